"""f16 expm1 and logistic as XLA's CPU backend computes them: its elemental emitter's
expansion with every step rounded to f16 (``templates.F16_STEPWISE``), not the f32 result
rounded once; the 8-bit floats, which XLA computes in f16, too. The fixed values are XLA's
(jaxlib 0.10.2) where the two differ, in a scalar kernel (10 elements) and a vector one (the
same values tiled); with jax installed, every code is compared bit for bit."""

import ml_dtypes
import numpy as np
import pytest

import runtime

X = np.array([1.7881393e-07, 1.1318922e-04, 1.2378693e-03, 1.6235352e-02, 0.24584961,
              0.96679688, -3.1280518e-03, -3.78515625, 7.3289871e-04, 9.21875], np.float16)
XLA = {
    "exponential-minus-one": [2.3841858e-07, 1.1324883e-04, 1.2378693e-03, 1.6357422e-02,
                              0.27856445, 1.62890625, -3.1242371e-03, -0.97753906,
                              7.3289871e-04, 10088.0],
    "logistic": [0.5, 0.5, 0.50048828, 0.50390625, 0.56103516, 0.72412109, 0.49902344,
                 0.02220154, 0.50048828, 1.0],
}


def _text(op: str, n: int, dtype: str = "f16") -> str:
    return (f"HloModule m\nENTRY e {{\n  p = {dtype}[{n}] parameter(0)\n"
            f"  ROOT r = {dtype}[{n}] {op}(p)\n}}\n")


@pytest.mark.parametrize("op", sorted(XLA))
@pytest.mark.parametrize("tiles", [1, 4096], ids=["scalar", "vector"])
def test_xlas_values(op, tiles):
    x = np.tile(X, tiles)
    got = runtime.compile(_text(op, x.size))(x)
    np.testing.assert_array_equal(got, np.tile(np.array(XLA[op], np.float16), tiles))


@pytest.mark.parametrize("op", sorted(XLA))
def test_every_code_like_xla(op):
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    text = _text(op, codes.size)
    want = np.asarray(xla_cpu.compile_hlo(text).executable.execute([jax.device_put(codes)])[0])
    got = runtime.compile(text)(codes)
    nan = np.isnan(got) & np.isnan(want)
    assert np.isnan(got).sum() == np.isnan(want).sum()
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


def test_an_eight_bit_float_takes_the_f16_steps():
    x = np.array([-0.1875, 1.0], ml_dtypes.float8_e4m3fn)
    got = runtime.compile(_text("logistic", 2, "f8e4m3fn"))(x)
    assert got.astype(np.float32).tolist() == [0.4375, 0.75]      # rounded once: 0.46875


@pytest.mark.parametrize("dtype", ["f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz",
                                   "f8e4m3b11fnuz", "f8e4m3", "f8e3m4"])
@pytest.mark.parametrize("op", sorted(XLA))
def test_every_eight_bit_code_like_xla(op, dtype):
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    codes = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, {
        "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "f8e4m3fnuz": "float8_e4m3fnuz",
        "f8e5m2fnuz": "float8_e5m2fnuz", "f8e4m3b11fnuz": "float8_e4m3b11fnuz",
        "f8e4m3": "float8_e4m3", "f8e3m4": "float8_e3m4"}[dtype]))
    text = _text(op, codes.size, dtype)
    want = np.asarray(xla_cpu.compile_hlo(text).executable.execute([jax.device_put(codes)])[0])
    got = runtime.compile(text)(codes)
    nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(got.view(np.uint8)[~nan], want.view(np.uint8)[~nan])
