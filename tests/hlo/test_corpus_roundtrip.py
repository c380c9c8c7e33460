"""Every corpus module parses, verifies, and prints text that re-parses to the same text."""

import pytest

import runtime
from runtime.hlo.parser import parse

from ..conftest import corpus_hlo_files


@pytest.mark.parametrize("path", corpus_hlo_files(), ids=lambda p: p.name)
def test_parse_verify_roundtrip(path):
    assert path.is_file(), f"corpus file missing: {path}"
    module = runtime.parse(path.read_text())
    printed = module.to_text()
    again = parse(printed)
    assert again.to_text() == printed
    assert len(list(again.instructions())) == len(list(module.instructions()))
    assert again.entry.root.shape == module.entry.root.shape
