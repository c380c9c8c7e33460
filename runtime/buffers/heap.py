"""Packing live intervals into one address range: XLA's global best-fit-decreasing heap.

Every interval is a block of bytes needed over inclusive steps [start, end]. Intervals are
placed one at a time, in decreasing order of size ("spatial") or of duration ("temporal"): the
placed blocks that overlap it in time leave gaps in the address space, and the block goes into
the smallest gap it fits (lowest offset on ties), else on top. Both orders are tried and the
smaller heap kept. Offsets are multiples of ``alignment``, or of an interval's own alignment
when it has one (``block_alignment``: a block smaller than the alignment needs only the next
power of two of its size, as no access to it is wider than the block).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np


@dataclass(frozen=True)
class Interval:
    start: int
    end: int
    size: int
    alignment: int = 0     # 0: the packing's alignment


@dataclass(frozen=True)
class Packing:
    offsets: list[int]     # per interval, in input order
    size: int              # heap size: the largest offset + size
    order: str             # "spatial" or "temporal": which order won


def align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def block_alignment(size: int, alignment: int) -> int:
    """The alignment a block of ``size`` bytes needs: ``alignment``, or for a smaller block the
    next power of two of its size (scalars and tiny vectors pack like XLA's, while every access
    as wide as the block, up to a vector of the full alignment, stays aligned)."""
    return min(alignment, 1 << max(size - 1, 0).bit_length())


def pack(intervals: list[Interval], alignment: int) -> Packing:
    orders = {
        "spatial": sorted(range(len(intervals)), key=lambda i: (
            -intervals[i].size, intervals[i].start - intervals[i].end, i)),
        "temporal": sorted(range(len(intervals)), key=lambda i: (
            intervals[i].start - intervals[i].end, -intervals[i].size, i)),
    }
    best: Packing | None = None
    for name, order in orders.items():
        offsets = _best_fit(intervals, order, alignment)
        size = max((offsets[i] + iv.size for i, iv in enumerate(intervals)), default=0)
        if best is None or size < best.size:
            best = Packing(offsets, size, name)
    assert best is not None
    return best


def _best_fit(intervals: list[Interval], order: list[int], alignment: int) -> list[int]:
    n = len(intervals)
    starts = np.empty(n, dtype=np.int64)
    ends = np.empty(n, dtype=np.int64)
    lows = np.empty(n, dtype=np.int64)
    highs = np.empty(n, dtype=np.int64)
    placed = 0
    offsets = [0] * n
    for i in order:
        iv = intervals[i]
        if iv.size == 0:
            continue
        overlap = (starts[:placed] <= iv.end) & (ends[:placed] >= iv.start)
        busy_lo = lows[:placed][overlap]
        by_offset = busy_lo.argsort(kind="stable")
        offset = _choose_gap(zip(busy_lo[by_offset].tolist(),
                                 highs[:placed][overlap][by_offset].tolist()),
                             iv.size, iv.alignment or alignment)
        offsets[i] = offset
        starts[placed], ends[placed] = iv.start, iv.end
        lows[placed], highs[placed] = offset, offset + iv.size
        placed += 1
    return offsets


def _choose_gap(busy: Iterable[tuple[int, int]], size: int, alignment: int) -> int:
    """The aligned offset of the smallest gap between busy blocks ((offset, end) in order of
    offset; blocks at one offset leave no gap between them, so their order does not matter)
    that fits ``size`` (the lowest on ties), else the aligned top. Numpy picks out the blocks
    live at the same time as the one placed (a toggle's repacking of a model's arena places
    hundreds, each against all placed so far: on average 170 of ViT-tiny's 449); one loop
    over them costs less than the dozen numpy calls it replaces (that arena: 36 -> 20 ms)."""
    best, best_gap, low = -1, 0, 0
    for lo, hi in busy:
        if lo > low:
            start = -(-low // alignment) * alignment
            if start + size <= lo and (best < 0 or lo - low < best_gap):
                best, best_gap = start, lo - low
        if hi > low:
            low = hi
    return best if best >= 0 else align_up(low, alignment)
