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


# lax.scan over a transposed input, as JAX prints it: the while's init and result carry the
# transpose's layout {1,0}... of a [steps, batch] array printed {0,1}, while the body and the
# condition declare the default layout; the state also holds a tuple, which is taken apart
SCAN = """HloModule scan
body {
  s = (s32[], f32[3,4]{1,0}, (f32[3,4]{1,0}, f32[4]{0})) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  xs = f32[3,4]{1,0} get-tuple-element(s), index=1
  inner = (f32[3,4]{1,0}, f32[4]{0}) get-tuple-element(s), index=2
  acc = f32[4]{0} get-tuple-element(inner), index=1
  z = s32[] constant(0)
  row = f32[1,4]{1,0} dynamic-slice(xs, i, z), dynamic_slice_sizes={1,4}
  r = f32[4]{0} reshape(row)
  a = f32[4]{0} add(acc, r)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ys = f32[3,4]{1,0} get-tuple-element(inner), index=0
  a2 = f32[1,4]{1,0} reshape(a)
  ys2 = f32[3,4]{1,0} dynamic-update-slice(ys, a2, i, z)
  t = (f32[3,4]{1,0}, f32[4]{0}) tuple(ys2, a)
  ROOT out = (s32[], f32[3,4]{1,0}, (f32[3,4]{1,0}, f32[4]{0})) tuple(j, xs, t)
}
cond {
  s = (s32[], f32[3,4]{0,1}, (f32[3,4]{1,0}, f32[4]{0})) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  xs = f32[3,4]{0,1} get-tuple-element(s), index=1
  k = s32[] constant(3)
  ROOT lt = pred[] compare(i, k), direction=LT
}
ENTRY e {
  x = f32[4,3]{1,0} parameter(0)
  xt = f32[3,4]{0,1} transpose(x), dimensions={1,0}
  z = s32[] constant(0)
  zf = f32[] constant(0)
  ys = f32[3,4]{0,1} broadcast(zf), dimensions={}
  acc = f32[4]{0} broadcast(zf), dimensions={}
  t = (f32[3,4]{0,1}, f32[4]{0}) tuple(ys, acc)
  init = (s32[], f32[3,4]{0,1}, (f32[3,4]{0,1}, f32[4]{0})) tuple(z, xt, t)
  w = (s32[], f32[3,4]{0,1}, (f32[3,4]{0,1}, f32[4]{0})) while(init), condition=cond, body=body
  inner = (f32[3,4]{0,1}, f32[4]{0}) get-tuple-element(w), index=2
  ROOT ys_out = f32[3,4]{0,1} get-tuple-element(inner), index=0
}"""


def test_a_while_state_follows_the_body_parameters_layouts():
    module, _ = clone_module(runtime.parse(SCAN))
    match_call_layouts(module)
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    state = loop.attrs["body"].parameter(0).shape
    assert loop.shape == state and loop.operands[0].shape == state
    assert loop.attrs["body"].root.shape == state
    assert loop.attrs["condition"].parameter(0).shape == state
    assert module.entry.root.shape.minor_to_major == (0, 1)      # as the module declares
    runtime.parse(module.to_text())


def test_a_scan_over_a_transposed_input_computes_the_logical_values():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(runtime.compile(SCAN)(x), np.cumsum(x.T, axis=0))
