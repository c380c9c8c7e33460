"""Live ranges: parameters, outputs, loop entry reads, conditional predicates."""

import runtime
from runtime.analysis.dataflow import Dataflow
from runtime.analysis.liveness import LiveRange, Liveness, peak_of
from runtime.analysis.schedule import build_schedule, text_order

from .test_schedule import LOOP_AND_BRANCHES, names


def ranges(text):
    module = runtime.parse(text)
    flow = Dataflow(module)
    schedule = build_schedule(module, text_order(flow.call_graph), "module")
    liveness = Liveness(flow, schedule)
    return {v.label: (liveness[v].start, liveness[v].end) for v in flow.values}, schedule


def test_parameters_live_to_the_end_unless_aliased_and_outputs_to_the_end():
    text = """
HloModule m{alias}
ENTRY e {{
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  n = f32[4] negate(p)
  m = f32[4] multiply(n, n)
  s = f32[4] add(q, q)
  ROOT t = (f32[4], f32[4]) tuple(m, s)
}}
"""
    plain, _ = ranges(text.format(alias=""))
    assert plain == {"p": (0, 5), "q": (0, 5), "n": (2, 3), "m": (3, 5), "s": (4, 5), "t": (5, 5)}
    aliased, _ = ranges(text.format(alias=", input_output_alias={ {0}: (0, {}) }"))
    assert aliased["p"] == (0, 2) and aliased["q"] == (0, 5)


def test_loop_init_is_read_when_the_loop_starts_and_the_condition_lives_through_the_body():
    live, schedule = ranges(LOOP_AND_BRANCHES)
    assert names(schedule.flattened) == ["a", "k", "b", "p", "f", "p", "n", "w", "x", "y", "z", "c"]
    assert live["b"] == (2, 10), "read by the loop at its start (3), then by branch drop at 10"
    assert live["p"] == (3, 6) and live["n"] == (6, 6) and live["w"] == (7, 8)
    assert live["k"] == (0, 11), "an entry parameter lives to the end"
    assert live["f"] == (4, 6), "the condition's result lives to the end of the body (6)"
    assert live["z"] == (10, 10) and live["c"] == (11, 11)


def test_a_computed_selector_lives_through_the_last_branch():
    live, schedule = ranges("""
HloModule m

one {
  x = f32[4] parameter(0)
  ROOT y = f32[4] negate(x)
}

two {
  x = f32[4] parameter(0)
  ROOT y = f32[4] abs(x)
}

ENTRY e {
  a = f32[4] parameter(0)
  i = s32[] parameter(1)
  j = s32[] negate(i)
  ROOT c = f32[4] conditional(j, a, a), branch_computations={one, two}
}
""")
    assert names(schedule.flattened) == ["a", "i", "j", "x", "y", "x", "y", "c"]
    assert live["j"] == (2, 6), "read by the kernels of both branches, the last ending at 6"


def test_peak_of_inclusive_intervals():
    assert peak_of([(0, 2, 4), (2, 3, 8), (4, 4, 1)], 5) == (12, 2)
    assert LiveRange(1, 3).contains(3) and not LiveRange(1, 3).contains(4)
