"""FlattenCallGraph gives every sequential computation one call site."""

import pytest

import runtime
from runtime.analysis.call_graph import CallGraph
from runtime.errors import HloVerifyError
from runtime.passes.flatten_call_graph import flatten_call_graph

TEXT = """
HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

twice {
  p = f32[4] parameter(0)
  ROOT d = f32[4] add(p, p)
}

ENTRY e {
  x = f32[4] parameter(0)
  one = f32[4] call(x), to_apply=twice
  two = f32[4] call(one), to_apply=twice
  k = s32[] constant(1)
  three = f32[4] conditional(k, two, one), branch_computations={twice, twice}
  z = f32[] constant(0)
  r = f32[] reduce(three, z), dimensions={0}, to_apply=add
  s = f32[] call(r, z), to_apply=add
  ROOT t = (f32[4], f32[]) tuple(three, s)
}
"""


def test_calls_from_several_places_get_their_own_copies():
    module = runtime.parse(TEXT)
    with pytest.raises(HloVerifyError, match="flatten_call_graph"):
        CallGraph(module)
    flat = flatten_call_graph(module)
    graph = CallGraph(flat)
    entry = flat.entry
    callees = {i.name: [c.name for c in i.called_computations] for i in entry.instructions
               if i.called_computations}
    assert callees == {"one": ["twice"], "two": ["twice.clone"],
                       "three": ["twice.clone.1", "twice.clone.2"], "r": ["add"],
                       "s": ["add.clone"]}
    assert [i.name for i in flat.computation("twice.clone.1").instructions] == [
        "p.clone.1", "d.clone.1"]
    assert flat.computation("add") in graph.thread_local
    assert [c.name for c in flat.computations] == [
        "add", "twice", "twice.clone", "twice.clone.1", "twice.clone.2", "add.clone", "e"]
    assert runtime.parse(flat.to_text()).to_text() == flat.to_text()
    assert [c.name for c in module.computations] == ["add", "twice", "e"]
