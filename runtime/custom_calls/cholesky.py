"""The host side of ``cholesky`` (``passes/cholesky_host_calls``): XLA's ``CholeskyExpander``.

The same algorithm as XLA's expansion, in the input's own type, so every input gets XLA's
answer and not LAPACK's where the two differ: a blocked left-looking factorisation in 128-wide
panels, each panel's diagonal block by the unblocked column algorithm (a block of one column
takes the root of the real part alone), the rows below it by a triangular solve against the
block's adjoint (BLAS ``trsm``, which divides by a zero pivot as XLA does instead of raising).
Only the lower triangle (``lower=false``: the upper, read through a transpose, not an
adjoint, as XLA does) is read; the other triangle of the result is zero. A pivot is the root
of the real part of what is left on the diagonal, and the column is divided by it, so a
complex diagonal keeps its imaginary part divided by the pivot; a matrix where any pivot's
root is NaN (a negative real part) becomes all NaN, each batch matrix on its own. Sums are
ordered differently from XLA's dots, so results agree to rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_BLOCK = 128                        # XLA's block_size
_TRSM = {"float32": "strsm", "float64": "dtrsm", "complex64": "ctrsm", "complex128": "ztrsm"}


def xla_cholesky(out, ins, lower: bool = False, **attrs) -> np.ndarray:
    a = np.asarray(ins[0])
    if a.dtype.name not in _TRSM:
        raise TypeError(f"cholesky takes float32, float64, complex64 or complex128 matrices, "
                        f"got {a.dtype}")
    if not lower:
        a = np.swapaxes(a, -1, -2)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        result = _blocked(a)
    return np.ascontiguousarray(result if lower else np.swapaxes(result, -1, -2))


def _adjoint(x: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(x, -1, -2))


def _root(x: np.ndarray) -> np.ndarray:
    """The pivot: the root of the real part (NaN where negative), in the input's type."""
    return np.sqrt(x.real).astype(x.dtype)


def _blocked(a: np.ndarray) -> np.ndarray:
    n = a.shape[-1]
    l = np.zeros_like(a)
    failed = np.zeros(a.shape[:-2], bool)
    for i in range(0, n, _BLOCK):
        k = min(_BLOCK, n - i)
        panel = a[..., i:, i:i + k]
        if i > 0:
            panel = panel - l[..., i:, :i] @ _adjoint(l[..., i:i + k, :i])
        if k == 1:
            factor = _root(panel[..., :1, :])
            failed |= np.isnan(factor[..., 0, 0].real)
        else:
            factor, block_failed = _unblocked(panel[..., :k, :])
            failed |= block_failed
        l[..., i:i + k, i:i + k] = factor
        if i + k < n:
            l[..., i + k:, i:i + k] = _solve_right_adjoint(factor, panel[..., k:, :])
    return np.where(failed[..., None, None], np.array(np.nan, a.dtype), l)


def _unblocked(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """XLA's column algorithm: column j below the diagonal is what is left of x's column
    divided by the pivot."""
    k = x.shape[-1]
    l = np.zeros_like(x)
    failed = np.zeros(x.shape[:-2], bool)
    for j in range(k):
        rest = x[..., j:, j] - (l[..., j:, :j] @ np.conj(l[..., j, :j])[..., None])[..., 0]
        pivot = _root(rest[..., :1])
        failed |= np.isnan(pivot[..., 0].real)
        l[..., j:, j] = rest / pivot
    return l, failed


def _solve_right_adjoint(factor: np.ndarray, b: np.ndarray) -> np.ndarray:
    """X with X @ factor^H = b (factor lower triangular), per batch matrix."""
    import scipy.linalg.blas
    trsm: Any = getattr(scipy.linalg.blas, _TRSM[factor.dtype.name])
    x = np.empty_like(b)
    for index in np.ndindex(b.shape[:-2]):
        x[index] = trsm(1.0, factor[index], b[index], side=1, lower=1, trans_a=2, diag=0)
    return x
