"""Regenerate ``data/lapack/*``: JAX programs whose CPU lowering calls the LAPACK targets
beyond ``jnp.linalg``'s basics (geev, gees, gehrd, sytrd/hetrd, gtsv, gesvd, ormqr/unmqr),
with XLA CPU's outputs. Run with a Python that has jax (written with jax 0.12):
``/path/to/py312/bin/python tests/custom_calls/make_lapack_more.py``. Each case stores
``NAME.hlo`` (``jax.jit(fn).lower(*args).as_text('hlo')``) and ``NAME.npz`` (``in_*`` and
XLA's ``out_*``, the outputs as jax returns them); the unbatched f32 and c128 cases also
``NAME.opt.hlo``, XLA's optimised text (``.compile().as_text()``)."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)

DTYPES = {"f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128}


def _qr_apply(a, c):
    """``Q^T c`` from ``a``'s Householder form (``lax.linalg.ormqr`` after geqrf)."""
    r, taus = jnp.linalg.qr(a, mode="raw")
    return lax.linalg.ormqr(jnp.swapaxes(r, -1, -2), taus, c, left=True, transpose=True)


FUNCTIONS = {
    "eig": (jnp.linalg.eig, 1),
    "eigvals": (jnp.linalg.eigvals, 1),
    "eig_left": (lambda a: lax.linalg.eig(a, compute_left_eigenvectors=True,
                                          compute_right_eigenvectors=False), 1),
    "schur": (jsl.schur, 1),
    "hessenberg": (lambda a: jsl.hessenberg(a, calc_q=True), 1),
    "tridiagonal": (lax.linalg.tridiagonal, 1),
    "tridiagonal_upper": (lambda a: lax.linalg.tridiagonal(a, lower=False), 1),
    "tridiagonal_solve": (lax.linalg.tridiagonal_solve, 4),
    "svd_qr": (lambda a: lax.linalg.svd(a, full_matrices=True,
                                        algorithm=lax.linalg.SvdAlgorithm.QR), 1),
    "svd_qr_economy": (lambda a: lax.linalg.svd(a, full_matrices=False,
                                                algorithm=lax.linalg.SvdAlgorithm.QR), 1),
    "ormqr": (_qr_apply, 2),
}

# (function, dtype, batch shape, matrix shape)
CASES = [(f, d, batch) for f in FUNCTIONS for d in DTYPES for batch in ((), (2,))]
# a batch whose second matrix holds an infinity: LAPACK is not run on it, JAX gives NaNs
NONFINITE = [("eig", "f32"), ("eigvals", "c128"), ("schur", "f64"), ("schur", "c64")]


def _shapes(function: str, batch: tuple[int, ...]) -> list[tuple[int, ...]]:
    if function == "tridiagonal_solve":
        return [batch + (5,)] * 3 + [batch + (5, 2)]
    if function.startswith("svd"):
        return [batch + (5, 3)]
    if function == "ormqr":
        return [batch + (5, 3), batch + (5, 2)]
    return [batch + (4, 4)]


def _input(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def main() -> None:
    out = Path(__file__).parent / "data" / "lapack"
    out.mkdir(parents=True, exist_ok=True)
    for function, dname, batch in CASES:
        fn, _ = FUNCTIONS[function]
        dtype = DTYPES[dname]
        name = f"{function}_{dname}" + ("_batched" if batch else "")
        rng = np.random.default_rng(len(name))
        args = [_input(rng, s, dtype) for s in _shapes(function, batch)]
        _write(out, name, fn, args, optimised=not batch and dname in ("f32", "c128"))
    for function, dname in NONFINITE:
        rng = np.random.default_rng(0)
        a = _input(rng, (2, 4, 4), DTYPES[dname])
        a[1, 0, 1] = np.inf
        _write(out, f"{function}_{dname}_nonfinite", FUNCTIONS[function][0], [a])


def _write(out: Path, name: str, fn, args: list[np.ndarray], optimised: bool = False) -> None:
    jitted = jax.jit(fn)
    lowered = jitted.lower(*args)
    text = lowered.as_text("hlo")
    if optimised:
        (out / f"{name}.opt.hlo").write_text(lowered.compile().as_text())
    outs = jax.tree_util.tree_leaves(jitted(*args))
    (out / f"{name}.hlo").write_text(text)
    np.savez(out / f"{name}.npz", **{f"in_{i}": a for i, a in enumerate(args)},
             **{f"out_{i}": np.asarray(o) for i, o in enumerate(outs)})


if __name__ == "__main__":
    main()
