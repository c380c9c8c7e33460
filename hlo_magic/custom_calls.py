"""Registering custom-call targets from a notebook: OpenCL C source or a host function.

The runtime's registry does the work (``runtime.register_custom_call``); this module finds
the kernel to launch in the cell's source and checks what the user named, so that a cell
without a ``__kernel`` or a name that is not a function is one ``UsageError`` line.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Callable

from IPython.core.error import UsageError

import runtime

_KERNEL = re.compile(r"__kernel\s+void\s+([A-Za-z_]\w*)\s*\(|kernel\s+void\s+([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class Registration:
    """What ``%%hlo_custom_call`` registered (its display is the confirmation)."""

    target: str
    platform: str
    what: str

    def __repr__(self) -> str:
        return f"registered custom call {self.target!r}: {self.what} ({self.platform})"

    def _repr_html_(self) -> str:
        return (f"registered custom call <code>{html.escape(self.target)}</code>: "
                f"{html.escape(self.what)} ({self.platform})")


def kernel_names(source: str) -> list[str]:
    """The ``__kernel`` functions defined in OpenCL C ``source``, in order."""
    return [a or b for a, b in _KERNEL.findall(source)]


def register_opencl(target: str, source: str, kernel: str | None) -> Registration:
    names = kernel_names(source)
    if kernel is None:
        if len(names) != 1:
            found = ", ".join(names) if names else "none"
            raise UsageError(f"%%hlo_custom_call {target}: the cell must define exactly one "
                             f"__kernel function or name one with --kernel (found: {found})")
        kernel = names[0]
    elif kernel not in names:
        raise UsageError(f"--kernel {kernel!r}: the cell defines no such __kernel function "
                         f"(found: {', '.join(names) or 'none'})")
    runtime.register_custom_call(target, source, platform="opencl", kernel=kernel)
    return Registration(target, "opencl", f"kernel {kernel}")


def register_host(target: str, fn: Callable, name: str) -> Registration:
    if not callable(fn):
        raise UsageError(f"--host {name!r}: expected a function, got {type(fn).__name__}")
    runtime.register_custom_call(target, fn, platform="host")
    return Registration(target, "host", f"function {name}")
