"""input_output_alias, buffer_donor and the caller's donations."""

import pytest

import runtime
from runtime.pipeline import buffer_assignment
from runtime.buffers.donation import plan_aliasing
from runtime.errors import HloVerifyError

from .checked import assigned

DONORS = """
HloModule donors, buffer_donor={ (0, {}), (1, {}), (2, {}) }

ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  c = f32[6] parameter(2)
  r = f32[2,2] reshape(a)
  n = f32[2,2] negate(r)
  w = f64[4] convert(b)
  ROOT t = (f32[2,2], f64[4], s32[4]) tuple(n, w, s)
}
""".replace("  ROOT", "  s = s32[4] convert(b)\n  ROOT")


def test_donors_match_equal_byte_sizes_largest_first_and_the_rest_are_reported():
    module = runtime.parse(DONORS)
    plan = plan_aliasing(module, None)
    assert [(a.output_index, a.parameter_number, a.kind) for a in plan.aliases] == [
        ((0,), 0, "may-alias"), ((2,), 1, "may-alias")]
    (unused,) = plan.unused_donors
    assert (unused.parameter_number, unused.parameter_index) == (2, ())
    assert "no output of 24 bytes" in unused.reason and "{1} (32 bytes), {0} (16 bytes), {2} (16 bytes)" in unused.reason
    ba = assigned(module)
    assert [(a.parameter_number, a.aliased_output) for a in ba.allocations
            if a.kind == "parameter"] == [(0, (0,)), (1, (2,)), (2, None)]
    assert ba.unused_donors == plan.unused_donors
    assert "Buffer donors not used" in ba.to_text() and "parameter 2 {}" in ba.to_text()


def test_a_donor_of_twice_the_bytes_of_every_output_does_nothing():
    """hlo-reference §9.3: f32[4] donated, output f64[4] -> silently dropped by XLA."""
    module = runtime.parse("""
HloModule d, buffer_donor={ (0, {}) }
ENTRY e {
  x = f32[4] parameter(0)
  ROOT y = f64[4] convert(x)
}
""")
    ba = assigned(module)
    assert ba.aliases == [] and ba.memory_stats.alias == 0
    (unused,) = ba.unused_donors
    assert "no output of 16 bytes is left" in unused.reason


def test_only_donated_parameters_alias_or_donate():
    module = runtime.parse(DONORS.replace("buffer_donor={ (0, {}), (1, {}), (2, {}) }",
                                          "input_output_alias={ {0}: (0, {}, must-alias) }, "
                                          "buffer_donor={ (1, {}) }"))
    everything = assigned(module)
    assert [(a.output_index, a.parameter_number) for a in everything.aliases] == [
        ((0,), 0), ((2,), 1)]
    assert everything.allocations[0].must_alias
    only_one = assigned(module, donated=frozenset({1}))
    assert [(a.output_index, a.parameter_number) for a in only_one.aliases] == [((0,), 1)]
    assert [a.parameter_number for a in only_one.not_donated] == [0]
    assert only_one.allocations[0].aliased_output is None
    nothing = assigned(module, donated=frozenset())
    assert nothing.aliases == [] and nothing.unused_donors == []


@pytest.mark.parametrize("header, message", [
    ("input_output_alias={ {}: (0, {}) }", "to have the same size"),
    ("input_output_alias={ {}: (3, {}) }", "has 2 parameters"),
    ("input_output_alias={ {}: (1, {}), {}: (1, {}) }", "aliased twice"),
])
def test_aliases_that_cannot_be_honoured_are_located_errors(header, message):
    text = f"""HloModule bad, {header}
ENTRY e {{
  a = f32[4] parameter(0)
  b = f32[8] parameter(1)
  ROOT c = f32[8] negate(b)
}}
"""
    module = runtime.parse(text, verify=False)
    with pytest.raises(HloVerifyError, match=message) as caught:
        buffer_assignment(module)
    assert caught.value.line == 1
