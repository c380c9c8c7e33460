"""Candidate schedules kept for a module's donation sets, so that a new set schedules little.

``choose_schedule`` depends on the donation set in two ways only: the schedulers order each
donated output's writer after the other readers of its parameter (``donated_updates``: edges
added to the dependency graph), and the simulated peaks see which parameters are writable and
which values share a buffer. Adding edges that an order already satisfies leaves both
schedulers' orders as they were. The list scheduler picks, at each step, the best ready
instruction (by bytes freed, then text position); with more edges every instruction is ready
no earlier, and the one it picked is still ready (its new predecessors ran before it), so it
is still the best. Post-order visits an instruction's new predecessors after its old ones,
when everything before it in the order has been visited. So the orders made once for the
donated updates that the no-donation orders break (``breaking``: a few, or none) are the
orders of every set with those whose other edges they satisfy (a donated weight's update runs
after its forward and backward reads); no edge is skipped as cyclic in either, as every edge
agrees with one order. Where the kept module has aliases of its own, post-order is redone (it
is cheap). The simulated peaks come from the kept no-donation buffers and live ranges: a set
makes its parameters' values writable (they die at their last read) and joins each with its
output's buffer. A set whose edges the kept list order breaks gets None and is scheduled from
scratch. ``tests/buffers/test_reassign_equivalence.py`` checks the plans against fresh
assignments.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable

from ..hlo.ir import AliasEntry, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ShapeIndex
from .alias_analysis import AliasAnalysis
from .dataflow import Dataflow, HloValue
from .liveness import LiveRange, Liveness, peak_of
from .memory_scheduler import candidate_schedules, simulated_peak
from .schedule import Schedule, build_schedule, donated_updates, post_order
from .side_effects import SideEffects

#: a set with more breaking aliases is scheduled from scratch: each combination of them needs
#: a basis of its own, which costs about as much as scheduling once
MAX_BREAKING = 4
#: aliases -> a copy of the module with those applied (scheduled by nothing, kernel bodies
#: shared) and its instructions' originals
Copier = Callable[[list[AliasEntry]], tuple[HloModule, dict[HloInstruction, HloInstruction]]]
#: (update, readers of the parameter element it overwrites), or None: it orders nothing
Update = tuple[HloInstruction, list[HloInstruction]] | None


@dataclass
class _Peaks:
    """One schedule's simulated peak for any aliases: the buffers with no alias applied, each
    as an interval under no-donation live ranges, and each parameter value's range were it
    writable."""

    schedule: Schedule
    flow: Dataflow
    aliasing: AliasAnalysis
    ranges: dict[HloValue, LiveRange] = field(init=False)
    writable: dict[HloValue, LiveRange] = field(init=False)
    intervals: list[tuple[int, int, int]] = field(init=False)

    def __post_init__(self) -> None:
        self.ranges = Liveness(self.flow, self.schedule, set()).ranges
        params = [v for v in self.flow.values if v.kind == "parameter"]
        every = Liveness(self.flow, self.schedule, {parameter_key(v) for v in params}).ranges
        self.writable = {v: every[v] for v in params}
        self.intervals = [self._interval(b.values, {}) for b in self.aliasing.buffers]

    def _interval(self, values: list[HloValue], writable: dict[HloValue, LiveRange]
                  ) -> tuple[int, int, int]:
        ranges = [writable.get(v) or self.ranges[v] for v in values]
        return (min(r.start for r in ranges), max(r.end for r in ranges),
                max(v.size for v in values))

    def peak(self, writable: list[HloValue], joined: list[tuple[HloValue, HloValue]]) -> int:
        """``simulated_peak`` with ``writable`` parameter values and the ``joined`` pairs of
        values in one buffer."""
        buffer_of = self.aliasing.buffer_of
        parent: dict[int, int] = {}

        def find(b: int) -> int:
            while parent.get(b, b) != b:
                b = parent[b]
            return b

        for v in writable:
            parent.setdefault(buffer_of(v).id, buffer_of(v).id)
        for param, output in joined:
            ra = find(buffer_of(param).id)
            rb = find(buffer_of(output).id)
            parent.setdefault(ra, ra)
            parent[rb] = ra
        if not parent:
            return peak_of(self.intervals, len(self.schedule.flattened))[0]
        groups: dict[int, list[HloValue]] = {}
        for k in parent:
            groups.setdefault(find(k), []).extend(self.aliasing.buffers[k].values)
        ranges = {v: self.writable[v] for v in writable}
        intervals = [iv for k, iv in enumerate(self.intervals) if k not in parent]
        intervals += [self._interval(values, ranges) for values in groups.values()]
        return peak_of(intervals, len(self.schedule.flattened))[0]


def parameter_key(value: HloValue) -> tuple[int, ShapeIndex]:
    """(parameter number, index): how ``Liveness`` asks whether a parameter value is
    writable."""
    number = value.instruction.parameter_number
    assert number is not None
    return number, value.index


@dataclass
class ScheduleBasis:
    """A copy of the module with some aliases applied, its dataflow and candidate schedules
    (``choose_schedule``'s, in its order, which breaks ties), and ``original``: each of the
    copy's instructions' counterpart in the module it was copied from."""

    module: HloModule
    flow: Dataflow
    candidates: dict[str, Schedule]
    effects: SideEffects
    original: dict[HloInstruction, HloInstruction]
    _updates: dict[AliasEntry, Update] = field(default_factory=dict)
    _peaks: dict[str, _Peaks] = field(default_factory=dict)
    _aliasing: AliasAnalysis | None = None
    _parameters: dict[tuple[int, ShapeIndex], list[HloValue]] | None = None

    @classmethod
    def of(cls, module: HloModule, original: dict[HloInstruction, HloInstruction]
           ) -> ScheduleBasis:
        flow = Dataflow(module)
        effects: SideEffects = {}
        return cls(module, flow, candidate_schedules(flow, effects), effects, original)

    def _updates_of(self, aliases: list[AliasEntry]) -> list[tuple[AliasEntry, Update]]:
        entry = self.module.entry
        assert entry is not None and entry.root is not None
        if entry.root.opcode != Opcode.TUPLE:
            return []
        missing = [a for a in aliases if a not in self._updates]
        if missing:
            self._updates.update(dict.fromkeys(missing))
            for alias, update, readers in donated_updates(entry, missing):
                self._updates[alias] = (update, [r for r in readers if r is not entry.root])
        return [(a, self._updates[a]) for a in aliases]

    def breaking(self, aliases: list[AliasEntry], name: str = "list") -> list[AliasEntry]:
        """The aliases whose update the candidate ``name`` runs before another reader of its
        parameter."""
        step = self.candidates[name].step
        return [alias for alias, found in self._updates_of(aliases) if found is not None
                and any(step[reader] > step[found[0]] for reader in found[1])]

    def choose(self, aliases: list[AliasEntry]) -> Schedule | None:
        """The schedule ``choose_schedule`` picks for the module with ``aliases`` applied (its
        instructions are this copy's), or None where the kept list order may not be its."""
        if self.breaking(aliases):
            return None
        candidates = dict(self.candidates)
        if self.module.input_output_alias or self.breaking(aliases, "post-order"):
            with_aliases = copy.copy(self.module)
            with_aliases.input_output_alias = aliases
            candidates["post-order"] = build_schedule(
                self.module, post_order(self.flow.call_graph, with_aliases, self.effects),
                "post-order")
        peaks = {name: self._peak(name, schedule, aliases)
                 for name, schedule in candidates.items()}
        best = min(peaks, key=lambda name: peaks[name])
        chosen = candidates[best]
        return Schedule(chosen.sequences, chosen.flattened, best, peaks, chosen.step,
                        chosen.spans)

    def _peak(self, name: str, schedule: Schedule, aliases: list[AliasEntry]) -> int:
        entry = self.module.entry
        assert entry is not None and entry.root is not None
        if schedule.flattened != self.candidates[name].flattened:
            return simulated_peak(schedule, self.flow, AliasAnalysis(self.flow, aliases), {
                (a.parameter_number, a.parameter_index) for a in aliases})
        if name not in self._peaks:
            if self._aliasing is None:
                self._aliasing = AliasAnalysis(self.flow, [])
            self._peaks[name] = _Peaks(schedule, self.flow, self._aliasing)
        flow = self.flow
        if self._parameters is None:
            self._parameters = {}
            for v in flow.values:
                if v.kind == "parameter":
                    self._parameters.setdefault(parameter_key(v), []).append(v)
        params = {p.parameter_number: p for p in entry.parameters}
        keys = {(a.parameter_number, a.parameter_index) for a in aliases}
        writable = [v for key in keys for v in self._parameters.get(key, [])]
        joined = [(flow.value_at(params[a.parameter_number], a.parameter_index),
                   flow.value_at(entry.root, a.output_index)) for a in aliases]
        return self._peaks[name].peak(writable, joined)


class ScheduleBases:
    """The bases of one module, one per set of breaking aliases, made when first needed."""

    def __init__(self, copier: Copier) -> None:
        self._copier = copier
        self._bases: dict[tuple[AliasEntry, ...], ScheduleBasis] = {}

    def _basis(self, aliases: tuple[AliasEntry, ...]) -> ScheduleBasis:
        if aliases not in self._bases:
            self._bases[aliases] = ScheduleBasis.of(*self._copier(list(aliases)))
        return self._bases[aliases]

    def choose(self, aliases: list[AliasEntry]) -> tuple[Schedule, ScheduleBasis] | None:
        """``choose_schedule``'s schedule for the module with ``aliases`` applied, and the basis
        whose instructions it holds; None where it has to be made from scratch."""
        none = self._basis(())
        breaking = set(none.breaking(aliases)) | set(none.breaking(aliases, "post-order"))
        if len(breaking) > MAX_BREAKING:
            return None
        basis = self._basis(tuple(a for a in aliases if a in breaking))
        chosen = basis.choose(aliases)
        return None if chosen is None else (chosen, basis)
