"""Hand-checked assignments of small modules: exact allocations, offsets, live ranges, peak."""

import pytest

import runtime
from runtime.buffers.assignment import BufferSlice, MemoryStats
from runtime.pipeline import buffer_assignment
from runtime.errors import HloArgumentError, HloError, HloUnsupportedError

from .checked import assigned
from runtime import reassign

INCREMENT = """
HloModule increment{alias}

ENTRY entry {{
  %p = f32[] parameter(0)
  %c = f32[] constant(1)
  ROOT %out = f32[] add(%p, %c)
}}
"""


@pytest.mark.parametrize("alias", [", input_output_alias={ {}: 0 }",
                                   ", input_output_alias={ {}: (0, {}, may-alias) }"])
def test_increment_with_its_alias_updates_the_parameter_in_place(alias):
    ba = assigned(INCREMENT.format(alias=alias))
    assert [(a.index, a.kind, a.size) for a in ba.allocations] == [
        (0, "parameter", 4), (1, "constant", 4)]
    param = ba.allocations[0]
    assert (param.parameter_number, param.parameter_index, param.aliased_output) == (0, (), ())
    assert param.maybe_live_out and not param.must_alias
    assert [v.label for v in param.buffers[0].values] == ["p", "out"]
    assert ba.records() == [
        {"name": "p", "allocation": 0, "kind": "parameter", "offset": 0, "size": 4, "start": 0, "end": 2},
        {"name": "c", "allocation": 1, "kind": "constant", "offset": 0, "size": 4, "start": 1, "end": 2},
    ]
    assert [i.name for i in ba.schedule.flattened] == ["p", "c", "out"]
    assert ba.memory_stats == MemoryStats(argument=4, output=4, alias=4, temp=0, peak=8)
    assert ba.output_slices() == {(): BufferSlice(0, 0, 4)}
    assert ba.parameter_slice(0) == BufferSlice(0, 0, 4)
    assert ba.copies == [] and ba.temp_arena is None


def test_increment_not_donated_gets_its_own_output():
    ba = assigned(INCREMENT.format(alias=", input_output_alias={ {}: 0 }"), donated=frozenset())
    assert [(a.kind, a.size, a.aliased_output) for a in ba.allocations] == [
        ("parameter", 4, None), ("constant", 4, None), ("output", 4, None)]
    assert ba.records()[2] == {"name": "out", "allocation": 2, "kind": "output", "offset": 0,
                               "size": 4, "start": 2, "end": 2}
    assert ba.memory_stats == MemoryStats(argument=4, output=4, alias=0, temp=0, peak=12)
    assert [(a.output_index, a.parameter_number) for a in ba.not_donated] == [((), 0)]
    assert "Aliases not applied" in ba.to_text()


def test_reassign_changes_only_the_donation_and_live_bytes_follow_the_peak():
    donated = assigned(INCREMENT.format(alias=", input_output_alias={ {}: 0 }"))
    assert donated.live_bytes() == [4, 8, 8]
    kept = reassign(donated, frozenset())
    assert kept.alignment == donated.alignment and kept.source is donated.source
    assert kept.memory_stats == MemoryStats(argument=4, output=4, alias=0, temp=0, peak=12)
    assert kept.live_bytes() == [4, 8, 12]
    assert [(b.name, start, end) for b, start, end in kept.live_intervals()] == [
        ("p", 0, 2), ("c", 1, 2), ("out", 2, 2)]
    assert reassign(kept, None).memory_stats == donated.memory_stats


XLA_EXAMPLE = """
HloModule jit_f, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias) }

fused {
  p0 = f32[4,8] parameter(0)
  p1 = f32[4,8] parameter(1)
  c = f32[] constant(2)
  b = f32[4,8] broadcast(c), dimensions={}
  m = f32[4,8] multiply(p0, b)
  ROOT a = f32[4,8] add(m, p1)
}

add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

wrapped_reduce_computation {
  x = f32[4,8] parameter(0)
  i = f32[] parameter(1)
  ROOT r = f32[] reduce(x, i), dimensions={0,1}, to_apply=add_f32
}

ENTRY main {
  x.1 = f32[4,8] parameter(0)
  y.1 = f32[4,8] parameter(1)
  constant.2 = f32[] constant(0)
  multiply_add_fusion = f32[4,8] fusion(x.1, y.1), kind=kLoop, calls=fused
  wrapped_reduce = f32[] fusion(x.1, constant.2), kind=kLoop, calls=wrapped_reduce_computation
  ROOT tuple = (f32[4,8], f32[]) tuple(multiply_add_fusion, wrapped_reduce)
}
"""


def test_xla_dump_example_copies_the_donated_parameter_read_after_the_fusion():
    """hlo-reference §8.6/8.11: `x*2 + y, sum(x)` with x donated, in XLA's schedule. XLA
    reports argument 256, output 148, alias 128, temp 128 and copies x first."""
    ba = assigned(XLA_EXAMPLE)
    assert ba.schedule.scheduler == "module"
    assert [i.name for i in ba.schedule.flattened] == [
        "x.1", "copy.0", "y.1", "constant.2", "multiply_add_fusion", "wrapped_reduce", "tuple"]
    (copy,) = ba.copies
    assert copy.instruction == "copy.0"
    assert "x.1" in copy.reason and "wrapped_reduce" in copy.reason
    stats = ba.memory_stats
    assert (stats.argument, stats.output, stats.alias, stats.temp) == (256, 148, 128, 128)
    assert stats.total == 404
    assert ba.records() == [
        {"name": "x.1", "allocation": 0, "kind": "parameter", "offset": 0, "size": 128, "start": 0, "end": 6},
        {"name": "y.1", "allocation": 1, "kind": "parameter", "offset": 0, "size": 128, "start": 0, "end": 6},
        {"name": "constant.2", "allocation": 2, "kind": "constant", "offset": 0, "size": 4, "start": 3, "end": 5},
        {"name": "tuple", "allocation": 3, "kind": "output", "offset": 0, "size": 16, "start": 6, "end": 6},
        {"name": "wrapped_reduce", "allocation": 4, "kind": "output", "offset": 0, "size": 4, "start": 5, "end": 6},
        {"name": "copy.0", "allocation": 5, "kind": "temp", "offset": 0, "size": 128, "start": 1, "end": 5},
    ]
    # x.1 / its copy / y.1 and the constant and the reduction are live at step 5
    assert (stats.peak, ba.peak_step, ba.peak_instruction.name) == (392, 5, "wrapped_reduce")
    assert [b.name for b in ba.live_at_peak()] == ["copy.0", "x.1", "y.1", "constant.2",
                                                   "wrapped_reduce"]


def test_our_own_schedule_avoids_the_copy():
    """Unscheduled, the list scheduler reduces x before the fusion overwrites it: no copy."""
    ba = assigned(XLA_EXAMPLE.replace("is_scheduled=true, ", ""))
    assert ba.copies == []
    assert [i.name for i in ba.schedule.flattened].index("wrapped_reduce") < \
        [i.name for i in ba.schedule.flattened].index("multiply_add_fusion")
    assert ba.memory_stats.temp == 0 and ba.memory_stats.alias == 128


LOOP = """
HloModule loop

cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(p), index=1
  y = f32[4] add(x, x)
  ROOT t = (s32[], f32[4]) tuple(next, y)
}

ENTRY e {
  a = f32[4] parameter(0)
  zero = s32[] constant(0)
  start = f32[4] negate(a)
  init = (s32[], f32[4]) tuple(zero, start)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""


def test_while_state_shares_one_buffer_per_index_and_the_constant_init_is_copied():
    ba = assigned(LOOP)
    assert " ".join(f"{n}:{i.name}" for n, i in enumerate(ba.schedule.flattened)) == (
        "0:a 1:zero 2:start 3:copy.0 4:tuple.0 5:p 6:i 7:n 8:lt 9:p 10:i 11:one 12:x 13:next "
        "14:y 15:t 16:w 17:r")
    (copy,) = ba.copies
    assert copy.instruction == "copy.0" and "zero is read-only" in copy.reason
    assert ba.records() == [
        {"name": "a", "allocation": 0, "kind": "parameter", "offset": 0, "size": 16, "start": 0, "end": 17},
        {"name": "zero", "allocation": 1, "kind": "constant", "offset": 0, "size": 4, "start": 1, "end": 3},
        {"name": "n", "allocation": 2, "kind": "constant", "offset": 0, "size": 4, "start": 7, "end": 8},
        {"name": "one", "allocation": 3, "kind": "constant", "offset": 0, "size": 4, "start": 11, "end": 13},
        # negate's result is the loop state {1} is the body's add (in place) is the output
        {"name": "start", "allocation": 4, "kind": "output", "offset": 0, "size": 16, "start": 2, "end": 17},
        {"name": "tuple.0", "allocation": 5, "kind": "temp", "offset": 0, "size": 16, "start": 4, "end": 16},
        {"name": "copy.0", "allocation": 5, "kind": "temp", "offset": 16, "size": 4, "start": 3, "end": 16},
        # the condition's result lives through the body (a guarded body may read it)
        {"name": "lt", "allocation": 5, "kind": "temp", "offset": 20, "size": 1, "start": 8, "end": 15},
    ]
    state = [v.label for v in ba.allocations[4].buffers[0].values]
    assert state == ["start", "p{1}", "y", "w{1}"]
    # three blocks live at step 8, each smaller than the alignment: aligned to their own size
    assert (ba.temp_arena.size, ba.temp_arena.lower_bound, ba.fragmentation) == (21, 21, 0)
    assert (ba.memory_stats.peak, ba.peak_step) == (57, 8)
    body = ba.module.computation("body")
    for index in [(0,), (1,), ()]:
        assert ba.slice(body.root, index) == ba.slice(body.parameters[0], index) == \
            ba.slice(ba.module.entry.instructions[5], index)


CONDITIONAL = """
HloModule cond

double {
  p = f32[4] parameter(0)
  ROOT d = f32[4] add(p, p)
}

same {
  ROOT p = f32[4] parameter(0)
}

ENTRY e {
  k = s32[] parameter(0)
  x = f32[4] parameter(1)
  ROOT c = f32[4] conditional(k, x, x), branch_computations={double, same}
}
"""


def test_conditional_branch_results_share_the_output_and_a_passed_through_input_is_copied():
    ba = assigned(CONDITIONAL)
    out = ba.output_slices()[()]
    assert ba.allocations[out.allocation].kind == "output"
    double, same = ba.module.computation("double"), ba.module.computation("same")
    assert ba.slice(double.root) == ba.slice(same.root) == out
    (copy,) = ba.copies
    assert "branch 1" in copy.reason and "x" in copy.reason
    assert same.root.opcode == "copy"


def test_slices_of_thread_local_and_unknown_positions_are_clear_errors():
    ba = assigned(XLA_EXAMPLE)
    fused = ba.module.computation("fused")
    with pytest.raises(HloError, match="no buffer"):
        ba.slice(fused.root)
    with pytest.raises(HloError, match="no index"):
        ba.slice(ba.module.entry.root, (5,))
    with pytest.raises(HloError, match="no parameter 7"):
        ba.parameter_slice(7)


def test_slice_accepts_instructions_of_the_original_module():
    module = runtime.parse(XLA_EXAMPLE)
    ba = assigned(module)
    assert ba.slice(module.entry.parameters[1]) == ba.parameter_slice(1)


def test_buffer_assignment_never_mutates_its_module():
    module = runtime.parse(LOOP)
    before = module.to_text()
    assigned(module)
    assert module.to_text() == before


def test_bad_arguments_are_reported():
    with pytest.raises(HloArgumentError, match="donated names parameter 3"):
        buffer_assignment(runtime.parse(LOOP), donated=frozenset({3}))
    with pytest.raises(HloArgumentError, match="alignment"):
        buffer_assignment(runtime.parse(LOOP), alignment=0)


TWO_LIVE = """
HloModule two_live
ENTRY e {
  a = f32[20] parameter(0)
  b = f32[20] negate(a)
  c = f32[20] exponential(a)
  d = f32[20] add(b, c)
  ROOT r = f32[20] multiply(d, a)
}
"""


@pytest.mark.parametrize("alignment,offsets", [(128, [0, 128]), (64, [0, 128]), (16, [0, 80])])
def test_alignment_is_configurable(alignment, offsets):
    ba = assigned(TWO_LIVE, alignment=alignment)
    arena = ba.allocations[[a.kind for a in ba.allocations].index("temp")]
    assert sorted({b.offset for b in arena.buffers}) == offsets


def test_elementwise_chain_reuses_dying_operands_in_the_temp_arena():
    ba = assigned("""
HloModule chain

ENTRY e {
  a = f32[32] parameter(0)
  b = f32[32] negate(a)
  c = f32[32] exponential(b)
  d = f32[32] sqrt(c)
  e = f32[32] abs(d)
  ROOT t = (f32[32], f32[32]) tuple(e, a)
}
""")
    arena = ba.allocations[[a.kind for a in ba.allocations].index("temp")]
    assert [(b.name, b.offset, b.live.start, b.live.end) for b in arena.buffers] == [
        ("b", 0, 1, 2), ("c", 0, 2, 3), ("d", 0, 3, 4)]
    assert arena.size == 128 and ba.temp_arena.lower_bound == 128
    counted = {b.name: (start, end) for b, start, end in ba.live_intervals()}
    assert (counted["b"], counted["c"], counted["d"]) == ((1, 1), (2, 2), (3, 4))
    assert ba.temp_arena.order == "spatial"


def test_unbounded_dimensions_have_nothing_to_allocate():
    module = runtime.parse("HloModule m\nENTRY e {\n  a = f32[?] parameter(0)\n"
                           "  ROOT b = f32[?] negate(a)\n}\n")
    with pytest.raises(HloUnsupportedError, match="a has shape f32.* unbounded") as caught:
        buffer_assignment(module)
    assert caught.value.line == 3
    bounded = assigned(module.to_text().replace("?", "<=8"))
    assert bounded.memory_stats.argument == 32
