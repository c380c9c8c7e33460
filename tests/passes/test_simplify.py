"""The simplifier removes JAX's broadcast_in_dim reshape chains without changing values."""

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.passes.simplify import simplify


def simplified(text: str):
    out = simplify(runtime.parse(text))
    assert runtime.parse(out.to_text()).to_text() == out.to_text()
    return out


def opcodes(module) -> list[str]:
    return [i.opcode for i in module.entry.instructions]


def test_broadcast_in_dim_chain_becomes_one_broadcast():
    text = """
HloModule bid
ENTRY e {
  g = f32[48]{0} parameter(0)
  r = f32[1,48]{1,0} reshape(g)
  b = f32[1,48]{1,0} broadcast(r), dimensions={0,1}
  r2 = f32[48]{0} reshape(b)
  ROOT out = f32[64,48]{1,0} broadcast(r2), dimensions={1}
}
"""
    out = simplified(text)
    assert opcodes(out) == ["parameter", "broadcast"]
    assert tuple(out.entry.root.attrs["dimensions"]) == (1,)
    g = np.arange(48, dtype=np.float32)
    np.testing.assert_array_equal(runtime.compile(text)(g), np.broadcast_to(g, (64, 48)))


def test_per_row_value_keeps_its_size_one_dimension_in_the_broadcast():
    text = """
HloModule row
ENTRY e {
  m = f32[64,1]{1,0} parameter(0)
  r = f32[64]{0} reshape(m)
  ROOT out = f32[64,48]{1,0} broadcast(r), dimensions={0}
}
"""
    out = simplified(text)
    assert opcodes(out) == ["parameter", "broadcast"]
    assert tuple(out.entry.root.attrs["dimensions"]) == (0, 1)
    m = np.arange(64, dtype=np.float32).reshape(64, 1)
    np.testing.assert_array_equal(runtime.compile(text)(m), np.broadcast_to(m, (64, 48)))


def test_identity_ops_disappear_but_layout_changes_stay():
    out = simplified("""
HloModule ident
ENTRY e {
  x = f32[4,8]{1,0} parameter(0)
  a = f32[4,8]{1,0} reshape(x)
  b = f32[4,8]{1,0} transpose(a), dimensions={0,1}
  c = f32[4,8]{1,0} convert(b)
  t = f32[4,8]{0,1} transpose(c), dimensions={0,1}
  ROOT n = f32[4,8]{0,1} negate(t)
}
""")
    assert opcodes(out) == ["parameter", "transpose", "negate"]


def test_a_copy_within_a_layout_disappears_and_copy_insertion_puts_back_what_buffers_need():
    """XLA's optimised text copies a loop's counter at the top of each iteration (its own
    copy insertion's); the copy of a loop-state element read after the body overwrites it
    comes back from this runtime's copy insertion, and the values stay."""
    text = """
HloModule copies
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ic = s32[] copy(i)
  x = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(ic, one)
  f = f32[] convert(ic)
  fb = f32[4] broadcast(f), dimensions={}
  y = f32[4] add(x, fb)
  ROOT out = (s32[], f32[4]) tuple(j, y)
}
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT c = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[4]{0} parameter(0)
  xc = f32[4]{0} copy(x)
  t = f32[2,2]{1,0} reshape(xc)
  tc = f32[2,2]{0,1} copy(t)
  z = s32[] constant(0)
  init = (s32[], f32[4]) tuple(z, xc)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  r = f32[4] get-tuple-element(w), index=1
  ROOT o = (f32[4], f32[2,2]{0,1}) tuple(r, tc)
}
"""
    out = simplified(text)
    assert opcodes(out).count("copy") == 1          # the layout change stays
    assert "copy" not in [i.opcode for c in out.computations for i in c.instructions
                          if c is not out.entry]
    x = np.arange(4, dtype=np.float32)
    got = runtime.compile(text)(x)
    np.testing.assert_array_equal(np.asarray(got[0]), x + 10)
    np.testing.assert_array_equal(np.asarray(got[1]), x.reshape(2, 2))


def test_broadcast_of_broadcast_composes():
    text = """
HloModule bb
ENTRY e {
  s = f32[3] parameter(0)
  a = f32[3,4] broadcast(s), dimensions={0}
  ROOT b = f32[2,3,4] broadcast(a), dimensions={1,2}
}
"""
    out = simplified(text)
    assert opcodes(out) == ["parameter", "broadcast"]
    assert tuple(out.entry.root.attrs["dimensions"]) == (1,)
    s = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(runtime.compile(text)(s),
                                  np.broadcast_to(s[None, :, None], (2, 3, 4)))


def test_instructions_with_control_dependencies_are_kept():
    out = simplified("""
HloModule ctl
ENTRY e {
  x = f32[4] parameter(0)
  r = f32[4] reshape(x)
  ROOT n = f32[4] negate(x), control-predecessors={r}
}
""")
    assert "reshape" in opcodes(out)


def test_a_tuple_of_a_loops_own_elements_is_the_loop_result():
    text = """
HloModule loop_result
cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(p), index=1
  y = f32[4] add(x, x)
  ROOT t = (s32[], f32[4]) tuple(next, y)
}
ENTRY e {
  a = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, a)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  w0 = s32[] get-tuple-element(w), index=0
  w1 = f32[4] get-tuple-element(w), index=1
  ROOT r = (s32[], f32[4]) tuple(w0, w1)
}
"""
    out = simplify(runtime.parse(text))
    assert out.entry.root.name == "w"
    swapped = simplify(runtime.parse(text.replace("tuple(w0, w1)", "tuple(w0, w0)").replace(
        "ROOT r = (s32[], f32[4])", "ROOT r = (s32[], s32[])")))
    assert swapped.entry.root.opcode == "tuple"
    i, x = runtime.compile(text)(np.ones(4, np.float32))
    assert int(i) == 3 and np.array_equal(x, np.full(4, 8, np.float32))


BIAS_GRADIENT = """
HloModule bias
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  g = f32[32,64]{1,0} parameter(0)
  zero = f32[] constant(INIT)
  s = f32[64]{0} reduce(g, zero), dimensions={0}, to_apply=add
  r = f32[1,64]{1,0} reshape(s)
  ROOT t = f32[64]{0} reduce(r, zero), dimensions={0}, to_apply=add
}
"""


def test_a_reduce_over_size_one_dimensions_from_the_identity_is_a_reshape():
    out = simplified(BIAS_GRADIENT.replace("INIT", "0"))
    assert opcodes(out) == ["parameter", "constant", "reduce"]
    g = np.random.default_rng(0).standard_normal((32, 64), dtype=np.float32)
    got = runtime.compile(BIAS_GRADIENT.replace("INIT", "0"))(g)
    np.testing.assert_allclose(got, g.sum(axis=0), rtol=1e-5, atol=1e-5)


def test_a_reduce_over_size_one_dimensions_from_another_init_applies_it():
    text = BIAS_GRADIENT.replace("INIT", "1")
    assert opcodes(simplified(text)).count("reduce") == 2
    g = np.random.default_rng(0).standard_normal((32, 64), dtype=np.float32)
    np.testing.assert_allclose(runtime.compile(text)(g), g.sum(axis=0) + 2, rtol=1e-5,
                               atol=1e-5)


def _round_trip(src: str, mid: str) -> str:
    return (f"HloModule rt\nENTRY e {{\n  x = {src}[4] parameter(0)\n"
            f"  m = {mid}[4] convert(x)\n  ROOT r = {src}[4] convert(m)\n}}\n")


def test_a_convert_round_trip_through_a_type_holding_every_value_is_removed():
    """XLA's algebraic simplifier's pairs: exact widenings and back go, lossy ones stay."""
    kept = [("f32", "f16"), ("f32", "bf16"), ("f16", "bf16"), ("bf16", "f16"),
            ("f8e8m0fnu", "f16"), ("f8e5m2", "f8e4m3fn"), ("f8e4m3fn", "f8e4m3fnuz"),
            ("s32", "f32"), ("s16", "u16"), ("u8", "s8"), ("s8", "u32"), ("f16", "s32"),
            ("f32", "pred"), ("s8", "f8e8m0fnu")]
    removed = [("f8e5m2", "f16"), ("f8e5m2", "bf16"), ("f8e3m4", "f32"), ("bf16", "f32"),
               ("f16", "f32"), ("f32", "f64"), ("f8e8m0fnu", "bf16"), ("f4e2m1fn", "f8e4m3fn"),
               ("s8", "s32"), ("u8", "s16"), ("s16", "f32"), ("u32", "s64"), ("pred", "s8")]
    for src, mid in kept:
        assert opcodes(simplified(_round_trip(src, mid))) == ["parameter", "convert",
                                                              "convert"], (src, mid)
    for src, mid in removed:
        assert opcodes(simplified(_round_trip(src, mid))) == ["parameter"], (src, mid)


NAN_PAYLOADS = _round_trip("f8e5m2", "f16")

ONE_ELEMENT_SUMS = """HloModule sums
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  p = f32[3,1] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[3] reduce(p, z), dimensions={1}, to_apply=add
}
"""


@pytest.mark.parametrize("fusion", [True, False])
def test_the_simplifications_that_change_values_run_with_fusion_off_too(fusion):
    """As in XLA, which always simplifies: f8e5m2 NaNs keep their payloads through f16 and
    back (converting them would give the canonical NaN 0x7f), a sum of one -0 from the init
    0 is -0 (the reduce became a reshape; adding would give +0)."""
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    nans = np.array([0x7d, 0xfe, 0x3c, 0x7f], np.uint8).view(ml_dtypes.float8_e5m2)
    zeros = np.array([[-0.0], [1.0], [-0.0]], np.float32)
    for text, x in ((NAN_PAYLOADS, nans), (ONE_ELEMENT_SUMS, zeros)):
        (want,) = xla_cpu.compile_hlo(text).executable.execute([jax.device_put(x)])
        got = runtime.compile(text, fusion=fusion)(x)
        np.testing.assert_array_equal(np.asarray(got).view(np.uint8),
                                      np.asarray(want).view(np.uint8))
