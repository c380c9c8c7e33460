"""Static copies of widget outputs, for notebooks opened without their widgets' state.

JupyterLab draws a widget output from the kernel's widget models; a saved notebook reopened
(or handed to someone) has none, and JupyterLab then shows "Error displaying widget: model not
found" whatever else the output's bundle holds, since the widget view outranks every other
type. So a widget here displays as two outputs: first a ``StaticCopy`` (HTML with the figure
inline, and the PNG), then the widget itself. When the widget's front end draws, it hides the
static copy (found by the id they share), so a live notebook shows the widget only; nbviewer,
GitHub, nbconvert and a reopened JupyterLab show the static copy.
"""

from __future__ import annotations

import base64
import html
import uuid
from dataclasses import dataclass, field

STATIC_CLASS = "hlo-magic-static"


def new_static_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class StaticCopy:
    """What a widget showed when it was displayed, as HTML (``body`` is already HTML)."""

    static_id: str
    body: str
    text: str
    png: bytes | None = field(default=None, repr=False)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        image = ""
        if self.png is not None:
            data = base64.b64encode(self.png).decode("ascii")
            image = (f'<img src="data:image/png;base64,{data}" alt="{html.escape(self.text)}" '
                     'style="max-width:100%">')
        note = ('<p style="margin:0.2em 0"><i>A static copy: run the cell to get the '
                "interactive view.</i></p>")
        copy = (f'<div class="{STATIC_CLASS} {STATIC_CLASS}-{self.static_id}">'
                f"{self.body}{image}{note}</div>")
        bundle: dict[str, str | bytes] = {"text/plain": self.text, "text/html": copy}
        if self.png is not None:
            bundle["image/png"] = self.png
        return bundle


def display_with_static_copy(copy: StaticCopy, widget_bundle: dict) -> None:
    """The static copy, then the widget (its view and a text line only: the copy is the
    fallback, so the bundle need not carry it twice)."""
    from IPython.display import display
    display(copy)
    display({k: v for k, v in widget_bundle.items()
             if k in ("application/vnd.jupyter.widget-view+json", "text/plain")}, raw=True)
