"""JAX's CPU linalg HLO (LAPACK typed-FFI custom calls) runs and matches numpy.linalg."""

from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

import runtime
from runtime import CustomCallError

from .linalg_cases import CASES, LinalgCase

DATA = Path(__file__).parent / "data"
TOLERANCE = {"float32": 2e-5, "float64": 1e-12}


def inputs(case: LinalgCase) -> list[np.ndarray]:
    rng = np.random.default_rng(len(case.name))
    args = [rng.standard_normal(shape).astype(case.dtype) for shape in case.shapes]
    if case.function in ("cholesky", "eigh"):
        a = args[0]
        args[0] = (a @ np.swapaxes(a, -1, -2) + a.shape[-1] * np.eye(a.shape[-1])).astype(case.dtype)
    return args


def close(got: np.ndarray, want: np.ndarray, case: LinalgCase) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCE[case.dtype] * scale * 10)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_jax_linalg_module_matches_numpy(case: LinalgCase):
    text = (DATA / f"{case.name}.hlo").read_text()
    assert "lapack_" in text
    args = inputs(case)
    got = runtime.compile(text)(*args)
    if case.function == "eigh":
        values, vectors = got
        close(values, np.linalg.eigh(args[0])[0], case)
        rebuilt = vectors @ (values[..., None] * np.swapaxes(vectors, -1, -2))
        close(rebuilt, args[0], case)
    elif case.function == "svd":
        u, values, vt = got
        close(values, np.linalg.svd(args[0], compute_uv=False), case)
        k = values.shape[-1]
        rebuilt = (u[..., :k] * values[..., None, :]) @ vt[..., :k, :]
        close(rebuilt, args[0], case)
        for q in (u, vt):
            close(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(q.shape[-1], dtype=q.dtype),
                                                              q.shape), case)
    elif case.function == "svdvals":
        close(got, np.linalg.svd(args[0], compute_uv=False), case)
    elif case.function == "qr":
        for g, w in zip(got, np.linalg.qr(args[0])):
            close(g, w, case)            # both are LAPACK's geqrf/orgqr: the same signs
    else:
        close(got, getattr(np.linalg, case.function)(*args), case)


def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_nan():
    text = (DATA / "cholesky_float32_3x3.hlo").read_text()
    out = runtime.compile(text)(-np.eye(3, dtype=np.float32))
    assert np.isnan(out[np.tril_indices(3)]).all()


LU_C64 = """HloModule lu_c64
ENTRY e {
  a = c64[2,3,3]{2,1,0} parameter(0)
  ROOT lu = (c64[2,3,3]{1,2,0}, s32[2,3]{1,0}, s32[2]{0}) custom-call(a), custom_call_target="lapack_cgetrf_ffi", operand_layout_constraints={c64[2,3,3]{1,2,0}}, output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI, backend_config={}
}"""


def test_complex_lu_with_one_based_pivots():
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3))).astype(np.complex64)
    lu, pivots, info = runtime.compile(LU_C64)(a)
    for b in range(2):
        want_lu, want_pivots = scipy.linalg.lu_factor(a[b])
        np.testing.assert_allclose(lu[b], want_lu, atol=1e-5)
        np.testing.assert_array_equal(pivots[b], want_pivots + 1)
    np.testing.assert_array_equal(info, [0, 0])


def test_singular_matrix_reports_info():
    a = np.ones((2, 3, 3), np.complex64)
    _, _, info = runtime.compile(LU_C64)(a)
    np.testing.assert_array_equal(info, [2, 2])


def test_wrong_element_type_for_the_target_is_an_error():
    text = LU_C64.replace("lapack_cgetrf_ffi", "lapack_sgetrf_ffi")
    with pytest.raises(CustomCallError, match="lapack_sgetrf_ffi takes float32 matrices, got complex64"):
        runtime.compile(text)(np.ones((2, 3, 3), np.complex64))


def test_builtins_are_listed_and_user_registrations_take_precedence():
    names = {t.name for t in runtime.registered_custom_calls(builtin=True)}
    assert {"lapack_sgetrf_ffi", "lapack_ztrsm_ffi", "lapack_cheevd_ffi", "lapack_dorgqr_ffi"} <= names
    runtime.register_custom_call("lapack_cgetrf_ffi", lambda out, ins: out[2].fill(7))
    assert [t.builtin for t in runtime.registered_custom_calls(builtin=True)
            if t.name == "lapack_cgetrf_ffi"] == [False]
    _, _, info = runtime.compile(LU_C64)(np.ones((2, 3, 3), np.complex64))
    np.testing.assert_array_equal(info, [7, 7])
