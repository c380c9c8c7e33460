"""What each collective of a multi-device plan moves, and where it sits in the schedule.

A partitioned module is one program every device runs; its memory plan is one device's, and
its collectives are where the devices trade data. ``collective_traffic`` lists them in
schedule order: the step of ``schedule.flattened`` (the memory timeline's x axis) each one
runs at, how often a run executes it (loops), and the bytes each device sends and receives
there, counted from the collective's definition (XLA's semantics) for a group of ``n``
devices and a device's operand bytes ``S``:

- all-reduce: ``2 (n-1)/n S`` each way, the bandwidth-optimal form (a reduce-scatter then an
  all-gather; any algorithm moves at least this);
- all-gather: ``(n-1) S`` each way (each device's shard reaches the ``n-1`` others);
- reduce-scatter and all-to-all: ``(n-1)/n S`` each way (all but the device's own part);
- collective-permute: ``S`` received where a device has a source other than itself, ``S`` sent
  per device it is the source of (zero for a device that keeps its own value);
- collective-broadcast: the group's first device sends ``(n-1) S``, the others receive ``S``.

Byte counts that do not divide evenly are rounded down. ``partition-id`` and ``replica-id``
move nothing and are not listed. The facts come from the ``Collective`` the SPMD pass puts on
each collective's custom-call, so what is reported is what a run exchanges.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..analysis.call_graph import CallGraph
from ..analysis.trip_count import trip_count
from ..hlo.ir import HloComputation, HloInstruction
from ..hlo.opcode_enum import Opcode
from ..passes.spmd_collectives import COLLECTIVE_TARGET, Collective
from .assignment import BufferAssignment

_IDS = (Opcode.PARTITION_ID, Opcode.REPLICA_ID)


@dataclass(frozen=True)
class CollectiveTraffic:
    """One collective of a plan: ``step`` in the flattened schedule, ``sent[d]`` and
    ``received[d]`` the bytes device ``d`` trades each time it runs, ``executions`` how many
    times a run runs it (None: in a loop whose trip count is not known before it runs, or in
    a conditional's branch)."""

    kind: Opcode
    instruction: str            # the collective as written in the module
    step: int
    computation: str            # the computation it runs in (a loop body: once an iteration)
    group_size: int             # devices in its largest group (2 for a pairwise permute)
    operand_bytes: int          # one device's operands
    result_bytes: int           # one device's result
    sent: tuple[int, ...]
    received: tuple[int, ...]
    executions: int | None

    @property
    def max_sent(self) -> int:
        return max(self.sent, default=0)

    @property
    def max_received(self) -> int:
        return max(self.received, default=0)


def collective_traffic(plan: BufferAssignment) -> list[CollectiveTraffic]:
    """The collectives of ``plan``'s module in schedule order (empty for one device)."""
    graph: CallGraph | None = None          # built at the first collective (a model has none)
    found = []
    for step, inst in enumerate(plan.schedule.flattened):
        spec = inst.attrs.get("collective")
        if inst.attrs.get("custom_call_target") != COLLECTIVE_TARGET or \
                not isinstance(spec, Collective) or spec.kind in _IDS:
            continue
        operand_bytes = sum(op.shape.byte_size for op in inst.operands)
        result_bytes = sum(leaf.byte_size for _, leaf in inst.shape.leaves())
        sent, received = _bytes(spec, operand_bytes, result_bytes)
        graph = graph or CallGraph(plan.module)
        size = 2 if spec.kind == Opcode.COLLECTIVE_PERMUTE else \
            max((len(g) for g in spec.groups), default=1)
        found.append(CollectiveTraffic(
            spec.kind, spec.instruction, step, _computation(inst).name, size, operand_bytes,
            result_bytes, sent, received, _executions(graph, _computation(inst))))
    return found


def _bytes(spec: Collective, operand: int, result: int
           ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(sent, received) per device; see the module's docstring for each kind's count."""
    devices = range(spec.devices)
    if spec.kind == Opcode.COLLECTIVE_PERMUTE:
        sent = tuple(operand * sum(1 for t, s in enumerate(spec.sources) if s == d and t != d)
                     for d in devices)
        received = tuple(0 if spec.sources[d] in (None, d) else operand for d in devices)
        return sent, received
    if spec.kind == Opcode.COLLECTIVE_BROADCAST:
        root = [spec.group_of(d)[0] == d for d in devices]
        return (tuple((len(spec.group_of(d)) - 1) * operand if root[d] else 0 for d in devices),
                tuple(0 if root[d] or len(spec.group_of(d)) == 1 else operand for d in devices))
    each = []
    for d in devices:
        n = len(spec.group_of(d))
        if spec.kind == Opcode.ALL_REDUCE:
            each.append(2 * (n - 1) * operand // n)
        elif spec.kind == Opcode.ALL_GATHER:
            each.append((n - 1) * operand)
        else:                      # reduce-scatter, all-to-all: all but the device's part
            each.append((n - 1) * operand // n)
    return tuple(each), tuple(each)


def _computation(inst: HloInstruction) -> HloComputation:
    parent = inst.parent
    assert parent is not None, inst.name
    return parent


def _executions(graph: CallGraph, comp: HloComputation) -> int | None:
    """Times a run executes ``comp``: the product of the trip counts of the loops around it
    (a loop's condition runs once more than its body); None where one is unknown or ``comp``
    is a conditional's branch."""
    count = 1
    while comp in graph.call_site:
        caller = graph.call_site[comp]
        if caller.opcode == Opcode.WHILE:
            trips = trip_count(caller)
            if trips is None:
                trips = _known_trip_count(caller)
            if trips is None:
                return None
            count *= trips + (1 if comp is caller.attrs.get("condition") else 0)
        elif caller.opcode != Opcode.CALL:
            return None
        comp = _computation(caller)
    return count


def _known_trip_count(loop: HloInstruction) -> int | None:
    """The trip count XLA wrote into the loop's ``backend_config`` (``known_trip_count``):
    a partitioned loop's counter often starts at a copy, which ``trip_count`` does not
    follow."""
    config = loop.attrs.get("backend_config")
    try:
        count = json.loads(getattr(config, "text", ""))["known_trip_count"]["n"]
        return int(count) if int(count) >= 0 else None
    except (ValueError, KeyError, TypeError):
        return None
