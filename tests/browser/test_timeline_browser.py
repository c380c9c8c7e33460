"""A whole-model report in a real browser: JupyterLab runs a notebook that shows a transformer
training step (``data/train_step.hlo``, 200+ buffers) with ``--show timeline``; the test finds
the largest buffer live at the peak in the interactive timeline, hovers it and reads its
details (name, instruction, shape, size, allocation, offset, live range, all checked against
the buffer assignment computed here), then donates a parameter in the donation panel and sees
the kernel-side handler say what that saved. Screenshots of both go to the artifacts folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import runtime
from hlo_magic.donation import DonationModel, describe_parameters
from hlo_magic.formatting import format_bytes
from runtime.pipeline import run as run_pipeline
from runtime import reassign

from .conftest import notebook_of

pytestmark = pytest.mark.browser

MODULE = Path(__file__).with_name("data") / "train_step.hlo"
NOTEBOOK = "whole-model-timeline.ipynb"
VIEW = "document.querySelector('.hlo-timeline').parentElement.hloTimeline"


@pytest.fixture(scope="module")
def declared():
    """The module's plan as compiled: its passes, PoCL's 128-byte alignment."""
    return run_pipeline(runtime.parse(MODULE.read_text()), alignment=128)


def test_hover_a_buffer_of_a_whole_model_then_donate(lab_root, lab_url, browser, declared,
                                                     artifacts):
    plan = reassign(declared, frozenset())       # what %%hlo shows without --donate
    peak_buffer = plan.live_at_peak()[0]
    params = describe_parameters(declared)
    donatable = max((p for p in params if p.blocked is None and not p.must_alias),
                    key=lambda p: (p.size, -p.number))
    expected_change = DonationModel(plan, frozenset()).set_donated(donatable.number, True)
    notebook = lab_root / "notebooks" / NOTEBOOK
    notebook.write_text(json.dumps(notebook_of([
        "%load_ext hlo_magic\n%config HloMagics.max_table_rows = 4",
        f"module = open({str(MODULE)!r}).read()\n"
        "get_ipython().run_cell_magic('hlo', '--show timeline -o r', module)",
        "r.panel()",
    ])))
    assert len(plan.buffers()) > 150

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{lab_url}/lab/workspaces/whole-model/tree/{NOTEBOOK}")    # a fresh layout
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
    page.wait_for_selector("text=/\\| Idle/", timeout=60000)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    timeline = page.locator(".hlo-timeline")
    timeline.wait_for(timeout=180000)
    timeline.scroll_into_view_if_needed()
    page.wait_for_function("() => [...document.querySelectorAll('.hlo-magic-static')]"
                           ".every((e) => e.offsetParent === null)", timeout=30000)
    status = page.locator(".hlo-tl-status")
    page.wait_for_function("(el) => el.textContent.includes('buffers')",
                           arg=status.element_handle(), timeout=30000)
    assert f"peak {format_bytes(plan.peak)} at step {plan.peak_step}" in status.inner_text()

    # find the largest buffer live at the peak by name (zooms to it), then hover it
    page.fill(".hlo-tl-search", peak_buffer.name)
    page.press(".hlo-tl-search", "Enter")
    rect = page.evaluate(f"{VIEW}.rectOf({json.dumps(peak_buffer.name)})")
    assert rect["visible"], rect
    page.mouse.move(rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2)
    tooltip = page.locator(".hlo-tl-tooltip")
    tooltip.wait_for(state="visible", timeout=10000)
    text = tooltip.inner_text()
    value = peak_buffer.buffer.first
    for expected in (peak_buffer.name, f"{value.instruction.name} ({value.instruction.opcode})",
                     value.shape.to_text(False), f"{format_bytes(peak_buffer.size)} "
                     f"({peak_buffer.size} B)", f"#{peak_buffer.allocation} ",
                     f"{peak_buffer.offset} B",
                     f"steps {peak_buffer.live.start}\u2013{peak_buffer.live.end}"):
        assert expected in text, (expected, text)
    timeline.screenshot(path=str(artifacts / "timeline-hover.png"))

    # donate the largest donatable parameter in the panel
    toggles = page.locator(".widget-toggle-buttons")
    toggles.nth(donatable.number).scroll_into_view_if_needed()
    toggles.nth(donatable.number).locator("button", has_text="donate").click()
    page.wait_for_function(
        "(want) => [...document.querySelectorAll('.hlo-donation-change')].some("
        "e => e.textContent.includes(want))", arg=expected_change, timeout=60000)
    panel = page.locator(".widget-vbox", has=page.locator(".widget-toggle-buttons")).first
    page.locator(".hlo-donation-change", has_text=expected_change).scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "donation-toggled.png"))
    assert f"donating {donatable.name}" in panel.inner_text()

    # running the report's cell again replaces its outputs: one report, one live timeline
    cell = page.locator(".jp-Cell").nth(1)
    prompt = cell.locator(".jp-InputPrompt").inner_text()
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    page.wait_for_function("([cell, old]) => { const p = cell.querySelector('.jp-InputPrompt')"
                           ".textContent; return p !== old && !p.includes('*') && "
                           "cell.querySelector('.hlo-timeline'); }",
                           arg=[cell.element_handle(), prompt], timeout=120000)
    assert cell.locator(".hlo-magic-report").count() == 1
    assert cell.locator(".hlo-timeline").count() == 1
    page.close()
