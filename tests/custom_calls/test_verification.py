"""The verifier checks a custom call's declared aliasing and layout constraints."""

import re

import pytest

import runtime
from runtime import HloVerifyError

CALL = """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = (f32[4], s32[]) parameter(1)
  ROOT c = (f32[4], s32[]) custom-call(x, y), custom_call_target="t"ATTRS
}"""


@pytest.mark.parametrize("attrs, message", [
    (", output_to_operand_aliasing={ {2}: (0, {}) }", "names output {2}"),
    (", output_to_operand_aliasing={ {0}: (2, {}) }", "names operand 2, but custom-call has 2"),
    (", output_to_operand_aliasing={ {0}: (1, {3}) }", "operand 1 at {3}"),
    (", output_to_operand_aliasing={ {1}: (0, {}) }", "must be arrays of one shape"),
    (", output_to_operand_aliasing={ {}: (0, {}) }", "must be arrays of one shape"),
    (", operand_layout_constraints={f32[4]{0}}", "gives 1 shape"),
    (", operand_layout_constraints={f32[5]{0}, (f32[4], s32[])}", "entry 0 does not match"),
])
def test_bad_declarations_are_located_verify_errors(attrs, message):
    with pytest.raises(HloVerifyError, match=re.escape(message)) as info:
        runtime.parse(CALL.replace("ATTRS", attrs))
    assert info.value.line == 5


def test_good_declarations_verify():
    runtime.parse(CALL.replace("ATTRS", ", output_to_operand_aliasing={ {0}: (0, {}), {1}: "
                                        "(1, {1}) }, operand_layout_constraints={f32[4]{0}, "
                                        "(f32[4]{0}, s32[])}"))
