"""Buffer assignments of the whole corpus are byte-for-byte those recorded in
``data/assignment_golden.json`` (see ``assignment_golden`` for how to regenerate and diff)."""

import json

import pytest

from ..conftest import corpus_dir
from .assignment_golden import GOLDEN, KINDS, corpus_files, digest, dump, key


def test_golden_covers_the_corpus():
    corpus_dir()
    want = sorted(key(n, k) for n in corpus_files() for k in KINDS)
    assert sorted(json.loads(GOLDEN.read_text())) == want


@pytest.mark.parametrize("name,kind", [(n, k) for n in corpus_files() for k in KINDS])
def test_assignment_matches_golden(name, kind):
    golden = json.loads(GOLDEN.read_text())
    assert digest(dump(name, kind)) == golden[key(name, kind)], (
        f"{name} ({kind}): the buffer assignment changed; diff the texts of "
        "`python -m tests.buffers.assignment_golden --dump DIR` before and after")
