"""DonationModel: which parameters can be donated, and what each toggle does to the plan."""

from __future__ import annotations

import pytest

import runtime
from hlo_magic.donation import DonationModel, describe_parameters
from runtime.pipeline import buffer_assignment

from ..conftest import corpus_dir
from .hlo_texts import ADD_MUL, INCREMENT, MUST_ALIAS, UNMATCHED_DONOR


def model_of(text: str, donated=()) -> DonationModel:
    return DonationModel(buffer_assignment(runtime.parse(text)), donated)


def test_parameters_say_what_the_module_declares_and_why_one_cannot_alias():
    x, y = describe_parameters(buffer_assignment(runtime.parse(ADD_MUL)))
    assert (x.number, x.name, x.shape_text, x.dtype, x.size) == (0, "x", "f32[4,8]", "f32", 128)
    assert x.declared() == "output {0} (may-alias)" and x.blocked is None and not x.must_alias
    assert y.declared() == "" and y.blocked == (
        "no input_output_alias or buffer_donor entry names this parameter, so no output can live "
        "in its buffer")


def test_a_donor_no_output_can_take_is_blocked_with_the_reason():
    (a,) = describe_parameters(buffer_assignment(runtime.parse(UNMATCHED_DONOR)))
    assert a.donor and a.declared() == "buffer_donor"
    assert a.blocked == ("buffer_donor matches no output: no output of 32 bytes is left to take "
                         "it (outputs without an input_output_alias: {} (16 bytes))")


def test_a_matching_donor_can_be_donated():
    text = (corpus_dir() / "donate_buffer_donor.hlo").read_text()
    model = model_of(text)
    (p,) = model.parameters
    assert p.donor and p.blocked is None
    line = model.set_donated(0, True)
    assert model.assignment.memory_stats.alias == 96
    assert line.startswith(f"donating {p.name} ")


def test_toggling_donation_changes_the_plan_and_says_what_changed():
    model = model_of(ADD_MUL)
    assert model.donated == frozenset() and model.peak == 528
    assert model.summary() == "peak 528 B, total allocated 528 B (nothing donated)"
    line = model.set_donated(0, True)
    assert line == ("donating x saves 128 B of peak (528 B -> 400 B) and 128 B of total "
                    "allocated (528 B -> 400 B); output {0} is live at the peak (step 4, t) in "
                    "its own buffer; runs in place")
    assert model.donated == frozenset({0}) and model.peak == 400
    assert model.assignment.memory_stats == runtime.buffers.MemoryStats(256, 272, 128, 0, 400)
    assert model.summary() == ("peak 528 B \u2192 400 B, \u221224 %; total allocated 528 B "
                               "\u2192 400 B, \u221224 % (donating x)")
    assert model.set_donated(0, True) == line     # no change, same sentence
    back = model.set_donated(0, False)
    assert back == ("keeping x costs 128 B of peak (400 B -> 528 B) and 128 B of total "
                    "allocated (400 B -> 528 B); output {0} is live at the peak (step 4, t) in "
                    "its own buffer; output {0} gets its own buffer")
    assert model.peak == 528 and model.baseline.peak == 528


def test_a_donation_that_needs_a_copy_says_so():
    model = model_of("""HloModule needs_copy, input_output_alias={ {0}: (0, {}, may-alias) }

ENTRY main {
  a = f32[16] parameter(0)
  n = f32[16] negate(a)
  m = f32[16] multiply(n, a)
  ROOT t = (f32[16], f32[16]) tuple(n, m)
}
""")
    assert model.set_donated(0, True) == (
        "donating a saves 16 B of peak (208 B -> 192 B) and 0 B of total allocated (208 B); "
        "output {0} is live at the peak (step 3, t) in its own buffer; "
        "in place after copy insertion adds copy.0: "
        "parameter 0 {}, aliased with output {0}: n would overwrite a, which is still needed "
        "until m")


def test_must_alias_parameters_are_always_donated():
    model = model_of(MUST_ALIAS)
    assert model.forced == frozenset({0}) and model.donated == frozenset({0})
    assert model.assignment.memory_stats.alias == 16
    with pytest.raises(runtime.HloArgumentError, match="must-alias: every run has to donate it"):
        model.set_donated(0, False)


def test_blocked_and_unknown_parameters_are_clear_errors():
    model = model_of(ADD_MUL)
    with pytest.raises(runtime.HloArgumentError, match=r"parameter 1 \(y\) cannot be donated: "
                                                       r"no input_output_alias"):
        model.set_donated(1, True)
    with pytest.raises(runtime.HloArgumentError, match="parameter 7 does not exist: the entry "
                                                       "has 2 parameter"):
        model.set_donated(7, True)
    with pytest.raises(runtime.HloArgumentError, match="cannot be donated"):
        model_of(ADD_MUL, donated=(1,))


def test_starting_donated_matches_the_compile_time_plan():
    model = model_of(INCREMENT, donated=(0,))
    ba = buffer_assignment(runtime.parse(INCREMENT))
    assert model.assignment.memory_stats == ba.memory_stats
    assert model.summary() == ("peak 12 B \u2192 8 B, \u221233 %; total allocated 8 B \u2192 "
                               "4 B, \u221250 % (donating p)")


# The peak is the dot's 16 KiB temporary (step 3); the output is made after it dies, so
# giving the output p's bytes shrinks the total allocated but not the peak.
EARLY_PEAK = """HloModule early_peak, input_output_alias={ {}: (0, {}, may-alias) }

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  p = f32[64] parameter(0)
  a = f32[64,1] reshape(p)
  b = f32[1,64] reshape(p)
  big = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zero = f32[] constant(0)
  s = f32[64] reduce(big, zero), dimensions={0}, to_apply=add
  ROOT out = f32[64] multiply(s, s)
}
"""


def test_a_donation_that_saves_no_peak_says_what_it_saves_and_why():
    model = model_of(EARLY_PEAK)
    assert model.set_donated(0, True) == (
        "donating p saves 0 B of peak (16.8 KiB) and 256 B of total allocated (17.0 KiB -> "
        "16.8 KiB); the peak does not move: output {} is not live at the peak (step 3, big); "
        "runs in place")
    assert model.summary() == ("peak 16.8 KiB (unchanged); total allocated 17.0 KiB \u2192 "
                               "16.8 KiB, \u22121 % (donating p)")


def test_donate_all_and_none_and_plans_are_kept_per_donation_set():
    model = model_of(ADD_MUL)
    assert model.donatable == frozenset({0})
    assert model.donate_all().startswith("donating all 1 donatable parameter saves 128 B")
    assert model.donated == frozenset({0}) and model.peak == 400
    assert model.donate_all(False).startswith("keeping every optional parameter costs 128 B")
    assert model.donated == frozenset() and model.assignment is model.baseline
    assert model.plan(frozenset({0})) is model.plan(frozenset({0}))
