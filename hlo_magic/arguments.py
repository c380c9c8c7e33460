"""Checking the values of ``%%hlo`` flags: each mistake is one ``UsageError`` sentence naming
the flag, the value given and what is allowed (IPython prints exactly ``UsageError`` as one red
line; a subclass would get a full traceback)."""

from __future__ import annotations

import difflib
import keyword
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

from IPython.core.error import UsageError

from runtime.buffers.donation_spec import resolve_donation
from runtime.errors import HloArgumentError

from .report import SECTIONS

SHOW_VALUES = (*SECTIONS, "none")
_NOT_IDENTIFIER = re.compile(r"\W")


def parse_show(value: str, flag: str = "--show") -> tuple[str, ...]:
    """``assignment,timeline`` -> ("assignment", "timeline"); ``none`` stands alone."""
    parts = tuple(p.strip() for p in value.split(",") if p.strip())
    bad = [p for p in parts if p not in SHOW_VALUES]
    if not parts or bad:
        raise UsageError(f"{flag} {value!r}: expected a comma-separated list of "
                         f"{', '.join(SHOW_VALUES)}")
    if "none" in parts and len(parts) > 1:
        raise UsageError(f"{flag} {value!r}: 'none' cannot be combined with other sections")
    return parts


def parse_donate(value: str, names: Sequence[str]) -> frozenset[int]:
    """``0,2``, ``w,g`` or ``all`` -> parameter numbers, checked against the entry's
    parameter ``names`` (the runtime's rules: each parameter at most once)."""
    if not value.strip():
        return frozenset()
    try:
        return resolve_donation(value, names, what=f"--donate {value!r}")
    except HloArgumentError as error:
        hint = f" ({error.hint})" if error.hint else ""
        raise UsageError(f"{error.message}{hint}") from None


def split_names(value: str | None) -> list[str]:
    """``-i a,b`` -> ["a", "b"]."""
    if not value:
        return []
    return [n.strip() for n in value.split(",") if n.strip()]


def lookup(namespace: Mapping[str, Any], names: Iterable[str], flag: str) -> list[Any]:
    """The user's values for ``names``; a missing name lists the similar ones that exist."""
    values = []
    for name in names:
        if name in namespace:
            values.append(namespace[name])
            continue
        public = [k for k in namespace if not k.startswith("_")]
        close = difflib.get_close_matches(name, public, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"{flag}: no variable named {name!r} in the notebook{hint}")
    return values


def lookup_function(namespace: Mapping[str, Any], name: str, flag: str) -> Callable:
    """The user's function called ``name`` (a missing name lists similar ones)."""
    (fn,) = lookup(namespace, [name], flag)
    if not callable(fn):
        raise UsageError(f"{flag} {name!r}: expected a function, got {type(fn).__name__}")
    return fn


def python_name(name: str) -> str:
    """A module name as a Python identifier: ``jit_f.1`` -> ``jit_f_1``, ``if`` -> ``if_``."""
    ident = _NOT_IDENTIFIER.sub("_", name)
    if not ident or ident[0].isdigit():
        ident = "_" + ident
    if keyword.iskeyword(ident):
        ident += "_"
    return ident


def check_identifier(value: str, flag: str) -> str:
    if not value.isidentifier() or keyword.iskeyword(value):
        raise UsageError(f"{flag} {value!r}: expected a Python variable name")
    return value
