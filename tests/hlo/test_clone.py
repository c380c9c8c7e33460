"""Cloning gives an independent module that prints the same text."""

import runtime
from runtime.hlo.clone import clone_computation, clone_module

TEXT = """
HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  r = f32[] reduce(x, z), dimensions={0}, to_apply=add
  n = f32[4] negate(x), control-predecessors={r}
  ROOT t = (f32[4], f32[]) tuple(n, r)
}
"""


def test_clone_module_is_equal_in_text_and_shares_no_mutable_state():
    module = runtime.parse(TEXT)
    copy, mapping = clone_module(module)
    assert copy.to_text() == module.to_text()
    entry, original = copy.entry, module.entry
    assert entry is not original and entry.is_entry
    for new, old in zip(entry.instructions, original.instructions):
        assert new is not old and mapping.instruction(old) is new
        assert new.parent is entry and new.attrs is not old.attrs
    reduce_ = entry.instructions[2]
    assert reduce_.attrs["to_apply"] is copy.computation("add")
    assert reduce_.attrs["to_apply"] is mapping.computation(module.computation("add"))
    assert entry.instructions[3].control_predecessors == [reduce_]
    entry.instructions[3].operands.clear()
    assert original.instructions[3].operands == [original.instructions[0]]


def test_clone_computation_renames_and_keeps_callees():
    module = runtime.parse(TEXT)
    copy = clone_computation(module.entry, "e2", instruction_suffix=".clone")
    assert [i.name for i in copy.instructions] == ["x.clone", "z.clone", "r.clone", "n.clone", "t.clone"]
    assert copy.root is copy.instructions[-1]
    assert copy.instructions[2].attrs["to_apply"] is module.computation("add")
