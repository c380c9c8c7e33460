"""Scatters with duplicate indices against the sequential loop XLA's CPU backend runs: every
update applied in the updates' row-major order (a last-writer-wins ``set`` and a float sum,
whose order shows in its rounding, give that loop's bits), an update whose window does not
fit skipped whole. Each case runs as the device's target builds it (one work-item on CPUs)
and as the GPU target shares the output elements out among work-items (as many as it asks
for, and only 8, so that each owns many), on the default device: the kernels are valid
OpenCL anywhere (Oclgrind's data-race check runs the GPU strategy on the corpus)."""

import re
from dataclasses import replace

import numpy as np
import pytest

import runtime
from runtime.analyzer import analyze_verified
from runtime.execution.kernel_builds import KernelBuild
from runtime.opencl.device import get_device
from runtime.execution.executable import Executable
from runtime.target import GPU

TARGETS = {"device": None, "gpu": GPU, "gpu-8-items": replace(GPU, scatter_work_items=8)}

Case = tuple[str, list[np.ndarray], np.ndarray]     # module text, arguments, expected output

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


def compile_on(text: str, target: str) -> Executable:
    if TARGETS[target] is None:
        return runtime.compile(text)
    dev = get_device()
    analysis = analyze_verified(runtime.parse(text), dev.mem_base_addr_align, True,
                                TARGETS[target])
    exe = Executable(runtime.parse(text), analysis, dev, KernelBuild(analysis, dev)).build()
    assert re.search(r"\bown\d+ = ", exe.program.source)  # the updates are shared out
    return exe


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


def rows_case(combiner: str, width: int) -> Case:
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
    want = sequential(x, [(int(i), 0) for i in idx], [u[k:k + 1] for k in range(n)],
                      COMBINERS[combiner][1])
    return text, [x, idx.reshape(n, 1), u], want


def windows_one_dimension_case() -> Case:
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
    want = sequential(x, [(int(i), 0) for i in idx], list(u), COMBINERS["add"][1])
    return text, [x, idx.reshape(n, 1), u], want


def sorted_elements_case(combiner: str) -> Case:
    """A histogram-like scatter of scalars (no window: every element is dealt out by its
    index), indices sorted as segment ids are, long runs of one index."""
    n_out, n = 50, 600
    x = RNG.standard_normal(n_out).astype(np.float32)
    idx = np.sort(RNG.integers(-2, n_out + 2, n)).astype(np.int32)
    u = (RNG.standard_normal(n) * 1e3).astype(np.float32)
    text = scatter_module(combiner, (n_out,), f"{n},1", f"{n}",
                          "update_window_dims={}, inserted_window_dims={0}, "
                          "scatter_dims_to_operand_dims={0}, index_vector_dim=1")
    want = sequential(x, [(int(i),) for i in idx], [u[k:k + 1] for k in range(n)],
                      COMBINERS[combiner][1])
    return text, [x, idx.reshape(n, 1), u], want


def windows_both_dimensions_case() -> Case:
    """2 x 3 windows whose start the indices give along both dimensions: no window dimension
    can be split, every element is dealt out by its index."""
    rows, cols, n = 9, 11, 120
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    idx = np.stack([RNG.integers(0, rows - 1, n), RNG.integers(0, cols - 2, n)], 1).astype(np.int32)
    idx[5] = (rows - 1, cols)                      # does not fit: skipped
    u = RNG.standard_normal((n, 2, 3)).astype(np.float32)
    text = scatter_module("add", (rows, cols), f"{n},2", f"{n},2,3",
                          "update_window_dims={1,2}, inserted_window_dims={}, "
                          "scatter_dims_to_operand_dims={0,1}, index_vector_dim=1")
    want = sequential(x, [tuple(map(int, i)) for i in idx], list(u), COMBINERS["add"][1])
    return text, [x, idx, u], want


def repeated_index_cases() -> dict[str, Case]:
    """Every case once, by name (``tests.gpu_sim.runner`` runs them under Oclgrind)."""
    return {"rows add 40": rows_case("add", 40), "rows set 3": rows_case("set", 3),
            "windows along one dimension": windows_one_dimension_case(),
            "sorted elements add": sorted_elements_case("add"),
            "sorted elements set": sorted_elements_case("set"),
            "windows along both dimensions": windows_both_dimensions_case()}


def check(target: str, case: Case) -> None:
    text, args, want = case
    got = compile_on(text, target)(*args)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("combiner", ["add", "set"])
@pytest.mark.parametrize("width", [40, 64, 3])
def test_rows_scattered_with_duplicates_keep_the_sequential_order(combiner, width, target):
    check(target, rows_case(combiner, width))


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_windows_moved_along_one_dimension_and_fixed_along_another(target):
    check(target, windows_one_dimension_case())


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("combiner", ["add", "set"])
def test_elements_scattered_by_sorted_and_repeated_indices(combiner, target):
    check(target, sorted_elements_case(combiner))


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_windows_moved_along_both_dimensions_overlap_in_both(target):
    check(target, windows_both_dimensions_case())
