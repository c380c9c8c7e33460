"""How an error in a user's program is shown: the short located message, and the user's own
Python frames first when the user's code raised it.

A host custom call that raises surfaces as the runtime's ``CustomCallError`` whose
``__cause__`` is the user's exception. Its Python traceback starts in the runtime (the call
site, the calling convention) and only then reaches the user's function; a person debugging
wants their own lines, so those frames are cut out of the cause's traceback and shown first,
followed by the short message that names the instruction. With ``full_traceback`` on, the
whole traceback follows as well.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

import runtime

_OURS = (str(Path(runtime.__file__).resolve().parent), str(Path(__file__).resolve().parent))


def _is_ours(tb: TracebackType) -> bool:
    return str(Path(tb.tb_frame.f_code.co_filename).resolve()).startswith(_OURS)


def user_frames(error: BaseException) -> tuple[BaseException, TracebackType] | None:
    """The exception the user's code raised and its traceback from the first frame outside
    the runtime and hlo_magic; None when the error did not come from the user's code."""
    cause = error.__cause__
    if cause is None:
        return None
    tb = cause.__traceback__
    while tb is not None and _is_ours(tb):
        tb = tb.tb_next
    return (cause, tb) if tb is not None else None


def render(shell, error: runtime.HloError, *, full: bool) -> list[str]:
    """``_render_traceback_`` lines: the user's frames (if any), then the short message, or
    the full traceback when ``full``."""
    lines: list[str] = []
    found = user_frames(error)
    if found is not None:
        cause, tb = found
        lines += shell.InteractiveTB.structured_traceback(type(cause), cause, tb)
        lines.append("")
    if full:
        lines += shell.InteractiveTB.structured_traceback(type(error), error,
                                                          error.__traceback__)
    else:
        lines += type(error)._render_traceback_(error)
    return lines
