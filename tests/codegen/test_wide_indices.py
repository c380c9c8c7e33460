"""Runtime start indices of every integer type are clamped (dynamic-slice,
dynamic-update-slice, gather) or bounds-checked (scatter) in a type that holds them, before
they are narrowed to the kernel's index type: an s64 start of -1e12 or 2^32 + 1, a u32 or
u64 start above 2^31, match XLA's CPU backend (``data/wide_index_golden.npz``, from
``make_wide_index_golden.py``), fused and unfused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import runtime

from .wide_index_cases import CASES

_GOLDEN = Path(__file__).parent / "data" / "wide_index_golden.npz"


@pytest.fixture(scope="module")
def golden():
    return np.load(_GOLDEN)


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("name", list(CASES))
def test_wide_start_indices_match_xla(golden, name, fusion):
    text, runs = CASES[name]
    exe = runtime.compile(text, fusion=fusion)
    for r, args in enumerate(runs):
        results = exe(*args)
        results = results if isinstance(results, tuple) else (results,)
        for k, value in enumerate(results):
            np.testing.assert_array_equal(np.asarray(value), golden[f"{name}/{r}/{k}"],
                                          err_msg=f"{name} run {r} output {k}")
