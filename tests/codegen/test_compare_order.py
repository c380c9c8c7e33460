"""jaxlib 0.11 prints a compare's float comparison as ``order=TOTAL`` / ``order=PARTIAL``
where earlier versions printed ``type=TOTALORDER`` / ``type=FLOAT``: both spellings compute
the same bits, on NaNs of both signs and signed zeros, where the two orders differ."""

import numpy as np
import pytest

import runtime
from runtime.errors import HloVerifyError

X = np.array([np.nan, -np.nan, -0.0, 0.0, 1.0, -np.inf, np.nan, 2.0], np.float32)
Y = np.array([1.0, np.nan, 0.0, -0.0, np.nan, -np.nan, -np.nan, 2.0], np.float32)


def module(et: str, attrs: str) -> str:
    return f"""HloModule cmp
ENTRY e {{
  x = {et}[8] parameter(0)
  y = {et}[8] parameter(1)
  ROOT c = pred[8] compare(x, y), {attrs}
}}"""


def run(et: str, attrs: str, x, y) -> np.ndarray:
    return np.asarray(runtime.compile(module(et, attrs))(x, y))


@pytest.mark.parametrize("direction", ["LT", "LE", "EQ", "NE", "GE", "GT"])
def test_order_spellings_compute_the_type_spellings(direction):
    total = run("f32", f"direction={direction}, order=TOTAL", X, Y)
    partial = run("f32", f"direction={direction}, order=PARTIAL", X, Y)
    np.testing.assert_array_equal(total, run("f32", f"direction={direction}, type=TOTALORDER", X, Y))
    np.testing.assert_array_equal(partial, run("f32", f"direction={direction}, type=FLOAT", X, Y))
    assert (total != partial).any()


def test_order_on_integers_is_their_only_order():
    x, y = np.array([3, -1, 0, 7, -5, 2, 2, 9], np.int32), np.array([1, -1, 4, 7, -6, 3, 1, 0], np.int32)
    np.testing.assert_array_equal(run("s32", "direction=LT, order=TOTAL", x, y), x < y)


def test_type_and_order_that_disagree_are_rejected():
    with pytest.raises(HloVerifyError, match="type=FLOAT and order=TOTAL disagree"):
        runtime.parse(module("f32", "direction=LT, type=FLOAT, order=TOTAL"))
    runtime.parse(module("f32", "direction=LT, type=TOTALORDER, order=TOTAL"))
