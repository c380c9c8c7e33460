"""Schedulers, the flattened timeline, and the choice by simulated peak."""

import runtime
from runtime.analysis.alias_analysis import AliasAnalysis
from runtime.analysis.dataflow import Dataflow
from runtime.analysis.memory_scheduler import choose_schedule
from runtime.analysis.schedule import build_schedule, list_order, post_order, text_order
from runtime.pipeline import buffer_assignment

TWO_REDUCTIONS = """
HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY e {
  p = f32[1024] parameter(0)
  z = f32[] constant(0)
  a = f32[1024] negate(p)
  b = f32[1024] exponential(p)
  ra = f32[] reduce(a, z), dimensions={0}, to_apply=add
  rb = f32[] reduce(b, z), dimensions={0}, to_apply=add
  ROOT t = (f32[], f32[]) tuple(ra, rb)
}
"""


def names(sequence):
    return [i.name for i in sequence]


def test_list_scheduler_frees_big_values_early_and_wins():
    module = runtime.parse(TWO_REDUCTIONS)
    flow = Dataflow(module)
    entry = module.entry
    assert names(post_order(flow.call_graph)[entry]) == ["p", "z", "a", "b", "ra", "rb", "t"]
    assert names(list_order(flow)[entry]) == ["p", "z", "a", "ra", "b", "rb", "t"]
    chosen = choose_schedule(flow, AliasAnalysis(flow, []))
    assert chosen.scheduler == "list"
    assert chosen.peaks == {"list": 4096 * 2 + 4 * 3, "post-order": 4096 * 3 + 4 * 2}


def test_scheduled_module_keeps_its_order_on_ties():
    module = runtime.parse("HloModule m, is_scheduled=true\nENTRY e {\n  a = f32[4] parameter(0)\n"
                           "  b = f32[4] parameter(1)\n  ROOT c = f32[4] add(b, a)\n}\n")
    flow = Dataflow(module)
    chosen = choose_schedule(flow, AliasAnalysis(flow, []))
    assert chosen.scheduler == "module" and set(chosen.peaks) == {"module", "list", "post-order"}


LOOP_AND_BRANCHES = """
HloModule m

cond {
  p = f32[4] parameter(0)
  ROOT f = pred[] constant(false)
}

body {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}

take {
  ROOT x = f32[4] parameter(0)
}

drop {
  y = f32[4] parameter(0)
  ROOT z = f32[4] abs(y)
}

ENTRY e {
  a = f32[4] parameter(0)
  k = pred[] parameter(1)
  b = f32[4] abs(a)
  w = f32[4] while(b), condition=cond, body=body
  ROOT c = f32[4] conditional(k, w, b), true_computation=take, false_computation=drop
}
"""


def test_flattened_timeline_puts_callees_before_their_call_site():
    module = runtime.parse(LOOP_AND_BRANCHES)
    flow = Dataflow(module)
    schedule = build_schedule(module, text_order(flow.call_graph), "module")
    assert names(schedule.flattened) == ["a", "k", "b", "p", "f", "p", "n", "w", "x", "y", "z",
                                         "c"]
    assert schedule.spans[module.computation("body")] == (5, 6)
    assert schedule.spans[module.entry] == (0, 11)
    assert schedule.step[module.entry.root] == 11 == schedule.last_step


COUNTER_READ_LATE = """
HloModule counter
cond {
  p = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[64] get-tuple-element(p), index=1
  fi = f32[] convert(i)
  b = f32[64] broadcast(fi), dimensions={}
  y = f32[64] add(x, b)
  ROOT t = (s32[], f32[64]) tuple(next, y)
}
ENTRY e {
  a = f32[64] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[64]) tuple(zero, a)
  ROOT w = (s32[], f32[64]) while(init), condition=cond, body=body
}
"""


def test_loop_state_update_waits_for_the_old_elements_readers():
    module = runtime.parse(COUNTER_READ_LATE)
    flow = Dataflow(module)
    body = names(list_order(flow)[module.computation("body")])
    assert body.index("next") > body.index("fi"), body
    ba = buffer_assignment(module)
    assert not any("loop state {0} computed by the body" in c.reason for c in ba.copies)


def test_post_order_also_updates_loop_state_after_its_old_readers():
    """Plain post-order computes ``next`` (first in text order) before ``fi`` reads the old
    counter, which would need a copy every iteration; the post-order candidate keeps the list
    scheduler's edge, whichever candidate wins."""
    module = runtime.parse(COUNTER_READ_LATE)
    flow = Dataflow(module)
    body = module.computation("body")
    assert names(body.post_order()).index("next") < names(body.post_order()).index("fi")
    ordered = names(post_order(flow.call_graph, module)[body])
    assert ordered.index("next") > ordered.index("fi"), ordered
    assert names(post_order(flow.call_graph, module)[module.entry]) == \
        names(module.entry.post_order())


def test_post_order_updates_a_donated_parameter_after_its_other_reads():
    module = runtime.parse("""
HloModule donated, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  w = f32[64] parameter(0)
  g = f32[64] parameter(1)
  nw = f32[64] subtract(w, g)
  old = f32[64] multiply(w, w)
  ROOT t = (f32[64], f32[64]) tuple(nw, old)
}
""")
    flow = Dataflow(module)
    ordered = names(post_order(flow.call_graph, module)[module.entry])
    assert ordered.index("nw") > ordered.index("old"), ordered
    assert not buffer_assignment(module).copies
