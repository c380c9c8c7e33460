"""Numbers as people read them in a report: bytes in binary units, durations, percentages."""

from __future__ import annotations

import math

BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def format_bytes(n: int) -> str:
    """``12 B``, ``4.0 KiB``, ``1.5 MiB``: exact below 1 KiB, one decimal above."""
    value, unit = float(n), 0
    while abs(value) >= 1024 and unit < len(BYTE_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{n} B" if unit == 0 else f"{value:.1f} {BYTE_UNITS[unit]}"


def format_seconds(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def format_change(before: int, after: int) -> str:
    """``-33 %`` or ``+50 %`` (relative to ``before``); ``±0 %`` when nothing moved. A change
    under 1 % keeps one significant digit (``-0.3 %``, ``-0.04 %``): a donation of one weight
    in a whole model moves the total by that much, and ``-0 %`` would read as nothing."""
    if before == after:
        return "\u00b10 %"
    if before == 0:
        return "+\u221e %"
    percent = 100.0 * (after - before) / before
    sign = "\u2212" if percent < 0 else "+"
    size = abs(percent)
    decimals = 0 if size >= 1 else -math.floor(math.log10(size))
    return f"{sign}{size:.{decimals}f} %"
