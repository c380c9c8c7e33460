"""``MemoryTimeline``: the interactive memory timeline, an anywidget drawn on a canvas.

Python computes the data once (``timeline_data``) and sends it as binary columns; the browser
draws, zooms, pans and answers hovers on its own, so a hover costs no kernel round trip and a
model with thousands of buffers stays responsive. The front end is ``static/timeline.js``
(package data, no CDN: it works offline). ``selected`` is synced both ways: clicking a buffer
sets it, and setting it from Python (``select``) shows that buffer. ``link`` names the annotated
view it is linked with (``HloResult.annotated``: a selected buffer's row is outlined there, a
buffer named there is selected here); "Save PNG" and "Save SVG" download the figure as shown.

Where no widget front end runs (nbconvert, CI, a closed notebook), the display bundle still
holds the static memory figure as PNG and a text summary; displayed in a notebook, a static
copy (``fallback``) comes first and the front end hides it once it draws.
"""

from __future__ import annotations

import html
from pathlib import Path

import anywidget
import traitlets

from runtime.buffers import BufferAssignment
from runtime.hlo import HloModule

from .fallback import StaticCopy, display_with_static_copy, new_static_id
from .formatting import format_bytes
from .names import SourceMembers, source_members
from .timeline_data import TimelineData, timeline_data

_JS = Path(__file__).with_name("static") / "timeline.js"
_CSS = Path(__file__).with_name("static") / "timeline.css"


class MemoryTimeline(anywidget.AnyWidget):
    """Live bytes over the schedule and the memory map of every buffer; hover for details,
    wheel to zoom (shift: bytes axis), drag to pan, search by name, click to pin."""

    _esm = _JS
    _css = _CSS
    meta = traitlets.Dict().tag(sync=True)
    columns = traitlets.Bytes().tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    height = traitlets.Int(460).tag(sync=True)
    static_id = traitlets.Unicode("").tag(sync=True)   # the static copy the view hides
    link = traitlets.Unicode("").tag(sync=True)        # the annotated view's data-hlo-link

    def __init__(self, assignment: BufferAssignment, *, source: HloModule | None = None,
                 max_buffers: int = 40, **kwargs) -> None:
        """``source``: the module as written, whose names a fusion's details list."""
        self.assignment = assignment
        self._source = source
        self._members: tuple[HloModule, SourceMembers] | None = None
        self.data: TimelineData = timeline_data(assignment, source, self._members_for(assignment))
        self._seen: dict[int, tuple[BufferAssignment, TimelineData]] = {
            id(assignment): (assignment, self.data)}
        self.max_buffers = max_buffers
        self._png: bytes | None = None
        super().__init__(meta=self.data.meta(), columns=self.data.numeric.tobytes(),
                         static_id=new_static_id(), **kwargs)

    def show(self, assignment: BufferAssignment) -> None:
        """Draw another plan of the same module (the donation panel's current one): the data
        is replaced in one message, the view keeps its place. Each plan's data is kept (keyed
        by the plan, which is kept with it), so toggling back costs no recomputation."""
        self.assignment = assignment
        if id(assignment) not in self._seen:
            self._seen[id(assignment)] = (assignment, timeline_data(
                assignment, self._source, self._members_for(assignment)))
        self.data = self._seen[id(assignment)][1]
        self._png = None
        with self.hold_sync():
            self.meta = self.data.meta()
            self.columns = self.data.numeric.tobytes()

    def _members_for(self, assignment: BufferAssignment) -> SourceMembers:
        """What fusions hold, traced to the source: kept while plans come from one module
        (the donation panel's), whose fusion bodies they share."""
        source = self._source or assignment.source
        if self._members is None or self._members[0] is not source:
            self._members = (source, source_members(source))
        return self._members[1]

    def select(self, name: str) -> None:
        """Show buffer ``name`` (zoomed to, outlined, its details pinned)."""
        if name not in self.data.names:
            raise KeyError(f"{self.data.module} has no buffer named {name!r}")
        self.selected = name

    def summary(self) -> str:
        data = self.data
        steps = len(data.steps)
        return (f"{data.module}: {len(data.names)} buffers in {len(data.allocations)} "
                f"allocations over {steps} steps; peak {format_bytes(data.peak)} at step "
                f"{data.peak_step} ({data.steps[data.peak_step]})")

    def figure(self):
        """The static figure the bundle falls back to (live bytes, packing map, peak)."""
        from .timeline import plot_memory
        return plot_memory(self.assignment, max_buffers=self.max_buffers)

    def png(self) -> bytes:
        """The static figure as PNG, drawn once per plan (a whole model's takes seconds)."""
        from .timeline import figure_png
        if self._png is None:
            self._png = figure_png(self.figure())
        return self._png

    def static_copy(self) -> StaticCopy:
        return StaticCopy(self.static_id, f"<b>{html.escape(self.summary())}</b>",
                          self.summary(), self.png())

    def _repr_mimebundle_(self, **kwargs) -> tuple[dict, dict] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:   # anywidget's answer for a widget without a view
            return None
        data, metadata = bundle
        data["text/plain"] = self.summary()
        data["image/png"] = self.png()
        return data, metadata

    def _ipython_display_(self) -> None:
        bundle = super()._repr_mimebundle_()
        view = bundle[0] if bundle is not None else {}
        display_with_static_copy(self.static_copy(), {**view, "text/plain": self.summary()})
