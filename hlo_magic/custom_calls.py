"""Registering custom-call targets from a notebook: OpenCL C source, a launcher, or a host
function.

The runtime's registry does the work (``runtime.register_custom_call``). This module picks
the kernel to launch from the cell's source and builds the source at once, so a cell with no
``__kernel``, a name that is not a function, or OpenCL C that does not compile fails in the
cell that registers it (a ``UsageError`` line, or the runtime's located ``DeviceError``), not
later in the cell that runs the module.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Callable

from IPython.core.error import UsageError

import runtime

_KERNEL = re.compile(r"\b(?:__)?kernel\s+void\s+([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class Registration:
    """What ``%%hlo_custom_call`` registered (its display is the confirmation)."""

    target: runtime.CustomCallTarget

    def __repr__(self) -> str:
        return f"registered custom call {self.target.describe()}"

    def _repr_html_(self) -> str:
        return f"registered custom call <code>{html.escape(self.target.describe())}</code>"


def kernel_names(source: str) -> list[str]:
    """The kernel functions defined in OpenCL C ``source``, in order."""
    return _KERNEL.findall(source)


def register_opencl(target: str, source: str | None, kernel: str | None,
                    launcher: Callable | None, device) -> Registration:
    """Register ``source`` (and/or ``launcher``) for ``target`` and build it for ``device``.
    Without ``kernel``, the source's only kernel is the one (a launcher may pick among many)."""
    if source is not None and kernel is None:
        names = kernel_names(source)
        if len(names) == 1:
            kernel = names[0]
        elif launcher is None:
            found = ", ".join(names) if names else "none"
            raise UsageError(f"%%hlo_custom_call {target}: the cell must define exactly one "
                             f"__kernel function or name one with --kernel (found: {found})")
    registered = runtime.register_custom_call(target, source, platform="opencl", kernel=kernel,
                                              launcher=launcher)
    if source is not None:
        if kernel is not None:
            registered.kernel(device)
        else:
            registered.program(device)
    return Registration(registered)


def register_host(target: str, fn: Callable) -> Registration:
    return Registration(runtime.register_custom_call(target, fn, platform="host"))
