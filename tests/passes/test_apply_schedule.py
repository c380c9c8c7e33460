"""Scheduling a module reorders its text and marks it scheduled."""

import runtime
from runtime.passes.apply_schedule import apply_schedule


def test_apply_schedule_reorders_a_copy():
    module = runtime.parse("HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n"
                           "  b = f32[4] negate(a)\n  c = f32[4] abs(a)\n"
                           "  ROOT d = f32[4] add(b, c)\n}\n")
    a, b, c, d = module.entry.instructions
    out = apply_schedule(module, {"e": [a, c, b, d]})
    assert out.is_scheduled and not module.is_scheduled
    assert [i.name for i in out.entry.instructions] == ["a", "c", "b", "d"]
    assert [i.name for i in module.entry.instructions] == ["a", "b", "c", "d"]
    assert runtime.parse(out.to_text()).to_text() == out.to_text()
