"""Kernel-build progress for a cold compile, shown in the notebook once it takes a while.

``runtime.compile`` calls ``progress(stage, done, total)``; PoCL compiles each kernel at its
first launch (70-100 ms each), so a module with many kernels takes seconds. Nothing is shown
for a compile that finishes within ``after`` seconds (most cells, and every cache hit); past
that, one display is created and updated in place (a display id), ending with the total time.
The clock starts at the first report: ``%%hlo`` builds kernels at the module's first run,
which may come cells later, and the runtime's final "done" report ends the display.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from typing import Callable

from IPython.display import display

from .formatting import format_seconds


@dataclass(frozen=True)
class ProgressLine:
    """``compiling add_mul: 3/12 kernels built, 9 to go`` as text, and as HTML with a
    progress bar."""

    module: str
    done: int
    total: int
    seconds: float
    finished: bool = False

    def __repr__(self) -> str:
        if self.finished:
            kernels = "1 kernel" if self.total == 1 else f"{self.total} kernels"
            return f"compiled {self.module}: {kernels} built in {format_seconds(self.seconds)}"
        return (f"compiling {self.module}: {self.done}/{self.total} kernels built, "
                f"{self.total - self.done} to go")

    def _repr_html_(self) -> str:
        bar = f'<progress value="{self.done}" max="{max(self.total, 1)}"></progress> '
        return ("" if self.finished else bar) + html.escape(repr(self))


class NotebookProgress:
    """A ``runtime.compile`` progress callback that displays after ``after`` seconds."""

    def __init__(self, module: str, after: float = 1.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.module = module
        self.after = after
        self.clock = clock
        self.start: float | None = None
        self.handle = None
        self.last: ProgressLine | None = None
        self.finished = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.start is None:
            self.start = self.clock()
        if stage == "done":
            self.finish()
            return
        if stage != "build":
            return
        elapsed = self.clock() - self.start
        self.last = ProgressLine(self.module, done, total, elapsed)
        if elapsed < self.after:
            return
        if self.handle is None:
            self.handle = display(self.last, display_id=True)
        else:
            self.handle.update(self.last)

    def finish(self) -> None:
        """Replace the bar with the total time (only if a bar was shown)."""
        if self.handle is not None and self.last is not None and not self.finished:
            self.finished = True
            self.handle.update(ProgressLine(self.module, self.last.total, self.last.total,
                                            self.clock() - self.start, finished=True))
