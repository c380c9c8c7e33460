"""Buffer assignment: the static memory plan the executor allocates and the notebook draws.

``assign_buffers`` takes a module the pre-assignment passes prepared (``pipeline``:
dead-code elimination, call-graph flattening, call layouts, scheduling, copy insertion) and
its schedule, runs dataflow, alias analysis and live ranges, and places every buffer:

* each entry parameter position (leaf or tuple table) gets its own allocation; an output
  aliased with it (``input_output_alias``, or a matched ``buffer_donor``) lives in it too;
* each constant gets its own allocation;
* each output buffer not aliased with a parameter gets its own (maybe-live-out) allocation,
  the entry result's tuple table included;
* everything else is packed into one temp arena by the best-fit heap, after chaining each
  elementwise result onto an operand that dies at that step (it reuses the operand's bytes).

Values of fusion/reduce/sort... computations are thread-local and get nothing.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from typing import Any

from ..analysis.alias_analysis import AliasAnalysis, HloBuffer
from ..analysis.call_graph import CallGraph
from ..analysis.dataflow import Dataflow, HloValue
from ..analysis.device_groups import DeviceGrid
from ..analysis.in_place import may_hand_off
from ..analysis.liveness import LiveRange, Liveness, peak_of
from ..analysis.schedule import Schedule
from ..errors import HloArgumentError, HloError
from ..hlo.ir import AliasEntry, HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ShapeIndex, index_text
from ..passes.copy_insertion import InsertedCopy, inserted_copies
from ..passes.spmd_collectives import COLLECTIVE_TARGET
from .donation import AliasPlan, UnusedDonor
from .heap import Interval, align_up, block_alignment, pack
from .report import assignment_text
from .slices import BufferSlice


@dataclass(frozen=True)
class MemoryStats:
    """XLA's vocabulary: argument = parameter allocations, output = maybe-live-out allocations
    (aliased parameters and tuple tables included), alias = parameter allocations shared with
    an output, temp = the temp arena; peak = the live-range peak (see BufferAssignment)."""

    argument: int
    output: int
    alias: int
    temp: int
    peak: int

    @property
    def total(self) -> int:
        """argument + output + temp - alias: the bytes one run needs beyond constants."""
        return self.argument + self.output + self.temp - self.alias


@dataclass(eq=False)
class AssignedBuffer:
    """One buffer (values that share bytes by necessity) at its place in an allocation."""

    buffer: HloBuffer
    name: str
    allocation: int
    offset: int
    size: int
    live: LiveRange

    @property
    def values(self) -> list[HloValue]:
        return self.buffer.values


@dataclass(eq=False)
class Allocation:
    index: int
    size: int
    kind: str                                   # "parameter" | "constant" | "output" | "temp"
    parameter_number: int | None = None
    parameter_index: ShapeIndex | None = None
    aliased_output: ShapeIndex | None = None    # parameter allocation an output lives in
    must_alias: bool = False
    constant: HloInstruction | None = None
    maybe_live_out: bool = False
    output_index: ShapeIndex | None = None      # for kind "output"
    buffers: list[AssignedBuffer] = field(default_factory=list)


@dataclass
class TempArena:
    size: int
    lower_bound: int       # no packing of the same live ranges at this alignment is smaller
    order: str             # which heap order won
    # buffer -> the buffer whose bytes it took over in place
    reuse: dict[HloBuffer, HloBuffer] = field(default_factory=dict)


def check_alignment(alignment: int) -> None:
    if alignment < 1:
        raise HloArgumentError(f"alignment must be a positive number of bytes, not {alignment}")


def assign_buffers(module: HloModule, schedule: Schedule, *, alignment: int = 128,
                   donation: AliasPlan | None = None, source: HloModule | None = None,
                   prepared_from: HloModule | None = None,
                   call_graph: CallGraph | None = None,
                   family: list[BufferAssignment] | None = None) -> BufferAssignment:
    """The memory plan of a prepared module (``pipeline.prepare``: scheduled in
    ``schedule``'s order, donation applied, copies inserted). ``donation`` is the plan that
    was applied (for the report), ``source`` the module before preparation, ``prepared_from``
    the module after the pipeline's donation-independent passes (``prepare_common``), which
    ``pipeline.reassign`` finishes again for other donations (None: the caller prepared it,
    and only it can); ``family``: the plans made from the same ``prepared_from`` so far
    (shared; the new plan joins it). ``call_graph``: the module's, where the caller has it."""
    check_alignment(alignment)
    flow = Dataflow(module, call_graph)
    aliasing = AliasAnalysis(flow, module.input_output_alias)
    copies = inserted_copies(module, set(flow.call_graph.sequential))
    return BufferAssignment(module, schedule, flow, aliasing, Liveness(flow, schedule),
                            alignment, copies,
                            donation.unused_donors if donation else [],
                            donation.not_donated if donation else [],
                            source=source or module, prepared_from=prepared_from,
                            donation=donation, family=family)


class BufferAssignment:
    """Allocations, slices, statistics and reports of one assigned module.

    ``peak`` is the live-range peak: the largest total size of buffers live at one step of
    the flattened schedule (parameters, constants, outputs and temps alike; a temp whose bytes
    an elementwise result takes over in place is counted once at the hand-over step).
    """

    def __init__(self, module: HloModule, schedule: Schedule, dataflow: Dataflow,
                 aliasing: AliasAnalysis, liveness: Liveness, alignment: int,
                 copies: list[InsertedCopy], unused_donors: list[UnusedDonor],
                 not_donated: list[AliasEntry], *, source: HloModule,
                 prepared_from: HloModule | None, donation: AliasPlan | None = None,
                 family: list[BufferAssignment] | None = None) -> None:
        self.module = module
        self.source = source
        self.prepared_from = prepared_from
        self.donation = donation
        # every plan made from ``prepared_from`` so far, this one included: the same aliasing
        # gives the same plan, so ``pipeline.reassign`` hands back the one made before (a
        # report asks for the plan of no donation, of every donation and of the module's own,
        # and for most modules two of those are one)
        self.family: list[BufferAssignment] = [] if family is None else family
        self.family.append(self)
        self.schedule = schedule
        self.dataflow = dataflow
        self.aliasing = aliasing
        self.liveness = liveness
        self.alignment = alignment
        self.copies = copies
        self.unused_donors = unused_donors
        self.not_donated = not_donated
        self.aliases: list[AliasEntry] = list(module.input_output_alias)
        self.allocations: list[Allocation] = []
        self._placed: dict[HloBuffer, AssignedBuffer] = {}
        self._names = _buffer_names(aliasing)
        self.temp_arena = self._allocate()
        self.peak, self.peak_step = self._live_range_peak()
        self.memory_stats = self._stats()

    # --- public queries ------------------------------------------------------------------
    def slice(self, inst: HloInstruction, index: ShapeIndex = ()) -> BufferSlice:
        """The bytes holding the value at (``inst``, ``index``): any position of a sequential
        computation, tuple nodes included. Instructions of ``self.module`` are looked up
        directly; others by (computation name, instruction name)."""
        target = self._resolve(inst)
        values = self.dataflow.value_set(target)
        if index not in values:
            raise HloError(f"{inst.name} has shape {inst.shape}, which has no index "
                           f"{index_text(index)}", instruction=inst.name)
        return self.value_slice(values[index])

    def value_slice(self, value: HloValue) -> BufferSlice:
        placed = self._placed[self.aliasing.buffer_of(value)]
        return BufferSlice(placed.allocation, placed.offset, value.size)

    def parameter_slice(self, number: int, index: ShapeIndex = ()) -> BufferSlice:
        entry = self.module.entry
        assert entry is not None
        params = entry.parameters
        if not 0 <= number < len(params):
            raise HloError(f"{entry.name} has no parameter {number} (it has {len(params)})")
        return self.slice(params[number], index)

    def output_slices(self) -> dict[ShapeIndex, BufferSlice]:
        entry = self.module.entry
        assert entry is not None and entry.root is not None
        return {index: self.value_slice(v)
                for index, v in self.dataflow.value_set(entry.root).items()}

    def buffers(self) -> list[AssignedBuffer]:
        return [b for a in self.allocations for b in a.buffers]

    def placement(self, buffer: HloBuffer) -> AssignedBuffer:
        return self._placed[buffer]

    def live_at_peak(self) -> list[AssignedBuffer]:
        """Buffers live at the peak step, largest first."""
        at = self.peak_step
        return sorted((b for b in self.buffers() if b.live.contains(at) and b.size),
                      key=lambda b: (-b.size, b.name))

    def records(self) -> list[dict[str, int | str]]:
        """One dict per buffer: name, allocation, kind, offset, size, start, end (inclusive
        steps of ``schedule.flattened``)."""
        return [{"name": b.name, "allocation": b.allocation,
                 "kind": self.allocations[b.allocation].kind, "offset": b.offset,
                 "size": b.size, "start": b.live.start, "end": b.live.end}
                for b in self.buffers()]

    def to_text(self) -> str:
        return assignment_text(self)

    def live_intervals(self) -> list[tuple[AssignedBuffer, int, int]]:
        """(buffer, first step, last step) of every buffer as ``peak`` counts it: a temp whose
        bytes an elementwise result takes over in place ends one step early, so the shared
        bytes are counted once at the hand-over step. Drawings of live bytes use this so that
        their maximum is ``peak``."""
        reuse = self.temp_arena.reuse if self.temp_arena else {}
        taken_over = set(reuse.values())
        intervals = []
        for placed in self.buffers():
            end = placed.live.end - (1 if placed.buffer in taken_over else 0)
            if end >= placed.live.start:
                intervals.append((placed, placed.live.start, end))
        return intervals

    def live_bytes(self) -> list[int]:
        """Total bytes live at each step of ``schedule.flattened``; its maximum is ``peak``."""
        delta = [0] * (len(self.schedule.flattened) + 1)
        for placed, start, end in self.live_intervals():
            delta[start] += placed.size
            delta[end + 1] -= placed.size
        return list(itertools.accumulate(delta[:-1]))

    # --- construction --------------------------------------------------------------------
    def _resolve(self, inst: HloInstruction) -> HloInstruction:
        if self.dataflow.has_positions(inst):
            return inst
        comp = inst.parent
        if comp is not None:
            for candidate in self.module.computations:
                if candidate.name == comp.name:
                    for mine in candidate.instructions:
                        if mine.name == inst.name and self.dataflow.has_positions(mine):
                            return mine
        where = comp.name if comp is not None else "no computation"
        raise HloError(f"{inst.name} (in {where}) has no buffer: only instructions of "
                       "computations run as program steps (entry, while, conditional and call "
                       "bodies) have one; values inside fusions and reducers stay in registers",
                       instruction=inst.name, computation=comp.name if comp else None)

    def _add(self, kind: str, size: int, **fields: Any) -> Allocation:
        allocation = Allocation(len(self.allocations), size, kind, **fields)
        self.allocations.append(allocation)
        return allocation

    def _place(self, allocation: Allocation, buffer: HloBuffer, offset: int = 0) -> None:
        placed = AssignedBuffer(buffer, self._names[buffer], allocation.index, offset,
                                buffer.size, self.liveness.hull(buffer.values))
        allocation.buffers.append(placed)
        self._placed[buffer] = placed

    def _allocate(self) -> TempArena | None:
        flow, aliasing = self.dataflow, self.aliasing
        entry = self.module.entry
        assert entry is not None and entry.root is not None
        # keyed as a parameter instruction reads it (its number is None only before parsing ends)
        alias_of: dict[tuple[int | None, ShapeIndex], AliasEntry] = {
            (a.parameter_number, a.parameter_index): a for a in self.aliases}
        outputs: dict[HloBuffer, ShapeIndex] = {}
        for index, value in flow.value_set(entry.root).items():
            outputs.setdefault(aliasing.buffer_of(value), index)
        for param in entry.parameters:
            for index, value in flow.value_set(param).items():
                buffer = aliasing.buffer_of(value)
                alias = alias_of.get((param.parameter_number, index))
                allocation = self._add(
                    "parameter", buffer.size, parameter_number=param.parameter_number,
                    parameter_index=index, maybe_live_out=buffer in outputs,
                    aliased_output=alias.output_index if alias else None,
                    must_alias=alias is not None and alias.kind == "must-alias")
                self._place(allocation, buffer)
        for buffer in aliasing.buffers:
            constants = [v for v in buffer.values if v.kind == "constant"]
            if constants and buffer not in self._placed:
                self._place(self._add("constant", buffer.size, constant=constants[0].instruction),
                            buffer)
        own: list[tuple[Allocation, HloBuffer]] = []
        for buffer, index in sorted(outputs.items(), key=lambda item: item[1]):
            if buffer not in self._placed:
                allocation = self._add("output", buffer.size, maybe_live_out=True,
                                       output_index=index)
                self._place(allocation, buffer)
                own.append((allocation, buffer))
        temps = [b for b in aliasing.buffers if b not in self._placed]
        if not temps:
            return None
        # a multi-device module's per-device plan is measured against XLA's, which puts temps
        # in output buffers; one-device plans keep every temp in the arena for now (the
        # notebook layer's reports and tutorials describe that layout)
        return self._pack(temps, own if DeviceGrid.of(self.module).size > 1 else [])

    def _pack(self, temps: list[HloBuffer],
              outputs: list[tuple[Allocation, HloBuffer]]) -> TempArena:
        reuse: dict[HloBuffer, HloBuffer] = {}
        chains = self._into_outputs(self._reuse_chains(temps), outputs, reuse)
        if not chains:
            return TempArena(0, 0, "none", reuse)
        intervals = []
        for chain in chains:
            hulls = [self.liveness.hull(b.values) for b in chain]
            size = max(b.size for b in chain)
            intervals.append(Interval(hulls[0].start, hulls[-1].end, size, max(
                value_alignment(v, self.alignment) for b in chain for v in b.values)))
        packing = pack(intervals, self.alignment)
        allocation = self._add("temp", packing.size)
        for chain, offset in zip(chains, packing.offsets):
            for earlier, later in zip(chain, chain[1:]):
                reuse[later] = earlier
            for buffer in chain:
                self._place(allocation, buffer, offset)
        allocation.buffers.sort(key=lambda b: (b.offset, b.live.start, b.name))
        return TempArena(packing.size, _aligned_lower_bound(intervals, len(self.schedule.flattened),
                                                            self.alignment),
                         packing.order, reuse)

    def _into_outputs(self, chains: list[list[HloBuffer]],
                      outputs: list[tuple[Allocation, HloBuffer]],
                      reuse: dict[HloBuffer, HloBuffer]) -> list[list[HloBuffer]]:
        """Put temp chains into the bytes of output allocations while those are free, as XLA
        does: an output allocation is bound for the whole run but holds its output only from
        the step that writes it, so a chain that dies before that step (or at it, when the
        output takes its bytes over: ``may_hand_off``) may live there first. Largest chains
        first, each into the smallest output allocation free for its whole life. Returns the
        chains left for the temp arena; ``reuse`` gets each chain's hand-overs."""
        if not outputs:
            return chains
        hull = self.liveness.hull
        # per output allocation: the live ranges it holds (its output's first), smallest first
        busy = {a.index: [hull(b.values)] for a, b in outputs}
        slots = sorted(outputs, key=lambda item: (item[0].size, item[0].index))
        sizes = [a.size for a, _ in slots]
        left = []
        for k, chain in sorted(enumerate(chains), key=lambda item: (
                -max(b.size for b in item[1]), hull(item[1][0].values).start)):
            size = max(b.size for b in chain)
            start, end = hull(chain[0].values).start, hull(chain[-1].values).end
            for allocation, output in slots[bisect.bisect_left(sizes, size):]:
                held, taken = busy[allocation.index], None
                if any(r.start <= end and start <= r.end for r in held[1:]):
                    continue
                if end >= held[0].start:
                    first = min(output.values, key=lambda v: (self.liveness[v].start, v.id))
                    if end != held[0].start or start >= end or not self._hands_off(
                            chain[-1], first):
                        continue
                    taken = output
                held.append(LiveRange(start, end))
                for earlier, later in zip(chain, chain[1:]):
                    reuse[later] = earlier
                if taken is not None:
                    reuse[taken] = chain[-1]
                for buffer in chain:
                    self._place(allocation, buffer)
                break
            else:
                left.append((k, chain))
        return [chain for _, chain in sorted(left, key=lambda item: item[0])]

    def _hands_off(self, earlier: HloBuffer, first: HloValue) -> bool:
        """Whether ``first`` (a buffer's first value) may take ``earlier``'s bytes in place at
        the step that reads ``earlier`` for the last time."""
        return (first.writes and first.instruction.opcode != Opcode.COPY
                and earlier.size == self.aliasing.buffer_of(first).size
                and may_hand_off(self.dataflow, set(earlier.values), first))

    def _reuse_chains(self, temps: list[HloBuffer]) -> list[list[HloBuffer]]:
        """Link each temp whose first value is an elementwise result onto a same-size temp that
        dies at that very step and that it reads: they occupy the same bytes."""
        hull = {b: self.liveness.hull(b.values) for b in temps}
        ending: dict[int, list[HloBuffer]] = {}
        for b in temps:
            ending.setdefault(hull[b].end, []).append(b)
        successor: dict[HloBuffer, HloBuffer] = {}
        predecessor: dict[HloBuffer, HloBuffer] = {}
        for b in sorted(temps, key=lambda b: (hull[b].start, b.id)):
            first = min(b.values, key=lambda v: (self.liveness[v].start, v.id))
            if not first.writes or first.instruction.opcode == Opcode.COPY or not b.size:
                continue
            for a in ending.get(hull[b].start, ()):
                if (a is not b and a not in successor and a.size == b.size
                        and hull[a].start < hull[b].start
                        and may_hand_off(self.dataflow, set(a.values), first)):
                    successor[a] = b
                    predecessor[b] = a
                    break
        chains = []
        for b in temps:
            if b in predecessor:
                continue
            chain = [b]
            while chain[-1] in successor:
                chain.append(successor[chain[-1]])
            chains.append(chain)
        return chains

    def _live_range_peak(self) -> tuple[int, int]:
        intervals = [(start, end, placed.size) for placed, start, end in self.live_intervals()]
        return peak_of(intervals, len(self.schedule.flattened))

    def _stats(self) -> MemoryStats:
        argument = sum(a.size for a in self.allocations if a.kind == "parameter")
        output = sum(a.size for a in self.allocations if a.maybe_live_out)
        alias = sum(a.size for a in self.allocations
                    if a.kind == "parameter" and a.aliased_output is not None)
        temp = sum(a.size for a in self.allocations if a.kind == "temp")
        return MemoryStats(argument, output, alias, temp, self.peak)

    @property
    def peak_instruction(self) -> HloInstruction:
        return self.schedule.flattened[self.peak_step]

    @property
    def fragmentation(self) -> int:
        """Bytes of the temp arena beyond its liveness lower bound."""
        arena = self.temp_arena
        return arena.size - arena.lower_bound if arena is not None else 0


def value_alignment(value: HloValue, alignment: int) -> int:
    """The alignment ``value``'s bytes need in the temp arena: the full alignment for what a
    custom call reads or writes (it gets its own sub-buffer, which the device's base-address
    alignment governs), else ``block_alignment`` of its size."""
    if any(_binds_sub_buffers(p) for p, _ in value.positions) or any(
            _binds_sub_buffers(u.instruction) for u in value.uses):
        return alignment
    return block_alignment(value.size, alignment)


def _binds_sub_buffers(inst: HloInstruction) -> bool:
    """A custom call, except a collective's host step: that maps its allocations and views
    each leaf at its offset (``custom_calls.mapping``), so its small results pack like XLA's
    rather than a base-address alignment apart."""
    return inst.opcode == Opcode.CUSTOM_CALL and \
        inst.attrs.get("custom_call_target") != COLLECTIVE_TARGET


def _aligned_lower_bound(intervals: list[Interval], steps: int, alignment: int) -> int:
    """max over steps of the live blocks' sizes rounded up to the smallest alignment among
    them, less the largest rounding: every block starts at a multiple of that alignment, so
    the next block above it starts no lower than its rounded end, and only the topmost one may
    skip its padding. No packing of these live ranges at these alignments can be smaller."""
    starting: dict[int, list[Interval]] = {}
    ending: dict[int, list[Interval]] = {}
    for iv in intervals:
        if iv.size:
            starting.setdefault(iv.start, []).append(iv)
            ending.setdefault(iv.end, []).append(iv)
    candidates = sorted({iv.alignment or alignment for iv in intervals if iv.size})
    live_alignments: dict[int, int] = {}                        # alignment -> live blocks
    padding = {a: 0 for a in candidates}                        # rounding to a, summed
    live_padding: dict[int, dict[int, int]] = {a: {} for a in candidates}   # pad -> blocks

    def count(iv: Interval, sign: int) -> None:
        own = iv.alignment or alignment
        live_alignments[own] = live_alignments.get(own, 0) + sign
        if not live_alignments[own]:
            del live_alignments[own]
        for a in candidates:
            pad = align_up(iv.size, a) - iv.size
            padding[a] += sign * pad
            pads = live_padding[a]
            pads[pad] = pads.get(pad, 0) + sign
            if not pads[pad]:
                del pads[pad]

    total, bound = 0, 0
    for step in range(steps):
        for iv in starting.get(step, ()):
            total += iv.size
            count(iv, 1)
        if live_alignments:
            a = min(live_alignments)
            bound = max(bound, total + padding[a] - max(live_padding[a]))
        for iv in ending.get(step, ()):
            total -= iv.size
            count(iv, -1)
    return bound


def _buffer_names(aliasing: AliasAnalysis) -> dict[HloBuffer, str]:
    """A buffer is named after its first value; names are qualified with the computation when
    two sequential computations use the same instruction name."""
    owners: dict[str, set[HloComputation | None]] = {}
    for buffer in aliasing.buffers:
        inst = buffer.first.instruction
        owners.setdefault(inst.name, set()).add(inst.parent)
    names = {}
    for buffer in aliasing.buffers:
        value = buffer.first
        inst = value.instruction
        prefix = f"{inst.parent.name}/" if len(owners[inst.name]) > 1 and inst.parent else ""
        names[buffer] = prefix + value.label
    return names
