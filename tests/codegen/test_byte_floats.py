"""8-bit floats (``cltypes`` byte floats): every conversion against ml_dtypes, arithmetic
rounded through f16 as XLA's CPU backend does, reductions in XLA's tree order
(``passes/tree_reductions``), and JAX programs against XLA's outputs bit for bit
(``data/byte_floats``, written by ``make_byte_float_programs.py``)."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.hlo.dtypes import BYTE_FLOATS, ELEMENT_TYPES
from runtime.passes.tree_reductions import tree_reductions_in_place

from ..corpus_data import compare_scaled

DATA = Path(__file__).parent / "data" / "byte_floats"


def _samples(dtype) -> np.ndarray:
    """Every value of the format, the midpoints between neighbours and the floats either side
    of them (ties and near-ties), magnitudes past the largest, random floats over 40 binades,
    zeros, infinities, NaNs and f32 denormals."""
    rng = np.random.default_rng(0)
    info = ml_dtypes.finfo(dtype)
    values = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    finite = np.unique(values[np.isfinite(values)])
    mids = ((finite[1:].astype(np.float64) + finite[:-1]) / 2).astype(np.float32)
    near = np.concatenate([np.nextafter(mids, np.float32(np.inf)),
                           np.nextafter(mids, np.float32(-np.inf))])
    with np.errstate(over="ignore"):        # f8e8m0fnu's largest is 2^127
        big = np.float32(info.max) * np.array([1.0, 1.03, 1.0625, 1.07, 1.5, 2, 1e10], np.float32)
    random = (rng.standard_normal(4000) * np.exp(rng.uniform(-25, 15, 4000))).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40], np.float32)
    return np.concatenate([values, mids, near, big, -big, random, special]).astype(np.float32)


@pytest.mark.parametrize("name", BYTE_FLOATS)
def test_conversions_match_ml_dtypes_bit_for_bit(name):
    dtype = ELEMENT_TYPES[name].numpy
    x = _samples(dtype)
    codes = np.arange(256, dtype=np.uint8).view(dtype)
    n = x.size
    text = (f"HloModule c\nENTRY e {{\n  x = f32[{n}] parameter(0)\n"
            f"  b = {name}[256] parameter(1)\n  c = {name}[{n}] convert(x)\n"
            f"  d = f32[256] convert(b)\n  ROOT t = ({name}[{n}], f32[256]) tuple(c, d)\n}}\n")
    encoded, decoded = runtime.compile(text)(x, codes)
    np.testing.assert_array_equal(np.asarray(encoded).view(np.uint8), x.astype(dtype).view(np.uint8))
    want = codes.astype(np.float32).view(np.uint32).copy()
    if name.endswith("fnuz"):
        want[0x80] = 0x7fc00000      # XLA widens the one NaN as +NaN (ml_dtypes: -NaN)
    np.testing.assert_array_equal(np.asarray(decoded).view(np.uint32), want)


@pytest.mark.parametrize("name", ["f8e4m3fn", "f8e5m2"])
@pytest.mark.parametrize("opcode,fn", [("add", np.add), ("multiply", np.multiply),
                                       ("divide", np.divide)])
def test_arithmetic_rounds_through_f16(name, opcode, fn):
    """Every pair of finite values: the result rounded to f16, then to the format, as XLA
    computes it in f16 (f32's result rounded to f16 is f16's correctly rounded one)."""
    dtype = ELEMENT_TYPES[name].numpy
    values = np.arange(256, dtype=np.uint8).view(dtype)
    values = values[np.isfinite(values.astype(np.float32))]
    a, b = (v.ravel() for v in np.meshgrid(values, values))
    text = (f"HloModule a\nENTRY e {{\n  a = {name}[{a.size}] parameter(0)\n"
            f"  b = {name}[{a.size}] parameter(1)\n  ROOT r = {name}[{a.size}] {opcode}(a, b)\n}}\n")
    got = np.asarray(runtime.compile(text)(a, b))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        wide = fn(a.astype(np.float32), b.astype(np.float32))
        want = wide.astype(np.float16).astype(dtype).view(np.uint8).copy()
    if name == "f8e5m2":
        want[np.isnan(wide)] = 0x7f          # XLA's NaN from f16 (ml_dtypes: 0x7e, signed)
    np.testing.assert_array_equal(got.view(np.uint8), want)


@pytest.mark.parametrize("size", [32, 128])     # in its own type; on f32 copies (upcast)
def test_a_dot_into_an_8_bit_float_rounds_its_f32_sum_through_f16(size):
    rng = np.random.default_rng(size)
    dtype = ml_dtypes.float8_e4m3fn
    a, b = (rng.standard_normal((size, size)).astype(dtype) for _ in range(2))
    text = (f"HloModule d\nENTRY e {{\n  a = f8e4m3fn[{size},{size}] parameter(0)\n"
            f"  b = f8e4m3fn[{size},{size}] parameter(1)\n  ROOT d = f8e4m3fn[{size},{size}] "
            "dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
    got = np.asarray(runtime.compile(text)(a, b)).view(np.uint8)
    exact = a.astype(np.float64) @ b.astype(np.float64)        # exact: few bits a product
    want = exact.astype(np.float32).astype(np.float16).astype(dtype).view(np.uint8)
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(want, exact.astype(np.float32).astype(dtype).view(np.uint8))


def _windows(text: str) -> list[tuple]:
    module = runtime.parse(text)
    tree_reductions_in_place(module)
    return [(i.shape.dims, tuple((w.size, w.stride, w.pad_low, w.pad_high)
                                 for w in i.attrs["window"].dims))
            for i in module.entry.instructions if i.opcode == "reduce-window"]


def _sum(shape: str, dims: str, out: str, et: str = "f8e4m3fn") -> str:
    return (f"HloModule s\nadd {{\n  a = {et}[] parameter(0)\n  b = {et}[] parameter(1)\n"
            f"  ROOT c = {et}[] add(a, b)\n}}\nENTRY e {{\n  x = {et}[{shape}] parameter(0)\n"
            f"  z = {et}[] constant(0)\n  ROOT r = {et}[{out}] reduce(x, z), dimensions={{{dims}}}, "
            f"to_apply=add\n}}\n")


def test_tree_reductions_take_xla_windows():
    assert _windows(_sum("40", "0", "")) == [((2,), ((32, 32, 12, 12),))]
    assert _windows(_sum("33", "0", "")) == [((2,), ((32, 32, 15, 16),))]
    assert _windows(_sum("5000", "0", "")) == [((157,), ((32, 32, 12, 12),)),
                                               ((5,), ((32, 32, 1, 2),))]
    # a short reduced dimension beside a long one is one window
    assert _windows(_sum("3,40,20", "1,2", "3")) == [
        ((3, 2, 1), ((1, 1, 0, 0), (32, 32, 12, 12), (20, 20, 0, 0)))]
    assert _windows(_sum("20", "0", "")) == []
    assert _windows(_sum("40", "0", "", "f32")) == []


def _load(name: str):
    data = np.load(DATA / f"{name}.npz")
    dtypes = [str(t) for t in data["dtypes"]]
    count = sum(k.startswith("arg_") for k in data.files)

    def typed(key: str, dtype: str) -> np.ndarray:
        a = data[key]
        return a.view(getattr(ml_dtypes, dtype)) if hasattr(ml_dtypes, dtype) else a
    args = [typed(f"arg_{i}", dtypes[i]) for i in range(count)]
    outs = [typed(f"out_{i}", dtypes[count + i]) for i in range(len(dtypes) - count)]
    return args, outs


@pytest.mark.parametrize("name", ["f8_arithmetic", "f8_quantized_matmul"])
def test_programs_match_xla(name):
    args, want = _load(name)
    got = runtime.compile((DATA / f"{name}.hlo").read_text())(*args)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape, k
        if w.dtype.itemsize <= 2 or w.dtype.kind in "biu":      # 8-bit, bf16, integers: exact
            np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8), err_msg=str(k))
        else:
            problems = compare_scaled(f"out_{k}", g, w, {"rtol": 2e-6, "atol": 0.0})
            assert not problems, problems
