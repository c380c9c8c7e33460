"""Every float NaN converted to every other float type carries XLA's CPU backend's bits: a
NaN narrowed to f8e5m2 from f16, bf16 or a byte float is 0x7f whatever its sign (0x7e with
its sign from f32 and f64), an "fnuz" NaN widens as +NaN, an f64 NaN narrows to f16 as the
quiet NaN with its sign (no payload). Also as XLA: convert round trips through a type holding
every value keep the bits, the 8-bit floats' sign and rounding ops on every code, and converts
of narrow-float arithmetic into the type XLA computes it in. (f6e2m3fn and f6e3m2fn are not
compared: XLA's CPU backend does not take them.)"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.hlo.dtypes import ELEMENT_TYPES, EXPONENT_FLOATS

_FLOATS = ["f64", "f32", "f16", "bf16", "f8e5m2", "f8e4m3fn", "f8e4m3b11fnuz", "f8e5m2fnuz",
           "f8e4m3fnuz", "f8e3m4", "f8e4m3", "f8e8m0fnu", "f4e2m1fn"]


def _nans(name: str) -> np.ndarray:
    """Every NaN code of a format of 16 bits or fewer; quiet, signalling, payload-carrying
    and negative NaNs of f32 and f64."""
    et = ELEMENT_TYPES[name]
    if et.bits == 32:
        return np.array([0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff,
                         0x7fa00000, 0x7fe00000], np.uint32).view(np.float32)
    if et.bits == 64:
        return np.array([0x7ff8000000000000, 0xfff8000000000000, 0x7ff0000000000001,
                         0x7fffffffffffffff, 0xffffffffffffffff, 0x7ff4000000000000],
                        np.uint64).view(np.float64)
    codes = np.arange(1 << 16 if et.bits == 16 else 256,
                      dtype=np.uint16 if et.bits == 16 else np.uint8).view(et.numpy)
    with np.errstate(invalid="ignore"):
        return codes[np.isnan(codes.astype(np.float32))]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.itemsize}")


def _module(params: list[tuple[str, int]], lines: list[str], outs: list[tuple[str, str]]) -> str:
    """One module of ``params`` (type, length; named x0, x1...), ``lines`` and the tuple of
    ``outs`` (name, shape): many checks share one compile on each side."""
    text = "HloModule m\nENTRY e {\n"
    text += "".join(f"  x{k} = {t}[{n}] parameter({k})\n" for k, (t, n) in enumerate(params))
    text += "".join(f"  {line}\n" for line in lines)
    return text + (f"  ROOT t = ({', '.join(shape for _, shape in outs)}) "
                   f"tuple({', '.join(name for name, _ in outs)})\n}}\n")


def _assert_bits_as_xla(text: str, args: list[np.ndarray], labels: list[str],
                        fusions: tuple[bool, ...] = (True,)) -> None:
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    with jax.enable_x64(True):
        want = xla_cpu.compile_hlo(text).executable.execute([jax.device_put(a) for a in args])
    for fusion in fusions:
        got = runtime.compile(text, fusion=fusion)(*args)
        for label, g, w in zip(labels, got, want, strict=True):
            np.testing.assert_array_equal(_bits(np.asarray(g)), _bits(np.asarray(w)),
                                          err_msg=f"{label} ({'fused' if fusion else 'unfused'})")


def test_nans_convert_to_every_float_as_xla():
    sources = [n for n in _FLOATS if n != "f4e2m1fn"]
    args = [_nans(src) for src in sources]
    lines, outs, labels = [], [], []
    for k, (src, x) in enumerate(zip(sources, args)):
        for dst in _FLOATS:
            if dst != src:
                lines.append(f"c{k}{dst} = {dst}[{x.size}] convert(x{k})")
                outs.append((f"c{k}{dst}", f"{dst}[{x.size}]"))
                labels.append(f"{src} -> {dst}")
    _assert_bits_as_xla(_module([(s, x.size) for s, x in zip(sources, args)], lines, outs),
                        args, labels)


def test_f8e5m2_arithmetic_makes_nan_0x7f_as_xla():
    """XLA computes f8e5m2 arithmetic in f16 and narrows a NaN result to 0x7f, which widens
    (fused or not) as the quiet +NaN."""
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    x = np.array([0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff, 0x7c, 0xfc],
                 np.uint8).view(ml_dtypes.float8_e5m2)
    y = np.array([0, 0, 0, 0, 0, 0, 0xfc, 0x7c], np.uint8).view(ml_dtypes.float8_e5m2)
    text = ("HloModule a\nENTRY e {\n  x = f8e5m2[8] parameter(0)\n  y = f8e5m2[8] parameter(1)\n"
            "  a = f8e5m2[8] add(x, y)\n  s = f8e5m2[8] sqrt(x)\n"
            "  w = f32[8] convert(a)\n  d = f64[8] convert(s)\n  b = bf16[8] convert(a)\n"
            "  h = f16[8] parameter(2)\n  n = f8e5m2[8] convert(h)\n  v = f32[8] convert(n)\n"
            "  ROOT t = (f8e5m2[8], f8e5m2[8], f32[8], f64[8], bf16[8], f32[8]) "
            "tuple(a, s, w, d, b, v)\n}\n")
    h = np.array([0x7e00, 0xfe00, 0x7c01, 0xfd00, 0x3c00, 0, 0x7c00, 0xfc00],
                 np.uint16).view(np.float16)
    with jax.enable_x64(True):
        want = xla_cpu.compile_hlo(text).executable.execute(
            [jax.device_put(x), jax.device_put(y), jax.device_put(h)])
    got = runtime.compile(text)(x, y, h)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_bits(np.asarray(g)), _bits(np.asarray(w)))


_ROUND_TRIP_MIDS = ["f16", "bf16", "f32", "f64", "f8e5m2", "f8e4m3fn", "s8", "u8", "s16",
                    "s32"]
_ROUND_TRIP_SOURCES = ["f16", "bf16", "f8e5m2", "f8e4m3fn", "f8e4m3b11fnuz", "f8e5m2fnuz",
                       "f8e4m3fnuz", "f8e3m4", "f8e4m3", "f8e8m0fnu", "s8", "u8", "s16", "u16"]


def test_every_code_converted_there_and_back_as_xla():
    """XLA drops a convert round trip through a type holding every value (f8e5m2 -> f16 ->
    f8e5m2 keeps NaN 0x7d's payload) and computes a lossy one (f16 -> f8e5m2 -> f16)."""
    args, lines, outs, labels = [], [], [], []
    for k, src in enumerate(_ROUND_TRIP_SOURCES):
        et = ELEMENT_TYPES[src]
        x = np.arange(1 << et.bits, dtype=np.uint32).astype(f"u{et.bits // 8}").view(et.numpy)
        args.append(x)
        for mid in _ROUND_TRIP_MIDS:
            if mid != src:
                lines += [f"m{k}{mid} = {mid}[{x.size}] convert(x{k})",
                          f"r{k}{mid} = {src}[{x.size}] convert(m{k}{mid})"]
                outs.append((f"r{k}{mid}", f"{src}[{x.size}]"))
                labels.append(f"{src} -> {mid} -> {src}")
    _assert_bits_as_xla(_module([(s, x.size) for s, x in zip(_ROUND_TRIP_SOURCES, args)],
                                lines, outs), args, labels)


def test_f32_through_f16_and_back_is_rounded_as_xla():
    """Lossy: XLA keeps both converts (f16's rounding, overflow and flushed denormals)."""
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    x = np.array([1 + 2.0 ** -20, 70000.0, 1e-8, 0.0, 3.14159], np.float32)
    x[3] = np.array(0x7fa00001, np.uint32).view(np.float32)     # a signalling NaN
    text = ("HloModule l\nENTRY e {\n  x = f32[5] parameter(0)\n  h = f16[5] convert(x)\n"
            "  ROOT r = f32[5] convert(h)\n}\n")
    want = xla_cpu.compile_hlo(text).executable.execute([jax.device_put(x)])[0]
    got = runtime.compile(text)(x)
    np.testing.assert_array_equal(_bits(np.asarray(got)), _bits(np.asarray(want)))
    assert not np.array_equal(_bits(np.asarray(want)), _bits(x))


_EXACT_UNARY = ["abs", "negate", "sign", "floor", "ceil", "round-nearest-afz",
                "round-nearest-even", "sqrt", "copy"]
_BYTE_FLOATS = [n for n in _FLOATS if ELEMENT_TYPES[n].bits == 8]


def test_sign_and_rounding_ops_on_every_code_as_xla():
    """XLA computes them in f16 (f32 for f8e8m0fnu) and converts back: f8e5m2's NaN is 0x7f
    whatever its sign, a "fnuz" -0 is +0, f8e3m4's floor(-15.5) is -inf, f8e8m0fnu's negation
    NaN; a convert to that wide type reads the unconverted result (f8e5m2's -NaN stays
    negative there, f8e8m0fnu's negation is -2^(c-127) in f32, its code 0 the f32 denormal
    2^-127 flushed by floor, folded by sign and ceil to 1). Every 8-bit float at once, stored,
    converted to f64, f32 and f16."""
    x = np.arange(256, dtype=np.uint8)
    lines, outs, labels = [], [], []
    for k, name in enumerate(_BYTE_FLOATS):
        for j, op in enumerate(_EXACT_UNARY):
            lines.append(f"o{k}x{j} = {name}[256] {op}(x{k})")
            outs.append((f"o{k}x{j}", f"{name}[256]"))
            labels.append(f"{op} of {name}")
            for t in ("f64", "f32", "f16"):
                lines.append(f"w{k}x{j}{t} = {t}[256] convert(o{k}x{j})")
                outs.append((f"w{k}x{j}{t}", f"{t}[256]"))
                labels.append(f"{op} of {name} as {t}")
    _assert_bits_as_xla(_module([(n, 256) for n in _BYTE_FLOATS], lines, outs),
                        [x.view(ELEMENT_TYPES[n].numpy) for n in _BYTE_FLOATS], labels)


_COMPUTED = ["f8e5m2", "f8e4m3fn", "f8e3m4", "f8e5m2fnuz", "f8e8m0fnu", "bf16"]


def test_arithmetic_converted_to_its_compute_type_is_not_rounded_as_xla():
    """XLA's float normalisation hands a convert to the type it computes the arithmetic in
    the wide result: an f8e5m2 sum converted to f16 is f16's sum (-NaN + 0 is f16's -NaN,
    1 + 2^-3 is not rounded to f8e5m2), bf16's exp converted to f32 is f32's, f8e8m0fnu's
    code 0 (2^-127) is flushed in f32's add. Other users (here a convert to f64 and the
    stored result) still read the rounded value. Fused and unfused."""
    rng = np.random.default_rng(0)
    args, lines, outs, labels = [], [], [], []
    for k, name in enumerate(_COMPUTED):
        et = ELEMENT_TYPES[name]
        codes = np.arange(1 << et.bits, dtype=np.uint32).astype(f"u{et.bits // 8}")
        x = codes[rng.permutation(codes.size)[:4096]].view(et.numpy) if et.bits == 16 \
            else codes.view(et.numpy)
        y = x[rng.permutation(x.size)]
        with np.errstate(invalid="ignore"):     # which of two NaNs survives: x86's operand order
            y = np.where(np.isnan(x.astype(np.float32)) & np.isnan(y.astype(np.float32)),
                         np.zeros_like(y), y)
        args += [x, y]
        n, w, a, b = x.size, et.arithmetic_type, f"x{2 * k}", f"x{2 * k + 1}"
        lines += [f"a{k} = {name}[{n}] add({a}, {b})", f"m{k} = {name}[{n}] multiply({a}, {b})",
                  f"p{k} = pred[{n}] compare({a}, {b}), direction=LT",
                  f"sel{k} = {name}[{n}] select(p{k}, a{k}, m{k})",
                  f"wa{k} = {w}[{n}] convert(a{k})", f"wm{k} = {w}[{n}] convert(m{k})",
                  f"ws{k} = {w}[{n}] convert(sel{k})", f"da{k} = f64[{n}] convert(a{k})"]
        for v, what, t in (("wa", "add", w), ("wm", "multiply", w), ("ws", "select", w),
                           ("da", "add as f64", "f64"), ("a", "add stored", name)):
            outs.append((f"{v}{k}", f"{t}[{n}]"))
            labels.append(f"{what} of {name}")
    params = [(name, a.size) for name, a in zip(np.repeat(_COMPUTED, 2), args)]
    _assert_bits_as_xla(_module(params, lines, outs), args, labels, (True, False))


@pytest.mark.parametrize("name", ["f8e5m2", "bf16"])
def test_exp_converted_to_its_compute_type_is_not_rounded_as_xla(name):
    """bf16's exp converted to f32 is f32's exp (the same within XLA's last bit: a
    transcendental), not bf16's."""
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    et = ELEMENT_TYPES[name]
    x = np.arange(0, 1 << et.bits, 1 if et.bits == 8 else 16, dtype=np.uint32)
    x = x.astype(f"u{et.bits // 8}").view(et.numpy)
    text = (f"HloModule q\nENTRY e {{\n  x = {name}[{x.size}] parameter(0)\n"
            f"  q = {name}[{x.size}] exponential(x)\n"
            f"  ROOT w = {et.arithmetic_type}[{x.size}] convert(q)\n}}\n")
    want = _bits(np.asarray(xla_cpu.compile_hlo(text).executable.execute([jax.device_put(x)])[0]))
    got = _bits(np.asarray(runtime.compile(text)(x)))
    assert (np.abs(got.astype(np.int64) - want.astype(np.int64)) <= 1).all(), name
