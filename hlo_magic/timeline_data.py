"""What the interactive memory timeline draws, computed once in Python from a buffer assignment.

The widget gets columns, not objects: one float64 array per numeric field of the buffers (so a
model with tens of thousands of buffers crosses the comm as a few binary buffers), and lists of
strings for their names, instructions and shapes. Everything the browser shows on hover is
here; the browser only lays it out, so the numbers it prints are the assignment's own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime import collective_traffic
from runtime.buffers import AssignedBuffer, BufferAssignment
from runtime.hlo import HloModule
from runtime.hlo.opcode_enum import Opcode

from .names import SourceMembers, source_members, source_of
from .sharing import Reuse, reuses, sentence

from .collectives import marks
from .formatting import format_bytes
from .timeline import COLLECTIVE_COLOUR, KIND_STYLES, buffer_kind, live_bytes_by_kind

KINDS = tuple(KIND_STYLES)
NUMERIC_COLUMNS = ("size", "allocation", "offset", "start", "end", "kind", "in_place")
TAKES_OVER, HANDS_OVER = 1, 2   # "in_place" bits: bytes handed over at a step, not reused after
MAX_LISTED = 8        # fused-from and other-value names listed per buffer


@dataclass(frozen=True)
class TimelineData:
    """Columns of every non-empty buffer (``numeric`` is ``NUMERIC_COLUMNS`` x buffers), the
    allocations, the schedule's steps and the live bytes at each step."""

    module: str
    numeric: np.ndarray
    names: list[str]
    instructions: list[str]
    opcodes: list[str]
    shapes: list[str]
    sources: list[str]          # JAX's op_name and Python line from the metadata ('' if none)
    notes: list[str]
    allocations: list[dict]
    steps: list[str]
    step_opcodes: list[str]
    live_by_kind: dict[str, list[int]]
    peak: int
    peak_step: int
    collectives: list[dict]     # a partitioned module's collectives (``collectives.marks``)

    def column(self, name: str) -> np.ndarray:
        return self.numeric[NUMERIC_COLUMNS.index(name)]

    def index_of(self, name: str) -> int:
        return self.names.index(name)

    def meta(self) -> dict:
        """Everything but the numeric columns, as JSON-ready data."""
        return {"module": self.module, "columns": list(NUMERIC_COLUMNS), "kinds": list(KINDS),
                "kind_labels": [KIND_STYLES[k].label for k in KINDS],
                "kind_colours": [KIND_STYLES[k].colour for k in KINDS],
                "names": self.names, "instructions": self.instructions, "opcodes": self.opcodes,
                "shapes": self.shapes, "sources": self.sources, "notes": self.notes,
                "allocations": self.allocations,
                "steps": self.steps, "step_opcodes": self.step_opcodes,
                "live": [self.live_by_kind[k] for k in KINDS], "peak": self.peak,
                "peak_step": self.peak_step, "peak_text": format_bytes(self.peak),
                "collectives": self.collectives, "collective_colour": COLLECTIVE_COLOUR}


def _allocation_label(assignment: BufferAssignment, index: int) -> str:
    a = assignment.allocations[index]
    if a.kind == "parameter":
        what = f"parameter {a.parameter_number}"
        if a.parameter_index:
            what += " {" + ",".join(map(str, a.parameter_index)) + "}"
        if a.aliased_output is not None:
            what += ", holds an output"
    elif a.kind == "constant" and a.constant is not None:
        what = f"constant {a.constant.name}"
    elif a.kind == "temp":
        what = f"temp arena, {len(a.buffers)} buffers"
    else:
        what = a.kind
    return f"#{a.index} {what} ({format_bytes(a.size)})"


def _note(placed: AssignedBuffer, reused: Reuse | None, members: SourceMembers) -> str:
    """Lines shown under a buffer's details: the source instructions a fusion holds, what
    else the buffer holds, whose bytes it reuses and why (``sharing``)."""
    lines = []
    inst = placed.buffer.first.instruction
    if inst.opcode == Opcode.FUSION:
        fused = members(inst)
        more = f" (+{len(fused) - MAX_LISTED} more)" if len(fused) > MAX_LISTED else ""
        lines.append(f"fused from {len(fused)}: {', '.join(fused[:MAX_LISTED])}{more}")
    others = [v.label for v in placed.values[1:]]
    if others:
        more = f" (+{len(others) - MAX_LISTED} more)" if len(others) > MAX_LISTED else ""
        lines.append(f"also holds: {', '.join(others[:MAX_LISTED])}{more}")
    if reused is not None:
        lines.append(sentence(reused))
    return "\n".join(lines)


def timeline_data(assignment: BufferAssignment, source: HloModule | None = None,
                  members: SourceMembers | None = None) -> TimelineData:
    """The widget's data for ``assignment``: every buffer with a size, in allocation order.
    ``source`` (the module as written) names what fusions hold (default: the plan's input);
    ``members``: ``source_members`` of that module, kept by a caller drawing many plans."""
    members = members or source_members(source or assignment.source)
    buffers = [b for b in assignment.buffers() if b.size]
    found = reuses(assignment)
    reused = {r.buffer.buffer: r for r in found}
    handing = {r.previous.buffer for r in found if r.in_place}
    in_place = [(TAKES_OVER if b.buffer in reused and reused[b.buffer].in_place else 0)
                | (HANDS_OVER if b.buffer in handing else 0) for b in buffers]
    numeric = np.array([[b.size for b in buffers], [b.allocation for b in buffers],
                        [b.offset for b in buffers], [b.live.start for b in buffers],
                        [b.live.end for b in buffers],
                        [KINDS.index(buffer_kind(assignment, b)) for b in buffers], in_place],
                       dtype=np.float64).reshape(len(NUMERIC_COLUMNS), len(buffers))
    allocations = [{"index": a.index, "kind": a.kind, "size": a.size,
                    "label": _allocation_label(assignment, a.index)}
                   for a in assignment.allocations]
    steps = assignment.schedule.flattened
    return TimelineData(
        module=assignment.module.name, numeric=numeric,
        names=[b.name for b in buffers],
        instructions=[b.buffer.first.instruction.name for b in buffers],
        opcodes=[b.buffer.first.instruction.opcode for b in buffers],
        shapes=[b.buffer.first.shape.to_text(False) for b in buffers],
        sources=[source_of(b.buffer.first.instruction, assignment.module) for b in buffers],
        notes=[_note(b, reused.get(b.buffer), members) for b in buffers],
        allocations=allocations, steps=[i.name for i in steps],
        step_opcodes=[i.opcode for i in steps], live_by_kind=live_bytes_by_kind(assignment),
        peak=assignment.peak, peak_step=assignment.peak_step,
        collectives=marks(collective_traffic(assignment)))
