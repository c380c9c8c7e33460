"""f8e8m0fnu, the exponent-only byte float (``dtypes.EXPONENT_FLOATS``): code c is
2^(c-127), 0xFF is NaN. Conversions from and to every other type, bitcasts, data movement,
comparisons, arithmetic and reductions against XLA's CPU backend (the test extra) bit for bit,
and the rounding rule XLA was measured to use."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import runtime

E8M0 = ml_dtypes.float8_e8m0fnu
CODES = np.arange(256, dtype=np.uint8).view(E8M0)


def _ours(text: str, *args) -> list[np.ndarray]:
    out = runtime.compile(text)(*args)
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def _xla(text: str, *args) -> list[np.ndarray]:
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    with jax.enable_x64(True):
        program = xla_cpu.compile_hlo(text)
        inputs = [jax.device_put(a) for a in args]
        return [np.asarray(o) for o in program.executable.execute(inputs)]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.itemsize}") if a.dtype != bool else a


def _assert_like_xla(text: str, *args) -> None:
    want = _xla(text, *args)
    got = _ours(text, *args)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, k
        np.testing.assert_array_equal(_bits(g), _bits(w), err_msg=f"output {k}")


def _convert(src: str, dst: str, n: int) -> str:
    return (f"HloModule c\nENTRY e {{\n  x = {src}[{n}] parameter(0)\n"
            f"  ROOT c = {dst}[{n}] convert(x)\n}}\n")


def test_the_measured_rounding_of_f32():
    """XLA's codes for the values the rule was found from (no XLA needed): a normal rounds
    half up in value (3.0 -> 4, not to the even exponent), a denormal above 2^-127 goes up to
    2^-126, zero, negatives, infinities and NaN are NaN, past the largest is NaN."""
    x = np.array([0.0, -0.0, -1.0, np.inf, np.nan, 1.5, 3.0, 6.0, 1.4, 2.9, 2.0 ** -127,
                  2.0 ** -128, 1e-45, 5.9e-39, 1.7e38, 2.5e38, 3e38], np.float32)
    want = [255, 255, 255, 255, 255, 128, 129, 130, 127, 128, 0, 0, 0, 1, 254, 254, 255]
    (got,) = _ours(_convert("f32", "f8e8m0fnu", x.size), x)
    assert got.view(np.uint8).tolist() == want


def test_every_code_to_f32_and_back():
    text = ("HloModule c\nENTRY e {\n  x = f8e8m0fnu[256] parameter(0)\n"
            "  f = f32[256] convert(x)\n  b = f8e8m0fnu[256] convert(f)\n"
            "  ROOT t = (f32[256], f8e8m0fnu[256]) tuple(f, b)\n}\n")
    _assert_like_xla(text, CODES)
    decoded, back = _ours(text, CODES)
    assert np.array_equal(back.view(np.uint8), CODES.view(np.uint8))
    assert decoded.view(np.uint32)[0] == 0x00400000          # 2^-127, an f32 denormal, kept


def _f32_patterns() -> np.ndarray:
    """Every f32 exponent with the mantissas about the rounding point and at the ends, every
    1023rd denormal and the denormal classes about 2^-127, random patterns; both signs."""
    rng = np.random.default_rng(0)
    mantissas = np.array([0, 1, 2, 0x3ffffe, 0x3fffff, 0x400000, 0x400001, 0x400002, 0x5fffff,
                          0x600000, 0x7ffffe, 0x7fffff], np.uint32)
    grid = (np.arange(256, dtype=np.uint32)[:, None] << 23 | mantissas).ravel()
    denormals = np.arange(0, 1 << 23, 1023, dtype=np.uint32)
    random = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    bits = np.concatenate([grid, denormals, random])
    return np.concatenate([bits, bits | 0x80000000]).view(np.float32)


def test_f32_bit_patterns_round_as_xla():
    x = _f32_patterns()
    _assert_like_xla(_convert("f32", "f8e8m0fnu", x.size), x)
    with np.errstate(invalid="ignore"):      # ml_dtypes agrees with XLA from f32
        want = x.astype(E8M0).view(np.uint8)
    (got,) = _ours(_convert("f32", "f8e8m0fnu", x.size), x)
    np.testing.assert_array_equal(got.view(np.uint8), want)


@pytest.mark.parametrize("src", ["f16", "bf16"])
def test_every_16_bit_float_rounds_as_xla(src):
    dtype = np.float16 if src == "f16" else ml_dtypes.bfloat16
    x = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    _assert_like_xla(_convert(src, "f8e8m0fnu", x.size), x)


def test_f64_rounds_directly_as_xla():
    """XLA rounds a double itself (ml_dtypes rounds it to f32 first): the halves and their
    neighbours in every binade, the f32 denormal range and below, random doubles."""
    rng = np.random.default_rng(1)
    exponents = np.arange(-160, 140)
    mantissas = [1.0, 1 + 2 ** -40, 1.5 - 2 ** -40, 1.5, 1.5 + 2 ** -40, 2 - 2 ** -40]
    x = np.concatenate([np.ldexp(m, exponents) for m in mantissas]
                       + [[1e-300, -1e-300, 1e300, 0.0, -0.0, np.inf, -np.inf, np.nan],
                          rng.standard_normal(5000) * np.exp(rng.uniform(-100, 100, 5000))])
    _assert_like_xla(_convert("f64", "f8e8m0fnu", x.size), x)
    (got,) = _ours(_convert("f64", "f8e8m0fnu", 1), np.array([(1.5 - 2 ** -40) * 2.0 ** -126]))
    assert got.view(np.uint8).tolist() == [1]


_OTHERS = ["f64", "f16", "bf16", "pred", "s8", "u8", "s32", "u32", "s64", "u64", "s4", "u2",
           "f8e4m3fn", "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz", "f8e4m3", "f8e3m4",
           "f4e2m1fn"]


@pytest.mark.parametrize("dst", _OTHERS)
def test_every_code_converts_to_other_types_as_xla(dst):
    _assert_like_xla(_convert("f8e8m0fnu", dst, 256), CODES)


def test_every_code_converts_to_f8e5m2_as_xla():
    """NaN too: XLA narrows it to 0x7f from every float narrower than f32."""
    _assert_like_xla(_convert("f8e8m0fnu", "f8e5m2", 256), CODES)


_SOURCES = {
    "s32": np.array([0, 1, 2, 3, 5, 6, 7, -1, 2 ** 31 - 1, -2 ** 31, 12582912, 12582913], np.int32),
    "u64": np.array([0, 1, 3, 2 ** 64 - 1, 2 ** 63 + 2 ** 62], np.uint64),
    "pred": np.array([True, False]),
    "u8": np.arange(256, dtype=np.uint8),
    "s4": np.arange(-8, 8).astype(ml_dtypes.int4),
    "f4e2m1fn": np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -6],
                         np.float32).astype(ml_dtypes.float4_e2m1fn),
    **{name: np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, numpy_name))
       for name, numpy_name in [("f8e4m3fn", "float8_e4m3fn"), ("f8e5m2", "float8_e5m2"),
                                ("f8e3m4", "float8_e3m4"), ("f8e4m3fnuz", "float8_e4m3fnuz")]},
}


@pytest.mark.parametrize("src", list(_SOURCES))
def test_other_types_convert_to_it_as_xla(src):
    x = _SOURCES[src]
    _assert_like_xla(_convert(src, "f8e8m0fnu", x.size), x)


def test_bitcasts_move_the_code():
    text = ("HloModule b\nENTRY e {\n  a = f8e8m0fnu[256] parameter(0)\n"
            "  b = u8[256] parameter(1)\n"
            "  c = u8[256] bitcast-convert(a)\n  d = f8e8m0fnu[256] bitcast-convert(b)\n"
            "  s = s8[256] bitcast-convert(a)\n"
            "  ROOT t = (u8[256], f8e8m0fnu[256], s8[256]) tuple(c, d, s)\n}\n")
    _assert_like_xla(text, CODES, np.arange(256, dtype=np.uint8))


_PAIRS = [v.ravel() for v in np.meshgrid(CODES, CODES)]


@pytest.mark.parametrize("opcode", ["add", "subtract", "multiply", "divide", "maximum",
                                    "minimum", "remainder", "power", "atan2"])
def test_binary_arithmetic_over_every_pair_as_xla(opcode):
    """XLA computes it in f32 and converts back once: multiply of 2.0 and 4.0 (1.5 and 3.0
    converted) by themselves is 4 and 16. Code 0 (2^-127, an f32 denormal) is flushed in its
    add and divide, but its power of code 0 is glibc's powf of a flushed denormal
    (2^(-150 b)) and atan2(code 0, 1) is code 0."""
    n = _PAIRS[0].size
    text = (f"HloModule a\nENTRY e {{\n  a = f8e8m0fnu[{n}] parameter(0)\n"
            f"  b = f8e8m0fnu[{n}] parameter(1)\n  ROOT r = f8e8m0fnu[{n}] {opcode}(a, b)\n}}\n")
    _assert_like_xla(text, *_PAIRS)


@pytest.mark.parametrize("direction", ["LT", "EQ", "GE"])
def test_comparisons_over_every_pair_as_xla(direction):
    n = _PAIRS[0].size
    text = (f"HloModule a\nENTRY e {{\n  a = f8e8m0fnu[{n}] parameter(0)\n"
            f"  b = f8e8m0fnu[{n}] parameter(1)\n"
            f"  c = pred[{n}] compare(a, b), direction={direction}\n"
            f"  d = pred[{n}] compare(a, b), direction={direction}, type=TOTALORDER\n"
            f"  ROOT t = (pred[{n}], pred[{n}]) tuple(c, d)\n}}\n")
    _assert_like_xla(text, *_PAIRS)


def test_select_and_clamp_over_every_pair_as_xla():
    n = _PAIRS[0].size
    text = (f"HloModule a\nENTRY e {{\n  a = f8e8m0fnu[{n}] parameter(0)\n"
            f"  b = f8e8m0fnu[{n}] parameter(1)\n"
            f"  lo = f8e8m0fnu[] constant(0.25)\n  l = f8e8m0fnu[{n}] broadcast(lo), dimensions={{}}\n"
            f"  c = pred[{n}] compare(a, b), direction=LT\n"
            f"  s = f8e8m0fnu[{n}] select(c, a, b)\n"
            f"  k = f8e8m0fnu[{n}] clamp(a, b, l)\n"
            f"  ROOT t = (f8e8m0fnu[{n}], f8e8m0fnu[{n}]) tuple(s, k)\n}}\n")
    _assert_like_xla(text, *_PAIRS)


# every elementwise unary opcode XLA's CPU backend compiles on a float (not sinh, cosh, atan)
@pytest.mark.parametrize("opcode", [
    "abs", "negate", "sign", "floor", "ceil", "round-nearest-afz", "round-nearest-even",
    "exponential", "exponential-minus-one", "log", "log-plus-one", "sqrt", "rsqrt", "cbrt",
    "sine", "cosine", "tan", "tanh", "asin", "acos", "asinh", "acosh", "atanh", "logistic",
    "erf", "is-finite", "copy"])
def test_unary_ops_over_every_code_as_xla(opcode):
    """Code 0 (2^-127) is where XLA differs from flushing it: its ceil and sign give 1, its
    expm1, tan and asin code 0 itself, its sqrt and erf NaN; its log1p of code 1 (2^-126) is
    code 1."""
    out = "pred" if opcode == "is-finite" else "f8e8m0fnu"
    text = (f"HloModule a\nENTRY e {{\n  a = f8e8m0fnu[256] parameter(0)\n"
            f"  ROOT r = {out}[256] {opcode}(a)\n}}\n")
    _assert_like_xla(text, CODES)


def test_data_movement_as_xla():
    n = "f8e8m0fnu"
    text = f"""HloModule m
ENTRY e {{
  a = {n}[16,16] parameter(0)
  i = s32[] parameter(1)
  t = {n}[16,16] transpose(a), dimensions={{1,0}}
  s = {n}[8,4] slice(t), slice={{[2:10], [1:13:3]}}
  sa = {n}[16,4] slice(a), slice={{[0:16], [0:4]}}
  c = {n}[24,4] concatenate(s, sa), dimensions={{0}}
  sb = {n}[2,4] slice(s), slice={{[0:2], [0:4]}}
  u = {n}[24,4] dynamic-update-slice(c, sb, i, i)
  r = {n}[4,24] reshape(u)
  half = {n}[] constant(0.5)
  p = {n}[26,24] pad(r, half), padding=2_20x0_0
  b = {n}[16,16,2] broadcast(a), dimensions={{0,1}}
  rv = {n}[16,16] reverse(a), dimensions={{0}}
  lt = pred[16,16] compare(a, rv), direction=LT
  sel = {n}[16,16] select(lt, a, rv)
  lo = {n}[] constant(0.25)
  hi = {n}[] constant(1024)
  cl = {n}[16,16] clamp(lo, a, hi)
  idx = s32[3,1] constant({{{{1}},{{5}},{{15}}}})
  g = {n}[3,16] gather(a, idx), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,16}}
  ROOT tt = ({n}[26,24], {n}[16,16,2], {n}[16,16], {n}[16,16], {n}[3,16], {n}[16,16]) tuple(p, b, sel, cl, g, t)
}}
"""
    _assert_like_xla(text, CODES.reshape(16, 16), np.int32(3))


@pytest.mark.parametrize("size", [16, 128])     # in its own type; on f32 copies (upcast)
def test_a_dot_rounds_its_f32_sum_once_as_xla(size):
    rng = np.random.default_rng(size)
    a, b = (rng.integers(112, 142, (size, size)).astype(np.uint8).view(E8M0) for _ in range(2))
    text = (f"HloModule d\nENTRY e {{\n  a = f8e8m0fnu[{size},{size}] parameter(0)\n"
            f"  b = f8e8m0fnu[{size},{size}] parameter(1)\n  ROOT d = f8e8m0fnu[{size},{size}] "
            "dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
    _assert_like_xla(text, a, b)


def test_reductions_and_a_dot_as_xla():
    n = "f8e8m0fnu"
    text = f"""HloModule r
add {{
  a = {n}[] parameter(0)
  b = {n}[] parameter(1)
  ROOT c = {n}[] add(a, b)
}}
mx {{
  a = {n}[] parameter(0)
  b = {n}[] parameter(1)
  ROOT c = {n}[] maximum(a, b)
}}
ENTRY e {{
  x = {n}[2,127] parameter(0)
  y = {n}[8,8] parameter(1)
  z = {n}[] constant(0.0078125)
  r = {n}[2] reduce(x, z), dimensions={{1}}, to_apply=add
  q = {n}[127] reduce(x, z), dimensions={{0}}, to_apply=mx
  d = {n}[8,8] dot(y, y), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT t = ({n}[2], {n}[127], {n}[8,8]) tuple(r, q, d)
}}
"""
    _assert_like_xla(text, CODES[1:255].reshape(2, 127), CODES[96:160].reshape(8, 8))


def test_f32_log1p_of_tiny_values_as_xla():
    """Code 1's log1p in f32 terms: log1p is its argument below 2^-24, 2^-126's binade
    included (PoCL's gives 0 there), and +-0 for a denormal, as XLA flushes it."""
    tiny = np.ldexp(1.0, np.arange(-149, -24)) * np.array([[1.0], [1.3], [1.999]])
    x = np.concatenate([tiny.ravel(), -tiny.ravel()]).astype(np.float32)
    text = (f"HloModule l\nENTRY e {{\n  x = f32[{x.size}] parameter(0)\n"
            f"  ROOT r = f32[{x.size}] log-plus-one(x)\n}}\n")
    _assert_like_xla(text, x)


@pytest.mark.parametrize("opcode", ["sign", "ceil", "exponential-minus-one", "tan", "asin",
                                    "power", "atan2"])
def test_the_ops_xla_folds_at_code_0_converted_to_f32_as_xla(opcode):
    """XLA converts their unrounded f32 result: at code 0 its folded value (ceil and sign 1,
    expm1, tan and asin the denormal 2^-127 unflushed, power 2^(-150 b), atan2 code 0 where
    b is 1), bit for bit; elsewhere f32's operation, within 2 ulps of XLA's (a NaN's sign
    aside: f32 asin of 2 is -NaN here). Rounded, they were whole binades off (tan of 1:
    1.5574 against 2)."""
    binary = opcode in ("power", "atan2")
    args = _PAIRS if binary else (CODES,)
    n = args[0].size
    params = "".join(f"  {v} = f8e8m0fnu[{n}] parameter({k})\n"
                     for k, v in enumerate("ab"[:len(args)]))
    text = (f"HloModule a\nENTRY e {{\n{params}"
            f"  r = f8e8m0fnu[{n}] {opcode}({', '.join('ab'[:len(args)])})\n"
            f"  ROOT c = f32[{n}] convert(r)\n}}\n")
    (want,), (got,) = _xla(text, *args), _ours(text, *args)
    code_0 = args[0].view(np.uint8) == 0
    exact = code_0 if opcode != "power" else np.zeros(n, bool)   # f32's power, not exp2
    np.testing.assert_array_equal(_bits(got[exact]), _bits(want[exact]))
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all()
    ulps = np.abs(_bits(got).astype(np.int64) - _bits(want).astype(np.int64))
    assert ulps[~nan].max() <= 2


def test_the_folded_code_0_results_are_the_opcodes_table_column():
    """The opcodes float normalisation leaves rounded (``folds_exponent_float_tiny``) are
    those whose code 0 result the code generator gives as XLA folds it, no more, no fewer."""
    from runtime.codegen.templates import EXPONENT_FLOAT_TINY
    from runtime.hlo.opcodes import OPCODES
    from runtime.passes.float_normalization import CODE_0
    assert set(EXPONENT_FLOAT_TINY) == set(CODE_0) == {op for op, spec in OPCODES.items()
                                                       if spec.folds_exponent_float_tiny}
