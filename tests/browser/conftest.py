"""JupyterLab on loopback and headless Debian Chromium driven by Playwright.

JupyterLab serves a temporary copy of the tutorial notebooks (so the repository's copies are
never autosaved with outputs) with no token, in temporary Jupyter, IPython and PoCL
directories. The browser is the system's ``/usr/bin/chromium`` (no Playwright download).
Every test here is marked ``browser`` and is skipped, never passed, when JupyterLab, Playwright
or Chromium is missing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ..conftest import REPO

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory) -> Path:
    """The temporary folder JupyterLab runs in; it serves ``lab_root / "notebooks"``."""
    return tmp_path_factory.mktemp("lab")


@pytest.fixture(scope="session")
def lab_url(lab_root):
    lab = shutil.which("jupyter-lab", path=os.path.dirname(sys.executable))
    if not lab or not os.path.exists(CHROMIUM):
        pytest.skip("jupyterlab or /usr/bin/chromium not installed")
    pytest.importorskip("playwright")
    root = lab_root
    env = dict(os.environ)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        env[name] = str(root / name.lower())
    env["POCL_CACHE_DIR"] = str(root / "pocl")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    # Silence the "official Jupyter news?" toast: it overlays the page.
    labconfig = root / "jupyter_config_dir" / "labconfig"
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(
        '{"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": true}}')
    notebooks = root / "notebooks"
    shutil.copytree(REPO / "notebooks", notebooks)
    port = _free_port()
    log_path = root / "lab.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [lab, "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={port}", "--IdentityProvider.token=", "--ServerApp.password=",
             f"--ServerApp.root_dir={notebooks}",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/api/status", timeout=2)
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.terminate()
                pytest.fail(f"jupyter lab did not start; see {log_path}")
            time.sleep(0.3)
    yield url
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where browser tests leave their screenshots for CI to keep: ``$HLO_TEST_ARTIFACTS``
    or ``test-artifacts/browser`` in the repository (ignored by git)."""
    folder = Path(os.environ.get("HLO_TEST_ARTIFACTS", REPO / "test-artifacts")) / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def screenshot_path(request, artifacts) -> Path:
    """Where the test leaves its screenshot: ``$SMOKE_SCREENSHOT`` or the artifacts folder."""
    default = artifacts / f"{request.node.name}.png"
    return Path(os.environ.get("SMOKE_SCREENSHOT", default))


def notebook_of(cells: list[str]) -> dict:
    """A notebook (nbformat 4 JSON) of code cells with these sources, not yet run."""
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {
                "kernelspec": {"name": "python3", "display_name": "Python 3",
                               "language": "python"}},
            "cells": [{"cell_type": "code", "id": f"cell{n}", "metadata": {},
                       "execution_count": None, "outputs": [], "source": source}
                      for n, source in enumerate(cells)]}


def wait_for_static_copies(page, count: int, timeout_ms: int = 60000) -> None:
    """Wait until a reopened notebook shows ``count`` static copies, scrolling its panel to
    the end at each poll: JupyterLab renders only the cells in view, and re-renders them
    while the notebook opens, so scrolling to one cell element can hit a detached one."""
    page.wait_for_function(
        "(count) => { const panel = document.querySelector('.jp-WindowedPanel-outer');"
        " if (panel) panel.scrollTop = panel.scrollHeight;"
        " return document.querySelectorAll('.hlo-magic-static').length == count; }",
        arg=count, timeout=timeout_ms, polling=500)
