"""Keeping the OpenCL compiler's chatter out of cells and terminals.

PoCL runs clang and LLVM inside the process and they write to the process's file descriptors
1 and 2 from C ("5 warnings generated."), below ``sys.stdout``, so redirecting Python's
streams does nothing. Builds therefore pass ``-w`` (no warnings: the project generates the
code, and a user's custom-call kernel is still checked for errors), and ``silenced_fds``
points descriptors 1 and 2 at a temporary file around builds and the launches that make PoCL
compile; what was written there is handed back, so a failure can attach it to its error.
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

_lock = threading.RLock()
_depth = 0


@dataclass
class Captured:
    """What the silenced code wrote to descriptors 1 and 2 (filled in when the block ends)."""

    text: str = ""


def _flush_c_streams() -> None:
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


@contextmanager
def silenced_fds() -> Iterator[Captured]:
    """Send everything written to fds 1 and 2 inside the block to a temporary file.

    Re-entrant (an inner block captures nothing of its own) and serialised across threads.
    Python's own streams are flushed first so nothing printed before the block is lost.
    """
    global _depth
    captured = Captured()
    with _lock:
        if _depth:
            _depth += 1
            try:
                yield captured
            finally:
                _depth -= 1
            return
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, ValueError, OSError):
                pass
        try:
            saved = [os.dup(1), os.dup(2)]
        except OSError:          # no descriptors 1/2 (some embedded interpreters): nothing to do
            yield captured
            return
        sink = tempfile.TemporaryFile()
        _depth = 1
        try:
            _flush_c_streams()
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield captured
        finally:
            _flush_c_streams()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            _depth = 0
            sink.seek(0)
            captured.text = sink.read().decode(errors="replace")
            sink.close()


__all__ = ["silenced_fds", "Captured"]
