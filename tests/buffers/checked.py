"""Every assignment a test makes goes through the soundness checker."""

from __future__ import annotations

import runtime
from runtime.buffers.assignment import BufferAssignment
from runtime.pipeline import buffer_assignment
from runtime.buffers.checker import check_assignment
from runtime.hlo.ir import HloModule


def assigned(source: str | HloModule, **kwargs) -> BufferAssignment:
    module = runtime.parse(source) if isinstance(source, str) else source
    ba = buffer_assignment(module, **kwargs)
    check_assignment(ba)
    return ba
