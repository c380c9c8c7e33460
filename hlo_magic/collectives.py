"""How a report and the memory timeline show a partitioned module's collectives.

The facts (bytes each device sends and receives, the step each collective runs at, how often
a run runs it) are ``runtime.collective_traffic``'s; this module words them once, so the
report's summary and table and the interactive timeline's hover say the same thing.
"""

from __future__ import annotations

from typing import Sequence

from runtime import CollectiveTraffic

from .formatting import format_bytes

COLUMNS = ("step", "collective", "kind", "group", "sends", "receives", "runs")
COUNTING = ("all-reduce counts 2(n-1)/n of its buffer each way, all-gather n-1 shards, "
            "reduce-scatter and all-to-all (n-1)/n of the input, a permute its buffer to each "
            "target, a broadcast its buffer from the group's first device to the others")


def per_device(values: Sequence[int]) -> str:
    """One number when every device moves the same, else the range and who moves most."""
    low, high = min(values, default=0), max(values, default=0)
    if low == high:
        return format_bytes(high)
    return f"{format_bytes(low)}\u2013{format_bytes(high)} (device {list(values).index(high)})"


def runs_text(t: CollectiveTraffic) -> str:
    if t.executions is None:
        return f"in {t.computation}: once an iteration (count unknown)"
    return "once" if t.executions == 1 else f"{t.executions} times ({t.computation})"


def hover_text(t: CollectiveTraffic) -> str:
    """What the timeline shows on a collective's step."""
    return (f"{t.kind} {t.instruction} over {t.group_size} devices: sends "
            f"{per_device(t.sent)}, receives {per_device(t.received)} per device; runs "
            f"{runs_text(t)}")


def marks(traffic: Sequence[CollectiveTraffic]) -> list[dict]:
    """The timeline's markers, JSON-ready: step, kind and the hover text."""
    return [{"step": t.step, "kind": str(t.kind), "name": t.instruction,
             "text": hover_text(t)} for t in traffic]


def per_run(traffic: Sequence[CollectiveTraffic], devices: int) -> tuple[list[int], list[int]]:
    """Bytes each device sends and receives over a whole run (collectives in loops counted
    for each iteration; ones whose count is unknown once)."""
    sent, received = [0] * devices, [0] * devices
    for t in traffic:
        times = 1 if t.executions is None else t.executions
        for d in range(devices):
            sent[d] += times * t.sent[d]
            received[d] += times * t.received[d]
    return sent, received


def summary(traffic: Sequence[CollectiveTraffic], devices: int) -> str:
    if not traffic:
        return "none: the devices never exchange data"
    sent, received = per_run(traffic, devices)
    kinds: dict[str, int] = {}
    for t in traffic:
        kinds[str(t.kind)] = kinds.get(str(t.kind), 0) + 1
    named = ", ".join(f"{n} {k}" for k, n in kinds.items())
    unknown = any(t.executions is None for t in traffic)
    return (f"{len(traffic)} ({named}); per device and run: sends {per_device(sent)}, "
            f"receives {per_device(received)}"
            + (" (loops of unknown length counted once)" if unknown else ""))



def rows(traffic: Sequence[CollectiveTraffic]) -> list[tuple[str, ...]]:
    return [(str(t.step), t.instruction, str(t.kind), str(t.group_size), per_device(t.sent),
             per_device(t.received), runs_text(t)) for t in traffic]
