"""Where in the user's Python program an instruction came from, read from its metadata.

JAX records it two ways: older printers write ``source_file`` and ``source_line`` in each
instruction's ``metadata``; newer ones (jax 0.12's texts, XLA's optimised dumps) write a
``stack_frame_id`` into the module's stack-frame tables (``FileNames``, ``FunctionNames``,
``FileLocations``, ``StackFrames``: each frame a file location and its caller's frame, where
``parent_frame_id=P`` names entry ``P - 1`` and 1 none, as XLA's printer numbers them: read
the other way, every table jax 0.10 to 0.12 printed would make frames their own callers). A
frame chain runs from the innermost call outwards; the line reported is the innermost frame
outside the libraries (JAX, Flax, Equinox... anything under ``site-packages`` or
``dist-packages``), as a profiler attributes time to the user's code, else the innermost one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from .attributes import Metadata, unquote_string
from .ir import HloInstruction, HloModule

_LIBRARY = re.compile(r"[/\\](site|dist)-packages[/\\]")
_ENTRY = re.compile(r"^\s*(\d+)\s+(\"(?:[^\"\\]|\\.)*\"|\{[^}]*\})", re.M)
_FIELD = re.compile(r"(\w+)=(-?\d+)")


@dataclass(frozen=True)
class SourceLocation:
    """One Python line: ``file``, ``line``, the function (when the tables name it) and JAX's
    ``op_name`` (``jit(f)/dot_general``) of the instruction."""

    file: str
    line: int
    function: str = ""
    op_name: str = ""

    @property
    def where(self) -> str:
        """``model.py:12`` (the file's last path component)."""
        name = self.file.replace("\\", "/").rsplit("/", 1)[-1]
        return f"{name}:{self.line}"


@dataclass(frozen=True)
class _Frame:
    file: str
    function: str
    line: int
    parent: int


@cache
def _frames(tables: str) -> dict[int, _Frame]:
    sections = re.split(r"^(FileNames|FunctionNames|FileLocations|StackFrames)\s*$", tables,
                        flags=re.M)
    parts = dict(zip(sections[1::2], sections[2::2]))

    def entries(name: str) -> dict[int, str]:
        return {int(k): v for k, v in _ENTRY.findall(parts.get(name, ""))}
    files = {k: unquote_string(v[1:-1]) for k, v in entries("FileNames").items()}
    functions = {k: unquote_string(v[1:-1]) for k, v in entries("FunctionNames").items()}
    locations = {k: dict((f, int(n)) for f, n in _FIELD.findall(v))
                 for k, v in entries("FileLocations").items()}
    frames = {}
    for k, v in entries("StackFrames").items():
        fields = dict((f, int(n)) for f, n in _FIELD.findall(v))
        where = locations.get(fields.get("file_location_id", 0), {})
        frames[k] = _Frame(files.get(where.get("file_name_id", 0), ""),
                           functions.get(where.get("function_name_id", 0), ""),
                           where.get("line", 0), fields.get("parent_frame_id", 1) - 1)
    return frames


def source_location(module: HloModule, inst: HloInstruction) -> SourceLocation | None:
    """Where ``inst`` came from (None when its metadata does not say)."""
    metadata = inst.optional_attr("metadata", Metadata)
    if metadata is None:
        return None
    fields = metadata.fields
    op_name = fields.get("op_name", "")
    if fields.get("source_file") and fields.get("source_line", "").isdigit():
        return SourceLocation(fields["source_file"], int(fields["source_line"]), "", op_name)
    frame_id = fields.get("stack_frame_id", "")
    frames = _frames(module.stack_frames) if module.stack_frames and frame_id.isdigit() else {}
    chain = []
    seen: set[int] = set()
    current = int(frame_id) if frame_id.isdigit() else 0
    while current in frames and current not in seen:
        seen.add(current)
        chain.append(frames[current])
        current = frames[current].parent
    chain = [f for f in chain if f.file and f.line > 0]
    if not chain:
        return None
    own = next((f for f in chain if not _LIBRARY.search(f.file)), chain[0])
    return SourceLocation(own.file, own.line, own.function, op_name)
