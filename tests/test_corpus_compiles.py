"""Every module of the shared corpus (``*.hlo`` and ``*.opt.hlo``, in the index or not) goes
through ``runtime.compile`` fused and unfused, up to its generated program (the OpenCL build
is left out: ``test_corpus_run`` builds and runs the indexed programs), and either compiles
or is refused with an ``HloError`` about the module: never an internal exception, and never
an ``InternalCompilerError`` (a bug the compiler reports as one)."""

from __future__ import annotations

import pytest

import runtime
from runtime.errors import HloError, InternalCompilerError

from .conftest import corpus_dir
from .corpus_data import CORPUS

_FILES = sorted(CORPUS.glob("*.hlo"))


def test_the_corpus_has_modules():
    corpus_dir()
    assert len(_FILES) >= 100


@pytest.mark.parametrize("path", _FILES, ids=lambda p: p.name)
def test_module_compiles_or_is_refused_with_an_hlo_error(path):
    text = path.read_text()
    for fusion in (True, False):
        try:
            runtime.compile(text, fusion=fusion, lazy=True).program
        except InternalCompilerError:
            raise
        except HloError:
            pass
