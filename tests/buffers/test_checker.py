"""The checker accepts sound assignments and catches planted mistakes."""

import pytest

import runtime
from runtime.pipeline import buffer_assignment
from runtime.buffers.checker import UnsoundAssignment, check_assignment

from .test_assignment import LOOP, XLA_EXAMPLE

CHAIN = """
HloModule chain

ENTRY e {
  a = f32[32] parameter(0)
  b = f32[32] negate(a)
  c = f32[32] exponential(a)
  d = f32[32] add(b, c)
  ROOT e = f32[32] sqrt(d)
}
"""


def test_planted_overlap_of_two_live_temps_is_caught():
    ba = buffer_assignment(runtime.parse(CHAIN))
    check_assignment(ba)
    arena = next(a for a in ba.allocations if a.kind == "temp")
    b, c = (p for p in arena.buffers if p.name in ("b", "c"))
    assert b.offset != c.offset
    c.offset = b.offset
    with pytest.raises(UnsoundAssignment) as caught:
        check_assignment(ba)
    assert any("c is written at step" in v and "where b is live" in v
               for v in caught.value.violations)


def test_planted_misplaced_loop_state_is_caught():
    ba = buffer_assignment(runtime.parse(LOOP))
    moved = ba.placement(ba.aliasing.buffer_of(ba.dataflow.value_at(ba.module.entry.root)))
    moved.offset += 128
    with pytest.raises(UnsoundAssignment, match="does not fit"):
        check_assignment(ba)


def test_planted_alias_break_is_caught():
    ba = buffer_assignment(runtime.parse(XLA_EXAMPLE))
    ba.aliases[0] = type(ba.aliases[0])((1,), 0, ())
    with pytest.raises(UnsoundAssignment, match="input_output_alias"):
        check_assignment(ba)


def test_planted_schedule_error_is_caught():
    ba = buffer_assignment(runtime.parse(CHAIN))
    sequence = ba.schedule.sequences["e"]
    sequence[0], sequence[-1] = sequence[-1], sequence[0]
    with pytest.raises(UnsoundAssignment, match="scheduled before its predecessor"):
        check_assignment(ba)
