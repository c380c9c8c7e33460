"""Exceptions that form part of the public interface.

Every user mistake surfaces as an ``HloError`` subclass whose message names what was being
processed, where (line and column when there is source text) and what was expected.
``_render_traceback_`` is the hook IPython and Jupyter use to replace a long traceback through
our internals with a few readable lines: the location, the source line, a caret, an optional
hint, and last the ``ClassName: message`` line that notebook runners report as the failure.
"""

from __future__ import annotations

import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Iterator

_RUNTIME = str(Path(__file__).resolve().parent)


@dataclass(frozen=True)
class SourceLocation:
    """A 1-based line and column in HLO text, with the text of that line for carets."""

    line: int
    column: int
    source_line: str = ""

    def caret_lines(self) -> list[str]:
        if not self.source_line:
            return []
        text = self.source_line.expandtabs(1)
        return ["  " + text, "  " + " " * max(self.column - 1, 0) + "^"]


class HloError(Exception):
    """Base of every error the runtime reports about a user's program or its use."""

    def __init__(self, message: str, *, location: SourceLocation | None = None,
                 instruction: str | None = None, computation: str | None = None,
                 hint: str | None = None) -> None:
        self.message = message
        self.location = location
        self.instruction = instruction
        self.computation = computation
        self.hint = hint
        super().__init__(self._full_message())

    @property
    def line(self) -> int | None:
        return self.location.line if self.location else None

    @property
    def column(self) -> int | None:
        return self.location.column if self.location else None

    @property
    def source_line(self) -> str | None:
        return self.location.source_line if self.location else None

    def _where(self) -> str:
        parts = []
        if self.location is not None:
            parts.append(f"line {self.location.line}:{self.location.column}")
        if self.computation:
            parts.append(f"in computation {self.computation}")
        return ", ".join(parts)

    def _full_message(self) -> str:
        where = self._where()
        text = f"{where}: {self.message}" if where else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text

    def _render_traceback_(self) -> list[str]:
        lines = []
        where = self._where()
        if where:
            lines.append(where)
        if self.location is not None:
            lines.extend(self.location.caret_lines())
        if self.hint:
            lines.append(f"hint: {self.hint}")
        lines.append(f"{type(self).__name__}: {self.message}")
        return lines


class HloParseError(HloError):
    """The text is not well-formed HLO (lexing, syntax, undefined names, bad literals)."""


class HloVerifyError(HloError):
    """The module parses but is not valid: shapes, arities, aliasing, numbering."""

    def __init__(self, message: str, *, expected: str | None = None, got: str | None = None,
                 **kwargs) -> None:
        self.expected = expected
        self.got = got
        super().__init__(message, **kwargs)


class HloUnsupportedError(HloError):
    """A valid construct this runtime cannot compile or run (named precisely)."""


class HloArgumentError(HloError):
    """Arguments passed to an executable do not match its entry signature."""


class DonatedBufferError(HloError):
    """A device array was used after a run consumed it by donation."""


class CustomCallError(HloError):
    """A custom call is unknown, malformed, or signalled failure while running.

    When the user's function raised, the exception is the ``__cause__``; its traceback
    starts in the runtime (the call site, the calling convention), so ``user_frames`` cuts
    those frames off and ``_render_traceback_`` shows the user's own lines first."""

    def __init__(self, message: str, *, target: str | None = None, **kwargs) -> None:
        self.target = target
        super().__init__(message, **kwargs)

    def user_frames(self) -> tuple[BaseException, TracebackType] | None:
        """The exception the user's code raised and its traceback from the first frame
        outside the runtime; None when no user code raised this error."""
        cause = self.__cause__
        tb = cause.__traceback__ if cause is not None else None
        while tb is not None and str(Path(tb.tb_frame.f_code.co_filename).resolve()
                                     ).startswith(_RUNTIME):
            tb = tb.tb_next
        return (cause, tb) if cause is not None and tb is not None else None

    def _render_traceback_(self) -> list[str]:
        found = self.user_frames()
        if found is None:
            return super()._render_traceback_()
        cause, tb = found
        frames = "".join(traceback.format_exception(type(cause), cause, tb)).splitlines()
        return [*frames, "", *super()._render_traceback_()]


class DeviceError(HloError):
    """OpenCL trouble: no device, a build failure (with its log), out of device memory."""

    build_log: str | None = None      # a failed build's whole compiler log


class InternalCompilerError(HloError):
    """A bug in this compiler: an internal exception (an ``IndexError``, a ``KeyError``, a
    failed assertion...) raised while a stage processed the module, reported with the stage
    and the instruction being processed where one is known. The original exception is the
    ``__cause__``, its traceback intact, for the bug report."""

    def __init__(self, stage: str, error: BaseException, **kwargs) -> None:
        self.stage = stage
        self.error = error
        what = f"{stage} of {kwargs['instruction']}" if kwargs.get("instruction") else stage
        super().__init__(f"internal compiler error in {what}: {type(error).__name__}: {error}",
                         hint="this is a bug in the compiler, not in the program; please "
                              "report it with the module", **kwargs)


@contextmanager
def internal_errors(stage: str, *, instruction: str | None = None,
                    location: SourceLocation | None = None,
                    computation: str | None = None) -> Iterator[None]:
    """Re-raise an exception that is not an ``HloError`` (so not a report about the program,
    and not an inner stage's ``InternalCompilerError``) as an ``InternalCompilerError`` of
    ``stage``: wrapped around each pass and each instruction's lowering, so no internal
    exception reaches the public entry points and the report names where it happened. An
    ``HloError`` raised without a location (a rule deep in the lowering that only knows an
    instruction's name) takes ``location``: every report points at a line of the text."""
    try:
        yield
    except HloError as e:
        if e.location is None and location is not None:
            e.location = location
            e.computation = e.computation or computation
            e.args = (e._full_message(),)
        raise
    except MemoryError:
        raise
    except Exception as e:
        raise InternalCompilerError(stage, e, instruction=instruction, location=location,
                                    computation=computation) from e


__all__ = [
    "SourceLocation", "HloError", "HloParseError", "HloVerifyError", "HloUnsupportedError",
    "HloArgumentError", "DonatedBufferError", "CustomCallError", "DeviceError",
    "InternalCompilerError", "internal_errors",
]
