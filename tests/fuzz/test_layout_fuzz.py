"""The layout fuzzer on a fixed budget: random modules with random non-default layouts on
parameters, intermediates and the root (``layout_programs``), in every element type, with
constants and special values (``value_steps``), must match XLA's CPU backend, fused and
unfused. ``benchmarks/fuzz_layouts.py`` runs the same check over many more seeds; every
failure it finds becomes an HLO-text regression test beside the pass it concerns."""

import numpy as np
import pytest

from .differential import check
from .layout_programs import random_cases

SEEDS = (2, 5, 7)   # seed 2 finds a division by a constant computed as a quotient
CASES_PER_MODULE = 8


@pytest.mark.parametrize("seed", SEEDS)
def test_random_layout_modules_match_xla(seed):
    failures = check(random_cases(seed, CASES_PER_MODULE))
    assert not failures, "\n\n".join(f.report() for f in failures)


def test_the_generator_covers_what_layout_bugs_hide_in():
    """The fixed budget sees every step kind, non-default layouts, every element type,
    constants as operands, reductions from non-identity values and special inputs (a
    generator that lost them would pass for nothing)."""
    cases = [c for s in SEEDS for c in random_cases(s, CASES_PER_MODULE)]
    text = "\n".join(c.module_text() for c in cases)
    for opcode in ("dot(", "transpose(", "reduce(", "reshape(", "broadcast(", "multiply(",
                   "dynamic-update-slice(", "concatenate(", "convolution(", "gather(",
                   "scatter(", "sort(", "reduce-window(", "{0,1} transpose(", "divide(",
                   "compare(", "select(", "clamp(", "convert(", "bitcast-convert(",
                   "constant({", "to_apply=mul_", "to_apply=min_"):
        assert opcode in text, opcode
    assert "{0,1}" in text and "{1,0,2}" in text
    for etype in ("f16", "bf16", "f64", "s8", "u8", "s16", "u16", "s64", "u64", "pred"):
        assert f" {etype}[" in text, etype
    data = [p.data for c in cases for p in c.params if p.data.dtype.kind == "f"]
    flat = np.concatenate([d.astype(np.float64).ravel() for d in data])
    with np.errstate(invalid="ignore"):
        assert np.isnan(flat).any() and np.isinf(flat).any() and (np.abs(flat) > 1e6).any()
        assert ((flat != 0) & (np.abs(flat) < 1.2e-38)).any()   # a denormal
