"""Every tutorial notebook executes headless through nbclient and its own assertions hold.

nbclient reads each cell's execute_reply status, so a cell whose magic raises ``UsageError``
fails here (nbmake and nbval would pass it: they only look for ``error`` outputs). Cells that
fail on purpose carry the ``raises-exception`` tag, and this test checks that they do fail.
Each notebook runs from a copy of ``notebooks/`` in a temporary directory, as a clone or an
install without the shared corpus would: no ``../shared`` above it and no ``HLO_CORPUS``, so a
tutorial that reads anything the project does not ship fails here. The kernel runs with that
copy as its working directory and with PoCL's cache, hlo-magic's cache, Jupyter's data
directory and IPython's directory in a temporary place (so every build is cold), and nothing
the OpenCL compiler prints may reach a cell.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from ..conftest import REPO

_MODULE_FILE = re.compile(r"modules/([\w.-]+\.(?:hlo|npz|json))")
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
# What clang and PoCL print: "5 warnings generated.", "<source>:3:7: warning: ...".
COMPILER_CHATTER = re.compile(r"warnings? generated|:\d+:\d+: (?:warning|note):")


@pytest.fixture(scope="session")
def kernel_environment(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("notebook-kernels")
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {"POCL_CACHE_DIR": str(root / "pocl"), "HLO_MAGIC_CACHE": str(root / "hlo-magic"),
            "JUPYTER_DATA_DIR": str(root / "jupyter-data"), "IPYTHONDIR": str(root / "ipython"),
            "PYTHONPATH": path}


@pytest.fixture(scope="session")
def standalone_notebooks(tmp_path_factory) -> Path:
    """A copy of ``notebooks/`` with nothing of the repository or ``/work/shared`` beside it."""
    copy = tmp_path_factory.mktemp("clone") / "notebooks"
    shutil.copytree(REPO / "notebooks", copy)
    assert not (copy.parent / "shared").exists() and not (copy.parent.parent / "shared").exists()
    return copy


def test_the_tutorials_are_all_there():
    assert [p.name for p in NOTEBOOKS] == [
        "01-quickstart.ipynb", "02-aliasing-and-donation.ipynb", "03-buffer-assignment.ipynb",
        "04-custom-calls.ipynb", "05-from-jax.ipynb", "06-transformer-memory.ipynb",
        "07-sharding.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_read_only_what_the_project_ships(path: Path):
    text = path.read_text()
    assert "../shared" not in text and "/shared/" not in text and "HLO_CORPUS" not in text, \
        path.name
    for name in set(_MODULE_FILE.findall(text)):
        assert (REPO / "notebooks" / "modules" / name).is_file(), f"{path.name} reads {name}"


def execute(path: Path) -> None:
    """Run every cell; cells tagged ``raises-exception`` must fail, all others must not."""
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
    return nb


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path: Path, kernel_environment, standalone_notebooks, monkeypatch):
    for name, value in kernel_environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("HLO_CORPUS", raising=False)
    execute(standalone_notebooks / path.name)


HIDE_JAX = """import sys


class HideJax:
    \"\"\"Installed by the test as sitecustomize: the kernel behaves as if JAX were absent.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("jax", "jaxlib"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, HideJax())
"""


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if "jax" in p.read_text().lower()],
                         ids=lambda p: p.stem)
def test_notebooks_teach_without_jax(path: Path, kernel_environment, standalone_notebooks,
                                     tmp_path, monkeypatch):
    """The JAX cells fall back to the text JAX printed when the tutorial was written."""
    (tmp_path / "sitecustomize.py").write_text(HIDE_JAX)
    for name, value in kernel_environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join((str(tmp_path),
                                                      kernel_environment["PYTHONPATH"])))
    nb = execute(standalone_notebooks / path.name)
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.outputs)
    if "HAVE_JAX" in path.read_text():
        assert "jax installed: False" in printed


_CODE_SPAN = re.compile(r"`[^`]*`")
_NUMBER = re.compile(r"(?<![\w.\[{-])(\d+(?:\.\d+)?)(?![\w.]*\])")
_NOT_A_CLAIM = re.compile(r"^\s*\d+[.–-]|notebook \d+|\d+ · ")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_number_the_prose_states_is_asserted(path: Path):
    """A number in a tutorial's text (outside code spans, headings and list markers) must
    appear in an ``assert`` of the same notebook, so the text cannot drift from the output."""
    nb = nbformat.read(path, as_version=4)
    asserted = "\n".join(line for c in nb.cells if c.cell_type == "code"
                         for line in c.source.splitlines() if "assert" in line)
    unasserted = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            if line.startswith("#"):
                continue
            text = _NOT_A_CLAIM.sub(" ", _CODE_SPAN.sub(" ", line))
            for number in _NUMBER.findall(text):
                if float(number) >= 2 and not re.search(rf"(?<![\w.]){re.escape(number)}(?![\w.])",
                                                        asserted):
                    unasserted.append(f"{cell.id}: {number} in {line.strip()!r}")
    assert not unasserted, "\n".join(unasserted)
