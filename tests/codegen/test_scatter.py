"""Scatters with duplicate indices against the sequential loop XLA's CPU backend runs: every
update applied in the updates' row-major order (a last-writer-wins ``set`` and a float sum,
whose order shows in its rounding, give that loop's bits), an update whose window does not
fit skipped whole."""

import numpy as np
import pytest

import runtime

RNG = np.random.default_rng(5)

COMBINERS = {
    "add": ("a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)",
            lambda old, new: np.float32(old + new)),
    "set": ("a = f32[] parameter(0)\n  ROOT b = f32[] parameter(1)", lambda old, new: new),
}


def scatter_module(combiner: str, table: tuple[int, ...], index_rank: str, updates: str,
                   dims: str) -> str:
    shape = ",".join(map(str, table))
    return f"""HloModule sc
comb {{
  {COMBINERS[combiner][0]}
}}
ENTRY e {{
  x = f32[{shape}] parameter(0)
  i = s32[{index_rank}] parameter(1)
  u = f32[{updates}] parameter(2)
  ROOT s = f32[{shape}] scatter(x, i, u), {dims}, to_apply=comb
}}"""


def sequential(x: np.ndarray, starts: list[tuple[int, ...]], windows: list[np.ndarray],
               combine) -> np.ndarray:
    """XLA's loop: each update's window in turn, element by element, skipped where it does
    not fit."""
    out = x.copy()
    for start, window in zip(starts, windows):
        if any(s < 0 or s + n > d for s, n, d in zip(start, window.shape, out.shape)):
            continue
        for pos in np.ndindex(window.shape):
            at = tuple(s + p for s, p in zip(start, pos))
            out[at] = combine(out[at], window[pos])
    return out


@pytest.mark.parametrize("combiner", ["add", "set"])
@pytest.mark.parametrize("width", [40, 64, 3])
def test_rows_scattered_with_duplicates_keep_the_sequential_order(combiner, width):
    """A segment sum (or an embedding gradient): the indices pick a row, each update covers
    all of its columns; duplicates and an out-of-range index among them."""
    rows, n = 30, 200
    x = RNG.standard_normal((rows, width)).astype(np.float32)
    idx = RNG.integers(0, rows, n).astype(np.int32)
    idx[7], idx[50] = rows, -1                     # skipped
    u = (RNG.standard_normal((n, width)) * 1e3).astype(np.float32)
    text = scatter_module(combiner, (rows, width), f"{n},1", f"{n},{width}",
                          "update_window_dims={1}, inserted_window_dims={0}, "
                          "scatter_dims_to_operand_dims={0}, index_vector_dim=1")
    got = runtime.compile(text)(x, idx.reshape(n, 1), u)
    want = sequential(x, [(int(i), 0) for i in idx], [u[k:k + 1] for k in range(n)],
                      COMBINERS[combiner][1])
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_windows_moved_along_one_dimension_and_fixed_along_another():
    """Windows of 3 x 20 whose start the indices give along the first dimension only, so that
    updates overlap in part."""
    rows, width, n = 12, 20, 40
    x = RNG.standard_normal((rows, width)).astype(np.float32)
    idx = RNG.integers(0, rows - 2, n).astype(np.int32)
    idx[3] = rows - 2 + 1                          # does not fit: skipped
    u = RNG.standard_normal((n, 3, width)).astype(np.float32)
    text = scatter_module("add", (rows, width), f"{n},1", f"{n},3,{width}",
                          "update_window_dims={1,2}, inserted_window_dims={}, "
                          "scatter_dims_to_operand_dims={0}, index_vector_dim=1")
    got = runtime.compile(text)(x, idx.reshape(n, 1), u)
    want = sequential(x, [(int(i), 0) for i in idx], list(u), COMBINERS["add"][1])
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
