"""Sub-byte element types (``dtypes.PACKED``, ``dtypes.SMALL_FLOATS``): packed storage as
XLA's CPU backend keeps it, and every result against XLA's CPU backend (jax 0.10.2, the test
extra) bit for bit: each conversion over all values, each arithmetic op over all pairs of
values, data movement, in-place updates, reductions and int4-weight dots. The 6-bit floats,
which XLA's CPU backend cannot compile, are checked against ml_dtypes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.errors import HloUnsupportedError
from runtime.hlo.dtypes import ELEMENT_TYPES
from runtime.hlo.packing import from_storage, to_storage
from runtime.hlo.parser import parse_shape

jax = pytest.importorskip("jax")
xla_cpu = pytest.importorskip("benchmarks.xla_cpu")

PACKED = {"s2": 2, "s4": 4, "u2": 2, "u4": 4, "f4e2m1fn": 4}
OTHERS = ("pred", "s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64", "f16", "bf16", "f32",
          "f64", "f8e4m3fn", "f8e5m2")


def _xla(text: str, *args) -> list[np.ndarray]:
    with jax.enable_x64(True):
        program = xla_cpu.compile_hlo(text)
        return [np.asarray(o) for o in program.executable.execute([jax.device_put(a) for a in args])]


def _ours(text: str, *args, donate=()) -> list[np.ndarray]:
    out = runtime.compile(text).run(*args, donate=donate)
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8 if a.itemsize == 1 else f"u{a.itemsize}") if a.dtype != bool else a


def _assert_like_xla(text: str, *args, donate=()) -> None:
    ref = _xla(text, *args)
    ours = _ours(text, *args, donate=donate)
    assert len(ours) == len(ref)
    for k, (o, r) in enumerate(zip(ours, ref)):
        assert o.dtype == r.dtype and o.shape == r.shape, k
        np.testing.assert_array_equal(_bits(o), _bits(r), err_msg=f"output {k}")


def _codes(name: str) -> np.ndarray:
    """Every value of a 2- or 4-bit type (or pred)."""
    if name == "pred":
        return np.array([False, True])
    return np.arange(1 << ELEMENT_TYPES[name].bits, dtype=np.uint8).view(ELEMENT_TYPES[name].numpy)


def _samples(name: str) -> np.ndarray:
    """Values of a wider type around and past the sub-byte ranges: halves and ties, the ends
    of every range, infinities, NaNs and signed zeros (floats); wrapping values (integers)."""
    if name in PACKED or name in ("pred", "s8", "u8", "f8e4m3fn", "f8e5m2"):
        return _codes(name) if name in PACKED or name == "pred" else \
            np.arange(256, dtype=np.uint8).view(ELEMENT_TYPES[name].numpy)
    dtype = ELEMENT_TYPES[name].numpy
    if ELEMENT_TYPES[name].is_float:
        finite = np.concatenate([np.arange(-20, 20, 0.25), [-1e30, 1e30, 15.5, 16, 17, 2.5,
                                                               3.5, 5, -5, 7.5, 8.5, 1e-3]])
        special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0])
        with np.errstate(over="ignore"):
            return np.concatenate([finite, special]).astype(np.float32).astype(dtype)
    info = np.iinfo(dtype)
    values = [-300, -129, -17, -9, -8, -3, -2, -1, 0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 255, 256,
              300, int(info.min), int(info.max)]
    return np.array(sorted({v for v in values if info.min <= v <= info.max}), dtype=dtype)


def test_packed_sizes_and_order_are_xlas():
    # XLA's bytes for int4 [-8, -7, ..., 7] (``bitcast_convert_type`` to uint8)
    codes = np.arange(-8, 8).astype(ml_dtypes.int4)
    assert list(to_storage(codes, ELEMENT_TYPES["s4"])) == [152, 186, 220, 254, 16, 50, 84, 118]
    two = np.array([1, -2, 0, -1, 1], ml_dtypes.int2)
    packed = to_storage(two, ELEMENT_TYPES["s2"])
    assert list(packed) == [0b11001001, 0b01]
    np.testing.assert_array_equal(from_storage(packed, ELEMENT_TYPES["s2"], 5), two)
    # packed whatever the layout says; the 6-bit floats a byte each
    assert parse_shape("s4[16]{0}").byte_size == 8 == parse_shape("s4[16]{0:E(4)}").byte_size
    assert parse_shape("u2[5]").byte_size == 2 and parse_shape("f4e2m1fn[3]").byte_size == 2
    assert parse_shape("f6e2m3fn[3]").byte_size == 3
    text = "HloModule m\nENTRY e {\n  p = s4[1001] parameter(0)\n  ROOT n = s4[1001] negate(p)\n}\n"
    stats = runtime.compile(text).memory_stats
    assert (stats.argument, stats.output) == (501, 501)
    xla = xla_cpu.compile_hlo(text).memory
    assert (xla["argument"], xla["output"]) == (501, 501)


@pytest.mark.slow
@pytest.mark.parametrize("name", PACKED)
def test_conversions_like_xla(name):
    """Every value of ``name`` to each other type, and each other type's samples to ``name``."""
    x = _codes(name)
    outs = "\n".join(f"  c{k} = {o}[{x.size}] convert(p)" for k, o in enumerate(OTHERS))
    shapes = ", ".join(f"{o}[{x.size}]" for o in OTHERS)
    names = ", ".join(f"c{k}" for k in range(len(OTHERS)))
    _assert_like_xla(f"HloModule c\nENTRY e {{\n  p = {name}[{x.size}] parameter(0)\n{outs}\n"
                     f"  ROOT t = ({shapes}) tuple({names})\n}}\n", x)
    samples = [_samples(o) for o in OTHERS]
    params = "\n".join(f"  p{k} = {o}[{v.size}] parameter({k})"
                        for k, (o, v) in enumerate(zip(OTHERS, samples)))
    outs = "\n".join(f"  c{k} = {name}[{v.size}] convert(p{k})" for k, v in enumerate(samples))
    shapes = ", ".join(f"{name}[{v.size}]" for v in samples)
    _assert_like_xla(f"HloModule c\nENTRY e {{\n{params}\n{outs}\n"
                     f"  ROOT t = ({shapes}) tuple({names})\n}}\n", *samples)


def test_conversions_between_packed_types_like_xla():
    for src in PACKED:
        x = _codes(src)
        outs = [d for d in PACKED if d != src]
        body = "\n".join(f"  c{k} = {d}[{x.size}] convert(p)" for k, d in enumerate(outs))
        shapes = ", ".join(f"{d}[{x.size}]" for d in outs)
        text = (f"HloModule c\nENTRY e {{\n  p = {src}[{x.size}] parameter(0)\n{body}\n"
                f"  ROOT t = ({shapes}) tuple({', '.join(f'c{k}' for k in range(len(outs)))})\n}}\n")
        _assert_like_xla(text, x)


_INT_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and",
               "or", "xor", "shift-left", "shift-right-logical", "shift-right-arithmetic",
               "power")
_FLOAT_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
                 "remainder", "atan2")
_UNARY = {"sint": ("negate", "abs", "not", "sign", "popcnt", "count-leading-zeros"),
          "uint": ("negate", "not", "popcnt", "count-leading-zeros"),
          "float": ("negate", "abs", "exponential", "log", "sqrt", "tanh", "floor", "sign",
                    "round-nearest-even", "logistic")}


@pytest.mark.parametrize("name", PACKED)
def test_arithmetic_over_all_pairs_like_xla(name):
    """Integers wrap at their width; f4 is computed wider and rounded back, as XLA does."""
    et = ELEMENT_TYPES[name]
    codes = _codes(name)
    n = codes.size
    x, y = codes.repeat(n), np.tile(codes, n)
    binary = _FLOAT_BINARY if et.is_float else _INT_BINARY
    unary = _UNARY[et.kind]
    shape = f"{name}[{n * n}]"
    lines = [f"  b{k} = {shape} {op}(p, q)" for k, op in enumerate(binary)]
    lines += [f"  v{k} = {shape} {op}(p)" for k, op in enumerate(unary)]
    lines += [f"  c{k} = pred[{n * n}] compare(p, q), direction={d}"
              for k, d in enumerate(("EQ", "NE", "LT", "LE", "GT", "GE"))]
    lines.append(f"  s = {shape} select(c2, p, q)")
    lines.append(f"  k = {shape} clamp(q, p, q)")
    names = [f"b{k}" for k in range(len(binary))] + [f"v{k}" for k in range(len(unary))] \
        + [f"c{k}" for k in range(6)] + ["s", "k"]
    shapes = [shape] * (len(binary) + len(unary)) + [f"pred[{n * n}]"] * 6 + [shape] * 2
    text = (f"HloModule a\nENTRY e {{\n  p = {shape} parameter(0)\n  q = {shape} parameter(1)\n"
            + "\n".join(lines) + f"\n  ROOT t = ({', '.join(shapes)}) tuple({', '.join(names)})\n}}\n")
    _assert_like_xla(text, x, y)


def _movement(name: str) -> str:
    t = name
    concatenate = (f"  cc = {t}[7,18,5] concatenate(p, rev), dimensions={{1}}"
                   if PACKED[name] == 4 else     # XLA's CPU backend crashes on 2-bit ones
                   f"  cc = {t}[3,4,6] concatenate(sl, sl), dimensions={{2}}")
    cc = f"{t}[7,18,5]" if PACKED[name] == 4 else f"{t}[3,4,6]"
    return f"""HloModule m
ENTRY e {{
  p = {t}[7,9,5] parameter(0)
  u = {t}[3,4,5] parameter(1)
  i = s32[] parameter(2)
  tr = {t}[5,7,9] transpose(p), dimensions={{2,0,1}}
  rs = {t}[63,5] reshape(p)
  sl = {t}[3,4,3] slice(p), slice={{[1:7:2], [2:6], [0:5:2]}}
  b = {t}[4,7,9,5] broadcast(p), dimensions={{1,2,3}}
  z = s32[] constant(0)
  dus = {t}[7,9,5] dynamic-update-slice(p, u, i, i, z)
  ds = {t}[3,4,5] dynamic-slice(p, i, i, z), dynamic_slice_sizes={{3,4,5}}
  rev = {t}[7,9,5] reverse(p), dimensions={{0,2}}
{concatenate}
  pd = {t}[9,9,5] pad(p, {t}[] constant(1)), padding=1_1x0_0x0_0
  cp = {t}[7,9,5]{{0,1,2}} copy(p)
  io = {t}[7,9,5] iota(), iota_dimension=2
  ROOT t = ({t}[5,7,9], {t}[63,5], {t}[3,4,3], {t}[4,7,9,5], {t}[7,9,5], {t}[3,4,5], {t}[7,9,5], {cc}, {t}[9,9,5], {t}[7,9,5]{{0,1,2}}, {t}[7,9,5]) tuple(tr, rs, sl, b, dus, ds, rev, cc, pd, cp, io)
}}
"""


def _random(name: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << PACKED[name], shape).astype(np.uint8).view(ELEMENT_TYPES[name].numpy)


@pytest.mark.parametrize("name", PACKED)
def test_data_movement_like_xla(name):
    """Neighbouring work-items write the same bytes (odd strides, transposes, odd sizes)."""
    _assert_like_xla(_movement(name), _random(name, (7, 9, 5)), _random(name, (3, 4, 5), 1),
                     np.int32(3))


@pytest.mark.parametrize("name", PACKED)
def test_update_in_place_keeps_the_other_codes_of_a_byte(name):
    """An in-place dynamic-update-slice writes half bytes at the window's edges."""
    text = f"""HloModule m, input_output_alias={{ {{}}: (0, {{}}, must-alias) }}
ENTRY e {{
  p = {name}[7,9,5] parameter(0)
  u = {name}[3,4,3] parameter(1)
  i = s32[] parameter(2)
  ROOT dus = {name}[7,9,5] dynamic-update-slice(p, u, i, i, i)
}}
"""
    args = _random(name, (7, 9, 5)), _random(name, (3, 4, 3), 1), np.int32(1)
    _assert_like_xla(text, *args, donate=(0,))


def test_work_groups_sharing_bytes_lose_no_code():
    """An in-place update at an odd offset: the work-items either side of each work-group
    boundary write the two halves of one byte from different threads (PoCL runs work-groups
    on every core), which a plain read-modify-write of the byte would lose. Whether threads
    collide here is chance; the simulator's race detector checks the same stores every time
    (``tests/gpu_sim`` case ``packed:shared-bytes``, which reports a plain read-modify-write)."""
    n = 1 << 20
    text = (f"HloModule m, input_output_alias={{ {{}}: (0, {{}}, must-alias) }}\n"
            f"ENTRY e {{\n  p = s4[{n}] parameter(0)\n  u = s4[{n - 2}] parameter(1)\n"
            f"  i = s32[] constant(1)\n  ROOT d = s4[{n}] dynamic-update-slice(p, u, i)\n}}\n")
    exe = runtime.compile(text)
    update = _random("s4", (n - 2,), 2)
    for _ in range(5):
        base = np.zeros(n, ml_dtypes.int4)
        out = np.asarray(exe.run(base, update, donate=(0,)))
        np.testing.assert_array_equal(_bits(out[1:-1]), _bits(update))


def _scatters(name: str) -> str:
    t = name
    return f"""HloModule m
combine {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] add(a, b)
}}
overwrite {{
  a = {t}[] parameter(0)
  ROOT b = {t}[] parameter(1)
}}
ENTRY e {{
  p = {t}[7,9] parameter(0)
  i = s32[6,2] parameter(1)
  u = {t}[6,3,3] parameter(2)
  j = s32[4,1] parameter(3)
  v = {t}[4,9] parameter(4)
  n = {t}[6,3,3] negate(u)
  a = {t}[7,9] scatter(p, i, n), update_window_dims={{1,2}}, inserted_window_dims={{}},
      scatter_dims_to_operand_dims={{0,1}}, index_vector_dim=1, to_apply=combine
  o = {t}[7,9] scatter(p, j, v), update_window_dims={{1}}, inserted_window_dims={{0}},
      scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=overwrite,
      unique_indices=true
  ROOT r = ({t}[7,9], {t}[7,9]) tuple(a, o)
}}
"""


@pytest.mark.parametrize("name", PACKED)
def test_scatters_like_xla(name):
    """Windows starting mid-byte, repeated windows combined in order, a window that does not
    fit skipped, updates computed in the scatter's fusion, and one work-item per update element
    (unique indices) writing neighbouring codes of one byte."""
    windows = np.array([[0, 0], [1, 3], [1, 3], [4, 5], [6, 6], [3, 1]], np.int32)
    rows = np.array([[5], [0], [3], [6]], np.int32)
    _assert_like_xla(_scatters(name), _random(name, (7, 9)), windows,
                     _random(name, (6, 3, 3), 1), rows, _random(name, (4, 9), 2))


@pytest.mark.parametrize("name", ["s4", "u2", "f4e2m1fn"])
def test_reductions_like_xla(name):
    """Integer sums wrap; f4 sums and products are in XLA's tree order (windows of 32)."""
    text = f"""HloModule m
add {{
  x = {name}[] parameter(0)
  y = {name}[] parameter(1)
  ROOT s = {name}[] add(x, y)
}}
mul {{
  x = {name}[] parameter(0)
  y = {name}[] parameter(1)
  ROOT s = {name}[] multiply(x, y)
}}
ENTRY e {{
  p = {name}[6,300] parameter(0)
  z = {name}[] constant(0)
  o = {name}[] constant(1)
  a = {name}[6] reduce(p, z), dimensions={{1}}, to_apply=add
  b = {name}[300] reduce(p, z), dimensions={{0}}, to_apply=add
  c = {name}[] reduce(p, z), dimensions={{0,1}}, to_apply=add
  d = {name}[6] reduce(p, o), dimensions={{1}}, to_apply=mul
  ROOT t = ({name}[6], {name}[300], {name}[], {name}[6]) tuple(a, b, c, d)
}}
"""
    x = _random(name, (6, 300), 3)
    _assert_like_xla(text, x)
    if name == "f4e2m1fn":
        _assert_like_xla(text, (x.astype(np.float32) / 8).astype(x.dtype))


@pytest.mark.parametrize("name", ["s4", "u4", "f4e2m1fn"])
@pytest.mark.parametrize("wide", ["f32", "bf16"])
def test_weight_dots_like_xla(name, wide):
    """The int4-weight matmul: weights converted to the activations' type, then a dot."""
    text = f"""HloModule m
ENTRY e {{
  x = {wide}[8,64] parameter(0)
  w = {name}[64,48] parameter(1)
  wc = {wide}[64,48] convert(w)
  ROOT d = {wide}[8,48] dot(x, wc), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"""
    x = np.random.default_rng(4).standard_normal((8, 64)).astype(ELEMENT_TYPES[wide].numpy)
    _assert_like_xla(text, x, _random(name, (64, 48), 5))


@pytest.mark.parametrize("name", ["f6e2m3fn", "f6e3m2fn"])
def test_six_bit_floats_convert_as_ml_dtypes(name):
    """Every code decoded exactly; f32 samples encoded as ml_dtypes does (round to nearest
    even, saturating), NaN to -0 as XLA does for its formats without NaN (f4)."""
    dtype = ELEMENT_TYPES[name].numpy
    codes = np.arange(64, dtype=np.uint8).view(dtype)
    finite = np.unique(codes.astype(np.float32))
    mids = ((finite[1:].astype(np.float64) + finite[:-1]) / 2).astype(np.float32)
    x = np.concatenate([mids, np.nextafter(mids, np.float32(np.inf)),
                        np.nextafter(mids, np.float32(-np.inf)), finite * 1.5,
                        np.array([np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0, 1e-30], np.float32)])
    n = x.size
    text = (f"HloModule c\nENTRY e {{\n  x = f32[{n}] parameter(0)\n  b = {name}[64] parameter(1)\n"
            f"  c = {name}[{n}] convert(x)\n  d = f32[64] convert(b)\n"
            f"  qnan = f32[] constant(nan)\n  m = {name}[] convert(qnan)\n"
            f"  ROOT t = ({name}[{n}], f32[64], {name}[]) tuple(c, d, m)\n}}\n")
    encoded, decoded, nan = _ours(text, x, codes)
    np.testing.assert_array_equal(encoded.view(np.uint8), x.astype(dtype).view(np.uint8))
    np.testing.assert_array_equal(decoded.view(np.uint32), codes.astype(np.float32).view(np.uint32))
    assert int(nan.view(np.uint8)) == 0x20


def test_unsupported_sub_byte_types_are_named():
    with pytest.raises(HloUnsupportedError, match="element type s1"):
        runtime.compile("HloModule m\nENTRY e {\n  p = s1[4] parameter(0)\n"
                        "  ROOT n = s1[4] negate(p)\n}\n")(np.zeros(4, ml_dtypes.int1))


def test_bitcast_converts_like_xla():
    """Codes joined into and split out of bytes, first code in the low bits, as XLA's."""
    codes = np.arange(32, dtype=np.uint8).reshape(16, 2) % 16
    _assert_like_xla("HloModule m\nENTRY e {\n  p = s4[16,2] parameter(0)\n"
                     "  ROOT r = u8[16] bitcast-convert(p)\n}\n", codes.view(ml_dtypes.int4))
    _assert_like_xla("HloModule m\nENTRY e {\n  p = u8[16] parameter(0)\n"
                     "  ROOT r = s4[16,2] bitcast-convert(p)\n}\n",
                     (np.arange(0, 256, 16) + 7).astype(np.uint8))
    _assert_like_xla("HloModule m\nENTRY e {\n  p = f4e2m1fn[16] parameter(0)\n"
                     "  ROOT r = u4[16] bitcast-convert(p)\n}\n",
                     np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn))


def test_packed_constants_like_xla():
    _assert_like_xla("HloModule m\nENTRY e {\n  p = s4[5] parameter(0)\n"
                     "  c = s4[5] constant({1, -2, 3, -8, 7})\n  ROOT r = s4[5] add(p, c)\n}\n",
                     np.array([1, 2, 3, 4, 5], ml_dtypes.int4))


def test_a_sort_of_packed_codes_is_a_named_error():
    text = ("HloModule m\ncmp {\n  a = s4[] parameter(0)\n  b = s4[] parameter(1)\n"
            "  ROOT c = pred[] compare(a, b), direction=LT\n}\nENTRY e {\n"
            "  p = s4[16] parameter(0)\n  ROOT s = s4[16] sort(p), dimensions={0}, to_apply=cmp\n}\n")
    with pytest.raises(HloUnsupportedError, match="sort s"):
        runtime.compile(text)(np.arange(16).astype(ml_dtypes.int4))
