"""Smoke test in a real browser: run notebook 02 in JupyterLab, click a donation toggle, and
see the kernel-side handler change the panel (the "what changed" line, the parameter's status),
then press "donate none"."""

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
    status = page.locator(".widget-label", has_text="not donated").first
    status.wait_for(timeout=30000)
    page.locator(".hlo-timeline").first.wait_for(timeout=30000)     # the interactive figure
    # the second row (g) cannot be donated: its buttons are disabled
    assert toggles.nth(1).locator("button").first.is_disabled()
    toggles.first.locator("button", has_text="donate").click()
    page.wait_for_selector("text=/donating w saves 4\\.0 MiB of peak/", timeout=30000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.widget-label')].some("
        "e => e.innerText.includes('donated: output {} written in place'))", timeout=30000)
    page.locator(".widget-button", has_text="donate none").click()
    page.wait_for_selector("text=/keeping every optional parameter costs 4\\.0 MiB/",
                           timeout=30000)
    page.screenshot(path=str(screenshot_path))
    page.close()
