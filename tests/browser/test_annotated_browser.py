"""The annotated view of a JAX program in JupyterLab on a 1280 px screen (the file browser
open beside the notebook): tutorial 06's transformer step, lowered from its Python function
with JAX's debug information as ``from_jax`` takes it, shown with ``--show annotated``. With
headless Chromium the test checks what a ``%%cython -a`` user expects: a table grouping the
instructions by Python line, rows tinted by cost, and every row's Python line and
instruction inside the view's box, with nothing cut off at its right edge (an instruction
longer than its column ends in an ellipsis, whole in its tooltip, where JAX's metadata stays
too). Screenshot: ``annotated-1280.png`` in the artifacts folder."""

from __future__ import annotations

import json

import pytest

from .conftest import notebook_of

pytestmark = pytest.mark.browser

NOTEBOOK = "annotated-1280.ipynb"
LOWER = """import importlib.util
spec = importlib.util.spec_from_file_location("make_modules", "modules/make_modules.py")
made = importlib.util.module_from_spec(spec)
spec.loader.exec_module(made)
import jax, numpy as np
lowered = jax.jit(made.transformer_train_step, donate_argnums=0).lower(
    *made.transformer_inputs(np.random.default_rng(0)))
text = lowered.as_text("hlo", debug_info=True)"""
# Every row's Python cell and instruction cell: whether each lies inside the box and how far
# its content reaches past it.
CELLS = r"""() => {
  const body = document.querySelector('.hlo-annotated-body').getBoundingClientRect();
  return [...document.querySelectorAll('.hlo-annotated tr[data-instruction]')].map((row) => {
    const [, python, , instruction] = row.children;
    const code = instruction.querySelector('code');
    return { name: row.dataset.instruction, python: python.textContent,
             inside: python.getBoundingClientRect().right <= body.right + 1 &&
                     instruction.getBoundingClientRect().right <= body.right + 1,
             clipped: code.scrollWidth > code.clientWidth,
             whole: code.title.replace(/, metadata=\{[^{}]*\}/, "") === code.textContent };
  });
}"""


def test_the_annotated_view_of_a_jax_program_fits_1280_px(lab_root, lab_url, browser,
                                                          artifacts):
    (lab_root / "notebooks" / NOTEBOOK).write_text(json.dumps(notebook_of([
        "%load_ext hlo_magic",
        LOWER,
        "get_ipython().run_cell_magic('hlo', '--show annotated -o r', text)",
    ])))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{lab_url}/lab/workspaces/annotated/tree/{NOTEBOOK}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
    page.wait_for_selector("text=/\\| Idle/", timeout=60000)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    view = page.locator(".hlo-annotated")
    view.wait_for(timeout=240000)
    assert page.locator(".jp-FileBrowser").is_visible()        # JupyterLab's default layout

    # grouped by Python line, like %%cython -a
    lines = page.locator(".hlo-annotated tr[data-python-line]")
    assert lines.count() >= 5
    assert all(w.startswith("make_modules.py:") for w in
               (lines.nth(k).get_attribute("data-python-line") for k in range(lines.count())))
    tinted = page.evaluate("() => [...document.querySelectorAll('.hlo-annotated "
                           "tr[data-instruction]')].filter((r) => r.style.background"
                           ".startsWith('rgba(242, 176, 30')).length")
    assert tinted > 10

    # nothing runs off the box's right edge: no horizontal scrolling, every row's Python line
    # and instruction in view, long instructions cut with an ellipsis and whole in the tooltip
    body = page.locator(".hlo-annotated-body")
    overflow = body.evaluate("(b) => [b.scrollWidth, b.clientWidth]")
    assert overflow[0] <= overflow[1] + 1, overflow
    cells = page.evaluate(CELLS)
    assert len(cells) > 100
    assert [c["name"] for c in cells if not c["inside"]] == []
    assert sum(c["python"].startswith("make_modules.py:") for c in cells) > 50
    assert any(c["clipped"] for c in cells) and all(c["whole"] for c in cells)
    view.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "annotated-1280.png"))
    page.close()
