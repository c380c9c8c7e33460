"""Every corpus program (pre-optimisation and XLA-optimised) runs on the default device and
matches XLA's CPU reference outputs within the index's per-output tolerances, both through the
fusion passes and without them (one kernel per instruction)."""

import pytest

import runtime

from .conftest import corpus_dir
from .corpus_data import CORPUS, flatten, mismatches, programs

_CASES = [(p, kind) for p in (programs() if (CORPUS / "index.json").is_file() else [])
          for kind in ("hlo", "opt_hlo") if p.entry["files"][kind]]


def test_corpus_is_present():
    corpus_dir()
    assert len(_CASES) >= 100


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("program,kind", _CASES, ids=lambda x: x.name if hasattr(x, "name") else x)
def test_program_matches_xla(program, kind, fusion):
    exe = runtime.compile(program.text(kind), fusion=fusion)
    got = flatten(exe(*program.inputs()))
    problems = mismatches(program, got)
    assert not problems, "\n".join(problems)
