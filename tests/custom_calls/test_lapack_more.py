"""JAX programs calling the LAPACK targets beyond ``jnp.linalg``'s basics (geev, gees, gehrd,
sytrd/hetrd, gtsv, gesvd, ormqr/unmqr), f32/f64/c64/c128, batched and not, against XLA CPU's
outputs (``data/lapack``, written by ``make_lapack_more.py`` with jax 0.12): JAX's text, and
XLA's optimised text where it is stored. Both run LAPACK,
so eigenvalues come in the same order and vectors with the same phases: outputs agree to
rounding, compared by the corpus's helper scaled by each output's largest magnitude."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import runtime
from runtime import CustomCallError

from ..corpus_data import flatten, output_differences

DATA = Path(__file__).parent / "data" / "lapack"
NAMES = sorted(p.name.removesuffix(".npz") for p in DATA.glob("*.npz"))
TEXTS = [(name, kind) for name in NAMES for kind in ("hlo", "opt.hlo")
         if (DATA / f"{name}.{kind}").exists()]
RTOL = {"f32": 1e-4, "c64": 1e-4, "f64": 1e-10, "c128": 1e-10}


def _rtol(name: str) -> float:
    return next(tol for suffix, tol in RTOL.items() if f"_{suffix}" in name)


@pytest.mark.parametrize("name,kind", TEXTS, ids=[f"{n}-{k}" for n, k in TEXTS])
def test_matches_xla(name: str, kind: str):
    data = np.load(DATA / f"{name}.npz")
    args = [data[f"in_{i}"] for i in range(sum(k.startswith("in_") for k in data))]
    want = [data[f"out_{i}"] for i in range(sum(k.startswith("out_") for k in data))]
    got = flatten(runtime.compile((DATA / f"{name}.{kind}").read_text())(*args))
    assert output_differences(got, want, _rtol(name)) == []


def test_all_targets_are_covered():
    """Every LAPACK target this module added is exercised by one of the stored programs."""
    texts = " ".join((DATA / f"{n}.hlo").read_text() for n in NAMES)
    for routine in ("geev", "gees", "gehrd", "sytrd", "hetrd", "gtsv", "gesvd", "ormqr",
                    "unmqr"):
        assert f"{routine}_ffi" in texts, routine


SORTED_SCHUR = """HloModule schur_sorted
ENTRY e {
  a = f32[3,3]{1,0} parameter(0)
  s = (f32[3,3]{0,1}, f32[3,3]{0,1}, f32[3]{0}, f32[3]{0}, s32[], s32[]) custom-call(a), custom_call_target="lapack_sgees_ffi", operand_layout_constraints={f32[3,3]{0,1}}, api_version=API_VERSION_TYPED_FFI, backend_config={mode = 86 : ui8, sort = 83 : ui8}
  ROOT t = f32[3,3]{0,1} get-tuple-element(s), index=0
}"""


def test_sorted_schur_is_refused_with_a_located_error():
    with pytest.raises(CustomCallError, match="lapack_sgees_ffi.*sort = 'S'"):
        runtime.compile(SORTED_SCHUR)(np.eye(3, dtype=np.float32))


ONE_ROW_SOLVE = """HloModule gtsv_one
ENTRY e {
  dl = f32[2,1]{1,0} parameter(0)
  d = f32[2,1]{1,0} parameter(1)
  du = f32[2,1]{1,0} parameter(2)
  b = f32[2,1,3]{2,1,0} parameter(3)
  s = (f32[2,1]{1,0}, f32[2,1]{1,0}, f32[2,1]{1,0}, f32[2,1,3]{1,2,0}, s32[2]{0}) custom-call(dl, d, du, b), custom_call_target="lapack_sgtsv_ffi", operand_layout_constraints={f32[2,1]{1,0}, f32[2,1]{1,0}, f32[2,1]{1,0}, f32[2,1,3]{1,2,0}}, output_to_operand_aliasing={{0}: (0, {}), {1}: (1, {}), {2}: (2, {}), {3}: (3, {})}, api_version=API_VERSION_TYPED_FFI, backend_config={}
  x = f32[2,1,3]{1,2,0} get-tuple-element(s), index=3
  info = s32[2]{0} get-tuple-element(s), index=4
  ROOT r = (f32[2,1,3]{1,2,0}, s32[2]{0}) tuple(x, info)
}"""


def test_tridiagonal_solve_of_one_row_divides_and_reports_a_zero_pivot():
    """LAPACK's gtsv for n = 1 (scipy's wrapper refuses its empty off-diagonals)."""
    zeros = np.zeros((2, 1), np.float32)
    d = np.array([[4.0], [0.0]], np.float32)
    b = np.arange(6, dtype=np.float32).reshape(2, 1, 3) + 1
    x, info = runtime.compile(ONE_ROW_SOLVE)(zeros, d, zeros, b)
    np.testing.assert_array_equal(x, [b[0] / 4, b[1]])
    np.testing.assert_array_equal(info, [0, 1])
