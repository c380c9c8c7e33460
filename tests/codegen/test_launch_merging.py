"""Independent launches merged into one (``codegen.launch_merging``): a scan step's
elementwise kernel, its two stacked outputs' in-place updates and a row reduction run as one
launch with the unmerged plan's bits, and so do an optimiser step's per-parameter updates in
the entry computation; a launch reading what another writes stays apart."""

import numpy as np
import pytest

import runtime
from runtime import compiler
from runtime.codegen import plan_passes
from runtime.codegen.plan import HostWhile, Launch
from runtime.execution import program_cache

SCAN = """HloModule scan_step
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
body {
  s = (s32[], f32[8,64], f32[6,8,64], f32[6,8,64], f32[6,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8,64] get-tuple-element(s), index=1
  ys = f32[6,8,64] get-tuple-element(s), index=2
  zs = f32[6,8,64] get-tuple-element(s), index=3
  rs = f32[6,8] get-tuple-element(s), index=4
  zero = s32[] constant(0)
  t = f32[8,64] tanh(x)
  y = f32[1,8,64] reshape(t)
  ys2 = f32[6,8,64] dynamic-update-slice(ys, y, i, zero, zero)
  e = f32[8,64] exponential(x)
  z = f32[1,8,64] reshape(e)
  zs2 = f32[6,8,64] dynamic-update-slice(zs, z, i, zero, zero)
  fz = f32[] constant(0)
  r = f32[8] reduce(x, fz), dimensions={1}, to_apply=add
  r2 = f32[1,8] reshape(r)
  rs2 = f32[6,8] dynamic-update-slice(rs, r2, i, zero)
  half = f32[] constant(0.5)
  hb = f32[8,64] broadcast(half), dimensions={}
  x2 = f32[8,64] multiply(x, hb)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT out = (s32[], f32[8,64], f32[6,8,64], f32[6,8,64], f32[6,8]) tuple(j, x2, ys2, zs2, rs2)
}
cond {
  s = (s32[], f32[8,64], f32[6,8,64], f32[6,8,64], f32[6,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT c = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[8,64] parameter(0)
  z = s32[] constant(0)
  f = f32[] constant(0)
  ys = f32[6,8,64] broadcast(f), dimensions={}
  zs = f32[6,8,64] broadcast(f), dimensions={}
  rs = f32[6,8] broadcast(f), dimensions={}
  init = (s32[], f32[8,64], f32[6,8,64], f32[6,8,64], f32[6,8]) tuple(z, x, ys, zs, rs)
  w = (s32[], f32[8,64], f32[6,8,64], f32[6,8,64], f32[6,8]) while(init), condition=cond, body=body
  a = f32[6,8,64] get-tuple-element(w), index=2
  b = f32[6,8,64] get-tuple-element(w), index=3
  c = f32[6,8] get-tuple-element(w), index=4
  ROOT o = (f32[6,8,64], f32[6,8,64], f32[6,8]) tuple(a, b, c)
}"""


def _compile(text: str, merged: bool, monkeypatch) -> runtime.Executable:
    monkeypatch.setattr(program_cache, "load", lambda key: None)
    if not merged:
        monkeypatch.setattr(plan_passes, "PLAN_PASSES", plan_passes.without("merge-launches"))
    compiler.clear_cache()
    try:
        return runtime.compile(text)
    finally:
        monkeypatch.undo()
        compiler.clear_cache()


def _body_launches(exe) -> list[Launch]:
    [loop] = [s for s in exe.program.plan if isinstance(s, HostWhile)]
    return [s for s in loop.body if isinstance(s, Launch)]


def test_independent_launches_of_a_loop_body_run_as_one(monkeypatch, unchained):
    merged, apart = _compile(SCAN, True, monkeypatch), _compile(SCAN, False, monkeypatch)
    fewer, more = _body_launches(merged), _body_launches(apart)
    assert len(fewer) < len(more)
    joined = [s for s in fewer if "+" in s.instruction]
    assert joined and "mg_count" in merged.program.kernel_texts[joined[0].kernel]
    x = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
    got, want = merged(x), apart(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    steps = x[None] * 0.5 ** np.arange(6)[:, None, None]
    np.testing.assert_allclose(np.asarray(got[0]), np.tanh(steps), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got[1]), np.exp(steps), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got[2]), steps.sum(-1), rtol=1e-4, atol=1e-4)


def _footprint(exe, comp, name):
    assignment = exe.buffer_assignment
    inst = next(i for i in comp.instructions if i.name == name)

    def ranges(insts):
        out = []
        for i in insts:
            for index, shape in i.shape.leaves():
                if shape.is_array:
                    s = assignment.slice(i, index)
                    out.append((s.allocation, s.offset, s.offset + max(s.size, 1)))
        return out
    return ranges([inst]), ranges(inst.operands)


def _overlap(a, b):
    return any(x[0] == y[0] and x[1] < y[2] and y[1] < x[2] for x in a for y in b)


def test_no_merged_launch_reads_or_writes_what_another_part_writes(monkeypatch, corpus, unchained):
    """Over this scan step and the corpus' loop programs (their values are the corpus
    tests'): the parts of every merged launch are independent."""
    texts = [SCAN] + [(corpus / f"{name}{kind}.hlo").read_text()
                      for name in ("rnn_scan", "scan_running", "fori_loop_poly")
                      for kind in ("", ".opt")]
    merges = 0
    for text in texts:
        exe = _compile(text, True, monkeypatch)
        module = exe.buffer_assignment.module
        loops = [i for c in module.computations for i in c.instructions if i.opcode == "while"]
        bodies = {loop.name: loop.body for loop in loops}
        for step in exe.program.plan:
            if not isinstance(step, HostWhile):
                continue
            body = bodies[step.instruction]
            for launch in step.body:
                if not isinstance(launch, Launch) or "+" not in launch.instruction:
                    continue
                merges += 1
                parts = [_footprint(exe, body, n) for n in launch.instruction.split("+")]
                for k, (w, r) in enumerate(parts):
                    for w2, r2 in parts[k + 1:]:
                        assert not _overlap(w, w2 + r2) and not _overlap(r, w2)
    assert merges


# an optimiser step over three parameters: each update is its own small kernel, none reads
# what another writes; the loss's reduction reads every update's input
UPDATES = """HloModule sgd, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias), {2}: (2, {}, may-alias) }
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  w = f32[64,64] parameter(0)
  b = f32[64] parameter(1)
  g = f32[64] parameter(2)
  dw = f32[64,64] parameter(3)
  db = f32[64] parameter(4)
  dg = f32[64] parameter(5)
  lr = f32[] constant(0.1)
  lw = f32[64,64] broadcast(lr), dimensions={}
  lv = f32[64] broadcast(lr), dimensions={}
  sw = f32[64,64] multiply(dw, lw)
  w2 = f32[64,64] subtract(w, sw)
  sb = f32[64] multiply(db, lv)
  b2 = f32[64] subtract(b, sb)
  sg = f32[64] multiply(dg, lv)
  g2 = f32[64] subtract(g, sg)
  ROOT o = (f32[64,64], f32[64], f32[64]) tuple(w2, b2, g2)
}"""


def test_independent_launches_of_the_entry_run_as_one(monkeypatch, unchained):
    merged, apart = _compile(UPDATES, True, monkeypatch), _compile(UPDATES, False, monkeypatch)
    fewer = [s for s in merged.program.plan if isinstance(s, Launch)]
    more = [s for s in apart.program.plan if isinstance(s, Launch)]
    assert len(fewer) == 1 < len(more) == 3
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((64, 64), (64,), (64,)) * 2]
    got, want = merged(*args), apart(*args)
    for g, w, p, d in zip(got, want, args[:3], args[3:]):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        np.testing.assert_allclose(np.asarray(g), p - np.float32(0.1) * d, rtol=1e-6)


def kernel_argument_bytes(program, kernel: str) -> int:
    from runtime.codegen.program import parameter_bytes
    return parameter_bytes(program.kernel_texts[kernel])


def sgd_over(n: int) -> str:
    """An SGD step over ``n`` independent parameters: ``n`` small kernels none of which reads
    what another writes."""
    params = [f"  p{k} = f32[{16 + k}] parameter({2 * k})\n  g{k} = f32[{16 + k}] parameter("
              f"{2 * k + 1})\n  lr{k} = f32[{16 + k}] broadcast(lr), dimensions={{}}\n"
              f"  s{k} = f32[{16 + k}] multiply(g{k}, lr{k})\n"
              f"  u{k} = f32[{16 + k}] subtract(p{k}, s{k})" for k in range(n)]
    shapes = ", ".join(f"f32[{16 + k}]" for k in range(n))
    return (f"HloModule sgd_many\nENTRY e {{\n  lr = f32[] constant(0.25)\n" + "\n".join(params)
            + f"\n  ROOT o = ({shapes}) tuple({', '.join(f'u{k}' for k in range(n))})\n}}")


def test_merged_launches_keep_within_the_arguments_every_device_takes(unchained):
    """Eighty independent updates: merging them all would pass 1,024 bytes of kernel
    arguments (what OpenCL promises; PoCL does not check, other drivers refuse the launch),
    so they merge into several launches, each within it."""
    from runtime.codegen.program import MAX_PARAMETER_BYTES
    exe = runtime.compile(sgd_over(80))
    launches = [s for s in exe.program.plan if isinstance(s, Launch)]
    assert 1 < len(launches) < 20
    assert all(kernel_argument_bytes(exe.program, s.kernel) <= MAX_PARAMETER_BYTES
               for s in launches)
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(16 + k // 2).astype(np.float32) for k in range(160)]
    for k, got in enumerate(exe(*args)):
        np.testing.assert_allclose(np.asarray(got), args[2 * k] - 0.25 * args[2 * k + 1],
                                   rtol=1e-6)


def test_the_plan_passes_are_one_ordered_list():
    """What happens to steps after lowering is ``plan_passes.PLAN_PASSES``, in this order,
    applied to the entry, loop bodies and branches (each computation) or once to the plan."""
    assert [(p.name, p.scope.value) for p in plan_passes.PLAN_PASSES] == [
        ("merge-launches", "each computation"), ("chain-launches", "each computation"),
        ("batch-copies", "whole plan"), ("predicate", "whole plan")]
    with pytest.raises(ValueError, match="no plan pass 'merge'"):
        plan_passes.without("merge")
