"""Every corpus module (.hlo and .opt.hlo) gets an assignment the checker proves sound, and
XLA's argument/output/alias figures are reproduced (they do not depend on fusion)."""

import json

import pytest

from ..conftest import corpus_dir, corpus_hlo_files
from .checked import assigned


@pytest.mark.parametrize("path", corpus_hlo_files(), ids=lambda p: p.name)
def test_corpus_assignment_is_sound(path):
    assert path.is_file(), f"corpus file missing: {path}"
    ba = assigned(path.read_text())
    entry = next(e for e in json.loads((corpus_dir() / "index.json").read_text())
                 if path.name in (e["files"]["hlo"], e["files"]["opt_hlo"]))
    xla = entry["xla"]["memory" if path.name == entry["files"]["hlo"] else "memory_jit"]
    stats = ba.memory_stats
    assert stats.argument == xla["argument"]
    assert stats.output == xla["output"]
    if not entry["buffer_donor"]:
        assert stats.alias == xla["alias"]
    live = ba.live_bytes()
    assert len(live) == len(ba.schedule.flattened)
    assert max(live) == stats.peak and live[ba.peak_step] == stats.peak
