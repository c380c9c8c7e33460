"""Control flow decided on the device (``codegen.predication``): a scan step's data-dependent
``cond`` and ``switch`` (out-of-range indices included) run with nothing read back; a
data-dependent while loop reads its predicate once per chunk of iterations, whatever its trip
count (none, one, many), and a conditional inside it runs only while the loop does; a loop
whose condition is a state element, and a conditional whose untaken branches cost more than a
read, stay decided on the host."""

import numpy as np
import pytest

import runtime
from runtime import compiler
from runtime.codegen import predication
from runtime.codegen.plan import HostConditional, HostWhile, iter_steps
from runtime.execution import program_cache
from runtime.execution.executable import Executable

COND_IN_SCAN = """HloModule cond_in_scan
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
grow {
  t = (f32[8], f32[8]) parameter(0)
  c = f32[8] get-tuple-element(t), index=0
  x = f32[8] get-tuple-element(t), index=1
  ROOT r = f32[8] add(c, x)
}
shrink {
  t = (f32[8], f32[8]) parameter(0)
  c = f32[8] get-tuple-element(t), index=0
  x = f32[8] get-tuple-element(t), index=1
  h = f32[] constant(0.5)
  hb = f32[8] broadcast(h), dimensions={}
  m = f32[8] multiply(c, hb)
  ROOT r = f32[8] subtract(m, x)
}
sine {
  v = f32[8] parameter(0)
  ROOT r = f32[8] sine(v)
}
twice {
  v = f32[8] parameter(0)
  ROOT r = f32[8] add(v, v)
}
flip {
  v = f32[8] parameter(0)
  ROOT r = f32[8] reverse(v), dimensions={0}
}
body {
  s = (s32[], f32[8], f32[6,8], s32[6], f32[6,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  c = f32[8] get-tuple-element(s), index=1
  xs = f32[6,8] get-tuple-element(s), index=2
  sel = s32[6] get-tuple-element(s), index=3
  ys = f32[6,8] get-tuple-element(s), index=4
  zero = s32[] constant(0)
  xr = f32[1,8] dynamic-slice(xs, i, zero), dynamic_slice_sizes={1,8}
  x = f32[8] reshape(xr)
  f0 = f32[] constant(0)
  total = f32[] reduce(x, f0), dimensions={0}, to_apply=add
  p = pred[] compare(total, f0), direction=GT
  ops = (f32[8], f32[8]) tuple(c, x)
  c2 = f32[8] conditional(p, ops, ops), true_computation=grow, false_computation=shrink
  kr = s32[1] dynamic-slice(sel, i), dynamic_slice_sizes={1}
  k = s32[] reshape(kr)
  y = f32[8] conditional(k, c2, c2, c2), branch_computations={sine, twice, flip}
  y1 = f32[1,8] reshape(y)
  ys2 = f32[6,8] dynamic-update-slice(ys, y1, i, zero)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT out = (s32[], f32[8], f32[6,8], s32[6], f32[6,8]) tuple(j, c2, xs, sel, ys2)
}
cond {
  s = (s32[], f32[8], f32[6,8], s32[6], f32[6,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  xs = f32[6,8] parameter(0)
  sel = s32[6] parameter(1)
  z = s32[] constant(0)
  one = f32[] constant(1)
  c = f32[8] broadcast(one), dimensions={}
  f0 = f32[] constant(0)
  ys = f32[6,8] broadcast(f0), dimensions={}
  init = (s32[], f32[8], f32[6,8], s32[6], f32[6,8]) tuple(z, c, xs, sel, ys)
  w = (s32[], f32[8], f32[6,8], s32[6], f32[6,8]) while(init), condition=cond, body=body
  rc = f32[8] get-tuple-element(w), index=1
  rys = f32[6,8] get-tuple-element(w), index=4
  ROOT o = (f32[8], f32[6,8]) tuple(rc, rys)
}"""

COLLATZ = """HloModule collatz
cond {
  s = (s32[], s32[]) parameter(0)
  n = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  ROOT c = pred[] compare(n, one), direction=NE
}
body {
  s = (s32[], s32[]) parameter(0)
  n = s32[] get-tuple-element(s), index=0
  k = s32[] get-tuple-element(s), index=1
  two = s32[] constant(2)
  r = s32[] remainder(n, two)
  zero = s32[] constant(0)
  even = pred[] compare(r, zero), direction=EQ
  half = s32[] divide(n, two)
  three = s32[] constant(3)
  t = s32[] multiply(n, three)
  one = s32[] constant(1)
  odd = s32[] add(t, one)
  n2 = s32[] select(even, half, odd)
  k2 = s32[] add(k, one)
  ROOT out = (s32[], s32[]) tuple(n2, k2)
}
ENTRY e {
  n = s32[] parameter(0)
  z = s32[] constant(0)
  init = (s32[], s32[]) tuple(n, z)
  w = (s32[], s32[]) while(init), condition=cond, body=body
  last = s32[] get-tuple-element(w), index=0
  steps = s32[] get-tuple-element(w), index=1
  ROOT o = (s32[], s32[]) tuple(last, steps)
}"""

# the condition is the loop state's own flag, which the body rewrites
FLAG = """HloModule flag
cond {
  s = (pred[], s32[]) parameter(0)
  ROOT go = pred[] get-tuple-element(s), index=0
}
body {
  s = (pred[], s32[]) parameter(0)
  n = s32[] get-tuple-element(s), index=1
  one = s32[] constant(1)
  m = s32[] subtract(n, one)
  zero = s32[] constant(0)
  go = pred[] compare(m, zero), direction=GT
  ROOT out = (pred[], s32[]) tuple(go, m)
}
ENTRY e {
  n = s32[] parameter(0)
  t = pred[] constant(true)
  init = (pred[], s32[]) tuple(t, n)
  w = (pred[], s32[]) while(init), condition=cond, body=body
  ROOT r = s32[] get-tuple-element(w), index=1
}"""


# a data-dependent loop with a data-dependent conditional inside: the branch's kernels test
# both the loop's predicate and the branch; iterations past the end must change nothing
HALVING = """HloModule halving
half {
  x = f32[] parameter(0)
  h = f32[] constant(0.5)
  ROOT r = f32[] multiply(x, h)
}
third {
  x = f32[] parameter(0)
  t = f32[] constant(3)
  ROOT r = f32[] divide(x, t)
}
cond {
  s = (f32[], s32[]) parameter(0)
  x = f32[] get-tuple-element(s), index=0
  one = f32[] constant(1)
  ROOT c = pred[] compare(x, one), direction=GT
}
body {
  s = (f32[], s32[]) parameter(0)
  x = f32[] get-tuple-element(s), index=0
  k = s32[] get-tuple-element(s), index=1
  two = s32[] constant(2)
  r = s32[] remainder(k, two)
  zero = s32[] constant(0)
  even = pred[] compare(r, zero), direction=EQ
  y = f32[] conditional(even, x, x), true_computation=half, false_computation=third
  one = s32[] constant(1)
  k2 = s32[] add(k, one)
  ROOT out = (f32[], s32[]) tuple(y, k2)
}
ENTRY e {
  x = f32[] parameter(0)
  z = s32[] constant(0)
  init = (f32[], s32[]) tuple(x, z)
  w = (f32[], s32[]) while(init), condition=cond, body=body
  y = f32[] get-tuple-element(w), index=0
  k = s32[] get-tuple-element(w), index=1
  ROOT o = (f32[], s32[]) tuple(y, k)
}"""


@pytest.fixture
def reads(monkeypatch):
    """How many scalars runs read back from the device."""
    count = [0]
    original = Executable._read_scalar

    def counting(self, *args):
        count[0] += 1
        return original(self, *args)
    monkeypatch.setattr(Executable, "_read_scalar", counting)
    return count


def _compile(text: str, monkeypatch, **settings) -> runtime.Executable:
    with monkeypatch.context() as m:
        m.setattr(program_cache, "load", lambda key: None)
        for name, value in settings.items():
            m.setattr(predication, name, value)
        compiler.clear_cache()
        try:
            return runtime.compile(text)
        finally:
            compiler.clear_cache()


def _steps(exe, kind) -> list:
    return [s for s in iter_steps(exe.program.plan) if isinstance(s, kind)]


def _cond_in_scan_reference(xs, sel):
    c = np.ones(8, np.float32)
    ys = np.zeros((6, 8), np.float32)
    for i in range(6):
        x = xs[i]
        c = c + x if x.sum(dtype=np.float32) > 0 else c * np.float32(0.5) - x
        k = sel[i] if 0 <= sel[i] < 3 else 2
        ys[i] = [np.sin(c), c + c, c[::-1]][k]
    return c, ys


def test_a_scans_cond_and_switch_run_with_nothing_read_back(monkeypatch, reads, host_loops):
    exe = _compile(COND_IN_SCAN, monkeypatch)
    conditionals = _steps(exe, HostConditional)
    assert len(conditionals) == 2 and all(s.predicated for s in conditionals)
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((6, 8)).astype(np.float32)
    xs[1] = np.abs(xs[1])
    xs[2] = -np.abs(xs[2])
    sel = np.array([0, 1, 2, -1, 7, 1], np.int32)      # -1 and 7 run the last branch
    c, ys = (np.asarray(a) for a in exe(xs, sel))
    assert reads[0] == 0
    want_c, want_ys = _cond_in_scan_reference(xs, sel)
    np.testing.assert_allclose(c, want_c, rtol=1e-6)
    np.testing.assert_allclose(ys, want_ys, rtol=1e-6, atol=1e-6)


def test_untaken_branches_dearer_than_a_read_stay_on_the_host(monkeypatch, reads, host_loops):
    exe = _compile(COND_IN_SCAN, monkeypatch, MAX_UNTAKEN=0)
    assert not any(s.predicated for s in _steps(exe, HostConditional))
    xs = np.random.default_rng(6).standard_normal((6, 8)).astype(np.float32)
    sel = np.array([2, 0, 1, 5, 0, -3], np.int32)
    c, ys = (np.asarray(a) for a in exe(xs, sel))
    assert reads[0] == 12
    want_c, want_ys = _cond_in_scan_reference(xs, sel)
    np.testing.assert_allclose(c, want_c, rtol=1e-6)
    np.testing.assert_allclose(ys, want_ys, rtol=1e-6, atol=1e-6)


def _collatz(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_a_scans_cond_and_switch_run_in_one_device_loop(monkeypatch, reads):
    """Where loops run on the device (``codegen.device_loops``) the scan and its branches
    are one launch, the selectors read there, out-of-range indices taking the last branch."""
    exe = _compile(COND_IN_SCAN, monkeypatch)
    assert not _steps(exe, HostWhile) and not _steps(exe, HostConditional)
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((6, 8)).astype(np.float32)
    xs[0] = np.abs(xs[0])
    xs[3] = -np.abs(xs[3])
    sel = np.array([1, -4, 0, 2, 9, 1], np.int32)
    c, ys = (np.asarray(a) for a in exe(xs, sel))
    assert reads[0] == 0
    want_c, want_ys = _cond_in_scan_reference(xs, sel)
    np.testing.assert_allclose(c, want_c, rtol=1e-6)
    np.testing.assert_allclose(ys, want_ys, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 6, 27, 97])
def test_a_data_dependent_loop_reads_its_predicate_once_a_chunk(monkeypatch, reads, n,
                                                                 host_loops):
    exe = _compile(COLLATZ, monkeypatch)
    [loop] = _steps(exe, HostWhile)
    assert loop.chunk >= 8
    last, steps = (int(np.asarray(a)) for a in exe(np.int32(n)))
    assert (last, steps) == (1, _collatz(n))
    # chunks of 1, 2, 4, ... up to the chunk, until one ends with the predicate false
    expected, done, k = 0, 0, 1
    while True:
        expected += 1
        done += k
        if done > _collatz(n):
            break
        k = min(2 * k, loop.chunk)
    assert reads[0] == expected <= _collatz(n) + 1      # the host loop: one read an iteration
    if n == 97:
        assert reads[0] == 11                             # against 119


def test_a_loop_whose_condition_is_a_state_element_reads_it_every_iteration(monkeypatch, reads,
                                                                           host_loops):
    exe = _compile(FLAG, monkeypatch)
    [loop] = _steps(exe, HostWhile)
    assert loop.chunk == 1
    assert int(np.asarray(exe(np.int32(5)))) == 0
    assert reads[0] == 6


@pytest.mark.parametrize("start", [0.5, 2.0, 1e6, 1e30])
def test_a_branch_inside_a_speculated_loop_runs_only_while_the_loop_does(monkeypatch, start,
                                                                         host_loops):
    exe = _compile(HALVING, monkeypatch)
    [loop] = _steps(exe, HostWhile)
    [branch] = _steps(exe, HostConditional)
    assert loop.chunk > 1 and branch.predicated
    x, k = np.float32(start), 0
    while x > 1:
        # XLA divides by the constant 3 as a multiplication by its reciprocal (constant-divisors)
        x = x * np.float32(0.5) if k % 2 == 0 else x * (np.float32(1) / np.float32(3))
        k += 1
    got_x, got_k = (np.asarray(a) for a in exe(np.float32(start)))
    assert (float(got_x), int(got_k)) == (float(x), k)
