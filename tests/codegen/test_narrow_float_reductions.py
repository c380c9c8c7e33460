"""f16 and bf16 sums in XLA's order: XLA's CPU backend rounds their running value at every
step and sums windows of 32 first (``passes/tree_reductions``), so one large value followed
by 63 ones sums to neither the exact total nor the left-to-right one. The expected values are
XLA's CPU backend's (jax 0.10): 2048 + 63 ones in f16 is 2080 (left to right 2048, exact
2111, rounded once 2112); 256 + 63 ones in bf16 is 288 (256, 319, 320)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import runtime

CASES = [("f16", np.float16, 2048, 2080), ("bf16", ml_dtypes.bfloat16, 256, 288)]


def _sum(et: str, shape: str, dims: str, out: str) -> str:
    return f"""HloModule s
add {{
  a = {et}[] parameter(0)
  b = {et}[] parameter(1)
  ROOT c = {et}[] add(a, b)
}}
ENTRY e {{
  x = {et}[{shape}] parameter(0)
  z = {et}[] constant(0)
  ROOT r = {et}[{out}] reduce(x, z), dimensions={{{dims}}}, to_apply=add
}}
"""


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("et,dtype,big,want", CASES)
def test_a_row_sum_takes_xla_windows(et, dtype, big, want, fusion):
    x = np.r_[big, np.ones(63)].astype(dtype)
    got = runtime.compile(_sum(et, "64", "0", ""), fusion=fusion)(x)
    assert float(np.asarray(got)) == want


@pytest.mark.parametrize("et,dtype,big,want", CASES)
def test_a_column_sum_takes_xla_windows(et, dtype, big, want):
    x = np.stack([np.r_[big, np.ones(63)]] * 3, 1).astype(dtype)
    got = runtime.compile(_sum(et, "64,3", "0", "3"))(x)
    np.testing.assert_array_equal(np.asarray(got, np.float64), [want] * 3)
