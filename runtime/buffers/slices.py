"""Where bytes live in a buffer assignment: the types the layers after assignment share.

``BufferSlice`` is a value's bytes (allocation, offset, size); ``BufferRef`` is where a kernel
or host-call argument points (allocation and offset: the callee knows the size from the
shape). Code generation, custom calls and execution all speak of buffers this way, so the
types live here, below all of them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BufferSlice:
    allocation: int
    offset: int
    size: int


@dataclass(frozen=True)
class BufferRef:
    """Where a kernel buffer argument points: an allocation of the buffer assignment (or the
    program's embedded-constant blob, ``allocation == codegen.kernel.EMBEDDED``) and a byte
    offset in it."""

    allocation: int
    offset: int
