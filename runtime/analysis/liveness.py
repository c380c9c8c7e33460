"""Live ranges of values over the flattened schedule (hlo-reference §8.6).

A value is live from the step that defines it to the last step that needs it, inclusive:
its last read, the last instruction that holds it at a position (a get-tuple-element or tuple
that forwards it), the end of its computation if it is that computation's result, and the end
of the program if it is an entry output. Entry parameters start at step 0 and, unless aliased
to an output, live to the end (the caller owns them). A while reads its initial state when the
loop starts, i.e. at the first step of its condition. A conditional's selector lives through
its last branch, and a while condition's computed result through the body: kernels the device
runs only when those select them read them at their start (``codegen.predication``), so
nothing either runs may overwrite them. Uses by call, tuple, get-tuple-element and bitcast
are not reads: the values flow on, and their readers count instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hlo.ir import HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ShapeIndex
from .call_graph import sequential_callees
from .dataflow import Dataflow, HloValue, Use
from .schedule import Schedule

@dataclass(frozen=True)
class LiveRange:
    start: int
    end: int

    def contains(self, step: int) -> bool:
        return self.start <= step <= self.end


def writable_parameters(module: HloModule) -> set[tuple[int, ShapeIndex]]:
    """Parameter leaves the program may overwrite: those aliased with an output."""
    return {(a.parameter_number, a.parameter_index) for a in module.input_output_alias}


class Liveness:
    def __init__(self, flow: Dataflow, schedule: Schedule,
                 writable: set[tuple[int, ShapeIndex]] | None = None) -> None:
        """``writable``: the parameter leaves aliased with an output, where they are not
        ``flow.module``'s (a module scheduled once for every donation set)."""
        self.flow = flow
        self.schedule = schedule
        if writable is None:
            writable = writable_parameters(flow.module)
        # a while's condition -> its body
        self._bodies = {inst.condition: inst.body for comp in flow.call_graph.sequential
                        for inst in comp.instructions if inst.opcode == Opcode.WHILE}
        self.ranges: dict[HloValue, LiveRange] = {
            v: self._range(v, writable) for v in flow.values}

    def __getitem__(self, value: HloValue) -> LiveRange:
        return self.ranges[value]

    def hull(self, values: list[HloValue]) -> LiveRange:
        return LiveRange(min(self.ranges[v].start for v in values),
                         max(self.ranges[v].end for v in values))

    def read_step(self, use: Use) -> int | None:
        inst = use.instruction
        if OPCODES[inst.opcode].forwards or (inst.opcode == Opcode.COPY and use.operand_index):
            return None
        if inst.opcode == Opcode.WHILE:
            return self.schedule.spans[sequential_callees(inst)[0]][0]
        if inst.opcode == Opcode.CONDITIONAL:
            if use.operand_number != 0:
                return None
            return max(self.schedule.spans[c][1] for c in sequential_callees(inst))
        return self.schedule.step[inst]

    def _range(self, value: HloValue, writable: set[tuple[int, ShapeIndex]]) -> LiveRange:
        schedule = self.schedule
        last = schedule.last_step
        if value.kind == "parameter":
            start = 0
            if (value.instruction.parameter_number, value.index) not in writable:
                return LiveRange(0, last)
        elif value.kind == "loop-state":
            assert value.site is not None
            start = schedule.spans[sequential_callees(value.site)[0]][0]
        else:
            start = schedule.step[value.instruction]
        end = start
        for inst, _ in value.positions:
            comp = inst.parent
            assert comp is not None
            step = schedule.spans[comp][1] if comp.root is inst else schedule.step[inst]
            if comp.root is inst and value.instruction is inst and comp in self._bodies:
                step = max(step, schedule.spans[self._bodies[comp]][1])
            end = max(end, step)
        for use in value.uses:
            read = self.read_step(use)
            if read is not None:
                end = max(end, read)
        return LiveRange(start, end)


def peak_of(intervals: list[tuple[int, int, int]], steps: int) -> tuple[int, int]:
    """(largest total size live at one step, the first step where it is reached) over
    inclusive (start, end, size) intervals."""
    delta = [0] * (steps + 1)
    for start, end, size in intervals:
        delta[start] += size
        delta[end + 1] -= size
    peak, at, running = 0, 0, 0
    for step in range(steps):
        running += delta[step]
        if running > peak:
            peak, at = running, step
    return peak, at
