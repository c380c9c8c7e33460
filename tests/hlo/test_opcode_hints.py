"""Unknown opcodes get the hint a person expects: common short names, case, underscores,
then edit distance preferring the opcode the word begins."""

from __future__ import annotations

import pytest

import runtime
from runtime.errors import HloParseError
from runtime.hlo.opcode_hints import edit_distance, suggest_opcode
from runtime.hlo.opcodes import OPCODES


def hint_for(opcode: str) -> str | None:
    text = ("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
            f"  ROOT r = f32[4] {opcode}(p, p)\n}}\n")
    with pytest.raises(HloParseError) as info:
        runtime.parse(text)
    assert f"unknown opcode: {opcode}" in str(info.value)
    return info.value.hint


@pytest.mark.parametrize("typed, meant", [
    ("ad", "add"), ("mul", "multiply"), ("sub", "subtract"), ("exp", "exponential"),
    ("ADD", "add"), ("Multiply", "multiply"), ("div", "divide"), ("neg", "negate"),
    ("max", "maximum"), ("dynamic_slice", "dynamic-slice"), ("matmul", "dot"),
    ("nagate", "negate"), ("subtact", "subtract"), ("tanhh", "tanh"), ("concat", "concatenate"),
])
def test_the_hint_is_the_opcode_meant(typed: str, meant: str):
    assert hint_for(typed) == f"did you mean {meant}?"


def test_no_hint_when_nothing_is_close():
    assert hint_for("frobnicate") is None


def test_every_common_name_points_at_a_real_opcode():
    from runtime.hlo.opcode_hints import COMMON_NAMES
    assert set(COMMON_NAMES.values()) <= set(OPCODES)
    assert not set(COMMON_NAMES) & set(OPCODES)


def test_edit_distance():
    assert edit_distance("ad", "add") == 1
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3
    assert suggest_opcode("ad", ["pad", "and", "add"]) == "add"
