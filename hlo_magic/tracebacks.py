"""How an error in a user's program is shown: the short located message, and the user's own
Python frames first when the user's code raised it.

A host custom call that raises surfaces as the runtime's ``CustomCallError`` whose
``__cause__`` is the user's exception. Its Python traceback starts in the runtime (the call
site, the calling convention) and only then reaches the user's function; a person debugging
wants their own lines, so those frames are cut out of the cause's traceback and shown first,
followed by the short message that names the instruction (the runtime's own rendering does
the same in plain text; here the frames come coloured, from IPython). With ``full_traceback``
on, the whole traceback follows as well.
"""

from __future__ import annotations

from types import TracebackType

import runtime


def user_frames(error: BaseException) -> tuple[BaseException, TracebackType] | None:
    """The exception the user's code raised and its traceback from the user's first frame
    (``CustomCallError.user_frames``); None when the error did not come from user code."""
    if isinstance(error, runtime.CustomCallError):
        return error.user_frames()
    return None


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
        lines += runtime.HloError._render_traceback_(error)
    return lines
