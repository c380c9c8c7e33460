"""Shared fixtures: the shared HLO corpus (its absence fails, never skips)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("HLO_CORPUS", REPO.parent / "shared" / "corpus"))


def corpus_dir() -> Path:
    if not (CORPUS / "index.json").is_file():
        pytest.fail(f"the shared HLO corpus is missing: expected {CORPUS}/index.json "
                    "(set HLO_CORPUS to its location)")
    return CORPUS


def corpus_index() -> list[dict]:
    return json.loads((corpus_dir() / "index.json").read_text())


def corpus_hlo_files() -> list[Path]:
    """Every .hlo and .opt.hlo named by the index (collected at import: fails loudly if absent)."""
    if not (CORPUS / "index.json").is_file():
        return [CORPUS / "MISSING-CORPUS.hlo"]
    files = []
    for entry in json.loads((CORPUS / "index.json").read_text()):
        for key in ("hlo", "opt_hlo"):
            if entry["files"].get(key):
                files.append(CORPUS / entry["files"][key])
    return files


@pytest.fixture(autouse=True)
def no_internal_compiler_errors(request, monkeypatch):
    """Fail a test in which the compiler raised an ``InternalCompilerError`` (a bug it reports
    to users as an ``HloError``), even one a ``pytest.raises(HloError)`` caught, unless the
    test is marked ``internal_error`` (the tests of that report itself)."""
    from runtime.errors import InternalCompilerError

    raised: list[InternalCompilerError] = []
    original = InternalCompilerError.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        raised.append(self)

    monkeypatch.setattr(InternalCompilerError, "__init__", record)
    yield
    if raised and request.node.get_closest_marker("internal_error") is None:
        pytest.fail(f"the compiler raised {raised[0]!r} (its cause: {raised[0].__cause__!r})",
                    pytrace=False)


@pytest.fixture(scope="session")
def corpus() -> Path:
    return corpus_dir()


def _targets_with(**settings):
    """Every device's target with ``settings`` replaced (part of the program cache's key),
    the compile caches cleared around it. Its own patch, which a test's
    ``monkeypatch.undo()`` leaves in place."""
    from dataclasses import replace

    from runtime import compiler
    from runtime.target import Target

    chosen = Target.for_device
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Target, "for_device",
                      staticmethod(lambda device: replace(chosen(device), **settings)))
        compiler.clear_cache()
        yield
    compiler.clear_cache()


@pytest.fixture
def unchained():
    """Launch chaining off (``codegen.launch_chaining``), for tests that count the launches
    a pass or another plan transformation leaves: ``chain_max_work=0``, each kernel keeps
    its own launch."""
    yield from _targets_with(chain_max_work=0)


@pytest.fixture
def host_loops():
    """Device loops off (``codegen.device_loops``), for tests of how the host runs a while
    loop (its reads of the predicate, its trip count): ``loop_max_work=0``."""
    yield from _targets_with(loop_max_work=0)
