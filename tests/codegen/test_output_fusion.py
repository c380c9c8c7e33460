"""An output fusion over a dedicated contraction family: the hero writes the fusion's output
bytes, an epilogue updates them in place."""

import numpy as np

import runtime
from runtime.codegen import lower as lowering
from runtime.codegen.loop import lower_loop

TEXT = """
HloModule dense
ENTRY e {
  a = f32[33,20]{1,0} parameter(0)
  w = f32[20,17]{1,0} parameter(1)
  b = f32[17]{0} parameter(2)
  d = f32[33,17]{1,0} dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[33,17]{1,0} broadcast(b), dimensions={1}
  s = f32[33,17]{1,0} add(d, bb)
  z = f32[] constant(0)
  zb = f32[33,17]{1,0} broadcast(z), dimensions={}
  ROOT r = f32[33,17]{1,0} maximum(s, zb)
}
"""


def inputs():
    rng = np.random.default_rng(5)
    return [rng.standard_normal(s).astype(np.float32) for s in ((33, 20), (20, 17), (17,))]


def test_without_a_dedicated_family_the_loop_kernel_computes_the_whole_fusion():
    exe = runtime.compile(TEXT, force=True)
    assert len(exe.program.plan) == 1
    a, w, b = inputs()
    np.testing.assert_allclose(exe(a, w, b), np.maximum(a @ w + b, 0), rtol=1e-5, atol=1e-5)


def test_a_dedicated_family_writes_the_output_then_the_epilogue_runs_in_place(monkeypatch):
    seen = []

    def dedicated_dot(ctx, inst):
        seen.append(ctx.ref(inst))
        return lower_loop(ctx, inst)

    monkeypatch.setitem(lowering.LOWERING, "dot", dedicated_dot)
    exe = runtime.compile(TEXT, force=True)
    [hero, epilogue] = exe.program.plan
    fusion = exe.buffer_assignment.module.entry.root
    out = exe.buffer_assignment.slice(fusion)
    assert (seen[0].allocation, seen[0].offset) == (out.allocation, out.offset)
    assert hero.buffers[0] == epilogue.buffers[0] == seen[0]
    assert exe.memory_stats.temp == 0
    a, w, b = inputs()
    np.testing.assert_allclose(exe(a, w, b), np.maximum(a @ w + b, 0), rtol=1e-5, atol=1e-5)
