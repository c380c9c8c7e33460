"""Every float elementwise opcode's NaN results carry XLA's CPU backend's bits (x86): a NaN
operand comes out quieted with its sign and payload, an invalid operation (log(-1), sqrt(-1),
sine(inf), inf % 1, 0 * inf) gives x86's negative default NaN, and the exceptions
``OpcodeSpec.nan`` lists (Eigen's f32 log gives all ones, asin(2) +NaN, logistic flips the
sign, f16 and 8-bit maximum the canonical +NaN...). Compared where either result is NaN, on
NaNs of both signs with payloads, signalling NaNs, infinities, zeros and +-1, fused and not,
against XLA (the test extra) or, for the opcodes jax 0.10.2's XLA cannot compile, against
bits measured with jax 0.12's."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.hlo.dtypes import ELEMENT_TYPES

_UNARY = ["abs", "negate", "sign", "floor", "ceil", "round-nearest-afz", "round-nearest-even",
          "exponential", "exponential-minus-one", "log", "log-plus-one", "sqrt", "rsqrt", "cbrt",
          "sine", "cosine", "tan", "tanh", "logistic", "erf", "real", "copy"]
_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "power", "maximum", "minimum",
           "atan2"]
# f16 operations XLA computes on the bits: a vector kernel's f16 load (vload_half) quiets a
# signalling NaN they keep, so they are compared on quiet NaNs only
_BIT_OPS = {"abs", "negate", "sign", "real", "copy"}
_FAST = ["f32", "f64", "f16", "bf16"]
_BYTE = ["f8e4m3", "f8e5m2", "f8e3m4", "f8e4m3fn"]


def _inputs(name: str) -> np.ndarray:
    """NaNs (quiet and signalling, both signs, payloads), infinities, zeros and numbers; every
    code of an 8-bit float."""
    et = ELEMENT_TYPES[name]
    if et.bits == 8:
        return np.arange(256, dtype=np.uint8).view(et.numpy)
    bits = {"f32": [0x7fc00000, 0xffc00000, 0x7fc01234, 0xffa00001, 0x7f800001, 0x7f800000,
                    0xff800000, 0, 0x80000000],
            "f64": [0x7ff8000000000000, 0xfff8000000000000, 0x7ff8000000001234,
                    0xfff4000000000001, 0x7ff0000000000001, 0x7ff0000000000000,
                    0xfff0000000000000, 0, 0x8000000000000000],
            "f16": [0x7e00, 0xfe00, 0x7e12, 0xfd01, 0x7c01, 0x7c00, 0xfc00, 0, 0x8000],
            "bf16": [0x7fc0, 0xffc0, 0x7fd2, 0xffa1, 0x7f81, 0x7f80, 0xff80, 0, 0x8000]}[name]
    special = np.array(bits, f"u{et.bits // 8}").view(et.numpy)
    numbers = np.array([-1, 1, 0.5, 2, -2.5, 100, 0.7, -0.3], np.float32).astype(et.numpy)
    return np.concatenate([special, numbers])


def _pairs(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of ``_inputs`` (of an 8-bit float: its NaNs, infinities and some numbers)."""
    x = _inputs(name)
    if x.itemsize == 1:
        with np.errstate(invalid="ignore"):
            wide = x.astype(np.float32)
        keep = ~np.isfinite(wide) | np.isin(wide, [0, 1, -1, 0.5, 2, -2.5])
        x = x[keep]
    return np.repeat(x, x.size), np.tile(x, x.size)


def _bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(f"u{a.itemsize}")


def _nan(a) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.isnan(np.asarray(a).astype(np.float64))


def _module(t: str, n: int, arity: int, lines: list[str], outs: list[str]) -> str:
    text = "HloModule m\nENTRY e {\n"
    text += "".join(f"  x{k} = {t}[{n}] parameter({k})\n" for k in range(arity))
    text += "".join(f"  {line}\n" for line in lines)
    return text + (f"  ROOT t = ({', '.join([f'{t}[{n}]'] * len(outs))}) "
                   f"tuple({', '.join(outs)})\n}}\n")


def _xla(text: str, args: list[np.ndarray]) -> list[np.ndarray]:
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    with jax.enable_x64(True):
        out = xla_cpu.compile_hlo(text).executable.execute([jax.device_put(a) for a in args])
    return [np.asarray(o) for o in out]


def _assert_nans_as_xla(t: str, text: str, args: list[np.ndarray], labels: list[str],
                        fusion: bool, skip=lambda label: None) -> None:
    want = _xla(text, args)
    got = runtime.compile(text, fusion=fusion)(*args)
    for label, g, w in zip(labels, got, want, strict=True):
        where = _nan(g) | _nan(w)
        skipped = skip(label)
        if skipped is not None:
            where &= ~skipped
        np.testing.assert_array_equal(_bits(g)[where], _bits(w)[where],
                                      err_msg=f"{label} {t} ({'fused' if fusion else 'unfused'})")


def _signalling(x: np.ndarray) -> np.ndarray:
    """Where ``x`` (f16) is a signalling NaN."""
    b = _bits(x)
    return ((b & 0x7fff) > 0x7c00) & ((b & 0x200) == 0)


def _unary_case(t: str, fusion: bool) -> None:
    x = _inputs(t)
    # (left: an 8-bit float's bitcast reads its f32 value, whose NaN code is the format's one
    # NaN with the sign, where XLA's reads the code; so only wider types bitcast here)
    bitcast = [] if x.itemsize == 1 else ["bitcast-log", "reduce-precision"]
    ops = _UNARY + bitcast
    lines = [f"r{k} = {t}[{x.size}] {op}(x0)" for k, op in enumerate(_UNARY)]
    unsigned = f"u{x.itemsize * 8}"
    lines += [f"l = {t}[{x.size}] log(x0)",
              f"bl = {unsigned}[{x.size}] bitcast-convert(l)", f"r{len(_UNARY)} = {t}[{x.size}] "
              f"bitcast-convert(bl)", f"r{len(_UNARY) + 1} = {t}[{x.size}] reduce-precision(x0), "
              "exponent_bits=5, mantissa_bits=2"] if bitcast else []
    text = _module(t, x.size, 1, lines, [f"r{k}" for k in range(len(ops))])

    def skip(label: str):
        if label == "real" and x.itemsize == 1:
            # left: an 8-bit float's value in a kernel is its f32, whose NaN's code is the
            # format's one NaN with the sign; XLA's real keeps the code
            return np.ones(x.size, bool)
        return _signalling(x) if t == "f16" and label in _BIT_OPS else None
    _assert_nans_as_xla(t, text, [x], ops, fusion, skip)


def _binary_case(t: str, fusion: bool) -> None:
    a, b = _pairs(t)
    n = a.size
    lines = [f"r{k} = {t}[{n}] {op}(x0, x1)" for k, op in enumerate(_BINARY)]
    lines += [f"m = {t}[{n}] multiply(x0, x1)", f"r{len(_BINARY)} = {t}[{n}] clamp(x0, x1, m)"]
    text = _module(t, n, 2, lines, [f"r{k}" for k in range(len(_BINARY) + 1)])

    with np.errstate(invalid="ignore"):
        wa, wb = a.astype(np.float32), b.astype(np.float32)

    def skip(label: str):
        if label == "power":
            # left: glibc's powf cases, pow(NaN, +-1) without its sign and a signalling NaN
            # to the power 0 or 1 to a signalling one
            return (np.isnan(wa) & np.isin(wb, [1, -1, 0])) | (np.isnan(wb) & (wa == 1))
        if a.itemsize == 1 and label != "atan2":
            # left: which of two NaNs an 8-bit float's scalar kernel passes on (the compiler
            # may swap the operands of its f32 arithmetic; XLA's f16 keeps the first)
            return np.isnan(wa) & np.isnan(wb)
        return None
    _assert_nans_as_xla(t, text, [a, b], _BINARY + ["clamp"], fusion, skip)


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("t", _FAST)
def test_unary_nans_as_xla(t, fusion):
    _unary_case(t, fusion)


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("t", _FAST)
def test_binary_nans_as_xla(t, fusion):
    _binary_case(t, fusion)


@pytest.mark.slow
@pytest.mark.parametrize("t", _BYTE)
def test_byte_float_nans_as_xla(t):
    """XLA computes them through f16: log's NaN is negative, maximum's and clamp's +NaN."""
    _unary_case(t, True)
    _binary_case(t, True)


# measured with jax 0.12's XLA (jax 0.10.2's cannot compile these opcodes) on these inputs
_INPUTS_12 = {
    "f32": [0x7fc00000, 0xffc00000, 0x7fc01234, 0xffa00001, 0x7f800001, 0x7f800000, 0xff800000,
            0, 0x80000000, 0xbf800000, 0x40000000, 0xc0200000, 0x3f000000],
    "f16": [0x7e00, 0xfe00, 0x7e12, 0xfd01, 0x7c01, 0x7c00, 0xfc00, 0, 0x8000, 0xbc00, 0x4000,
            0xc100, 0x3800],
}
_NAN_12 = {
    "f32": {
        "sinh": [0x7fc00000, 0xffc00000, 0x7fc01234, 0xffe00001, 0x7fc00001],
        "cosh": [0x7fc00000, 0xffc00000, 0x7fc01234, 0xffe00001, 0x7fc00001],
        "asin": [0x7fc00000, 0xffc00000, 0x7fc01234, 0xffe00001, 0x7fc00001, 0x7fc00000,
                 0x7fc00000, None, None, None, 0x7fc00000, 0x7fc00000],
        "acos": [0x7fc00000, 0xffc00000, 0x7fc01234, 0xffe00001, 0x7fc00001, 0x7fc00000,
                 0x7fc00000, None, None, None, 0x7fc00000, 0x7fc00000],
        "asinh": [0x7fc00000, 0xffc00000, 0x7fc01234, 0xffe00001, 0x7fc00001],
        "acosh": [0x7fc00000, 0xffc00000, 0x7fc01234, 0xffe00001, 0x7fc00001, None,
                  0xffc00000, 0xffc00000, 0xffc00000, 0xffc00000, None, 0xffc00000,
                  0xffc00000],
        "atanh": [0x7fc00000, 0xffc00000, 0x7fc01234, 0xffe00001, 0x7fc00001, 0xffc00000,
                  0xffc00000, None, None, None, 0xffc00000, 0xffc00000],
    },
    "f16": {
        "sinh": [0x7e00, 0xfe00, 0x7e12, 0xff01, 0x7e01],
        "cosh": [0x7e00, 0xfe00, 0x7e12, 0xff01, 0x7e01],
        "asin": [0x7e00, 0xfe00, 0x7e12, 0xff01, 0x7e01, 0x7e00, 0x7e00, None, None, None,
                 0x7e00, 0x7e00],
        "acos": [0x7e00, 0xfe00, 0x7e12, 0xff01, 0x7e01, 0x7e00, 0x7e00, None, None, None,
                 0x7e00, 0x7e00],
        "asinh": [0x7e00, 0xfe00, 0x7e12, 0xff01, 0x7e01],
        "acosh": [0x7e00, 0xfe00, 0x7e12, 0xff01, 0x7e01, None, 0xfe00, 0xfe00, 0xfe00, 0xfe00,
                  None, 0xfe00, 0xfe00],
        "atanh": [0x7e00, 0xfe00, 0x7e12, 0xff01, 0x7e01, 0xfe00, 0xfe00, None, None, None,
                  0xfe00, 0xfe00],
    },
}


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("t", sorted(_NAN_12))
def test_nans_of_opcodes_jax_0_10_cannot_compile(t, fusion):
    x = np.array(_INPUTS_12[t], np.uint32 if t == "f32" else np.uint16).view(
        np.float32 if t == "f32" else np.float16)
    ops = list(_NAN_12[t])
    text = _module(t, x.size, 1, [f"r{k} = {t}[{x.size}] {op}(x0)" for k, op in enumerate(ops)],
                   [f"r{k}" for k in range(len(ops))])
    got = runtime.compile(text, fusion=fusion)(x)
    for op, g in zip(ops, got, strict=True):
        want = _NAN_12[t][op]
        where = [k for k, w in enumerate(want) if w is not None]
        assert [int(v) for v in _bits(g)[where]] == [want[k] for k in where], op
        assert not _nan(g)[len(want):].any() and not _nan(g)[
            [k for k, w in enumerate(want) if w is None]].any(), op


def test_byte_float_log_and_maximum_nan_signs():
    """The issue's examples without XLA: f8e3m4's log of a positive NaN is its negative NaN
    (XLA's f16 log of the widened code gives all ones), maximum(-NaN, 0) its positive one."""
    codes = np.array([0x79, 0xf9], np.uint8).view(ml_dtypes.float8_e3m4)
    text = ("HloModule m\nENTRY e {\n  x = f8e3m4[2] parameter(0)\n  l = f8e3m4[2] log(x)\n"
            "  z = f8e3m4[] constant(0)\n  zs = f8e3m4[2] broadcast(z), dimensions={}\n"
            "  m = f8e3m4[2] maximum(x, zs)\n  ROOT t = (f8e3m4[2], f8e3m4[2]) tuple(l, m)\n}\n")
    log, biggest = runtime.compile(text)(codes)
    assert _bits(log).tolist() == [0xf8, 0xf8]
    assert _bits(biggest).tolist() == [0x78, 0x78]


_DENORMAL_EXPONENT = """HloModule pow_denormal
ENTRY e {
  a = {t}[6] parameter(0)
  b = {t}[6] parameter(1)
  ROOT p = {t}[6] power(a, b)
}
"""


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("t, tiny", [("f32", 1e-40), ("f64", 1e-310)])
def test_power_of_a_negative_base_to_a_denormal_exponent(t, tiny, fusion):
    """Found by the fuzzer: XLA's CPU backend calls glibc's pow, which reads the exponent's
    bits, so a denormal exponent is not an integer and pow(-2, 1e-40) is x86's default NaN;
    the device flushed the exponent to 0 and gave 1. A positive base still gives 1."""
    dtype = np.float32 if t == "f32" else np.float64
    a = np.array([-2, -0.5, -1, 2, 0.5, -2], dtype)
    b = np.array([tiny, -tiny, tiny, tiny, -tiny, 0], dtype)
    got = np.asarray(runtime.compile(_DENORMAL_EXPONENT.replace("{t}", t), fusion=fusion)(a, b))
    default_nan = np.array([0xffc00000 if t == "f32" else 0xfff8000000000000],
                           f"u{a.itemsize}").view(dtype)[0]
    want = np.array([default_nan] * 3 + [1, 1, 1], dtype)
    np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("fusion", [True, False])
def test_power_of_a_denormal_base_as_glibc_under_flush_to_zero(fusion):
    """Found by the fuzzer: glibc's powf, which XLA's CPU backend calls, takes a positive
    denormal base's log2 as -150 under flush-to-zero (pow(2.8e-40, 0.5) is 2^-75, pow(x, -1)
    inf); PoCL's pow read garbage (0.014 for pow(2.8e-40, 1)). A negative one is NaN."""
    a = np.array([2.8e-40, 2.8e-40, 2.8e-40, 2.8e-40, -2.8e-40, 2.8e-40], np.float32)
    b = np.array([0.5, -1, 1, 0, 0.5, -0.25], np.float32)
    got = np.asarray(runtime.compile(_DENORMAL_EXPONENT.replace("{t}", "f32"),
                                     fusion=fusion)(a, b))
    want = np.array([2.0 ** -75, np.inf, 0, 1, np.nan, 2.0 ** 37.5], np.float32)
    np.testing.assert_array_equal(got, want)
