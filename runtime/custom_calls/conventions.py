"""XLA's custom-call calling conventions, one row per ``api_version``, and the call status.

The instruction's ``api_version`` decides how an implementation is called, exactly as in XLA,
so one registered function serves whichever version a module was written with:

* ``API_VERSION_ORIGINAL`` (the default): host ``fn(out, ins)``;
  launcher ``fn(queue, buffers, opaque, status)``.
* ``API_VERSION_STATUS_RETURNING``: host ``fn(out, ins, status)``; launcher as above.
* ``API_VERSION_STATUS_RETURNING_UNIFIED``: host ``fn(out, ins, opaque, status)``; launcher as
  above.
* ``API_VERSION_TYPED_FFI``: host ``fn(out, ins, **attrs)``; launcher
  ``fn(queue, buffers, opaque, status, **attrs)``.

``opaque`` is the ``backend_config`` as bytes; typed-FFI ``attrs`` are its MLIR dictionary
decoded (``mlir_attributes``). A typed-FFI host function signals failure by raising, as an XLA
FFI handler returns an error; the others call ``status.set_failure(message)`` (or raise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


class CustomCallStatus:
    """XLA's ``XlaCustomCallStatus``: success unless ``set_failure`` is called."""

    def __init__(self) -> None:
        self.message: str | None = None

    def set_failure(self, message: str | bytes) -> None:
        self.message = message.decode(errors="replace") if isinstance(message, bytes) \
            else str(message)

    def set_success(self) -> None:
        self.message = None

    @property
    def failed(self) -> bool:
        return self.message is not None

    def __repr__(self) -> str:
        return f"CustomCallStatus(failed: {self.message!r})" if self.failed \
            else "CustomCallStatus(ok)"


@dataclass
class CallArguments:
    """What one call passes: ``out``/``ins`` for host functions, ``queue``/``buffers`` for
    OpenCL launchers, and the rest for both."""

    opaque: bytes
    attrs: dict
    out: Any = None
    ins: list | None = None
    queue: Any = None
    buffers: list | None = None
    status: CustomCallStatus = field(default_factory=CustomCallStatus)


HOST_CONVENTIONS: dict[str, Callable[[Callable, CallArguments], Any]] = {
    "API_VERSION_ORIGINAL": lambda fn, a: fn(a.out, a.ins),
    "API_VERSION_STATUS_RETURNING": lambda fn, a: fn(a.out, a.ins, a.status),
    "API_VERSION_STATUS_RETURNING_UNIFIED": lambda fn, a: fn(a.out, a.ins, a.opaque, a.status),
    "API_VERSION_TYPED_FFI": lambda fn, a: fn(a.out, a.ins, **a.attrs),
}

LAUNCHER_CONVENTIONS: dict[str, Callable[[Callable, CallArguments], Any]] = {
    "API_VERSION_ORIGINAL": lambda fn, a: fn(a.queue, a.buffers, a.opaque, a.status),
    "API_VERSION_STATUS_RETURNING": lambda fn, a: fn(a.queue, a.buffers, a.opaque, a.status),
    "API_VERSION_STATUS_RETURNING_UNIFIED":
        lambda fn, a: fn(a.queue, a.buffers, a.opaque, a.status),
    "API_VERSION_TYPED_FFI": lambda fn, a: fn(a.queue, a.buffers, a.opaque, a.status, **a.attrs),
}

DEFAULT_API_VERSION = "API_VERSION_ORIGINAL"


__all__ = ["CustomCallStatus", "CallArguments", "HOST_CONVENTIONS",
           "LAUNCHER_CONVENTIONS", "DEFAULT_API_VERSION"]
