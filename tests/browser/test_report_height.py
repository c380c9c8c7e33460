"""The report of a model-sized module (249 parameters, 831 buffers) in Chromium at 1400 px:
short enough to read (folded tables stay closed), its answers on the first screen."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..notebook.hlo_texts import model_step
from .conftest import CHROMIUM

pytestmark = pytest.mark.browser


def test_a_model_report_is_under_2000_px_with_the_answers_on_top(browser, artifacts):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed")
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "hlo_magic")
    try:
        html = shell.run_cell_magic("hlo", "", model_step())._repr_html_()
    finally:
        shell.run_line_magic("unload_ext", "hlo_magic")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_content(f"<body style='font:13px sans-serif'>{html}</body>")
    height = page.evaluate("document.body.scrollHeight")
    answers = page.locator("th", has_text="biggest saving").bounding_box()
    page.screenshot(path=str(artifacts / "model-report.png"), full_page=True)
    page.close()
    assert height < 2000, height
    assert answers["y"] + answers["height"] < 400, answers
