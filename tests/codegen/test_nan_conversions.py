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


@pytest.mark.parametrize("src", [n for n in _FLOATS if n != "f4e2m1fn"])
def test_nans_convert_to_every_float_as_xla(src):
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    x = _nans(src)
    targets = [d for d in _FLOATS if d != src]
    lines = [f"  c{k} = {d}[{x.size}] convert(x)" for k, d in enumerate(targets)]
    shapes = ", ".join(f"{d}[{x.size}]" for d in targets)
    names = ", ".join(f"c{k}" for k in range(len(targets)))
    text = (f"HloModule n\nENTRY e {{\n  x = {src}[{x.size}] parameter(0)\n"
            + "\n".join(lines) + f"\n  ROOT t = ({shapes}) tuple({names})\n}}\n")
    with jax.enable_x64(True):
        want = xla_cpu.compile_hlo(text).executable.execute([jax.device_put(x)])
    got = runtime.compile(text)(x)
    for dst, g, w in zip(targets, got, want):
        np.testing.assert_array_equal(_bits(np.asarray(g)), _bits(np.asarray(w)),
                                      err_msg=f"{src} -> {dst}")


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


@pytest.mark.parametrize("src", ["f16", "bf16", "f8e5m2", "f8e4m3fn", "f8e4m3b11fnuz",
                                 "f8e5m2fnuz", "f8e4m3fnuz", "f8e3m4", "f8e4m3", "f8e8m0fnu",
                                 "s8", "u8", "s16", "u16"])
def test_every_code_converted_there_and_back_as_xla(src):
    """XLA drops a convert round trip through a type holding every value (f8e5m2 -> f16 ->
    f8e5m2 keeps NaN 0x7d's payload) and computes a lossy one (f16 -> f8e5m2 -> f16)."""
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    et = ELEMENT_TYPES[src]
    x = np.arange(1 << et.bits, dtype=np.uint32).astype(f"u{et.bits // 8}").view(et.numpy)
    mids = [m for m in _ROUND_TRIP_MIDS if m != src]
    lines = [f"  m{k} = {m}[{x.size}] convert(x)\n  r{k} = {src}[{x.size}] convert(m{k})"
             for k, m in enumerate(mids)]
    text = (f"HloModule rt\nENTRY e {{\n  x = {src}[{x.size}] parameter(0)\n" + "\n".join(lines)
            + f"\n  ROOT t = ({', '.join([f'{src}[{x.size}]'] * len(mids))}) "
            f"tuple({', '.join(f'r{k}' for k in range(len(mids)))})\n}}\n")
    with jax.enable_x64(True):
        want = xla_cpu.compile_hlo(text).executable.execute([jax.device_put(x)])
    got = runtime.compile(text)(x)
    for mid, g, w in zip(mids, got, want):
        np.testing.assert_array_equal(_bits(np.asarray(g)), _bits(np.asarray(w)),
                                      err_msg=f"{src} -> {mid} -> {src}")


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


@pytest.mark.parametrize("name", [n for n in _FLOATS if ELEMENT_TYPES[n].bits == 8])
def test_sign_and_rounding_ops_on_every_code_as_xla(name):
    """XLA computes them in f16 (f32 for f8e8m0fnu) and converts back: f8e5m2's NaN is 0x7f
    whatever its sign, a "fnuz" -0 is +0, f8e3m4's floor(-15.5) is -inf, f8e8m0fnu's negation
    NaN; a convert to that wide type reads the unconverted result (f8e5m2's -NaN stays
    negative there, f8e8m0fnu's negation is -2^(c-127) in f32, its code 0 the f32 denormal
    2^-127 flushed by floor, folded by sign and ceil to 1). Stored, converted to f64, f32
    and f16."""
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    x = np.arange(256, dtype=np.uint8).view(ELEMENT_TYPES[name].numpy)
    outs = [name, "f64", "f32", "f16"]
    lines, names = [], []
    for k, op in enumerate(_EXACT_UNARY):
        lines.append(f"  o{k} = {name}[256] {op}(x)")
        names.append(f"o{k}")
        for j, t in enumerate(outs[1:]):
            lines.append(f"  w{k}x{j} = {t}[256] convert(o{k})")
            names.append(f"w{k}x{j}")
    shapes = ", ".join(f"{t}[256]" for _ in _EXACT_UNARY for t in outs)
    text = (f"HloModule s\nENTRY e {{\n  x = {name}[256] parameter(0)\n" + "\n".join(lines)
            + f"\n  ROOT t = ({shapes}) tuple({', '.join(names)})\n}}\n")
    with jax.enable_x64(True):
        want = xla_cpu.compile_hlo(text).executable.execute([jax.device_put(x)])
    got = runtime.compile(text)(x)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(
            _bits(np.asarray(g)), _bits(np.asarray(w)),
            err_msg=f"{_EXACT_UNARY[k // len(outs)]} of {name} as {outs[k % len(outs)]}")


@pytest.mark.parametrize("name", ["f8e5m2", "f8e4m3fn", "f8e3m4", "f8e5m2fnuz", "f8e8m0fnu",
                                  "bf16"])
def test_arithmetic_converted_to_its_compute_type_is_not_rounded_as_xla(name):
    """XLA's float normalisation hands a convert to the type it computes the arithmetic in
    the wide result: an f8e5m2 sum converted to f16 is f16's sum (-NaN + 0 is f16's -NaN,
    1 + 2^-3 is not rounded to f8e5m2), bf16's exp converted to f32 is f32's. Other users
    (here a convert to f64 and the stored result) still read the rounded value."""
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    et = ELEMENT_TYPES[name]
    codes = np.arange(1 << et.bits, dtype=np.uint32).astype(f"u{et.bits // 8}")
    rng = np.random.default_rng(0)
    x = codes[rng.permutation(codes.size)[:4096]].view(et.numpy) if et.bits == 16 \
        else codes.view(et.numpy)
    y = x[rng.permutation(x.size)]
    with np.errstate(invalid="ignore"):     # which of two NaNs survives is x86's operand order
        y = np.where(np.isnan(x.astype(np.float32)) & np.isnan(y.astype(np.float32)),
                     np.zeros_like(y), y)
    n, wide = x.size, et.arithmetic_type
    text = (f"HloModule a\nENTRY e {{\n  x = {name}[{n}] parameter(0)\n"
            f"  y = {name}[{n}] parameter(1)\n  a = {name}[{n}] add(x, y)\n"
            f"  m = {name}[{n}] multiply(x, y)\n  q = {name}[{n}] exponential(x)\n"
            f"  p = pred[{n}] compare(x, y), direction=LT\n  s = {name}[{n}] select(p, a, m)\n"
            f"  wa = {wide}[{n}] convert(a)\n  wm = {wide}[{n}] convert(m)\n"
            f"  wq = {wide}[{n}] convert(q)\n  ws = {wide}[{n}] convert(s)\n"
            f"  da = f64[{n}] convert(a)\n"
            f"  ROOT t = ({wide}[{n}], {wide}[{n}], {wide}[{n}], {wide}[{n}], f64[{n}], "
            f"{name}[{n}]) tuple(wa, wm, wq, ws, da, a)\n}}\n")
    with jax.enable_x64(True):
        want = xla_cpu.compile_hlo(text).executable.execute(
            [jax.device_put(x), jax.device_put(y)])
    got = runtime.compile(text)(x, y)
    for what, g, w in zip(["add", "multiply", "exponential", "select", "add as f64",
                           "add stored"], got, want):
        g, w = _bits(np.asarray(g)), _bits(np.asarray(w))
        if what == "exponential":       # transcendental: the same within XLA's last bit
            close = np.abs(g.astype(np.int64) - w.astype(np.int64)) <= 1
            assert close.all(), f"{what} of {name}"
            continue
        np.testing.assert_array_equal(g, w, err_msg=f"{what} of {name}")
