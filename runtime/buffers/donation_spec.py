"""Which parameters a caller donates: numbers, names, or ``all``, checked in one place.

``Executable.run(donate=...)``, ``hlo run --donate`` and ``%%hlo --donate`` accept the same
forms: ``0``, ``(0, 2)``, ``"0,2"``, ``"w"`` or ``("w", "g")`` (the entry's parameter names,
as the report and the donation panel show them, with or without a leading ``%``), mixtures of
both, and ``"all"``. A parameter given twice (``0,0``, or ``w`` and its number) is an error
rather than silently one donation: it usually means a slip in which one was meant. A name
that is no parameter's gets the closest names first, not a list of a model's 243.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Sequence

import numpy as np

from ..errors import HloArgumentError

LISTED_NAMES = 8       # an error lists every parameter name only for entries this small


def resolve_donation(donate: object, names: Sequence[str], *,
                     what: str = "donate") -> frozenset[int]:
    """Parameter numbers for ``donate`` given the entry's parameter ``names`` in order."""
    if isinstance(donate, str) and donate.strip() in ("all", "*"):
        return frozenset(range(len(names)))
    if isinstance(donate, (int, np.integer, str)) or not isinstance(donate, Iterable):
        donate = [donate]   # one item; _number names it if it is neither a number nor a name
    items: list[object] = []
    for item in donate:
        if isinstance(item, str):
            items += [part.strip() for part in item.split(",") if part.strip()]
        else:
            items.append(item)
    seen: dict[int, object] = {}
    for item in items:
        number = _number(item, names, what)
        if number in seen:
            first = seen[number]
            again = "again" if first == item else f"again as {item!r}"
            raise HloArgumentError(
                f"{what}: parameter {number} ({names[number]}) is given as {first!r} and "
                f"{again}; name each donated parameter once",
                hint="a buffer can be handed over once: drop the repeat")
        seen[number] = item
    return frozenset(seen)


def _number(item: object, names: Sequence[str], what: str) -> int:
    if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
        if 0 <= int(item) < len(names):
            return int(item)
    elif isinstance(item, str):
        if item.isdigit():
            return _number(int(item), names, what)
        if item.lstrip("%") in names:
            return list(names).index(item.lstrip("%"))
    close = difflib.get_close_matches(item, list(names), n=3) if isinstance(item, str) else []
    guess = f"; did you mean {', '.join(close)}?" if close else ""
    raise HloArgumentError(f"{what}: {item!r} is not a parameter number or name{guess}; "
                           f"expected {_allowed(names)}")


def _allowed(names: Sequence[str]) -> str:
    """What ``donate`` accepts, short: a model's 243 parameter names are not listed."""
    if not names:
        return "none (the entry has no parameters)"
    if len(names) <= LISTED_NAMES:
        return f"numbers 0..{len(names) - 1}, names {', '.join(names)}, or 'all'"
    return (f"numbers 0..{len(names) - 1}, one of the {len(names)} parameter names "
            f"({', '.join(names[:3])}, \u2026 {names[-1]}), or 'all'")
