"""JAX programs with complex numbers and FFTs against XLA CPU's outputs
(``data/complex``, written by ``make_complex_programs.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import runtime

from ..corpus_data import flatten, output_differences

DATA = Path(__file__).parent / "data" / "complex"
# JAX's HLO, and XLA's optimised HLO where it printed every constant
PROGRAMS = sorted(p.name[:-len(".hlo")] for p in DATA.glob("*.hlo"))
# the loop iterates a chaotic map (z^2 / 2 + c): rounding differences grow with each step
TOLERANCE = {"cx_while": 1e-4, "cx_while.opt": 1e-4}


def _outputs(data) -> list[np.ndarray]:
    keys = sorted((k for k in data.files if k.startswith("out_")), key=lambda k: int(k[4:]))
    return [data[k] for k in keys]


def test_the_programs_are_present():
    assert len([p for p in PROGRAMS if not p.endswith(".opt")]) == 7
    assert len([p for p in PROGRAMS if p.endswith(".opt")]) >= 5


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_matches_xla(name):
    data = np.load(DATA / f"{name.removesuffix('.opt')}.npz")
    args = [data[f"arg_{i}"] for i in range(sum(k.startswith("arg_") for k in data.files))]
    got = runtime.compile((DATA / f"{name}.hlo").read_text())(*args)
    problems = output_differences(flatten(got), _outputs(data), TOLERANCE.get(name, 2e-6))
    assert not problems, "\n".join(problems)
