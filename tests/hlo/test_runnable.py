"""check_runnable: the gate before compiling refuses modules whose values cannot exist."""

import pytest

import runtime
from runtime.errors import HloUnsupportedError
from runtime.hlo.runnable import check_runnable

H = "HloModule m\n\nENTRY %e {\n"


def test_a_complete_module_is_runnable():
    check_runnable(runtime.parse(H + "  %p = f32[<=8] parameter(0)\n  %c = f32[2] constant({1, 2})\n"
                                 "  ROOT %t = (f32[<=8], f32[2]) tuple(%p, %c)\n}"))


def test_elided_constant_is_refused_naming_the_instruction_and_line():
    module = runtime.parse(H + "  %p = f32[20] parameter(0)\n  %big = f32[20] constant({...})\n"
                           "  ROOT %r = f32[20] add(%p, %big)\n}")
    with pytest.raises(HloUnsupportedError) as info:
        check_runnable(module)
    err = info.value
    assert (err.instruction, err.computation, err.line, err.column) == ("big", "e", 5, 3)
    assert "constant big was printed elided as {...}" in err.message
    assert "XLA would silently run it as zeros" in err.message
    assert err._render_traceback_()[-1].startswith("HloUnsupportedError: constant big")


def test_elided_element_of_a_tuple_constant_is_refused():
    module = runtime.parse(H + "  ROOT %t = (f32[], f32[12]) constant((1, {...}))\n}")
    with pytest.raises(HloUnsupportedError) as info:
        check_runnable(module)
    assert info.value.instruction == "t"


def test_unbounded_dimension_is_refused():
    module = runtime.parse(H + "  %p = f32[?,4] parameter(0)\n  ROOT %n = f32[?,4] negate(%p)\n}")
    with pytest.raises(HloUnsupportedError) as info:
        check_runnable(module)
    assert (info.value.instruction, info.value.line) == ("p", 4)
    assert "unbounded shape f32[?,4]" in info.value.message
