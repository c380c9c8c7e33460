"""Temps in the bytes of an output allocation before its output is written (XLA does the
same): an output allocation is bound for the whole run, but holds its output only from the
step that writes it. Multi-device modules only for now: their per-device plans are measured
against XLA's (one-device plans keep every temp in the arena)."""

import numpy as np

import runtime

from .checked import assigned

EARLY_TEMP = """
HloModule early, num_partitions=2
ENTRY e {
  a = f32[32] parameter(0)
  b = f32[32] exponential(a)
  c = f32[] constant(1)
  s = f32[] reduce(b, c), dimensions={0}, to_apply=add
  k = f32[32] broadcast(s), dimensions={}
  ROOT r = f32[32] multiply(a, k)
}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT z = f32[] add(x, y)
}
"""


def _run(text: str, a: np.ndarray) -> list[np.ndarray]:
    """Each device's result (both devices get ``a``; nothing is exchanged)."""
    outs = runtime.compile(text, fusion=False).run_spmd([[a], [a]])
    return [np.asarray(out) for out in outs]


def _where(ba, name: str) -> tuple[str, int]:
    placed = next(b for b in ba.buffers() if b.name == name)
    return ba.allocations[placed.allocation].kind, placed.allocation


def test_a_temp_dead_before_the_output_is_written_lives_in_its_allocation():
    ba = assigned(EARLY_TEMP)
    assert _where(ba, "b") == _where(ba, "r") and _where(ba, "r")[0] == "output"
    # k is read where r is written, and multiply may write over it: the output takes it over
    assert _where(ba, "k") == _where(ba, "r")
    a = np.linspace(-1, 1, 32, dtype=np.float32)
    for out in _run(EARLY_TEMP, a):
        np.testing.assert_allclose(out, a * (np.exp(a).sum() + 1), rtol=1e-5)


def test_a_temp_read_where_the_output_is_written_without_hand_off_stays_apart():
    text = EARLY_TEMP.replace("multiply(a, k)", "reverse(k), dimensions={0}")
    ba = assigned(text)
    assert _where(ba, "k") != _where(ba, "r")
    assert _where(ba, "b") == _where(ba, "r")
    a = np.linspace(-1, 1, 32, dtype=np.float32)
    for out in _run(text, a):
        np.testing.assert_allclose(out, np.full(32, np.exp(a).sum() + 1), rtol=1e-5)


def test_a_temp_larger_than_the_output_stays_in_the_arena():
    text = EARLY_TEMP.replace("ROOT r = f32[32] multiply(a, k)",
                              "m = f32[32] multiply(a, k)\n  ROOT r = f16[32] convert(m)")
    ba = assigned(text)
    assert _where(ba, "b")[0] == "temp" and _where(ba, "m")[0] == "temp"


def test_a_one_device_plan_keeps_its_temps_in_the_arena():
    ba = assigned(EARLY_TEMP.replace(", num_partitions=2", ""))
    assert _where(ba, "b")[0] == "temp" and _where(ba, "k")[0] == "temp"
