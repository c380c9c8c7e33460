"""Values, positions and buffers: the seed study note's example and control flow."""

import pytest

import runtime
from runtime.analysis.alias_analysis import AliasAnalysis
from runtime.analysis.dataflow import Dataflow

from .test_schedule import TWO_REDUCTIONS

SEED = """
HloModule seed

ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] negate(a)
  c = (f32[4], f32[4]) tuple(a, b)
  d = f32[4] get-tuple-element(c), index=1
  ROOT e = f32[4] add(d, d)
}
"""


def buffers_by_first(text):
    module = runtime.parse(text)
    flow = Dataflow(module)
    aliasing = AliasAnalysis(flow, module.input_output_alias)
    out = {}
    for buffer in aliasing.buffers:
        positions = [(inst.name, index) for v in buffer.values for inst, index in v.positions]
        out[buffer.first.label] = positions
    return flow, out


def test_seed_example_tuple_elements_and_get_tuple_element_are_aliases():
    """Study note 9.4.2: Buffer(a) = [(a,{}), (c,{0})], Buffer(b) = [(b,{}), (c,{1}), (d,{})],
    Buffer(c) = [(c,{})]."""
    _, buffers = buffers_by_first(SEED)
    assert buffers["a"] == [("a", ()), ("c", (0,))]
    assert buffers["b"] == [("b", ()), ("c", (1,)), ("d", ())]
    assert buffers["c"] == [("c", ())]
    assert buffers["e"] == [("e", ())]


def test_uses_record_reads_through_forwarding_positions():
    flow, _ = buffers_by_first(SEED)
    b = flow.value_at(flow.module.entry.instructions[1])
    assert [(u.instruction.name, u.operand_number, u.operand_index) for u in b.uses] == [
        ("c", 1, ()), ("d", 0, (1,)), ("e", 0, ()), ("e", 1, ())]


LOOP = """
HloModule loop

cond {
  p = (s32[], f32[4]) parameter(0)
  ROOT lt = pred[] constant(false)
}

body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  y = f32[4] negate(x)
  ROOT t = (s32[], f32[4]) tuple(i, y)
}

branch {
  q = f32[4] parameter(0)
  ROOT r = f32[4] abs(q)
}

ENTRY e {
  k = s32[] parameter(0)
  a = f32[4] parameter(1)
  init = (s32[], f32[4]) tuple(k, a)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  s = f32[4] get-tuple-element(w), index=1
  ROOT c = f32[4] conditional(k, s), branch_computations={branch}
}
"""


def test_loop_state_and_conditional_values_merge_into_buffers():
    flow, buffers = buffers_by_first(LOOP)
    module = flow.module
    body = module.computation("body")
    state = flow.loops[module.entry.instructions[3]].state
    assert state[(1,)].kind == "loop-state" and not state[(1,)].writes
    assert flow.value_at(body.instructions[2]) is state[(1,)]
    assert buffers["a"] == [("a", ()), ("init", (1,)), ("p", (1,)), ("p", (1,)), ("x", ()),
                            ("y", ()), ("t", (1,)), ("w", (1,)), ("s", ()),
                            ("q", ())]
    assert buffers["k"] == [("k", ()), ("init", (0,)), ("p", (0,)), ("p", (0,)), ("i", ()),
                            ("t", (0,)), ("w", (0,))]
    assert buffers["r"] == [("r", ()), ("c", ())]


def test_thread_local_instructions_have_no_positions():
    flow, _ = buffers_by_first(TWO_REDUCTIONS)
    add = flow.module.computation("add")
    assert not flow.has_positions(add.root)
    with pytest.raises(LookupError, match="not in a sequential computation"):
        flow.value_set(add.root)
