"""A checker that proves a buffer assignment sound, independently of how it was built.

It re-derives nothing from the assignment's decisions; it takes the placements and verifies:

* the schedule runs every instruction of each sequential computation once, after its operands
  and control predecessors;
* every position has a slice inside its allocation; temp offsets are aligned; an output lives in
  an output allocation or in the parameter allocation it is aliased with; a constant's
  allocation is written by nothing else;
* every aliasing constraint holds: input_output_alias, while state (init, condition and body
  parameters, body result, while result), conditional outputs and branch results, in-place
  operands;
* no write clobbers a live value: whenever a value is written, no other value sharing any of
  its bytes is live at that step, except one that dies there and is read by the writing
  instruction in a way that permits writing over it (in-place op, elementwise).
"""

from __future__ import annotations

from ..analysis.call_graph import sequential_callees
from ..analysis.dataflow import HloValue
from ..analysis.in_place import in_place_pairs, may_hand_off
from ..hlo.ir import HloInstruction
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import index_text
from .assignment import BufferAssignment, value_alignment
from .slices import BufferSlice


class UnsoundAssignment(Exception):
    def __init__(self, violations: list[str]) -> None:
        self.violations = violations
        super().__init__(f"{len(violations)} violation(s):\n" + "\n".join(violations[:20]))


def check_assignment(ba: BufferAssignment) -> None:
    """Raises ``UnsoundAssignment`` listing every violation found."""
    violations: list[str] = []
    _check_schedule(ba, violations)
    _check_placements(ba, violations)
    _check_constraints(ba, violations)
    _check_writes(ba, violations)
    if violations:
        raise UnsoundAssignment(violations)


def _check_schedule(ba: BufferAssignment, out: list[str]) -> None:
    for comp in ba.dataflow.call_graph.sequential:
        sequence = ba.schedule.sequences.get(comp.name, [])
        if len(sequence) != len(comp.instructions) or set(sequence) != set(comp.instructions):
            out.append(f"the schedule of {comp.name} does not run each instruction once")
            continue
        done: set[HloInstruction] = set()
        for inst in sequence:
            for pred in inst.operands + inst.control_predecessors:
                if pred not in done:
                    out.append(f"{inst.name} is scheduled before its predecessor {pred.name}")
            done.add(inst)
    for step, inst in enumerate(ba.schedule.flattened):
        if ba.schedule.step.get(inst) != step:
            out.append(f"step {step} ({inst.name}) is not where the schedule says")


def _check_placements(ba: BufferAssignment, out: list[str]) -> None:
    flow = ba.dataflow
    for value in flow.values:
        s = ba.value_slice(value)
        allocation = ba.allocations[s.allocation]
        if s.offset < 0 or s.offset + s.size > allocation.size:
            out.append(f"{value.label} at [{s.offset}, {s.offset + s.size}) does not fit "
                       f"allocation {allocation.index} of {allocation.size} bytes")
        need = value_alignment(value, ba.alignment)
        if allocation.kind == "temp" and s.offset % need:
            out.append(f"{value.label} is at offset {s.offset}, not a multiple of {need}")
        if allocation.kind == "constant" and value.writes and value.kind != "constant":
            out.append(f"{value.label} is written into constant allocation {allocation.index}")
    for index, s in ba.output_slices().items():
        allocation = ba.allocations[s.allocation]
        if allocation.kind not in ("output", "parameter") and s.size:
            out.append(f"output {index_text(index)} is in a {allocation.kind} allocation")
        if allocation.kind == "parameter" and allocation.aliased_output != index:
            out.append(f"output {index_text(index)} is in parameter "
                       f"{allocation.parameter_number}'s allocation without being aliased with it")


def _same(out: list[str], what: str, slices: list[tuple[str, BufferSlice]]) -> None:
    first_name, first = slices[0]
    for name, s in slices[1:]:
        if s != first:
            out.append(f"{what}: {name} is at {s} but {first_name} is at {first}")


def _check_constraints(ba: BufferAssignment, out: list[str]) -> None:
    for alias in ba.aliases:
        _same(out, f"input_output_alias {index_text(alias.output_index)}",
              [("the output", ba.output_slices()[alias.output_index]),
               (f"parameter {alias.parameter_number}",
                ba.parameter_slice(alias.parameter_number, alias.parameter_index))])
    for comp in ba.dataflow.call_graph.sequential:
        for inst in comp.instructions:
            callees = sequential_callees(inst)
            for index, _ in inst.shape.subshapes():
                if inst.opcode == Opcode.WHILE:
                    condition, body = callees
                    assert body.root is not None
                    _same(out, f"{inst.name} state {index_text(index)}", [
                        ("the while", ba.slice(inst, index)),
                        ("its init", ba.slice(inst.operands[0], index)),
                        ("the condition parameter", ba.slice(condition.parameters[0], index)),
                        ("the body parameter", ba.slice(body.parameters[0], index)),
                        ("the body result", ba.slice(body.root, index))])
                elif inst.opcode == Opcode.CONDITIONAL:
                    _same(out, f"{inst.name} output {index_text(index)}",
                          [("the conditional", ba.slice(inst, index))]
                          + [(f"branch {k}", ba.slice(c.root, index)) for k, c in enumerate(callees)
                             if c.root is not None])
            for pair in in_place_pairs(inst):
                _same(out, f"in-place {inst.name}", [
                    ("the output", ba.slice(inst, pair.output_index)),
                    (f"operand {pair.operand_number}",
                     ba.slice(inst.operands[pair.operand_number], pair.operand_index))])


def _check_writes(ba: BufferAssignment, out: list[str]) -> None:
    flow = ba.dataflow
    liveness = ba.liveness
    placed: list[tuple[HloValue, int, int, int]] = []
    for value in flow.values:
        s = ba.value_slice(value)
        if s.size:
            placed.append((value, s.allocation, s.offset, s.offset + s.size))
    placed.sort(key=lambda item: liveness[item[0]].start)
    writers = sorted((item for item in placed if item[0].writes),
                     key=lambda item: liveness[item[0]].start)
    active: list[tuple[HloValue, int, int, int]] = []
    next_in = 0
    for w, allocation, lo, hi in writers:
        at = liveness[w].start
        while next_in < len(placed) and liveness[placed[next_in][0]].start <= at:
            active.append(placed[next_in])
            next_in += 1
        active = [item for item in active if liveness[item[0]].end >= at]
        for a, a_allocation, a_lo, a_hi in active:
            if a is w or a_allocation != allocation or a_hi <= lo or hi <= a_lo:
                continue
            if liveness[a].end == at and may_hand_off(flow, {a}, w):
                continue
            out.append(f"{w.label} is written at step {at} over bytes [{max(lo, a_lo)}, "
                       f"{min(hi, a_hi)}) of allocation {allocation}, where {a.label} is live "
                       f"({liveness[a].start}-{liveness[a].end})")
