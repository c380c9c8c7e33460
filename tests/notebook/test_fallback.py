"""Widget outputs carry a static copy (HTML with the figure, and the PNG) displayed just
before the widget and sharing its id, so a notebook saved without widget state still shows
what the widget showed."""

from __future__ import annotations

import re

import pytest
from IPython.display import display
from IPython.utils.capture import capture_output

import runtime
from hlo_magic.donation import DonationModel
from hlo_magic.timeline_widget import MemoryTimeline
from hlo_magic.widgets import DonationPanel
from runtime.pipeline import buffer_assignment

from .hlo_texts import ADD_MUL, model_step

WIDGET = "application/vnd.jupyter.widget-view+json"


def shown(obj) -> list[dict]:
    with capture_output() as cap:
        display(obj)
    return [o.data for o in cap.outputs]


def static_id(html: str) -> str:
    (found,) = re.findall(r'class="hlo-magic-static hlo-magic-static-(\w+)"', html)
    return found


def test_the_timeline_displays_its_static_copy_first(shell):
    widget = MemoryTimeline(buffer_assignment(runtime.parse(ADD_MUL)))
    copy, view = shown(widget)
    assert static_id(copy["text/html"]) == widget.static_id
    assert copy["image/png"].startswith(b"\x89PNG")
    assert "data:image/png;base64," in copy["text/html"]
    assert widget.summary() in copy["text/html"] and copy["text/plain"] == widget.summary()
    assert view[WIDGET]["model_id"] == widget.model_id and set(view) == {WIDGET, "text/plain"}


def test_the_donation_panel_copy_says_what_the_panel_says(shell):
    panel = DonationPanel(DonationModel(buffer_assignment(runtime.parse(ADD_MUL))))
    panel.toggles[0].value = "donate"
    copy, view = shown(panel)
    html = copy["text/html"]
    assert static_id(html) == panel.timeline.static_id
    assert "donating x saves 128 B of peak" in html
    assert "donated: output {0} written in place" in html and "Memory (XLA" in html
    assert copy["image/png"].startswith(b"\x89PNG")
    assert view[WIDGET]["model_id"] == panel.root.model_id
    assert view["text/plain"] == panel.model.summary()


@pytest.mark.parametrize("rows", [25])
def test_a_model_sized_panel_copy_is_capped(shell, rows):
    model = DonationModel(runtime.compile(model_step(), lazy=True).buffer_assignment)
    copy = DonationPanel(model, max_rows=rows).static_copy()
    html = copy._repr_mimebundle_()["text/html"]
    assert "\u2026 224 more parameters" in html and html.count("<tr>") < 60
