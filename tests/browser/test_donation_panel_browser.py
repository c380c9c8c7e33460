"""Smoke test in a real browser: run notebook 02 in JupyterLab, click a donation toggle, and
see the kernel-side handler change the panel (the "what changed" line, the report, the figure)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

NOTEBOOK = "02-aliasing-and-donation.ipynb"


def test_clicking_donate_redraws_the_report(lab_url, browser, screenshot_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{lab_url}/lab/tree/{NOTEBOOK}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
    page.wait_for_selector("text=/\\| Idle/", timeout=60000)      # status bar: kernel ready
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    toggles = page.locator(".widget-toggle-buttons")
    toggles.first.wait_for(timeout=120000)
    panel_report = page.locator(".widget-html", has_text="this plan").first
    panel_report.wait_for(timeout=30000)
    assert "not donated" in panel_report.inner_text()
    image = page.locator(".widget-image").first
    before = image.get_attribute("src")
    # the second row (g) cannot be donated: its buttons are disabled
    assert toggles.nth(1).locator("button").first.is_disabled()
    toggles.first.locator("button", has_text="donate").click()
    page.wait_for_selector("text=/donating w saves 4\\.0 MiB/", timeout=30000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.widget-html')].some("
        "e => e.innerText.includes('donated: output {} written in place'))", timeout=30000)
    page.wait_for_function(
        "(old) => { const i = document.querySelector('.widget-image');"
        " return i && i.getAttribute('src') !== old; }", arg=before, timeout=30000)
    page.screenshot(path=str(screenshot_path))
    page.close()
