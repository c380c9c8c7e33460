"""A dot of bounded dynamic values against XLA's CPU backend: a contraction over a dynamic
dimension sums the first ``size`` products only (sizes past the bound all of them, negative
ones none), the result keeps the sizes of the batch and free dimensions (XLA returns a
dynamic output in its compact form, ours is that array at its runtime shape)."""

from __future__ import annotations

import numpy as np
import pytest

from .test_dynamic_padding import _compact, _ours, _xla

VECTOR = """HloModule vector
ENTRY main {
  p = f32[8] parameter(0)
  q = f32[8] parameter(1)
  s = s32[] parameter(2)
  d = f32[<=8] set-dimension-size(p, s), dimensions={0}
  ROOT r = f32[] dot(d, q), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}
"""

# a dynamic free dimension and a contraction dynamic in both operands
MATRIX = """HloModule matrix
ENTRY main {
  p = f32[5,8] parameter(0)
  q = f32[8,3] parameter(1)
  s = s32[] parameter(2)
  t = s32[] parameter(3)
  d = f32[5,<=8] set-dimension-size(p, s), dimensions={1}
  rows = f32[<=5,<=8] set-dimension-size(d, t), dimensions={0}
  e = f32[<=8,3] set-dimension-size(q, s), dimensions={0}
  r = f32[<=5,3] dot(rows, e), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  g = s32[] get-dimension-size(r), dimensions={0}
  ROOT out = (f32[<=5,3], s32[]) tuple(r, g)
}
"""

# batched, a dynamic contraction in one operand and a dynamic free dimension in the other
BATCHED = """HloModule batched
ENTRY main {
  p = f32[2,5,8] parameter(0)
  q = f32[2,8,3] parameter(1)
  s = s32[] parameter(2)
  t = s32[] parameter(3)
  d = f32[2,5,<=8] set-dimension-size(p, s), dimensions={2}
  e = f32[2,8,<=3] set-dimension-size(q, t), dimensions={2}
  r = f32[2,5,<=3] dot(d, e), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
  g = s32[] get-dimension-size(r), dimensions={2}
  ROOT out = (f32[2,5,<=3], s32[]) tuple(r, g)
}
"""


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("s", [0, 1, 5, 8, 11, -1])
def test_a_dynamic_contraction_sums_the_first_size_products(s, fusion):
    p, q = np.linspace(-2, 3, 8).astype(np.float32), np.linspace(1, 2, 8).astype(np.float32)
    (got,), (want,) = _ours(VECTOR, p, q, np.int32(s), fusion=fusion), \
        _xla(VECTOR, p, q, np.int32(s))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got, np.dot(p[:max(s, 0)], q[:max(s, 0)]), rtol=1e-6)


def test_the_other_operands_elements_past_the_size_add_nothing():
    """XLA's CPU backend zeroes the dynamic operand only and returns NaN here (0 * inf)."""
    p, q = np.arange(1, 9, dtype=np.float32), np.ones(8, np.float32)
    q[5:] = np.inf
    (got,) = _ours(VECTOR, p, q, np.int32(5))
    assert got == 15


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("s,t", [(0, 0), (1, 1), (3, 2), (8, 5), (5, 1)])
def test_a_dynamic_free_dimension_is_kept(s, t, fusion):
    rng = np.random.default_rng(s * 10 + t)
    p, q = rng.standard_normal((5, 8), np.float32), rng.standard_normal((8, 3), np.float32)
    args = (p, q, np.int32(s), np.int32(t))
    (got, g), (want, wg) = _ours(MATRIX, *args, fusion=fusion), _xla(MATRIX, *args)
    np.testing.assert_allclose(got, _compact(want, (t, 3)), rtol=1e-5, atol=1e-6, strict=True)
    np.testing.assert_allclose(got, p[:t, :s] @ q[:s], rtol=1e-5, atol=1e-6)
    assert g == wg == t


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("s,t", [(0, 0), (1, 1), (3, 2), (8, 3), (9, 3)])
def test_a_batched_dot(s, t, fusion):
    rng = np.random.default_rng(s * 10 + t)
    p, q = rng.standard_normal((2, 5, 8), np.float32), rng.standard_normal((2, 8, 3), np.float32)
    args = (p, q, np.int32(s), np.int32(t))
    (got, g), (want, wg) = _ours(BATCHED, *args, fusion=fusion), _xla(BATCHED, *args)
    np.testing.assert_allclose(got, _compact(want, (2, 5, t)), rtol=1e-5, atol=1e-6,
                               strict=True)
    np.testing.assert_allclose(got, p[..., :s] @ q[:, :s, :t], rtol=1e-5, atol=1e-6)
    assert g == wg == t
