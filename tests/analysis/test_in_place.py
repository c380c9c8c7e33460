"""In-place pairs and the permission to write a result over a dying operand."""

import runtime
from runtime.analysis.dataflow import Dataflow
from runtime.analysis.in_place import InPlacePair, in_place_pairs, may_hand_off

TEXT = """
HloModule m

upd {
  a = f32[] parameter(0)
  ROOT b = f32[] parameter(1)
}

dus_fused {
  p0 = f32[8] parameter(0)
  p1 = f32[2] parameter(1)
  i = s32[] parameter(2)
  old = f32[2] dynamic-slice(p0, i), dynamic_slice_sizes={2}
  new = f32[2] add(old, p1)
  ROOT d = f32[8] dynamic-update-slice(p0, new, i)
}

reads_more {
  p0 = f32[8] parameter(0)
  p1 = f32[2] parameter(1)
  i = s32[] parameter(2)
  j = s32[] constant(0)
  old = f32[2] dynamic-slice(p0, j), dynamic_slice_sizes={2}
  ROOT d = f32[8] dynamic-update-slice(p0, old, i)
}

ew_fused {
  p0 = f32[8] parameter(0)
  p1 = f32[] parameter(1)
  b = f32[8] broadcast(p1), dimensions={}
  ROOT m = f32[8] multiply(p0, b)
}

ENTRY e {
  x = f32[8] parameter(0)
  u = f32[2] parameter(1)
  k = s32[] parameter(2)
  s = f32[] parameter(3)
  idx = s32[1] parameter(4)
  d = f32[8] dynamic-update-slice(x, u, k)
  sc1 = f32[8] scatter(x, idx, s), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=0, to_apply=upd
  cc = (f32[8], f32[2]) custom-call(u, x), custom_call_target="t", output_to_operand_aliasing={ {0}: (1, {}) }
  f1 = f32[8] fusion(x, u, k), kind=kLoop, calls=dus_fused
  f2 = f32[8] fusion(x, u, k), kind=kLoop, calls=reads_more
  f3 = f32[8] fusion(x, s), kind=kLoop, calls=ew_fused
  n = f32[8] negate(x)
  cv = s32[8] convert(x)
  cp = f32[8]{0} copy(x)
  bc = f32[8] broadcast(s), dimensions={}
  ROOT t = (f32[8], f32[8]) tuple(n, bc)
}
"""


def entry_instructions():
    module = runtime.parse(TEXT)
    return module, {i.name: i for i in module.entry.instructions}


def test_in_place_pairs_by_opcode():
    _, inst = entry_instructions()
    assert in_place_pairs(inst["d"]) == [InPlacePair(0, (), ())]
    assert in_place_pairs(inst["sc1"]) == [InPlacePair(0, (), ())]
    assert in_place_pairs(inst["cc"]) == [InPlacePair(1, (), (0,))]
    assert in_place_pairs(inst["f1"]) == [InPlacePair(0, (), ())], "reads its own window first"
    assert in_place_pairs(inst["f2"]) == [], "reads another window of the operand"
    assert in_place_pairs(inst["n"]) == []


def test_may_hand_off_only_where_each_element_reads_its_own_element():
    module, inst = entry_instructions()
    flow = Dataflow(module)
    x = {flow.value_at(inst["x"])}

    def hand_off(name):
        return may_hand_off(flow, x, flow.value_at(inst[name]))

    assert hand_off("n") and hand_off("d") and hand_off("f3") and hand_off("cp")
    assert not hand_off("cv"), "a convert changes the element type"
    assert not hand_off("f2") and not hand_off("bc")
    assert not may_hand_off(flow, x, flow.value_at(inst["t"])), "a tuple reads no elements"
