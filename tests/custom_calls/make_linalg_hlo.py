"""Regenerate ``data/*.hlo``: the HLO JAX emits on CPU for ``jnp.linalg`` functions.

Needs jax, which the tests never import: they run these texts and compare with numpy.linalg.
Each module is ``jax.jit(fn).lower(*shapes).as_text('hlo')``; its custom calls are the
LAPACK typed-FFI targets (``lapack_sgetrf_ffi``...). Run from the repository root:
``python tests/custom_calls/make_linalg_hlo.py``.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from linalg_cases import CASES

jax.config.update("jax_enable_x64", True)

FUNCTIONS = {"solve": jnp.linalg.solve, "inv": jnp.linalg.inv, "det": jnp.linalg.det,
             "cholesky": jnp.linalg.cholesky, "qr": jnp.linalg.qr, "eigh": jnp.linalg.eigh,
             "svd": jnp.linalg.svd, "svdvals": jnp.linalg.svdvals}


def main() -> None:
    out = Path(__file__).parent / "data"
    out.mkdir(exist_ok=True)
    for case in CASES:
        args = [jax.ShapeDtypeStruct(shape, np.dtype(case.dtype)) for shape in case.shapes]
        text = jax.jit(FUNCTIONS[case.function]).lower(*args).as_text("hlo")
        (out / f"{case.name}.hlo").write_text(text)


if __name__ == "__main__":
    main()
