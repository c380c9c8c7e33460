"""``cholesky`` runs as XLA's CPU backend computes it (its CholeskyExpander), not as LAPACK's
potrf: one triangle read, zeros in the other, a complex diagonal's imaginary part divided by
the pivot, NaN for a whole batch matrix with a negative pivot. Fixed values are XLA's
(jaxlib 0.10.2 through ``benchmarks/xla_cpu.py``); with jax installed every element type,
both triangles and the block edges (a last block of one column) are compared live."""

import numpy as np
import pytest

import runtime
from runtime.errors import HloUnsupportedError
from runtime.pipeline import optimise


def _text(shape: str, lower: bool) -> str:
    return (f"HloModule c\nENTRY e {{\n  a = {shape} parameter(0)\n"
            f"  ROOT l = {shape} cholesky(a), lower={'true' if lower else 'false'}\n}}\n")


def test_complex_matrices_get_xlas_values():
    a = np.array([[[4 + 1j, 99], [2 - 1j, 5 + 0.5j]], [[-1, 0], [0, 1]]], np.complex64)
    got = runtime.compile(_text("c64[2,2,2]", True))(a)
    want = np.array([[[2 + 0.5j, 0], [1 - 0.5j, 1.9364916 + 0.2581989j]],
                     [[np.nan, np.nan], [np.nan, np.nan]]], np.complex64)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert (got[1].imag == 0).all()


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_upper_reads_the_upper_triangle(fusion):
    a = np.array([[4, 2, -2], [70, 10, 2], [70, 70, 6]], np.float64)
    got = runtime.compile(_text("f64[3,3]", False), fusion=fusion)(a)
    symmetric = np.triu(a) + np.triu(a, 1).T
    np.testing.assert_allclose(got, np.linalg.cholesky(symmetric).T, rtol=1e-14)


def test_no_cholesky_reaches_the_kernels():
    module = optimise(runtime.parse(_text("c128[3,3]", True)), fusion=False)
    assert not any(i.opcode == "cholesky" for i in module.instructions())


def test_half_precision_is_refused_at_its_line():
    with pytest.raises(HloUnsupportedError, match="cholesky l of bf16 values") as caught:
        runtime.compile(_text("bf16[3,3]", True))
    assert caught.value.line == 4


def _inputs(shape: tuple[int, ...], dtype) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(sum(shape))
    n = shape[-1]

    def draw() -> np.ndarray:
        x = rng.standard_normal(shape)
        return x + 1j * rng.standard_normal(shape) if np.dtype(dtype).kind == "c" else x
    a = draw()
    return {"hermitian": (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype),
            "dominant": (draw() + 3 * n * np.eye(n)).astype(dtype),
            "random": draw().astype(dtype)}


@pytest.mark.parametrize("name,dtype", [("f32", np.float32), ("f64", np.float64),
                                        ("c64", np.complex64), ("c128", np.complex128)])
@pytest.mark.parametrize("dims", [(1, 1), (3, 5, 5), (2, 129, 129)], ids=str)
def test_like_xla(name, dtype, dims):
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    shape = f"{name}[{','.join(map(str, dims))}]"
    single = np.dtype(dtype) in (np.float32, np.complex64)
    for lower in (True, False):
        text = _text(shape, lower)
        program = xla_cpu.compile_hlo(text)
        ours = runtime.compile(text)
        for kind, a in _inputs(dims, dtype).items():
            with jax.enable_x64(True):
                want = np.asarray(program.executable.execute([jax.device_put(a)])[0])
            got = ours(a)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=kind)
            scale = np.nanmax(np.abs(want), initial=1.0)
            np.testing.assert_allclose(np.nan_to_num(got), np.nan_to_num(want), rtol=0,
                                       atol=scale * (1e-5 if single else 1e-12), err_msg=kind)
