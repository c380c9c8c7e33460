"""The top-k kernel against a stable sort by XLA's total order: NaNs of both signs, signed
zeros and ties (the lower index first), rows shorter and longer than a vector, k larger than
a vector; f32 and s32 rows pass over vectors that cannot enter the k best, other types
compare element by element."""

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.opencl.device import get_device
from runtime.target import Target

RNG = np.random.default_rng(11)


def topk_module(et: str, rows: int, n: int, k: int, largest: bool, extra: str = "") -> str:
    return f"""HloModule tk
ENTRY e {{
  x = {et}[{rows},{n}]{{1,0}} parameter(0)
  ROOT t = ({et}[{rows},{k}]{{1,0}}, s32[{rows},{k}]{{1,0}}) topk(x), k={k}, largest={str(largest).lower()}{extra}
}}"""


def order_keys(x: np.ndarray) -> np.ndarray:
    """Keys whose order is XLA's total order of the values (floats: -NaN < -inf < -0 < +0)."""
    if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16:
        bits = x.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    return x.astype(np.int64)


def values(dtype, rows: int, n: int) -> np.ndarray:
    x = (RNG.standard_normal((rows, n)) * 10).astype(dtype)
    if np.dtype(dtype).kind == "f" or dtype == ml_dtypes.bfloat16:
        x[0, n // 3] = np.nan
        x[0, n - 1] = -np.nan
        x[1, 2] = -0.0
        x[1, n // 2] = 0.0
    x[2] = x[2] // 4 * 4                           # many ties
    return x


@pytest.mark.parametrize("et, dtype, skips", [("f32", np.float32, True), ("s32", np.int32, True),
                                              ("bf16", ml_dtypes.bfloat16, False)])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("n, k", [(2048, 8), (1000, 5), (40, 8), (17, 16), (300, 20)])
def test_topk_is_a_stable_sort_prefix_by_total_order(et, dtype, skips, largest, n, k):
    rows = 4
    x = values(dtype, rows, n)
    exe = runtime.compile(topk_module(et, rows, n, k, largest))
    got_values, got_index = exe(x)
    keys = order_keys(x)
    want = np.argsort(-keys if largest else keys, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(got_index, want)
    np.testing.assert_array_equal(np.asarray(got_values).view(np.uint8),
                                  np.take_along_axis(x, want, 1).view(np.uint8))
    vectors = Target.for_device(get_device()).lanes(32) > 1
    assert ("kth" in exe.program.source) == (skips and vectors)


@pytest.mark.parametrize("stable", ["true", "false"])
def test_topk_accepts_is_stable_and_keeps_ties_in_index_order(stable):
    """jaxlib 0.11 prints ``is_stable=true`` on topk; ties come lower index first either way."""
    x = np.array([[1, 3, 3, 0, 3, 2], [5, 5, 5, 5, 5, 5]], np.float32)
    exe = runtime.compile(topk_module("f32", 2, 6, 3, True, f", is_stable={stable}"))
    got_values, got_index = exe(x)
    np.testing.assert_array_equal(got_index, [[1, 2, 4], [0, 1, 2]])
    np.testing.assert_array_equal(got_values, [[3, 3, 3], [5, 5, 5]])
