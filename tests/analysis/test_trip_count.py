"""Trip counts known before a loop runs: JAX's counted loops (a scan's counter, before and
after fusion) get theirs, counted exactly; loops whose condition reads anything else, whose
counter starts at a parameter or never moves stay unknown; and a counted loop computes the
same values without reading its predicate."""

import numpy as np
import pytest

import runtime
from runtime.analysis.trip_count import trip_count
from runtime.pipeline import optimise


def loop(start: str = "s32[] constant(0)", step: str = "add(i, one)", limit: str = "7",
         direction: str = "LT", condition_reads: str = "i") -> str:
    return f"""HloModule counted
body {{
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] {step}
  two = f32[] constant(2)
  b = f32[4] broadcast(two), dimensions={{}}
  y = f32[4] multiply(x, b)
  ROOT out = (s32[], f32[4]) tuple(j, y)
}}
cond {{
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  k = s32[] constant({limit})
  ROOT c = pred[] compare({condition_reads}, k), direction={direction}
}}
ENTRY e {{
  x = f32[4] parameter(0)
  n = s32[] parameter(1)
  z = {start}
  init = (s32[], f32[4]) tuple(z, x)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}}"""


def _while(module):
    return next(i for i in module.entry.instructions if i.opcode == "while")


@pytest.mark.parametrize("text, count", [
    (loop(), 7),
    (loop(start="s32[] constant(3)"), 4),
    (loop(start="s32[] constant(9)"), 0),
    (loop(step="add(one, i)", limit="10", direction="LE"), 11),
    (loop(start="s32[] constant(10)", step="subtract(i, one)", limit="0", direction="GT"), 10),
    (loop(step="multiply(i, i)", start="s32[] constant(2)", limit="1000"), 4),   # 2 4 16 256
    # the counter's start through the tuples and copies copy insertion leaves around state
    (loop().replace("init = (s32[], f32[4]) tuple(z, x)",
                    "t0 = (s32[], f32[4]) tuple(z, x)\n  g = s32[] get-tuple-element(t0), index=0\n"
                    "  c = s32[] copy(g)\n  init = (s32[], f32[4]) tuple(c, x)"), 7),
    # the next counter copied into the body's result, as copy insertion leaves it where the
    # body still reads the old counter after the increment
    (loop().replace("ROOT out = (s32[], f32[4]) tuple(j, y)",
                    "jc = s32[] copy(j)\n  ROOT out = (s32[], f32[4]) tuple(jc, y)"), 7),
    # XLA's optimised text starts a counter from an operand-less fusion of a constant
    (loop(start="s32[] fusion(), kind=kLoop, calls=start").replace(
        "body {", "start {\n  c = s32[] constant(2)\n  ROOT cp = s32[] copy(c)\n}\nbody {"), 5),
])
def test_counted_loops_before_and_after_fusion(text, count):
    assert trip_count(_while(runtime.parse(text))) == count
    assert trip_count(_while(optimise(runtime.parse(text)))) == count


@pytest.mark.parametrize("text", [
    loop(start="s32[] add(n, n)"),                  # starts at a parameter
    loop(step="add(i, i)"),                         # 0 + 0 never moves
    loop(limit="1000000"),                          # more iterations than counting is worth
])
def test_loops_that_stay_unknown(text):
    assert trip_count(_while(runtime.parse(text))) is None


def test_a_condition_reading_other_state_is_unknown():
    text = loop().replace("ROOT c = pred[] compare(i, k), direction=LT",
                          "e0 = f32[] constant(0)\n  f = f32[1] slice(x), slice={[0:1]}\n"
                          "  fr = f32[] reshape(f)\n  g = pred[] compare(fr, e0), direction=LT\n"
                          "  h = pred[] compare(i, k), direction=LT\n  ROOT c = pred[] and(g, h)")
    assert trip_count(_while(runtime.parse(text))) is None


def test_a_counted_loop_runs_without_reading_its_predicate(monkeypatch, host_loops):
    exe = runtime.compile(loop())
    [step] = [s for s in exe.program.plan if type(s).__name__ == "HostWhile"]
    assert step.trip_count == 7
    from runtime.execution.executable import Executable
    monkeypatch.setattr(Executable, "_read_scalar",
                        lambda *a: pytest.fail("a counted loop read its predicate"))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(exe(x, np.int32(0)), x * 2 ** 7)


COUNTED_CONDITIONAL = """HloModule counted_conditional
even {
  x = f32[4] parameter(0)
  two = f32[] constant(2)
  b = f32[4] broadcast(two), dimensions={}
  ROOT y = f32[4] multiply(x, b)
}
odd {
  x = f32[4] parameter(0)
  one = f32[] constant(1)
  b = f32[4] broadcast(one), dimensions={}
  ROOT y = f32[4] add(x, b)
}
third {
  x = f32[4] parameter(0)
  ROOT y = f32[4] negate(x)
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  nine = s32[] constant(9)
  back = s32[] subtract(nine, i)
  two = s32[] constant(2)
  r = s32[] remainder(back, two)
  zero = s32[] constant(0)
  neg = pred[] compare(r, zero), direction=LT
  wrapped = s32[] add(r, two)
  m = s32[] select(neg, wrapped, r)
  p = pred[] compare(m, zero), direction=EQ
  y = f32[4] conditional(p, x, x), true_computation=even, false_computation=odd
  three = s32[] constant(3)
  k = s32[] remainder(i, three)
  z = f32[4] conditional(k, y, y, y), branch_computations={even, odd, third}
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT out = (s32[], f32[4]) tuple(j, z)
}
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(7)
  ROOT c = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[4] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[4]) tuple(z, x)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}"""


def test_conditionals_on_the_counter_of_a_counted_loop_read_nothing_back(monkeypatch, host_loops):
    """A sampler's ``cond`` on the step number (``(9 - i) % 2 == 0`` as JAX writes it, and a
    three-way switch on ``i % 3``): the host knows each iteration's branch before the run
    (where the loop is the host's: small ones with conditionals run on the device)."""
    exe = runtime.compile(COUNTED_CONDITIONAL)
    [loop] = [s for s in exe.program.plan if type(s).__name__ == "HostWhile"]
    conditionals = [s for s in loop.body if type(s).__name__ == "HostConditional"]
    assert [c.selected for c in conditionals] == [
        tuple(int((9 - i) % 2 == 0) for i in range(7)), tuple(i % 3 for i in range(7))]
    from runtime.execution.executable import Executable
    monkeypatch.setattr(Executable, "_read_scalar",
                        lambda *a: pytest.fail("a conditional read its selector"))
    x = np.arange(4, dtype=np.float32)
    want = x.astype(np.float64)
    for i in range(7):
        want = want * 2 if (9 - i) % 2 == 0 else want + 1
        want = (want * 2, want + 1, -want)[i % 3]
    np.testing.assert_array_equal(exe(x), want.astype(np.float32))


def test_a_conditional_on_other_loop_state_still_reads_its_selector(host_loops):
    text = COUNTED_CONDITIONAL.replace(
        "  y = f32[4] conditional(p, x, x)",
        "  x0 = f32[1] slice(x), slice={[0:1]}\n  x0s = f32[] reshape(x0)\n"
        "  fz = f32[] constant(0)\n  q = pred[] compare(x0s, fz), direction=GT\n"
        "  y = f32[4] conditional(q, x, x)")
    exe = runtime.compile(text)
    [loop] = [s for s in exe.program.plan if type(s).__name__ == "HostWhile"]
    first = next(s for s in loop.body if type(s).__name__ == "HostConditional")
    assert first.selected is None
    x = np.array([1, -2, 3, 4], np.float32)
    want = x.astype(np.float64)
    for i in range(7):
        want = want * 2 if want[0] > 0 else want + 1
        want = (want * 2, want + 1, -want)[i % 3]
    np.testing.assert_array_equal(exe(x), want.astype(np.float32))
