"""Built-in host targets: the LAPACK typed-FFI calls JAX emits on CPU for ``jnp.linalg``.

``jax.jit(jnp.linalg.solve)`` lowers to ``lapack_sgetrf_ffi`` and ``lapack_strsm_ffi`` calls,
``cholesky`` to ``*potrf``, ``qr`` to ``*geqrf`` and ``*orgqr``/``*ungqr``, ``eigh`` to
``*syevd``/``*heevd``, ``svd`` to ``*gesdd`` (prefix s, d, c, z for f32, f64, c64, c128). Each runs the same LAPACK
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
with ``mode uplo``; gesdd ``a -> (a, s, u, vt, info)`` with ``mode``. Extra trailing results of older jaxlib versions are workspace and are
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
