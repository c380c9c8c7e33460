"""JAX's argmax and argmin reductions (the reducer ``lax.argmax`` emits, over an iota) against
the reducer applied in sequence, bit for bit, on both outputs: NaNs of both signs (the first
wins), ties (the lowest index), signed zeros (the value of the last zero), rows of -inf,
rows shorter and longer than a vector. On targets with vector lanes the row goes through
lane accumulators (``reduction._argminmax_lanes``); a reducer that is not JAX's (a total-order
compare) or indices that are not an iota keep the sequential loop, with the same results."""

import numpy as np
import pytest

import runtime
from runtime.analyzer import analyze_verified
from runtime.execution.kernel_builds import KernelBuild
from runtime.opencl.device import get_device
from runtime.execution.executable import Executable
from runtime.target import GPU, Target

RNG = np.random.default_rng(3)


def argminmax_module(rows: int, n: int, direction: str, init: str = "-inf",
                     order: str = "", indices: str = "iota") -> str:
    index_input = ("  i1 = s32[{n}]{{0}} iota(), iota_dimension=0\n"
                   "  i = s32[{rows},{n}]{{1,0}} broadcast(i1), dimensions={{1}}"
                   if indices == "iota" else "  i = s32[{rows},{n}]{{1,0}} parameter(1)")
    return f"""HloModule am
reducer {{
  v = f32[] parameter(0)
  w = f32[] parameter(2)
  better = pred[] compare(v, w), direction={direction}{order}
  isnan = pred[] compare(v, v), direction=NE
  pick = pred[] or(better, isnan)
  value = f32[] select(pick, v, w)
  eq = pred[] compare(v, w), direction=EQ
  i = s32[] parameter(1)
  j = s32[] parameter(3)
  lt = pred[] compare(i, j), direction=LT
  tie = pred[] and(eq, lt)
  first = pred[] or(pick, tie)
  index = s32[] select(first, i, j)
  ROOT r = (f32[], s32[]) tuple(value, index)
}}
ENTRY e {{
  x = f32[{rows},{n}]{{1,0}} parameter(0)
{index_input.format(rows=rows, n=n)}
  v0 = f32[] constant({init})
  i0 = s32[] constant(0)
  ROOT r = (f32[{rows}]{{0}}, s32[{rows}]{{0}}) reduce(x, i, v0, i0), dimensions={{1}}, to_apply=reducer
}}"""


def total_order_key(v: np.float32) -> int:
    bits = int(np.array(v, np.float32).view(np.int32))
    return bits ^ 0x7FFFFFFF if bits < 0 else bits


def sequential(x: np.ndarray, indices: np.ndarray, direction: str, init: float,
               total: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The reducer applied element after element, accumulator first (XLA's loop); ``total``:
    its ordering compare is a total-order one."""
    values, positions = [], []
    for row, row_indices in zip(x, indices):
        v, i = np.float32(init), np.int32(0)
        for w, j in zip(row, row_indices):
            a, b = (total_order_key(v), total_order_key(w)) if total else (v, w)
            better = a > b if direction == "GT" else a < b
            pick = better or v != v
            v, i = (v if pick else w), (i if pick or (v == w and i < j) else j)
        values.append(v)
        positions.append(i)
    return np.array(values, np.float32), np.array(positions, np.int32)


def rows_of(rows: int, n: int) -> np.ndarray:
    x = RNG.standard_normal((rows, n)).astype(np.float32)
    x[0, n // 3], x[0, n - 1] = np.nan, -np.nan                    # first NaN wins
    x[1, [2, n // 2]] = -np.nan, np.nan
    x[2] = np.round(x[2])                                          # many ties
    x[3] = np.where(RNG.random(n) < 0.5, 0.0, -0.0) * (RNG.random(n) < 0.7) - \
        (RNG.random(n) < 0.3) * 5                                  # zeros of both signs win
    x[4] = -np.inf
    x[5] = np.where(RNG.random(n) < 0.5, np.inf, -np.inf)
    x[6, [k % n for k in (37, 53, 69)]] = -np.nan, np.nan, -np.nan   # NaNs in one lane
    return x


def compile_for_gpu(text: str) -> Executable:
    """The GPU target's kernels (a work-group a row) on the default device: valid OpenCL
    anywhere (Oclgrind runs them as a GPU's in ``tests/gpu_sim``)."""
    dev = get_device()
    analysis = analyze_verified(runtime.parse(text), dev.mem_base_addr_align, True, GPU)
    return Executable(runtime.parse(text), analysis, dev, KernelBuild(analysis, dev)).build()


def check(text: str, x: np.ndarray, indices: np.ndarray, direction: str, init: float,
          index_argument: bool = False, total: bool = False,
          gpu: bool = False) -> runtime.Executable:
    exe = compile_for_gpu(text) if gpu else runtime.compile(text)
    args = (x, indices) if index_argument else (x,)
    got_values, got_indices = exe(*args)
    want_values, want_indices = sequential(x, indices, direction, init, total)
    np.testing.assert_array_equal(np.asarray(got_indices), want_indices)
    np.testing.assert_array_equal(np.asarray(got_values).view(np.uint32),
                                  want_values.view(np.uint32))
    return exe


@pytest.mark.parametrize("direction", ["GT", "LT"])
@pytest.mark.parametrize("n", [8192, 1000, 17, 16, 8, 5, 3])
def test_argminmax_matches_the_sequential_reducer(direction, n):
    rows = 8
    x = rows_of(rows, n)
    indices = np.broadcast_to(np.arange(n, dtype=np.int32), (rows, n))
    exe = check(argminmax_module(rows, n, direction), x, indices, direction, -np.inf)
    lanes = Target.for_device(get_device()).reduction.lanes
    assert ("besti" in exe.program.source) == (lanes > 1 and n >= 4)    # vectors of 4 or more


@pytest.mark.parametrize("direction", ["GT", "LT"])
@pytest.mark.parametrize("n", [8192, 1000, 40, 32])
def test_argminmax_by_work_groups_matches_the_sequential_reducer(direction, n):
    """The GPU target's work-group a row: strided partials in order, a tree of keys."""
    rows = 8
    x = rows_of(rows, n)
    indices = np.broadcast_to(np.arange(n, dtype=np.int32), (rows, n))
    exe = check(argminmax_module(rows, n, direction), x, indices, direction, -np.inf, gpu=True)
    assert "barrier(CLK_LOCAL_MEM_FENCE)" in exe.program.source


@pytest.mark.parametrize("gpu", [False, True])
@pytest.mark.parametrize("direction", ["GT", "LT"])
def test_a_zero_initial_value_and_zero_rows(direction, gpu):
    """Rows whose result is the initial value's +0 unless a -0 comes later."""
    rows, n = 6, 100
    x = -np.abs(RNG.standard_normal((rows, n))).astype(np.float32) - 1
    if direction == "LT":
        x = -x
    x[1, 40], x[2, [10, 90]], x[3, 99] = -0.0, [-0.0, 0.0], -0.0
    indices = np.broadcast_to(np.arange(n, dtype=np.int32), (rows, n))
    check(argminmax_module(rows, n, direction, init="0"), x, indices, direction, 0.0, gpu=gpu)


def test_reductions_that_are_not_order_free_keep_the_sequential_loop():
    """A total-order compare, or indices read from memory (any order, repeats): no lanes."""
    rows, n = 8, 200
    x = rows_of(rows, n)
    iota = np.broadcast_to(np.arange(n, dtype=np.int32), (rows, n))
    exe = check(argminmax_module(rows, n, "GT", order=", type=TOTALORDER"), x, iota, "GT",
                -np.inf, total=True)
    assert "besti" not in exe.program.source
    shuffled = RNG.integers(0, 50, (rows, n)).astype(np.int32)
    exe = check(argminmax_module(rows, n, "GT", indices="parameter"), x, shuffled, "GT",
                -np.inf, index_argument=True)
    assert "besti" not in exe.program.source
