"""Every tutorial notebook executes headless through nbclient and its own assertions hold.

nbclient reads each cell's execute_reply status, so a cell whose magic raises ``UsageError``
fails here (nbmake and nbval would pass it: they only look for ``error`` outputs). Cells that
fail on purpose carry the ``raises-exception`` tag, and this test checks that they do fail.
The kernel runs with the notebook's directory as its working directory and with PoCL's cache,
hlo-magic's cache, Jupyter's data directory and IPython's directory in a temporary place
(so every build is cold), and nothing the OpenCL compiler prints may reach a cell.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from ..conftest import CORPUS, REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
# What clang and PoCL print: "5 warnings generated.", "<source>:3:7: warning: ...".
COMPILER_CHATTER = re.compile(r"warnings? generated|:\d+:\d+: (?:warning|note):")


@pytest.fixture(scope="session")
def kernel_environment(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("notebook-kernels")
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {"POCL_CACHE_DIR": str(root / "pocl"), "HLO_MAGIC_CACHE": str(root / "hlo-magic"),
            "JUPYTER_DATA_DIR": str(root / "jupyter-data"), "IPYTHONDIR": str(root / "ipython"),
            "PYTHONPATH": path, "HLO_CORPUS": str(CORPUS)}


def test_the_tutorials_are_all_there():
    assert [p.name for p in NOTEBOOKS] == [
        "01-quickstart.ipynb", "02-aliasing-and-donation.ipynb", "03-buffer-assignment.ipynb",
        "04-custom-calls.ipynb", "05-from-jax.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path: Path, kernel_environment, monkeypatch):
    for name, value in kernel_environment.items():
        monkeypatch.setenv(name, value)
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), \
        f"{path.name} was committed with outputs; clear them"
    assert nb.metadata.kernelspec.name == "python3"
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    chatter = [o.text for cell in code for o in cell.outputs
               if o.output_type == "stream" and COMPILER_CHATTER.search(o.text)]
    assert not chatter, f"{path.name}: the OpenCL compiler printed into cells: {chatter}"
    for cell in code:
        failed = any(o.output_type == "error" for o in cell.outputs)
        expected = "raises-exception" in cell.metadata.get("tags", [])
        assert failed == expected, (f"{path.name}: cell {cell.id} "
                                    f"{'did not fail' if expected else 'failed'}")
