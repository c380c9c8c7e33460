"""While loops run as one launch that loops on the device (``codegen.device_loops``): which
loops qualify, and the same values as the host's loop, with one work-item and with sixteen
(where the barriers around the predicate matter; Oclgrind's race check runs these loops
through ``tests/codegen/test_launch_chaining``'s data loop)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from runtime.codegen.plan import HostWhile, Launch, iter_launches
from tests.analysis.test_trip_count import loop as counted_loop
from tests.codegen.test_launch_chaining import DATA_LOOP, base_target, compile_for
from tests.codegen.test_predication import COLLATZ, FLAG

VARIANTS = {"host": lambda t: replace(t, loop_max_work=0),
            "device": lambda t: replace(t, loop_max_work=1 << 15, chain_max_work=1 << 18),
            "device-16-items": lambda t: replace(t, loop_max_work=1 << 15,
                                                 chain_max_work=1 << 18, chain_local_size=16)}

NESTED = """HloModule nested
inner_cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  k = s32[] constant(3)
  ROOT c = pred[] compare(i, k), direction=LT
}
inner_body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  h = f32[] constant(1.5)
  hb = f32[4] broadcast(h), dimensions={}
  y = f32[4] add(x, hb)
  ROOT out = (s32[], f32[4]) tuple(j, y)
}
outer_cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  k = s32[] constant(5)
  ROOT c = pred[] compare(i, k), direction=LT
}
outer_body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  z = s32[] constant(0)
  init = (s32[], f32[4]) tuple(z, x)
  w = (s32[], f32[4]) while(init), condition=inner_cond, body=inner_body
  y = f32[4] get-tuple-element(w), index=1
  two = f32[] constant(0.5)
  tb = f32[4] broadcast(two), dimensions={}
  y2 = f32[4] multiply(y, tb)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT out = (s32[], f32[4]) tuple(j, y2)
}
ENTRY e {
  x = f32[4] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[4]) tuple(z, x)
  w = (s32[], f32[4]) while(init), condition=outer_cond, body=outer_body
  ROOT r = f32[4] get-tuple-element(w), index=1
}"""

# the condition sums what every work-item of the body's last stage wrote
SUMMED = """HloModule summed
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
cond {
  x = f32[64] parameter(0)
  z = f32[] constant(0)
  s = f32[] reduce(x, z), dimensions={0}, to_apply=add
  k = f32[] constant(1000)
  ROOT c = pred[] compare(s, k), direction=LT
}
body {
  x = f32[64] parameter(0)
  h = f32[] constant(1.25)
  hb = f32[64] broadcast(h), dimensions={}
  ROOT y = f32[64] multiply(x, hb)
}
ENTRY e {
  x = f32[64] parameter(0)
  ROOT w = f32[64] while(x), condition=cond, body=body
}"""

# a conditional in the outer body runs on the device too, its branches' stages guarded by
# the selector
BRANCHED = NESTED.replace("""outer_body {""", """halve {
  h = f32[4] parameter(0)
  k = f32[] constant(0.5)
  kb = f32[4] broadcast(k), dimensions={}
  ROOT r = f32[4] multiply(h, kb)
}
double {
  d = f32[4] parameter(0)
  ROOT r = f32[4] add(d, d)
}
outer_body {""").replace("""  two = f32[] constant(0.5)
  tb = f32[4] broadcast(two), dimensions={}
  y2 = f32[4] multiply(y, tb)""", """  two = s32[] constant(2)
  early = pred[] compare(i, two), direction=LT
  y2 = f32[4] conditional(early, y, y), true_computation=halve, false_computation=double""")

# a switch on the counter minus one: -1 and 3 are out of range and select the last branch
SWITCHED = BRANCHED.replace("""  two = s32[] constant(2)
  early = pred[] compare(i, two), direction=LT
  y2 = f32[4] conditional(early, y, y), true_computation=halve, false_computation=double""",
                            """  m1 = s32[] constant(1)
  k = s32[] subtract(i, m1)
  y2 = f32[4] conditional(k, y, y, y), branch_computations={halve, double, halve}""")
# a loop inside a branch keeps the loop around it on the host (its barriers would be under
# the branch)
LOOP_IN_BRANCH = BRANCHED.replace("""  ROOT r = f32[4] multiply(h, kb)
}""", """  s0 = s32[] constant(0)
  t = (s32[], f32[4]) tuple(s0, h)
  lw = (s32[], f32[4]) while(t), condition=inner_cond, body=inner_body
  ROOT r = f32[4] get-tuple-element(lw), index=1
}""")

CASES = {
    "data-dependent": (DATA_LOOP, lambda: [np.random.default_rng(4).standard_normal(
        (8, 32)).astype(np.float32)]),
    "collatz": (COLLATZ, lambda: [np.int32(27)]),
    "counted": (counted_loop(), lambda: [np.arange(4, dtype=np.float32), np.int32(0)]),
    "state-flag": (FLAG, lambda: [np.int32(9)]),
    "nested": (NESTED, lambda: [np.arange(4, dtype=np.float32)]),
    "branched": (BRANCHED, lambda: [np.arange(4, dtype=np.float32)]),
    "switched": (SWITCHED, lambda: [np.arange(4, dtype=np.float32)]),
    "loop-in-branch": (LOOP_IN_BRANCH, lambda: [np.arange(4, dtype=np.float32)]),
    "summed": (SUMMED, lambda: [np.linspace(0.5, 1.5, 64, dtype=np.float32)]),
}


def _run(name: str, variant: str):
    text, args = CASES[name]
    exe = compile_for(text, VARIANTS[variant](base_target()))
    result = exe(*args())
    return exe, [np.asarray(r) for r in (result if isinstance(result, tuple) else (result,))]


def _host_whiles(steps) -> int:
    count = 0
    for step in steps:
        if isinstance(step, HostWhile):
            count += 1 + _host_whiles(step.body) + _host_whiles(step.condition)
    return count


@pytest.mark.parametrize("variant", ["device", "device-16-items"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_loops_on_the_device_give_the_host_loops_values(name, variant):
    exe, got = _run(name, variant)
    _, want = _run(name, "host")
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.atleast_1d(g).view(np.uint8),
                                      np.atleast_1d(w).view(np.uint8))
    plan = exe.program.plan
    if name == "loop-in-branch":    # the inner loops on the device, the outer on the host
        assert _host_whiles(plan) == 1
        [outer] = [s for s in plan if isinstance(s, HostWhile)]
        assert [s for s in outer.body if isinstance(s, Launch) and "for (;;)"
                in exe.program.kernel_texts[s.kernel]]
    else:
        assert _host_whiles(plan) == 0
        assert len([s for s in iter_launches(plan)
                    if "for (;;)" in exe.program.kernel_texts[s.kernel]]) == 1


def test_a_body_doing_more_work_than_the_limit_stays_a_host_loop():
    text, args = CASES["data-dependent"]
    target = replace(VARIANTS["device"](base_target()), loop_max_work=64)
    exe = compile_for(text, target)
    assert _host_whiles(exe.program.plan) == 1


def test_a_body_of_one_work_group_launches_runs_on_the_device_whatever_the_limit():
    """A launch of one work-group runs on one core wherever it runs: its work does not count
    against ``loop_max_work`` (the nested loops' f32[4] kernels do some)."""
    text, args = CASES["nested"]
    target = replace(VARIANTS["device"](base_target()), loop_max_work=1)
    exe = compile_for(text, target)
    assert _host_whiles(exe.program.plan) == 0
    _, want = _run("nested", "host")
    np.testing.assert_array_equal(exe(*args()), want[0])


# an RNN scan's step: a 30x30 weight times 4 rows of input (``A @ B^T`` over a contraction
# of 30, which packs from 16 rows) into the state, then tanh: 3,600 products, too few to pack
RNN_SCAN = """HloModule rnn_scan
cond {
  s = (s32[], f32[4,30], f32[30,30], f32[30,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(12)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4,30], f32[30,30], f32[30,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4,30] get-tuple-element(s), index=1
  w = f32[30,30] get-tuple-element(s), index=2
  h = f32[30,4] get-tuple-element(s), index=3
  d = f32[30,4] dot(w, x), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  a = f32[30,4] add(h, d)
  h2 = f32[30,4] tanh(a)
  half = f32[] constant(0.5)
  hb = f32[4,30] broadcast(half), dimensions={}
  x2 = f32[4,30] multiply(x, hb)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT out = (s32[], f32[4,30], f32[30,30], f32[30,4]) tuple(j, x2, w, h2)
}
ENTRY e {
  x = f32[4,30] parameter(0)
  w = f32[30,30] parameter(1)
  h = f32[30,4] parameter(2)
  z = s32[] constant(0)
  init = (s32[], f32[4,30], f32[30,30], f32[30,4]) tuple(z, x, w, h)
  l = (s32[], f32[4,30], f32[30,30], f32[30,4]) while(init), condition=cond, body=body
  ROOT r = f32[30,4] get-tuple-element(l), index=3
}"""


def test_a_scan_over_a_small_dot_runs_on_the_device():
    """The dot of a scan's step is too small to pack (``TileShape.pack_min_products``), so it
    is a stage and the scan one launch (an Equinox GRU's scan took three launches a step)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 30)).astype(np.float32)
    w = (rng.standard_normal((30, 30)) / 6).astype(np.float32)
    h = rng.standard_normal((30, 4)).astype(np.float32)
    exe = compile_for(RNN_SCAN, base_target())
    assert _host_whiles(exe.program.plan) == 0
    want, xs = h.astype(np.float64), x.astype(np.float64)
    for _ in range(12):
        want = np.tanh(want + w.astype(np.float64) @ xs.T)
        xs = xs * 0.5
    np.testing.assert_allclose(exe(x, w, h), want, rtol=1e-4, atol=1e-5)
