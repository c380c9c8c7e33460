"""Consecutive small copies done by one launch (``codegen.copy_batching``): a loop body that
rotates three scalars and swaps two arrays (copy insertion's chain of copies through a
temporary) copies in one launch a step, in plan order, with the bits of the copies done one
command each; copies above the size limit stay copy commands."""

import numpy as np

import runtime
from runtime import compiler
from runtime.codegen import copy_batching, plan_passes
from runtime.codegen.plan import CopyBytes, HostWhile, Launch
from runtime.execution import program_cache

ROTATE = """HloModule rotate
body {
  s = (s32[], f32[], f32[], f32[], f32[N], f32[N]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[] get-tuple-element(s), index=1
  b = f32[] get-tuple-element(s), index=2
  c = f32[] get-tuple-element(s), index=3
  u = f32[N] get-tuple-element(s), index=4
  v = f32[N] get-tuple-element(s), index=5
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT out = (s32[], f32[], f32[], f32[], f32[N], f32[N]) tuple(j, b, c, a, v, u)
}
cond {
  s = (s32[], f32[], f32[], f32[], f32[N], f32[N]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(7)
  ROOT c = pred[] compare(i, n), direction=LT
}
ENTRY e {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f32[] parameter(2)
  u = f32[N] parameter(3)
  v = f32[N] parameter(4)
  z = s32[] constant(0)
  init = (s32[], f32[], f32[], f32[], f32[N], f32[N]) tuple(z, a, b, c, u, v)
  w = (s32[], f32[], f32[], f32[], f32[N], f32[N]) while(init), condition=cond, body=body
  ra = f32[] get-tuple-element(w), index=1
  rb = f32[] get-tuple-element(w), index=2
  rc = f32[] get-tuple-element(w), index=3
  ru = f32[N] get-tuple-element(w), index=4
  rv = f32[N] get-tuple-element(w), index=5
  ROOT o = (f32[], f32[], f32[], f32[N], f32[N]) tuple(ra, rb, rc, ru, rv)
}"""


def _rotate(n: int) -> str:
    return ROTATE.replace("f32[N]", f"f32[{n}]")


def _compile(text: str, batched: bool, monkeypatch) -> runtime.Executable:
    """Unbatched: without copy batching, nor chaining (whose chains take small copies too)."""
    monkeypatch.setattr(program_cache, "load", lambda key: None)
    if not batched:
        monkeypatch.setattr(plan_passes, "PLAN_PASSES", tuple(
            p for p in plan_passes.PLAN_PASSES if p.name not in ("batch-copies", "chain-launches")))
    compiler.clear_cache()
    try:
        return runtime.compile(text)
    finally:
        monkeypatch.undo()
        compiler.clear_cache()


def _body(exe) -> list:
    [loop] = [s for s in exe.program.plan if isinstance(s, HostWhile)]
    return loop.body


def _inputs(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [np.float32(1.5), np.float32(-2.0), np.float32(4.25),
            rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)]


def test_a_rotation_through_a_temporary_copies_in_one_launch(monkeypatch, host_loops):
    text = _rotate(16)
    batched, single = _compile(text, True, monkeypatch), _compile(text, False, monkeypatch)
    assert sum(isinstance(s, CopyBytes) for s in _body(single)) >= 4
    body = _body(batched)
    assert not any(isinstance(s, CopyBytes) for s in body)
    [chain] = [s for s in body if isinstance(s, Launch) and "copy" in s.instruction]
    assert sum(name.startswith("copy") for name in chain.instruction.split("+")) >= 4
    args = _inputs(16)
    got = [np.asarray(x) for x in batched(*args)]
    want = [np.asarray(x) for x in single(*args)]
    a, b, c, u, v = args
    # seven rotations of (a, b, c) are one; seven swaps of (u, v) are one
    expected = [b, c, a, v, u]
    for g, w, e in zip(got, want, expected):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(g, e)


def test_copies_above_the_limit_stay_copy_commands(monkeypatch, host_loops):
    n = copy_batching.SMALL // 4 + 1
    exe = _compile(_rotate(n), True, monkeypatch)
    body = _body(exe)
    big = [s for s in body if isinstance(s, CopyBytes)]
    assert sum(s.nbytes > copy_batching.SMALL for s in big) == 3     # the swap, as before
    a, b, c, u, v = args = _inputs(n)
    for g, e in zip(exe(*args), [b, c, a, v, u]):
        np.testing.assert_array_equal(np.asarray(g), e)


def test_a_long_run_of_copies_keeps_within_the_arguments_every_device_takes():
    """Forty small copies in a row would pass the 1,024 bytes of kernel arguments OpenCL
    promises (two buffers and a size a copy): they batch into launches within it."""
    from runtime.codegen.program import MAX_PARAMETER_BYTES

    from .test_launch_merging import kernel_argument_bytes
    n = 40
    text = ("HloModule copies\nENTRY e {\n"
            + "\n".join(f"  p{k} = f32[{k + 1}] parameter({k})\n"
                        f"  c{k} = f32[{k + 1}] copy(p{k})" for k in range(n))
            + f"\n  ROOT o = ({', '.join(f'f32[{k + 1}]' for k in range(n))}) "
            f"tuple({', '.join(f'c{k}' for k in range(n))})\n}}")
    exe = runtime.compile(text)
    batches = [s for s in exe.program.plan
               if isinstance(s, Launch) and s.instruction.startswith("c")]
    assert sum(s.instruction.count("+") + 1 for s in batches) == n and len(batches) >= 2
    assert all(kernel_argument_bytes(exe.program, s.kernel) <= MAX_PARAMETER_BYTES
               for s in batches)
    args = [np.arange(k + 1, dtype=np.float32) * (k + 1) for k in range(n)]
    for got, want in zip(exe(*args), args):
        np.testing.assert_array_equal(np.asarray(got), want)
