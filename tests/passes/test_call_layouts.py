"""Relayout copies where a call or a branch crosses layouts (what JAX's text needs)."""

import numpy as np

import runtime
from runtime.hlo.clone import clone_module
from runtime.passes.call_layouts import match_call_layouts

TEXT = """HloModule m
callee {
  p = f32[2,3]{1,0} parameter(0)
  ROOT t = f32[3,2]{0,1} transpose(p), dimensions={1,0}
}
branch {
  q = f32[2,3]{1,0} parameter(0)
  ROOT n = f32[2,3]{1,0} negate(q)
}
ENTRY e {
  x = f32[3,2]{1,0} parameter(0)
  k = s32[] parameter(1)
  xt = f32[2,3]{0,1} transpose(x), dimensions={1,0}
  c = f32[3,2]{1,0} call(xt), to_apply=callee
  ct = f32[2,3]{0,1} transpose(c), dimensions={1,0}
  ROOT b = f32[2,3]{1,0} conditional(k, ct), branch_computations={branch}
}"""


def test_copies_are_added_at_mismatched_boundaries_only():
    module, _ = clone_module(runtime.parse(TEXT))
    match_call_layouts(module)
    entry = module.entry
    call = next(i for i in entry.instructions if i.opcode == "call")
    cond = next(i for i in entry.instructions if i.opcode == "conditional")
    assert call.operands[0].opcode == "copy"
    assert call.operands[0].shape.minor_to_major == (1, 0)
    assert cond.operands[1].opcode == "copy" and cond.operands[0].opcode == "parameter"
    callee = call.attrs["to_apply"]
    assert callee.root.opcode == "copy" and callee.root.shape.minor_to_major == (1, 0)
    assert module.computation("branch").root.opcode == "negate"
    runtime.parse(module.to_text())


def test_the_module_computes_the_logical_values():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = runtime.compile(TEXT)(x, np.int32(0))
    np.testing.assert_array_equal(out, -x.T)
