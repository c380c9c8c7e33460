"""``HloResult``: what a ``%%hlo`` cell returns, and everything a person looks at next.

The result keeps the executable, the buffer assignment for the cell's donation choice, the
outputs of a run (numpy) and the run record, and renders itself as a static report: HTML for
notebooks, text for terminals, a one-line ``repr``. Figures are made on request and only enter
the display bundle when the cell asked for ``--show timeline`` (in a kernel, ``%%hlo`` shows the
interactive ``MemoryTimeline`` after the report instead; its bundle keeps the PNG).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .donation import ParameterInfo
from .fallback import new_static_id
from .formatting import format_bytes
from .render import to_html, to_text
from .report import Part, build_report

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from runtime import CollectiveTraffic, Executable
    from runtime.buffers import BufferAssignment, MemoryStats
    from runtime.execution.executable import RunRecord

    from .annotated import AnnotatedModule
    from .timeline_widget import MemoryTimeline
    from .widgets import DonationPanel


@dataclass(eq=False)
class HloResult:
    """One cell's compiled module, memory plan and (if it ran) outputs."""

    executable: Executable
    assignment: BufferAssignment       # the memory plan when ``donated`` are donated
    parameters: list[ParameterInfo]
    donated: frozenset[int] = frozenset()
    # numpy array or (nested) tuple of arrays, after a run; for a multi-device module a list
    # of them, device p's at p
    outputs: Any = None
    run: RunRecord | None = None
    bound_as: str | None = None        # the user-namespace name the executable was bound to
    show: tuple[str, ...] = ("assignment",)
    max_table_rows: int = 25
    timeline_max_buffers: int = 40
    explain_terms: bool = True         # the glossary starts open (the session's first report)
    warnings: tuple[str, ...] = ()     # what the cell asked for that did not happen
    link: str = field(default_factory=new_static_id)   # pairs its timeline and annotated view
    _png: bytes | None = field(default=None, repr=False)
    _savings: list[tuple[int, str]] | None = field(default=None, repr=False)
    _collectives: list[CollectiveTraffic] | None = field(default=None, repr=False)
    # the report's parts, built once for both the text and the HTML of the display bundle
    # (not copied by ``dataclasses.replace``, which may change what is shown)
    _parts: list[Part] | None = field(default=None, repr=False, init=False)

    # --- data --------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.executable.name

    @property
    def device(self):
        return self.executable.device

    @property
    def memory_stats(self) -> MemoryStats:
        return self.assignment.memory_stats

    @property
    def peak(self) -> int:
        return self.assignment.peak

    @property
    def devices(self) -> int:
        """How many devices the module runs on (1 unless it is partitioned or replicated)."""
        return self.executable.device_count

    def collectives(self) -> list[CollectiveTraffic]:
        """Each collective in schedule order: its step, and the bytes each device sends and
        receives there (``runtime.collective_traffic``); empty for one device."""
        if self._collectives is None:
            from runtime import collective_traffic
            self._collectives = collective_traffic(self.assignment)
        return self._collectives

    @property
    def compile_seconds(self) -> float:
        return self.executable.compile_seconds

    @property
    def cache_hit(self) -> bool:
        return self.executable.cache_hit

    def records(self) -> list[dict]:
        """One dict per buffer (name, allocation, kind, offset, size, start, end)."""
        return self.assignment.records()

    def live_ranges(self) -> dict[str, tuple[int, int]]:
        """Buffer name -> (first, last) step of the flattened schedule, inclusive."""
        return {r["name"]: (r["start"], r["end"]) for r in self.records()}

    def sharing(self) -> list[str]:
        """For each reused byte range, which buffer held it before and until which step."""
        from .sharing import reuses, sentence
        return [sentence(r) for r in reuses(self.assignment)]

    def fusions(self) -> dict[str, list[str]]:
        """Fusion name -> the source instructions it holds, root first."""
        from .names import fusions
        return fusions(self.assignment.module)

    def savings(self) -> list[tuple[int, str]]:
        """(bytes, sentence) for each saving the report weighs; the largest is shown first.
        Computed once (it plans the module again with other donations)."""
        if self._savings is None:
            from .report import savings
            self._savings = savings(self)
        return self._savings

    # --- figures and widgets ----------------------------------------------------------------
    def timeline(self) -> MemoryTimeline:
        """The interactive memory timeline (hover, zoom, find a buffer); its display bundle
        falls back to ``figure()``'s PNG where no widget front end runs."""
        from .timeline_widget import MemoryTimeline
        return MemoryTimeline(self.assignment, source=self.executable.module,
                              max_buffers=self.timeline_max_buffers, link=self.link)

    def annotated(self) -> AnnotatedModule:
        """The module after the passes, each instruction with its allocation, offset, size,
        live range and the source instructions a fusion was made from; linked with
        ``timeline()`` where both are shown."""
        from .annotated import annotate
        return annotate(self.assignment, self.executable.module, link=self.link)

    def live_bytes(self, *, ax: Axes | None = None) -> Figure:
        """The static plot of bytes live at each step, stacked by kind."""
        from .timeline import plot_timeline
        return plot_timeline(self.assignment, ax=ax)

    def packing(self, *, ax: Axes | None = None) -> Figure:
        from .timeline import plot_packing
        return plot_packing(self.assignment, ax=ax, max_buffers=self.timeline_max_buffers)

    def figure(self) -> Figure:
        """Live bytes, the packing map and the peak's buffers in one figure."""
        from .timeline import plot_memory
        return plot_memory(self.assignment, max_buffers=self.timeline_max_buffers)

    def timeline_png(self) -> bytes:
        if self._png is None:
            from .timeline import figure_png
            self._png = figure_png(self.figure())
        return self._png

    def panel(self) -> DonationPanel:
        """The interactive donation panel, starting from this cell's donation choice."""
        from .donation import DonationModel
        from .widgets import DonationPanel
        model = DonationModel(self.assignment, self.donated - {p.number for p in self.parameters
                                                               if p.blocked is not None})
        return DonationPanel(model, max_buffers=self.timeline_max_buffers,
                             max_rows=self.max_table_rows)

    # --- display ----------------------------------------------------------------------------
    def _outputs_text(self) -> str:
        shape = self.executable.result_shape
        leaves = [leaf.to_text(False) for _, leaf in shape.leaves()]
        if not shape.is_tuple:
            return f"({leaves[0]},)"
        return "(" + ", ".join(leaves) + ("," if len(leaves) == 1 else "") + ")"

    def __repr__(self) -> str:
        return (f"HloResult(module={self.name}, peak={format_bytes(self.peak)}, "
                f"outputs={self._outputs_text()}, device={self.device.platform_short}:"
                f"{self.device.kind})")

    def _report_parts(self) -> list[Part]:
        if self._parts is None:
            self._parts = build_report(self)
        return self._parts

    def report_text(self) -> str:
        return to_text(self._report_parts())

    def _repr_html_(self) -> str:
        if "none" in self.show:
            return f"<code>{html.escape(repr(self))}</code>"
        return to_html(self._report_parts())

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(repr(self) if cycle or "none" in self.show else self.report_text())

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle: dict[str, str | bytes] = {
            "text/plain": repr(self) if "none" in self.show else self.report_text(),
            "text/html": self._repr_html_()}
        if "timeline" in self.show and "none" not in self.show:
            bundle["image/png"] = self.timeline_png()
        return bundle
