"""``reassign`` (what a donation toggle runs) against a from-scratch ``buffer_assignment``.

``reassign`` starts from the donation-independent preparation kept with a plan and shares
kernel bodies between the plans of one module; the plan must still be exactly the one a fresh
assignment of a freshly parsed module makes, for any donation set, in any order of toggles.
"""

from __future__ import annotations

import random
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime
from runtime import HloError, reassign
from runtime.buffers import BufferAssignment
from runtime.pipeline import buffer_assignment, optimise

from ..notebook.hlo_texts import model_step
from .random_modules import random_modules

# Tuple outputs, an in-place dynamic-update-slice of a donated parameter, a tuple parameter
# whose two leaves alias two outputs, and a buffer_donor that fits either of two outputs of
# its size (which one it takes depends on which other parameters are donated).
TUPLES_IN_PLACE = """HloModule tuples_in_place, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {0}, may-alias), {2}: (1, {1}, may-alias), {3}: (2, {}, may-alias) }, buffer_donor={ (3, {}), (4, {}) }

ENTRY main {
  w = f32[64] parameter(0)
  t = (f32[32], f32[32]) parameter(1)
  buf = f32[128] parameter(2)
  d = f32[16] parameter(3)
  e = f32[16] parameter(4)
  i = s32[] parameter(5)
  upd = f32[8] parameter(6)
  t0 = f32[32] get-tuple-element(t), index=0
  t1 = f32[32] get-tuple-element(t), index=1
  nw = f32[64] negate(w)
  s0 = f32[32] add(t0, t1)
  s1 = f32[32] multiply(t0, t1)
  nb = f32[128] dynamic-update-slice(buf, upd, i)
  x = f32[16] exponential(d)
  y = f32[16] add(d, e)
  z = f32[16] subtract(x, e)
  ROOT out = (f32[64], f32[32], f32[32], f32[128], f32[16], f32[16], f32[16]) tuple(nw, s0, s1, nb, x, y, z)
}
"""

# A loop (sequential computations besides the entry) whose state starts from a donated
# parameter, and fusions once optimised (kernel bodies the plans share).
LOOP = """HloModule loop, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }

cond {
  s = (s32[], f32[256]) parameter(0)
  n = s32[] get-tuple-element(s), index=0
  lim = s32[] constant(4)
  ROOT lt = pred[] compare(n, lim), direction=LT
}

body {
  s = (s32[], f32[256]) parameter(0)
  n = s32[] get-tuple-element(s), index=0
  v = f32[256] get-tuple-element(s), index=1
  one = s32[] constant(1)
  n1 = s32[] add(n, one)
  v1 = f32[256] multiply(v, v)
  v2 = f32[256] add(v1, v)
  ROOT r = (s32[], f32[256]) tuple(n1, v2)
}

ENTRY main {
  a = f32[256] parameter(0)
  b = f32[256] parameter(1)
  c = f32[256] parameter(2)
  zero = s32[] constant(0)
  init = (s32[], f32[256]) tuple(zero, a)
  w = (s32[], f32[256]) while(init), condition=cond, body=body
  v = f32[256] get-tuple-element(w), index=1
  e = f32[256] exponential(b)
  f = f32[256] add(e, c)
  g = f32[256] multiply(f, v)
  ROOT out = (f32[256], f32[256]) tuple(g, f)
}
"""


# Side effects in the entry and in a loop body (the schedulers keep them in order, dead-code
# elimination keeps the unused one), a conditional, a donor and a must-alias parameter.
EFFECTS = """HloModule effects, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }, buffer_donor={ (2, {}) }

cond {
  s = (s32[], f32[64]) parameter(0)
  n = s32[] get-tuple-element(s), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(n, lim), direction=LT
}

body {
  s = (s32[], f32[64]) parameter(0)
  n = s32[] get-tuple-element(s), index=0
  v = f32[64] get-tuple-element(s), index=1
  one = s32[] constant(1)
  n1 = s32[] add(n, one)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[64] rng(lo, hi), distribution=rng_uniform
  unused = f32[64] rng(lo, hi), distribution=rng_normal
  v1 = f32[64] add(v, r)
  ROOT t = (s32[], f32[64]) tuple(n1, v1)
}

yes {
  x = f32[64] parameter(0)
  ROOT y = f32[64] exponential(x)
}

no {
  x = f32[64] parameter(0)
  ROOT y = f32[64] negate(x)
}

ENTRY main {
  a = f32[64] parameter(0)
  b = f32[64] parameter(1)
  c = f32[64] parameter(2)
  k = pred[] parameter(3)
  zero = s32[] constant(0)
  init = (s32[], f32[64]) tuple(zero, a)
  w = (s32[], f32[64]) while(init), condition=cond, body=body
  v = f32[64] get-tuple-element(w), index=1
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  noise = f32[64] rng(lo, hi), distribution=rng_uniform
  sel = f32[64] conditional(k, b, c), true_computation=yes, false_computation=no
  s = f32[64] add(v, noise)
  m = f32[64] multiply(sel, b)
  e = f32[64] exponential(c)
  ROOT out = (f32[64], f32[64], f32[64], f32[64]) tuple(s, m, sel, e)
}
"""

# Each donated update comes first in the text, so with nothing donated the list scheduler runs
# it before the parameter's other reader; donating the parameter orders it after that reader
# (the schedules kept for a module's donation sets must see it). Scheduled as it stands, the
# module's own order is a candidate too.
REORDERED = """HloModule reordered, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias), {2}: (2, {}, may-alias) }

ENTRY main {
  a = f32[256] parameter(0)
  b = f32[256] parameter(1)
  c = f32[64] parameter(2)
  na = f32[256] negate(a)
  ea = f32[256] exponential(a)
  nb = f32[256] negate(b)
  eb = f32[256] exponential(b)
  s = f32[256] add(ea, eb)
  nc = f32[64] negate(c)
  ROOT out = (f32[256], f32[256], f32[64], f32[256]) tuple(na, nb, nc, s)
}
"""
UNSCHEDULED = REORDERED.replace(" is_scheduled=true,", "")


def plan_facts(plan: BufferAssignment) -> tuple:
    """Everything a plan says: each buffer's place and live range, each allocation, the
    statistics, the schedule and the copies."""
    allocations = [(a.index, a.kind, a.size, a.parameter_number, a.parameter_index,
                    a.aliased_output, a.must_alias, a.maybe_live_out, a.output_index)
                   for a in plan.allocations]
    return (sorted(tuple(sorted(r.items())) for r in plan.records()), allocations,
            plan.memory_stats, plan.peak_step, [i.name for i in plan.schedule.flattened],
            plan.schedule.scheduler, plan.copies, plan.unused_donors, plan.not_donated)


def donation_sets(parameters: int, count: int, seed: int) -> list[frozenset[int]]:
    rng = random.Random(seed)
    sets = [frozenset(), frozenset(range(parameters))]
    sets += [frozenset(n for n in range(parameters) if rng.random() < rng.random())
             for _ in range(count)]
    return sets


@pytest.mark.parametrize("text, optimised, count", [
    (TUPLES_IN_PLACE, False, 24), (TUPLES_IN_PLACE, True, 24), (LOOP, True, 12),
    (EFFECTS, False, 12), (EFFECTS, True, 12), (model_step(6), True, 12),
    (REORDERED, False, 12), (UNSCHEDULED, False, 12), (UNSCHEDULED, True, 12)],
    ids=["tuples-in-place", "tuples-in-place-fused", "loop", "effects", "effects-fused",
         "model-step", "reordered", "reordered-unscheduled", "reordered-fused"])
def test_reassign_gives_the_plan_of_a_fresh_assignment(text, optimised, count):
    def module():
        parsed = runtime.parse(text)
        return optimise(parsed) if optimised else parsed

    first = buffer_assignment(module())
    parameters = len(first.source.entry_computation.parameters)
    plan = first
    for donated in donation_sets(parameters, count, seed=parameters):
        plan = reassign(plan, donated)          # from the last plan, as toggles go
        assert plan_facts(plan) == plan_facts(buffer_assignment(module(), donated=donated)), \
            sorted(donated)
        assert plan_facts(reassign(first, donated)) == plan_facts(plan)
    # the kept preparation and the shared kernel bodies are as the first plan left them
    assert plan_facts(reassign(plan, None)) == plan_facts(first)


def test_the_donor_takes_a_different_output_as_other_parameters_are_donated():
    """The module above exercises what it means to: parameter 3's donor is matched with
    output {4} or {5} depending on the donation set, and the in-place update and the tuple
    parameter's leaves alias their outputs."""
    first = buffer_assignment(runtime.parse(TUPLES_IN_PLACE))

    def aliased(plan: BufferAssignment) -> dict[int, set]:
        found: dict[int, set] = {}
        for a in plan.allocations:
            if a.kind == "parameter" and a.aliased_output is not None:
                found.setdefault(a.parameter_number, set()).add(a.aliased_output)
        return found

    assert aliased(first) == {0: {(0,)}, 1: {(1,), (2,)}, 2: {(3,)}, 3: {(4,)}, 4: {(5,)}}
    assert aliased(reassign(first, frozenset({3})))[3] == {(4,)}
    assert aliased(reassign(first, frozenset({2, 3}))) == {2: {(3,)}, 3: {(4,)}}
    assert aliased(reassign(first, frozenset({4}))) == {4: {(4,)}}


def _plan_or_error(make: Callable[[], BufferAssignment]) -> tuple:
    """The plan's facts, or the error a donation set that cannot be planned gives."""
    try:
        return plan_facts(make())
    except HloError as error:
        return (type(error), str(error))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_modules(), st.booleans(), st.data())
def test_reassign_of_random_modules_gives_the_plan_of_a_fresh_assignment(generated, optimised,
                                                                         data):
    """Random modules (loops, conditionals, calls, in-place updates, outputs repeating values,
    random aliases, must-alias entries and donors) and random donation sets, one after
    another."""
    text, parameters = generated

    def module():
        parsed = runtime.parse(text)
        return optimise(parsed) if optimised else parsed

    plan = first = buffer_assignment(module())
    for _ in range(4):
        donated = frozenset(data.draw(st.sets(st.integers(0, parameters - 1))))
        fresh = _plan_or_error(lambda: buffer_assignment(module(), donated=donated))
        assert _plan_or_error(lambda: reassign(plan, donated)) == fresh, sorted(donated)
        assert _plan_or_error(lambda: reassign(first, donated)) == fresh, sorted(donated)
        if not isinstance(fresh[0], type):
            plan = reassign(plan, donated)


def test_a_donation_set_with_the_same_aliasing_gets_the_plan_made_before():
    """A report plans its module for no donation, for every donation and as the module says;
    a plan depends on the donation set only through the aliasing applied, so a set applying
    the same aliasing gets the plan already made (a model's plan takes a second or more)."""
    first = buffer_assignment(runtime.parse(TUPLES_IN_PLACE))
    assert reassign(first, frozenset(range(7))) is first      # every alias, as the module says
    nothing = reassign(first, frozenset())
    assert nothing is not first
    assert reassign(first, frozenset({5, 6})) is nothing       # parameters that alias nothing
    assert reassign(nothing, None) is first
