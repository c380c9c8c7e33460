"""Built-in host targets: the LAPACK typed-FFI calls JAX emits on CPU for ``jnp.linalg``.

``jax.jit(jnp.linalg.solve)`` lowers to ``lapack_sgetrf_ffi`` and ``lapack_strsm_ffi`` calls,
``cholesky`` to ``*potrf``, ``qr`` to ``*geqrf`` and ``*orgqr``/``*ungqr``, ``eigh`` to
``*syevd``/``*heevd``, ``svd`` to ``*gesdd`` (``*gesvd`` with ``SvdAlgorithm.QR``), ``eig``/``eigvals``
to ``*geev``, ``jax.scipy.linalg.schur`` to ``*gees``, ``hessenberg`` to ``*gehrd``,
``lax.linalg.tridiagonal`` to ``*sytrd``/``*hetrd``, ``tridiagonal_solve`` to ``*gtsv`` and
``lax.linalg.ormqr`` to ``*ormqr``/``*unmqr`` (prefix s, d, c, z for f32, f64, c64, c128). Each runs the same LAPACK
routine through ``scipy.linalg.lapack``/``blas`` (what jaxlib itself calls), one matrix per
batch index, so pivots, ``info`` codes and the Householder form of QR are LAPACK's own:
pivots 1-based s32, ``info`` > 0 for a singular or non-positive-definite matrix (JAX turns
that into NaNs). Matrices are the trailing two dimensions; JAX asks for them column-major
through ``operand_layout_constraints``, which the host-call views honour, so the code below
only sees logical arrays. Character attributes (``uplo = 76 : ui8``) are LAPACK's flags.

Operand and result conventions (after the batch dimensions), per jaxlib's FFI handlers:
getrf ``a -> (lu, ipiv, info)``; trsm ``(a, b[, alpha]) -> x`` with ``side uplo trans_x
diag``; potrf ``a -> (c, info)`` with ``uplo``; geqrf ``a -> (qr, tau[, info, work])``;
orgqr ``(a, tau) -> q`` (or ``(q, info, work)``); syevd ``a -> (v, w, info[, work...])``
with ``mode uplo``; gesdd and gesvd ``a -> (a, s, u, vt, info)`` with ``mode``; geev
``a -> (wr, wi, vl, vr, info)`` (complex: ``(w, vl, vr, info)``) with ``compute_left
compute_right``; gees ``a -> (t, vs, wr, wi, sdim, info)`` (complex: ``(t, vs, w, sdim,
info)``) with ``mode sort``; gehrd ``a -> (a, tau, info)`` with 1-based ``low high``; sytrd
``a -> (a, d, e, tau, info)`` with ``uplo``; gtsv ``(dl, d, du, b) -> (dl, d, du, b, info)``;
ormqr ``(a, tau, c) -> c`` with boolean ``left transpose``. Extra trailing results of older jaxlib versions are workspace and are
left alone (or given ``info``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

_PREFIX_DTYPES: dict[str, np.dtype[Any]] = {"s": np.dtype(np.float32), "d": np.dtype(np.float64),
                  "c": np.dtype(np.complex64), "z": np.dtype(np.complex128)}
_TRANSPOSE = {"N": 0, "T": 1, "C": 2}


def _flag(value, default: str) -> str:
    return chr(int(value)) if value is not None else default


def _batches(a: np.ndarray):
    return np.ndindex(a.shape[:-2])


def _outputs(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _info(outs: tuple, position: int):
    """The ``info`` result at ``position`` if this call has it (older jaxlibs differ)."""
    return outs[position] if len(outs) > position and outs[position].dtype == np.int32 else None


def _getrf(routine: Callable, out, ins, **attrs) -> None:
    lu, ipiv, info = _outputs(out)[:3]
    a = ins[0]
    for b in _batches(a):
        factor, pivots, code = routine(a[b])
        lu[b], ipiv[b], info[b] = factor, pivots + 1, code


def _trsm(routine: Callable, out, ins, side=None, uplo=None, trans_x=None, diag=None,
          **attrs) -> None:
    a, rhs = ins[0], ins[1]
    alpha = ins[2][()] if len(ins) > 2 else 1.0
    x = _outputs(out)[0]
    for b in _batches(rhs):
        x[b] = routine(alpha, a[b], rhs[b], side=int(_flag(side, "L") == "R"),
                       lower=int(_flag(uplo, "L") == "L"),
                       trans_a=_TRANSPOSE[_flag(trans_x, "N")], diag=int(_flag(diag, "N") == "U"))


def _potrf(routine: Callable, out, ins, uplo=None, **attrs) -> None:
    factor, info = _outputs(out)[:2]
    a = ins[0]
    for b in _batches(a):
        factor[b], info[b] = routine(a[b], lower=int(_flag(uplo, "L") == "L"), clean=0)


def _geqrf(routine: Callable, out, ins, **attrs) -> None:
    outs = _outputs(out)
    qr, tau = outs[:2]
    info = _info(outs, 2)
    a = ins[0]
    for b in _batches(a):
        qr[b], tau[b], _, code = routine(a[b])
        if info is not None:
            info[b] = code


def _orgqr(routine: Callable, out, ins, **attrs) -> None:
    outs = _outputs(out)
    q = outs[0]
    info = _info(outs, 1)
    a, tau = ins[0], ins[1]
    for b in _batches(a):
        q[b], _, code = routine(a[b], tau[b])
        if info is not None:
            info[b] = code


def _syevd(routine: Callable, out, ins, mode=None, uplo=None, **attrs) -> None:
    vectors, values, info = _outputs(out)[:3]
    a = ins[0]
    for b in _batches(a):
        values[b], vectors[b], info[b] = routine(
            a[b], compute_v=int(_flag(mode, "V") == "V"), lower=int(_flag(uplo, "L") == "L"))


def _gesdd(routine: Callable, out, ins, mode=None, **attrs) -> None:
    """``mode`` is LAPACK's ``jobz``: A (full U and V^T), S (economy), N (values only; the
    U and V^T results are left as they are, as jaxlib leaves them)."""
    _, values, u_out, vt_out, info = _outputs(out)[:5]
    a = ins[0]
    job = _flag(mode, "A")
    for b in _batches(a):
        u, s, vt, code = routine(a[b], compute_uv=int(job != "N"),
                                 full_matrices=int(job == "A"))
        values[b], info[b] = s, code
        if job != "N":
            u_out[b], vt_out[b] = u, vt


def _finite(a: np.ndarray) -> bool:
    return bool(np.isfinite(a).all())


def _unpack_eigenvectors(packed: np.ndarray, imaginary: np.ndarray) -> np.ndarray:
    """Real geev's packed eigenvectors as complex columns: a conjugate pair ``j, j+1``
    (``imaginary[j] != 0``) is stored as the real and imaginary parts in columns j and j+1."""
    vectors = packed.astype(np.result_type(packed.dtype, np.complex64))
    j = 0
    while j < len(imaginary):
        if imaginary[j] != 0 and not np.isnan(imaginary[j]) and j + 1 < len(imaginary):
            pair = packed[:, j] + 1j * packed[:, j + 1]
            vectors[:, j], vectors[:, j + 1] = pair, pair.conj()
            j += 2
        else:
            j += 1
    return vectors


def _geev(routine: Callable, out, ins, compute_left=None, compute_right=None,
          **attrs) -> None:
    """A matrix with a NaN or infinity is not handed to LAPACK (geev can loop on one):
    its ``info`` is -4 and the results stay as they are, which JAX turns into NaNs."""
    outs = _outputs(out)
    a = ins[0]
    real = a.dtype.kind != "c"
    *values, left, right, info = outs[:5] if real else outs[:4]
    want_left, want_right = _flag(compute_left, "N") == "V", _flag(compute_right, "V") == "V"
    for b in _batches(a):
        if not _finite(a[b]):
            info[b] = -4
            continue
        *w, vl, vr, code = routine(a[b], compute_vl=int(want_left), compute_vr=int(want_right))
        info[b] = code
        for result, got in zip(values, w):
            result[b] = got
        if real:
            vl, vr = _unpack_eigenvectors(vl, w[1]), _unpack_eigenvectors(vr, w[1])
        if want_left:
            left[b] = vl
        if want_right:
            right[b] = vr


def _gees(routine: Callable, out, ins, mode=None, sort=None, **attrs) -> None:
    """Without sorting only (``sort = N``): jaxlib passes no selection function, and a sorted
    Schur form needs one. Unlike geev, a non-finite matrix goes to LAPACK, as in jaxlib."""
    if _flag(sort, "N") != "N":
        raise ValueError(f"sort = {_flag(sort, 'N')!r} (a sorted Schur form) is not supported")
    outs = _outputs(out)
    a = ins[0]
    real = a.dtype.kind != "c"
    t, vs, *values, sdim, info = outs[:6] if real else outs[:5]
    want_vectors = _flag(mode, "V") == "V"
    for b in _batches(a):
        schur, dim, *rest = routine(lambda *_: 0, a[b], compute_v=int(want_vectors), sort_t=0)
        *w, vectors, _, code = rest
        t[b], sdim[b], info[b] = schur, dim, code
        for result, got in zip(values, w):
            result[b] = got
        if want_vectors:
            vs[b] = vectors


def _gehrd(routine: Callable, out, ins, low=None, high=None, **attrs) -> None:
    reduced, tau, info = _outputs(out)[:3]
    a = ins[0]
    n = a.shape[-1]
    lo = int(low) if low is not None else 1
    hi = int(high) if high is not None else n
    for b in _batches(a):
        reduced[b], tau[b], info[b] = routine(a[b], lo=lo - 1, hi=hi - 1, lwork=max(1, 32 * n))


def _sytrd(routine: Callable, out, ins, uplo=None, **attrs) -> None:
    reduced, diagonal, off_diagonal, tau, info = _outputs(out)[:5]
    a = ins[0]
    for b in _batches(a):
        (reduced[b], diagonal[b], off_diagonal[b], tau[b],
         info[b]) = routine(a[b], lower=int(_flag(uplo, "L") == "L"))


def _gtsv(routine: Callable, out, ins, **attrs) -> None:
    """JAX's three diagonals all have length n (``dl[0]`` and ``du[n-1]`` unused); LAPACK's
    sub- and superdiagonal have n-1, so ``dl[1:]`` and ``du[:-1]`` go to it, as in jaxlib."""
    dl_out, d_out, du_out, x, info = _outputs(out)[:5]
    dl, d, du, rhs = ins[:4]
    for b in _batches(rhs):
        dl_out[b], d_out[b], du_out[b] = dl[b], d[b], du[b]
        if d.shape[-1] <= 1:                    # scipy's wrapper refuses empty diagonals
            singular = d.shape[-1] == 1 and d[b][0] == 0
            x[b], info[b] = rhs[b] if singular else rhs[b] / d[b][:, None], int(singular)
            continue
        second, diagonal, upper, solution, code = routine(dl[b][1:], d[b], du[b][:-1], rhs[b])
        dl_out[b][1:], d_out[b], du_out[b][:-1] = second, diagonal, upper
        x[b], info[b] = solution, code


def _ormqr(routine: Callable, out, ins, left=None, transpose=None, **attrs) -> None:
    """``transpose`` is the conjugate transpose for complex elements (unmqr's ``C``)."""
    result = _outputs(out)[0]
    a, tau, c = ins[:3]
    side = "L" if left is None or bool(left) else "R"
    trans = ("C" if a.dtype.kind == "c" else "T") if transpose else "N"
    lwork = max(1, 64 * max(c.shape[-2:], default=1))
    for b in _batches(c):
        result[b], _, _ = routine(side, trans, a[b], tau[b], c[b], lwork)


@dataclass(frozen=True)
class LapackTarget:
    """A built-in target: the routine (by scipy name) for one element type."""

    name: str
    routine: str
    dtype: np.dtype
    implementation: Callable

    def __call__(self, out, ins, **attrs) -> None:
        import scipy.linalg.blas
        import scipy.linalg.lapack
        if not ins or ins[0].dtype != self.dtype:
            got = ins[0].dtype if ins else "no operands"
            raise TypeError(f"{self.name} takes {self.dtype} matrices, got {got}")
        module = scipy.linalg.blas if self.routine.endswith("trsm") else scipy.linalg.lapack
        self.implementation(getattr(module, self.routine), out, ins, **attrs)


# (real routine, complex routine, implementation)
_ROUTINES = [
    ("getrf", "getrf", _getrf),
    ("trsm", "trsm", _trsm),
    ("potrf", "potrf", _potrf),
    ("geqrf", "geqrf", _geqrf),
    ("orgqr", "ungqr", _orgqr),
    ("syevd", "heevd", _syevd),
    ("gesdd", "gesdd", _gesdd),
    ("gesvd", "gesvd", _gesdd),
    ("geev", "geev", _geev),
    ("gees", "gees", _gees),
    ("gehrd", "gehrd", _gehrd),
    ("sytrd", "hetrd", _sytrd),
    ("gtsv", "gtsv", _gtsv),
    ("ormqr", "unmqr", _ormqr),
]


def _table() -> dict[str, LapackTarget]:
    table = {}
    for real, complex_, implementation in _ROUTINES:
        for prefix, dtype in _PREFIX_DTYPES.items():
            routine = prefix + (complex_ if dtype.kind == "c" else real)
            name = f"lapack_{routine}_ffi"
            table[name] = LapackTarget(name, routine, dtype, implementation)
    return table


LAPACK_TARGETS: dict[str, LapackTarget] = _table()

__all__ = ["LAPACK_TARGETS", "LapackTarget"]
