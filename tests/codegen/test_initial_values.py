"""Initial values that are not their reducer's identity, read as XLA's CPU backend reads them
(jax 0.10's results): a ``reduce-window`` skips its padding rather than combining the initial
value for it, and a reduction over a dimension longer than 32 takes XLA's tree
(``passes/tree_reductions``), each window of 32 starting from the initial value, except f32
reductions of 4096 elements or more, which read it once."""

from __future__ import annotations

import numpy as np
import pytest

import runtime


def _module(et: str, op: str, shape: str, out: str, attrs: str) -> str:
    return f"""HloModule m
add {{
  a = {et}[] parameter(0)
  b = {et}[] parameter(1)
  ROOT c = {et}[] add(a, b)
}}
ENTRY e {{
  x = {et}[{shape}] parameter(0)
  z = {et}[] parameter(1)
  ROOT r = {et}[{out}] {op}(x, z), {attrs}, to_apply=add
}}
"""


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("et,dtype", [("s32", np.int32), ("f32", np.float32)])
def test_reduce_window_padding_does_not_read_the_initial_value(et, dtype, fusion):
    text = _module(et, "reduce-window", "10", "10", "window={size=3 pad=1_1}")
    got = runtime.compile(text, fusion=fusion)(np.ones(10, dtype), dtype(5))
    np.testing.assert_array_equal(np.asarray(got), [7] + [8] * 8 + [7])


@pytest.mark.parametrize("et,dtype,rows,n,want", [
    ("s32", np.int32, 3, 2048, 2048 + 5 * 67),      # 64 windows, 2 windows, the rest
    ("u32", np.uint32, 3, 1000, 1000 + 5 * 33),     # 32 windows (padded), the rest
    ("f32", np.float32, 3, 1000, 1000 + 5 * 33),
    ("s32", np.int32, 3, 20, 20 + 5),               # one window: no tree
    ("f32", np.float32, 2, 2048, 2048 + 5),         # 4096 f32 elements: read once
])
def test_a_long_reduction_reads_the_initial_value_once_per_window(et, dtype, rows, n, want):
    text = _module(et, "reduce", f"{rows},{n}", f"{rows}", "dimensions={1}")
    got = runtime.compile(text)(np.ones((rows, n), dtype), dtype(5))
    np.testing.assert_array_equal(np.asarray(got), [want] * rows)
