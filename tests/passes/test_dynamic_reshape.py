"""``dynamic-reshape`` (and a ``reshape`` merging dynamic dimensions) of bounded dynamic
values against XLA's CPU backend: the operand's elements inside its sizes, in logical
row-major order, laid out into the result's sizes; sizes past a bound are clamped to it,
negative ones to zero. XLA returns a dynamic output in its
compact form (the first ``product(sizes)`` elements of the buffer, then whatever its buffers
held); ours is that compact array at its runtime shape."""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from runtime.errors import HloUnsupportedError

from .test_dynamic_padding import _compact, _ours, _xla

# XLA's own test module (dynamic_reshape_test.cc, SingleDynamicDimension)
SINGLE = """HloModule single
ENTRY main {
  param = s32[2,3,3] parameter(0)
  two = s32[] parameter(1)
  param_padded = s32[2,<=3,3] set-dimension-size(param, two), dimensions={1}
  nine = s32[] parameter(2)
  ROOT reshaped = s32[<=18] dynamic-reshape(param_padded, nine)
}
"""

# both dimensions dynamic, flattened
BOTH = """HloModule both
ENTRY main {
  p = s32[4,6] parameter(0)
  s = s32[] parameter(1)
  t = s32[] parameter(2)
  n = s32[] parameter(3)
  d = s32[<=4,6] set-dimension-size(p, s), dimensions={0}
  e = s32[<=4,<=6] set-dimension-size(d, t), dimensions={1}
  ROOT r = s32[<=24] dynamic-reshape(e, n)
}
"""

# the minor dimension dynamic, a 2-D result with both dimensions dynamic, its sizes read back
SPLIT = """HloModule split
ENTRY main {
  p = f32[4,6] parameter(0)
  s = s32[] parameter(1)
  a = s32[] parameter(2)
  b = s32[] parameter(3)
  d = f32[4,<=6] set-dimension-size(p, s), dimensions={1}
  r = f32[<=8,<=3] dynamic-reshape(d, a, b)
  ga = s32[] get-dimension-size(r), dimensions={0}
  gb = s32[] get-dimension-size(r), dimensions={1}
  ROOT t = (f32[<=8,<=3], s32[], s32[]) tuple(r, ga, gb)
}
"""

# a reshape merging a dynamic dimension with a static one, between static ones
MERGE = """HloModule merge
ENTRY main {
  p = f32[3,2,4,5] parameter(0)
  s = s32[] parameter(1)
  d = f32[3,2,<=4,5] set-dimension-size(p, s), dimensions={2}
  r = f32[3,<=8,5] reshape(d)
  g = s32[] get-dimension-size(r), dimensions={1}
  ROOT t = (f32[3,<=8,5], s32[]) tuple(r, g)
}
"""

# a static operand, then a reduce over the result's dynamic dimension
ROWS = """HloModule rows
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT z = f32[] add(x, y)
}
ENTRY main {
  p = f32[24] parameter(0)
  a = s32[] parameter(1)
  four = s32[] constant(4)
  r = f32[<=6,4] dynamic-reshape(p, a, four)
  zero = f32[] constant(0)
  cols = f32[4] reduce(r, zero), dimensions={0}, to_apply=add
  ROOT t = (f32[<=6,4], f32[4]) tuple(r, cols)
}
"""


def _sequence(x: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """The elements inside the sizes in row-major order, then the padding in storage order."""
    return x.ravel()[np.argsort(~inside.ravel(), kind="stable")]


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("two,nine", [(2, 6), (0, 0), (1, 3), (2, 12), (3, 18), (3, 9),
                                      (5, 18), (-1, 2), (2, 1)])
def test_xlas_single_dynamic_dimension_module(two, nine, fusion):
    """Sizes 0, 1, mid and the bound; an operand size past its bound (5) or negative (-1)
    clamped as XLA's validity mask does. A result wanting more elements than the operand's
    sizes hold continues with the operand's padding in storage order, as XLA's does
    (``(-1, 2)``)."""
    x = np.arange(1, 19, dtype=np.int32).reshape(2, 3, 3)
    (got,), (want,) = (f(SINGLE, x, np.int32(two), np.int32(nine), **kw)
                       for f, kw in ((_ours, {"fusion": fusion}), (_xla, {})))
    np.testing.assert_array_equal(got, want[:nine])
    assert got.shape == (nine,)


@pytest.mark.parametrize("nine", [20, -1])
def test_result_sizes_past_the_bound_or_negative_are_clamped(nine):
    """XLA's CPU backend writes past its output buffer for 20 and crashes for -1, so the
    reference is the order above: all 18 elements, none."""
    x = np.arange(1, 19, dtype=np.int32).reshape(2, 3, 3)
    (got,) = _ours(SINGLE, x, np.int32(2), np.int32(nine))
    inside = np.arange(3)[None, :, None] < 2
    want = _sequence(x, np.broadcast_to(inside, x.shape)) if nine > 0 else np.zeros(0, np.int32)
    np.testing.assert_array_equal(got, want, strict=True)


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("s,t,n", [(2, 3, 6), (3, 6, 18), (4, 1, 4), (2, 2, 12), (0, 3, 19)])
def test_both_dimensions_dynamic(s, t, n, fusion):
    """Past the elements inside both sizes XLA's result continues with the rows past the
    size of dimension 0, inside dimension 1's size (its order ignores dimension 0's size);
    so does ours (``(2, 2, 12)``, ``(0, 3, 19)``)."""
    x = np.arange(1, 25, dtype=np.int32).reshape(4, 6)
    args = (x, np.int32(s), np.int32(t), np.int32(n))
    (got,), (want,) = _ours(BOTH, *args, fusion=fusion), _xla(BOTH, *args)
    np.testing.assert_array_equal(got, want[:n], strict=True)


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("s,a,b", [(6, 8, 3), (0, 0, 3), (1, 2, 2), (3, 4, 3), (3, 6, 2),
                                   (5, 5, 3), (9, 8, 3)])
def test_a_2d_result_of_a_minor_dynamic_dimension(s, a, b, fusion):
    x = np.arange(1, 25, dtype=np.float32).reshape(4, 6)
    args = (x, np.int32(s), np.int32(a), np.int32(b))
    (got, ga, gb), (want, wa, wb) = _ours(SPLIT, *args, fusion=fusion), _xla(SPLIT, *args)
    sizes = (min(a, 8), min(b, 3))
    np.testing.assert_array_equal(got, _compact(want, sizes), strict=True)
    assert (ga, gb) == (wa, wb) == (a, b)


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("a", [0, 1, 3, 6])
def test_a_static_operand_and_a_reduce_of_the_result(a, fusion):
    x = np.linspace(-3, 4, 24).astype(np.float32)
    (got, cols), (want, want_cols) = _ours(ROWS, x, np.int32(a), fusion=fusion), \
        _xla(ROWS, x, np.int32(a))
    rows = min(a, 6)
    np.testing.assert_array_equal(got, _compact(want, (rows, 4)), strict=True)
    np.testing.assert_allclose(cols, want_cols, rtol=1e-6)


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("s", [0, 1, 3, 4, 6])
def test_a_reshape_merging_a_dynamic_dimension(s, fusion):
    """XLA infers the merged dimension's size as the product (as given: 12 for 6, whose
    elements are clamped to the bound; XLA's CPU backend writes past its output buffer
    there, so that case is checked against the logical reshape only)."""
    x = np.arange(120, dtype=np.float32).reshape(3, 2, 4, 5)
    got, g = _ours(MERGE, x, np.int32(s), fusion=fusion)
    rows = min(2 * s, 8)
    np.testing.assert_array_equal(got, x[:, :, :min(s, 4)].reshape(3, rows, 5), strict=True)
    assert g == 2 * s
    if 2 * s <= 8:
        want, wg = _xla(MERGE, x, np.int32(s))
        np.testing.assert_array_equal(got, _compact(want, (3, rows, 5)))
        assert wg == g


def test_sizes_across_reshape_groups_keep_the_logical_order():
    """[2,<=3,<=4] with sizes (2, 3) as a 3x4 result: the first twelve elements of the
    logical 2x2x3 operand. XLA's dynamic padder reshapes [2,3] -> 6 and 4 -> 4 as separate
    groups here and reads the operand's padding (element [0,0,3], its value 4, at [0,3])."""
    text = """HloModule groups
ENTRY main {
  p = s32[2,3,4] parameter(0)
  s = s32[] parameter(1)
  t = s32[] parameter(2)
  a = s32[] parameter(3)
  b = s32[] parameter(4)
  d = s32[2,<=3,4] set-dimension-size(p, s), dimensions={1}
  e = s32[2,<=3,<=4] set-dimension-size(d, t), dimensions={2}
  ROOT r = s32[<=6,<=4] dynamic-reshape(e, a, b)
}
"""
    x = np.arange(1, 25, dtype=np.int32).reshape(2, 3, 4)
    for fusion in (True, False):
        (got,) = _ours(text, x, *map(np.int32, (2, 3, 3, 4)), fusion=fusion)
        np.testing.assert_array_equal(got, x[:, :2, :3].reshape(3, 4), strict=True)


def test_a_reshape_changing_the_element_count_is_refused_at_its_line():
    text = """HloModule r
ENTRY e {
  p = f32[8] parameter(0)
  s = s32[] parameter(1)
  d = f32[<=8] set-dimension-size(p, s), dimensions={0}
  ROOT r = f32[<=3,3] dynamic-reshape(d, s, s)
}
"""
    with pytest.raises(HloUnsupportedError, match="dynamic-reshape r .*element count") as error:
        runtime.compile(text)
    assert "line 6" in str(error.value)
