"""Pick the schedule with the lowest simulated peak, as XLA's memory scheduler does.

Each candidate sequence set is simulated with a no-fragmentation heap: the peak of the sum of
buffer sizes live at each step, buffers being the must-alias groups of the alias analysis. An
``is_scheduled`` module's own order is a candidate too (preferred on ties), so an XLA dump
keeps XLA's schedule unless ours is strictly better.
"""

from __future__ import annotations

from ..hlo.shape import ShapeIndex
from .alias_analysis import AliasAnalysis
from .dataflow import Dataflow
from .liveness import Liveness, peak_of
from .schedule import Schedule, Sequences, build_schedule, list_order, post_order, text_order
from .side_effects import SideEffects


def simulated_peak(schedule: Schedule, flow: Dataflow, aliasing: AliasAnalysis,
                   writable: set[tuple[int, ShapeIndex]] | None = None) -> int:
    """``writable``: as ``Liveness`` takes it (None: ``flow.module``'s aliased parameters)."""
    liveness = Liveness(flow, schedule, writable)
    intervals = []
    for buffer in aliasing.buffers:
        hull = liveness.hull(buffer.values)
        intervals.append((hull.start, hull.end, buffer.size))
    return peak_of(intervals, len(schedule.flattened))[0]


def choose_schedule(flow: Dataflow, aliasing: AliasAnalysis,
                    effects: SideEffects | None = None) -> Schedule:
    """``effects``: ``has_side_effect``'s memo, shared by the candidates (and with a caller
    that asks about the same module later)."""
    schedules = candidate_schedules(flow, effects if effects is not None else {})
    peaks = {name: simulated_peak(s, flow, aliasing) for name, s in schedules.items()}
    best = min(peaks, key=lambda name: peaks[name])
    chosen = schedules[best]
    chosen.peaks = peaks
    return chosen


def candidate_schedules(flow: Dataflow, effects: SideEffects) -> dict[str, Schedule]:
    """The module's own order when it is ``is_scheduled`` (first: it wins ties), the list
    scheduler's and post-order."""
    module = flow.module
    candidates: dict[str, Sequences] = {}
    if module.is_scheduled:
        candidates["module"] = text_order(flow.call_graph)
    candidates["list"] = list_order(flow, effects)
    candidates["post-order"] = post_order(flow.call_graph, module, effects)
    return {name: build_schedule(module, seqs, name) for name, seqs in candidates.items()}
