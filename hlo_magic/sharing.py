"""Why two buffers share bytes: for each reused range, who held it before and until when.

Buffers in one allocation may share bytes only when their live ranges do not overlap. For
each buffer that lands on bytes an earlier buffer used, the previous holder is the one that
overlaps its byte range and died last before it started (live ranges are inclusive schedule
steps); a buffer that the temp arena's reuse chain links to its operand takes that operand's
bytes over in place, at the operand's last step. This is derived from the assignment's
offsets and live ranges only, so it says exactly what the plan did.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime.buffers import AssignedBuffer, BufferAssignment

from .formatting import format_bytes


@dataclass(frozen=True)
class Reuse:
    buffer: AssignedBuffer       # the later holder
    previous: AssignedBuffer     # the buffer that held (part of) these bytes before
    allocation: int
    offset: int                  # where the shared range starts in the allocation
    size: int                    # bytes shared
    in_place: bool               # handed over at the previous holder's last step


def reuses(plan: BufferAssignment) -> list[Reuse]:
    """Every buffer that reuses bytes, with the buffer that held them last before it. Each
    buffer is compared with all of its allocation's at once (numpy): a model's temp arena
    holds hundreds of buffers, and the donation panel recomputes this at every toggle."""
    handed_over = plan.temp_arena.reuse if plan.temp_arena is not None else {}
    found = []
    for allocation in plan.allocations:
        placed = [b for b in allocation.buffers if b.size]
        index = {p.buffer: k for k, p in enumerate(placed)}
        offset = np.array([p.offset for p in placed], dtype=np.int64)
        end = offset + np.array([p.size for p in placed], dtype=np.int64)
        last = np.array([p.live.end for p in placed], dtype=np.int64)
        for b in sorted(placed, key=lambda b: (b.live.start, b.offset, b.name)):
            k = index[b.buffer]
            overlap = np.maximum(0, np.minimum(end, end[k]) - np.maximum(offset, offset[k]))
            earlier = last < b.live.start
            previous = handed_over.get(b.buffer)
            if previous is not None and previous in index:
                earlier[index[previous]] = True
            earlier[k] = False
            candidates = np.flatnonzero(earlier & (overlap > 0))
            if not candidates.size:
                continue
            # the latest to die, then the largest overlap; ties: the first in the allocation
            latest = candidates[last[candidates] == last[candidates].max()]
            p = placed[int(latest[np.argmax(overlap[latest])])]
            start = max(p.offset, b.offset)
            found.append(Reuse(b, p, allocation.index, start, _overlap(p, b),
                               p.buffer is previous))
    return found


def _overlap(a: AssignedBuffer, b: AssignedBuffer) -> int:
    return max(0, min(a.offset + a.size, b.offset + b.size) - max(a.offset, b.offset))


def sentence(reuse: Reuse, names: dict[str, str] | None = None) -> str:
    """``d reuses b's bytes at offset 0 (4.0 KiB) because b dies at step 2`` (in place: ``d
    takes over c's bytes ... at step 3, c's last use``)."""
    names = names or {}
    b = names.get(reuse.buffer.name, reuse.buffer.name)
    p = names.get(reuse.previous.name, reuse.previous.name)
    where = f"at offset {reuse.offset} ({format_bytes(reuse.size)})"
    if reuse.in_place:
        return (f"{b} takes over {p}'s bytes {where} in place at step {reuse.buffer.live.start}, "
                f"{p}'s last use")
    return (f"{b} reuses {p}'s bytes {where} because {p} dies at step "
            f"{reuse.previous.live.end} and {b} starts at step {reuse.buffer.live.start}")
