"""A notebook saved with its outputs but no widget state (what a colleague receives), opened
in JupyterLab: each widget output shows its static copy (the summary and the figure) instead
of nothing but "Error displaying widget"."""

from __future__ import annotations

import os

import pytest

from ..conftest import REPO
from ..notebook.hlo_texts import ADD_MUL
from .conftest import wait_for_static_copies

pytestmark = pytest.mark.browser

NOTEBOOK = "saved-without-widget-state.ipynb"


def test_a_reopened_notebook_shows_the_static_copies(lab_root, lab_url, browser, artifacts,
                                                      tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3",
                                                           "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("%load_ext hlo_magic"),
                nbformat.v4.new_code_cell(f"%%hlo --show timeline -o r\n{ADD_MUL}"),
                nbformat.v4.new_code_cell("r.panel()")]
    NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=False).execute()
    nbformat.write(nb, lab_root / "notebooks" / NOTEBOOK)

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{lab_url}/lab/workspaces/saved/tree/{NOTEBOOK}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
    copies = page.locator(".hlo-magic-static")
    copies.first.wait_for(timeout=30000)
    wait_for_static_copies(page, 2)
    timeline, panel = copies.nth(0), copies.nth(1)
    # textContent: JupyterLab skips rendering cells out of view, which empties innerText
    assert "Donation: add_mul" in panel.text_content()
    assert "total allocated 528 B" in panel.text_content()
    timeline.scroll_into_view_if_needed()
    assert timeline.is_visible() and "peak 528 B at step 4" in timeline.text_content()
    page.wait_for_function("(img) => img.complete && img.naturalWidth > 100",
                           arg=timeline.locator("img").element_handle(), timeout=10000)
    page.screenshot(path=str(artifacts / "saved-notebook-static-copies.png"), full_page=True)
    page.close()
