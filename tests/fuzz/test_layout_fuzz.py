"""The layout fuzzer on a fixed budget: random modules with random non-default layouts on
parameters, intermediates and the root (``layout_programs``) must match XLA's CPU backend,
fused and unfused. ``benchmarks/fuzz_layouts.py`` runs the same check over many more seeds;
every failure it finds becomes an HLO-text regression test beside the pass it concerns."""

import pytest

from .differential import check
from .layout_programs import random_cases

SEEDS = (0, 1, 2)
CASES_PER_MODULE = 8


@pytest.mark.parametrize("seed", SEEDS)
def test_random_layout_modules_match_xla(seed):
    failures = check(random_cases(seed, CASES_PER_MODULE))
    assert not failures, "\n\n".join(f.report() for f in failures)


def test_the_generator_covers_what_layout_bugs_hide_in():
    """The fixed budget sees every step kind and non-default layouts (a generator that lost
    them would pass for nothing)."""
    text = "\n".join(c.module_text() for s in SEEDS for c in random_cases(s, CASES_PER_MODULE))
    for opcode in ("dot(", "transpose(", "reduce(", "reshape(", "broadcast(", "multiply(",
                   "dynamic-update-slice(", "concatenate(", "convolution(", "gather(",
                   "scatter(", "sort(", "reduce-window(", "{0,1} transpose("):
        assert opcode in text, opcode
    assert "{0,1}" in text and "{1,0,2}" in text
