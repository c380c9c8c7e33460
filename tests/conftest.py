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


@pytest.fixture(scope="session")
def corpus() -> Path:
    return corpus_dir()
