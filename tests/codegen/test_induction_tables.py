"""A counted loop's induction variables read from a table (``codegen.induction_tables``): a
scan step that stacks its rows at the counter and slices its input at a second index counting
down runs as one launch a step, with no launch for either; the loop's result holds the values
they leave."""

import numpy as np

import runtime
from runtime import compiler
from runtime.codegen.plan import HostWhile, Launch
from runtime.execution import program_cache

SCAN = """HloModule scan
body {
  s = (s32[], s32[], f32[8], f32[6,8], f32[6,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  j = s32[] get-tuple-element(s), index=1
  c = f32[8] get-tuple-element(s), index=2
  xs = f32[6,8] get-tuple-element(s), index=3
  ys = f32[6,8] get-tuple-element(s), index=4
  zero = s32[] constant(0)
  xr = f32[1,8] dynamic-slice(xs, j, zero), dynamic_slice_sizes={1,8}
  x = f32[8] reshape(xr)
  c2 = f32[8] add(c, x)
  y = f32[1,8] reshape(c2)
  ys2 = f32[6,8] dynamic-update-slice(ys, y, i, zero)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  j2 = s32[] subtract(j, one)
  ROOT out = (s32[], s32[], f32[8], f32[6,8], f32[6,8]) tuple(i2, j2, c2, xs, ys2)
}
cond {
  s = (s32[], s32[], f32[8], f32[6,8], f32[6,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  xs = f32[6,8] parameter(0)
  z = s32[] constant(0)
  last = s32[] constant(5)
  f0 = f32[] constant(0)
  c = f32[8] broadcast(f0), dimensions={}
  ys = f32[6,8] broadcast(f0), dimensions={}
  init = (s32[], s32[], f32[8], f32[6,8], f32[6,8]) tuple(z, last, c, xs, ys)
  w = (s32[], s32[], f32[8], f32[6,8], f32[6,8]) while(init), condition=cond, body=body
  ri = s32[] get-tuple-element(w), index=0
  rj = s32[] get-tuple-element(w), index=1
  rys = f32[6,8] get-tuple-element(w), index=4
  ROOT o = (s32[], s32[], f32[6,8]) tuple(ri, rj, rys)
}"""


def _compile(text: str) -> runtime.Executable:
    program_cache_load = program_cache.load
    program_cache.load = lambda key: None
    compiler.clear_cache()
    try:
        return runtime.compile(text)
    finally:
        program_cache.load = program_cache_load
        compiler.clear_cache()


def _body(exe) -> list:
    [loop] = [s for s in exe.program.plan if isinstance(s, HostWhile)]
    return loop.body


def _reference(xs):
    c, ys = np.zeros(8, np.float32), np.zeros((6, 8), np.float32)
    for i in range(6):
        c = c + xs[5 - i]
        ys[i] = c
    return ys


def test_a_scans_counters_are_read_from_a_table():
    exe = _compile(SCAN)
    # without tables: the step's kernel, then one launch adding to i and subtracting from j
    [step] = _body(exe)
    assert isinstance(step, Launch) and len(step.per_iteration) == 2
    xs = np.random.default_rng(4).standard_normal((6, 8)).astype(np.float32)
    i, j, ys = (np.asarray(a) for a in exe(xs))
    assert (int(i), int(j)) == (6, -1)
    np.testing.assert_allclose(ys, _reference(xs), rtol=1e-6)

