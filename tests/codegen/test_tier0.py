"""Tier 0: elementwise steps on the generic kernels (``runtime.codegen.tier0``) give the same
bits as tier 1's specialised kernels, NaN, infinities, signed zeros and denormals included,
over layouts, broadcasts, transposes, slices, reshapes, bitcasts, converts, compares,
selects, iotas and constants; a module of such steps builds no program of its own; what a
generic kernel cannot compute keeps its specialised kernel; "auto" swaps tier 1 in."""

from __future__ import annotations

import time

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.codegen.plan import GenericLaunch, iter_steps

_SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-40, -3e-39, 1e-45,
                     3.4e38, -3.4e38, 1e-7, 0.5, 2.5, -2.5, 100.0, -100.0, 7.0, 0.1, -0.3,
                     65504.0, 70000.0, 6e-8], np.float64)


def _floats(dtype, shape, seed: int = 0) -> np.ndarray:
    """Random values and every special value, in ``dtype``."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    values = rng.normal(0, 3, n)
    values[:min(n, len(_SPECIAL))] = _SPECIAL[:n]
    with np.errstate(over="ignore", invalid="ignore"):
        return rng.permutation(values).astype(dtype).reshape(shape)


def _ints(dtype, shape, seed: int = 1) -> np.ndarray:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    values = rng.integers(info.min, info.max, int(np.prod(shape)), dtype=dtype, endpoint=True)
    edges = np.array([0, 1, -1 if info.min else 2, info.min, info.max, 3, 31, 32, 64],
                     dtype=np.int64)
    values[:len(edges)] = edges[:values.size].astype(dtype)
    return values.reshape(shape)


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.itemsize}") if a.dtype.itemsize > 1 else a.view(np.uint8)


def _leaves(x):
    return [l for v in x for l in _leaves(v)] if isinstance(x, tuple) else [np.asarray(x)]


def _generic(exe) -> int:
    return sum(isinstance(s, GenericLaunch) for s in iter_steps(exe.program.plan))


def _same(got: np.ndarray, want: np.ndarray, ulps: int) -> np.ndarray:
    """Where ``got`` is ``want``: the same bits, or both NaN (which NaN an operation on two
    NaNs gives is the compiler's choice of operand order, in either tier), or within
    ``ulps`` units in the last place."""
    same = _bits(got) == _bits(want)
    if got.dtype.kind == "f" or got.dtype == ml_dtypes.bfloat16:
        wide_g, wide_w = got.astype(np.float64), want.astype(np.float64)
        same |= np.isnan(wide_g) & np.isnan(wide_w)
        if ulps:
            spacing = np.abs(np.spacing(want.astype(got.dtype))).astype(np.float64)
            same |= np.isfinite(wide_w) & (np.abs(wide_g - wide_w) <= ulps * spacing)
    return same


def assert_same_bits(text: str, args: list[np.ndarray], fusion: bool = True,
                     generic: bool = True, ulps: int = 0) -> None:
    """Tier 0 and tier 1 give the same bits (NaN as any NaN; ``ulps``: library functions,
    within so many units in the last place); ``generic``: every launch of tier 0 is one of
    the generic kernels (so it builds no program of its own)."""
    t0 = runtime.compile(text, tier=0, fusion=fusion)
    t1 = runtime.compile(text, tier=1, fusion=fusion)
    assert t0.tier == 0 and t1.tier == 1
    got, want = _leaves(t0(*args)), _leaves(t1(*args))
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        same = _same(g, w, ulps)
        assert same.all(), (f"output {k}: {np.flatnonzero(~same.ravel())[:5]}: "
                            f"{g.ravel()[~same.ravel()][:5]} != {w.ravel()[~same.ravel()][:5]}")
    assert _generic(t0) > 0
    if generic:       # no OpenCL program of the module's own is generated or built
        assert t0.program.kernel_names == [] and "opencl-build" not in t0.compile_times


_EXACT_CHAIN = """HloModule m
ENTRY e {
  x = $T[6,40]{1,0} parameter(0)
  y = $T[6,40]{0,1} parameter(1)
  a = $T[6,40]{1,0} add(x, y)
  m = $T[6,40]{1,0} multiply(a, x)
  d = $T[6,40]{1,0} divide(m, y)
  s = $T[6,40]{1,0} subtract(d, x)
  mx = $T[6,40]{1,0} maximum(s, y)
  mn = $T[6,40]{1,0} minimum(mx, x)
  sq = $T[6,40]{1,0} sqrt(x)
  fl = $T[6,40]{1,0} floor(y)
  rn = $T[6,40]{1,0} round-nearest-even(x)
  ab = $T[6,40]{1,0} abs(y)
  ng = $T[6,40]{1,0} negate(mn)
  sg = $T[6,40]{1,0} sign(x)
  rm = $T[6,40]{1,0} remainder(x, y)
  lo = $T[6,40]{1,0} negate(y)
  cl = $T[6,40]{1,0} clamp(lo, x, y)
  fi = pred[6,40]{1,0} is-finite(x)
  r1 = $T[6,40]{1,0} add(sq, fl)
  r2 = $T[6,40]{1,0} multiply(rn, ab)
  r3 = $T[6,40]{1,0} subtract(ng, sg)
  ROOT t = ($T[6,40], $T[6,40], $T[6,40], $T[6,40], $T[6,40], pred[6,40], $T[6,40])
           tuple(r1, r2, r3, rm, cl, fi, a)
}
"""

# library functions: tier 0 calls PoCL's scalar forms, tier 1's kernels its vectorised ones
_LIBRARY_CHAIN = """HloModule m
ENTRY e {
  x = $T[6,40]{1,0} parameter(0)
  y = $T[6,40]{0,1} parameter(1)
  ex = $T[6,40]{1,0} exponential(x)
  lg = $T[6,40]{1,0} log(y)
  th = $T[6,40]{1,0} tanh(x)
  rs = $T[6,40]{1,0} rsqrt(y)
  pw = $T[6,40]{1,0} power(x, y)
  e1 = $T[6,40]{1,0} exponential-minus-one(y)
  l1 = $T[6,40]{1,0} log-plus-one(x)
  ROOT t = ($T[6,40], $T[6,40], $T[6,40], $T[6,40], $T[6,40], $T[6,40], $T[6,40])
           tuple(ex, lg, th, rs, pw, e1, l1)
}
"""

_FLOATS = [("f32", np.float32), ("f16", np.float16), ("bf16", ml_dtypes.bfloat16),
           ("f64", np.float64)]


@pytest.mark.parametrize("name,dtype", _FLOATS)
@pytest.mark.parametrize("fusion", [True, False])
def test_float_chains(name: str, dtype, fusion: bool) -> None:
    x = _floats(dtype, (6, 40))
    y = np.asfortranarray(_floats(dtype, (6, 40), seed=3))
    assert_same_bits(_EXACT_CHAIN.replace("$T", name), [x, y], fusion=fusion)


@pytest.mark.parametrize("name,dtype", _FLOATS)
def test_library_functions_within_an_ulp_or_two(name: str, dtype) -> None:
    """Without finite values above 1e4 (where the library's forms part further); sine is
    ``test_tier1_vector_sine_beside_a_huge_value``'s."""
    x, y = (np.where(np.abs(v) > 1e4, np.where(np.isfinite(v), v / 1e35, v), v).astype(dtype)
            for v in (_floats(np.float64, (6, 40)), _floats(np.float64, (6, 40), seed=3)))
    y = np.asfortranarray(y)
    assert_same_bits(_LIBRARY_CHAIN.replace("$T", name), [x, y], ulps=2)


_INT_CHAIN = """HloModule m
ENTRY e {
  x = $T[5,30]{1,0} parameter(0)
  y = $T[5,30]{1,0} parameter(1)
  a = $T[5,30]{1,0} add(x, y)
  m = $T[5,30]{1,0} multiply(a, y)
  d = $T[5,30]{1,0} divide(x, y)
  r = $T[5,30]{1,0} remainder(m, y)
  sl = $T[5,30]{1,0} shift-left(x, y)
  sr = $T[5,30]{1,0} shift-right-logical(x, y)
  sa = $T[5,30]{1,0} shift-right-arithmetic(a, y)
  an = $T[5,30]{1,0} and(x, y)
  xo = $T[5,30]{1,0} xor(an, m)
  mx = $T[5,30]{1,0} maximum(xo, d)
  cz = $T[5,30]{1,0} count-leading-zeros(x)
  pc = $T[5,30]{1,0} popcnt(y)
  c = pred[5,30]{1,0} compare(x, y), direction=LT
  s = $T[5,30]{1,0} select(c, mx, r)
  f = f32[5,30]{1,0} convert(s)
  g = f32[5,30]{1,0} multiply(f, f)
  k = $T[5,30]{1,0} convert(g)
  r1 = $T[5,30]{1,0} add(sl, sr)
  r2 = $T[5,30]{1,0} add(sa, cz)
  r3 = $T[5,30]{1,0} add(pc, k)
  ROOT t = ($T[5,30], $T[5,30], $T[5,30], pred[5,30]) tuple(r1, r2, r3, c)
}
"""


def test_tier1_vector_sine_beside_a_huge_value() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[64]{0} parameter(0)
  ROOT s = f32[64]{0} sine(x)
}
"""
    x = np.full(64, 1e-7, np.float32)
    x[1] = 3.4e38
    assert runtime.compile(text, tier=0)(x)[0] == np.float32(1e-7)
    assert runtime.compile(text, tier=1)(x)[0] == np.float32(1e-7)


@pytest.mark.parametrize("name,dtype", [("s32", np.int32), ("u8", np.uint8),
                                        ("s64", np.int64), ("u32", np.uint32),
                                        ("s16", np.int16)])
def test_integer_chains(name: str, dtype) -> None:
    text = _INT_CHAIN.replace("$T", name)
    assert_same_bits(text, [_ints(dtype, (5, 30)), _ints(dtype, (5, 30), seed=2)])


def test_pred_logic_compares_and_selects() -> None:
    text = """HloModule m
ENTRY e {
  p = pred[64]{0} parameter(0)
  q = pred[64]{0} parameter(1)
  x = f32[64]{0} parameter(2)
  y = f32[64]{0} parameter(3)
  a = pred[64]{0} and(p, q)
  o = pred[64]{0} or(a, q)
  n = pred[64]{0} not(o)
  xx = pred[64]{0} xor(n, p)
  lt = pred[64]{0} compare(x, y), direction=LT
  ne = pred[64]{0} compare(x, y), direction=NE
  to = pred[64]{0} compare(x, y), direction=LE, type=TOTALORDER
  eq = pred[64]{0} compare(x, x), direction=EQ
  s = f32[64]{0} select(xx, x, y)
  sel = pred[64]{0} select(lt, ne, to)
  ROOT t = (pred[64], pred[64], f32[64], pred[64]) tuple(sel, eq, s, xx)
}
"""
    rng = np.random.default_rng(5)
    assert_same_bits(text, [rng.random(64) < 0.5, rng.random(64) < 0.5,
                            _floats(np.float32, (64,)), _floats(np.float32, (64,), seed=7)])


def test_layouts_broadcasts_transposes_slices_reshapes() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[4,6,10]{0,2,1} parameter(0)
  v = f32[6]{0} parameter(1)
  s = f32[] parameter(2)
  b = f32[4,6,10]{2,1,0} broadcast(v), dimensions={1}
  bs = f32[4,6,10]{1,2,0} broadcast(s), dimensions={}
  a = f32[4,6,10]{2,1,0} add(x, b)
  m = f32[4,6,10]{2,1,0} multiply(a, bs)
  t = f32[10,4,6]{0,1,2} transpose(m), dimensions={2,0,1}
  sl = f32[5,2,3]{2,1,0} slice(t), slice={[1:10:2], [1:3], [0:6:2]}
  r = f32[5,6]{1,0} reshape(sl)
  rv = f32[5,6]{0,1} reverse(r), dimensions={0,1}
  rs = f32[30]{0} reshape(rv)
  bc = f32[6,5]{0,1} bitcast(rv)
  e = f32[30]{0} exponential(rs)
  sr = f32[2,2]{1,0} slice(rv), slice={[1:5:2], [1:6:3]}
  ss = f32[1,2]{0,1} slice(sr), slice={[1:2], [0:2]}
  ROOT t2 = (f32[30], f32[6,5], f32[10,4,6], f32[2,2], f32[1,2]) tuple(e, bc, t, sr, ss)
}
"""
    x = np.ascontiguousarray(_floats(np.float32, (4, 6, 10)))
    assert_same_bits(text, [x, _floats(np.float32, (6,), 2), np.float32(1.5)])


def test_iota_constants_converts_and_bitcast_converts() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[3,50]{1,0} parameter(0)
  i = s32[3,50]{1,0} iota(), iota_dimension=1
  f = f32[3,50]{1,0} convert(i)
  c = f32[] constant(0.1)
  cb = f32[3,50]{1,0} broadcast(c), dimensions={}
  k = f32[50]{0} constant({...})
  kb = f32[3,50]{1,0} broadcast(k), dimensions={1}
  a = f32[3,50]{1,0} multiply(f, cb)
  b = f32[3,50]{1,0} add(a, x)
  d = f32[3,50]{1,0} add(b, kb)
  s = s32[3,50]{1,0} convert(x)
  u = u8[3,50]{1,0} convert(d)
  h = f16[3,50]{1,0} convert(d)
  bf = bf16[3,50]{1,0} convert(h)
  g = f64[3,50]{1,0} convert(bf)
  bits = u32[3,50]{1,0} bitcast-convert(d)
  back = f32[3,50]{1,0} bitcast-convert(bits)
  p = pred[3,50]{1,0} convert(x)
  ROOT t = (s32[3,50], u8[3,50], f64[3,50], u32[3,50], f32[3,50], pred[3,50])
           tuple(s, u, g, bits, back, p)
}
"""
    values = ", ".join(f"{v!r}" for v in np.linspace(-3, 3, 50).astype(np.float32).tolist())
    text = text.replace("{...}", "{" + values + "}")
    assert_same_bits(text, [_floats(np.float32, (3, 50)) * np.float32(1e3)])


def test_explicit_multi_output_fusion() -> None:
    text = """HloModule m
fused {
  p0 = f32[8,16]{1,0} parameter(0)
  p1 = f32[16,8]{1,0} parameter(1)
  t = f32[8,16]{1,0} transpose(p1), dimensions={1,0}
  a = f32[8,16]{1,0} add(p0, t)
  e = f32[8,16]{1,0} exponential(a)
  c = pred[8,16]{1,0} compare(a, p0), direction=GT
  ROOT r = (f32[8,16]{1,0}, pred[8,16]{1,0}, f32[8,16]{0,1}) tuple(e, c, a)
}
ENTRY e {
  x = f32[8,16]{1,0} parameter(0)
  y = f32[16,8]{1,0} parameter(1)
  ROOT f = (f32[8,16]{1,0}, pred[8,16]{1,0}, f32[8,16]{0,1}) fusion(x, y), kind=kLoop, calls=fused
}
"""
    assert_same_bits(text, [_floats(np.float32, (8, 16)), _floats(np.float32, (16, 8), 4)])


def test_other_steps_keep_their_specialised_kernels() -> None:
    """A reduction is not tier 0's: its own kernel is built, the elementwise steps around it
    run generic, and the results are tier 1's."""
    text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[32,64]{1,0} parameter(0)
  e = f32[32,64]{1,0} multiply(x, x)
  z = f32[] constant(0)
  r = f32[32]{0} reduce(e, z), dimensions={1}, to_apply=add
  b = f32[32,64]{1,0} broadcast(r), dimensions={0}
  ROOT d = f32[32,64]{1,0} divide(e, b)
}
"""
    assert_same_bits(text, [_floats(np.float32, (32, 64))], fusion=False, generic=False)
    t0 = runtime.compile(text, tier=0, fusion=False)
    assert t0.program.kernel_names and _generic(t0) >= 2


def test_auto_swaps_in_tier_one() -> None:
    text = _EXACT_CHAIN.replace("$T", "f32")
    x, y = _floats(np.float32, (6, 40)), _floats(np.float32, (6, 40), seed=3)
    exe = runtime.compile(text, tier="auto", force=True)
    assert exe.tier == 0
    first = _leaves(exe(x, y))
    deadline = time.monotonic() + 600
    while exe.tier == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
        again = _leaves(exe(x, y))
        assert all((_bits(a) == _bits(b)).all() for a, b in zip(first, again))
    assert exe.tier == 1
    after = _leaves(exe(x, y))
    assert all((_bits(a) == _bits(b)).all() for a, b in zip(first, after))


def test_an_unknown_tier_is_refused() -> None:
    with pytest.raises(ValueError, match="tier=2"):
        runtime.compile(_EXACT_CHAIN.replace("$T", "f32"), tier=2)


_FAST_CORPUS = ("ew_arith", "ew_rounding", "ew_minmax_clamp", "ew_transcendental",
                "convert_small_types", "convert_x64", "int_bitops", "popcnt_clz",
                "compare_select", "broadcast_reshape_transpose", "scalar_ops", "iota_eye",
                "tuple_outputs", "slice_concat_pad_reverse")


def _corpus_cases():
    from tests.conftest import corpus_hlo_files
    for path in corpus_hlo_files():
        stem = path.name.split(".")[0]
        marks = () if stem in _FAST_CORPUS and ".opt." not in path.name else (pytest.mark.slow,)
        yield pytest.param(path, id=path.name, marks=marks)


@pytest.mark.parametrize("path", list(_corpus_cases()))
def test_corpus_modules_as_tier_one(path) -> None:
    """Every corpus module: tier 0's outputs are tier 1's (library functions within 2 ulp)
    on the same random arguments, its elementwise steps on the generic kernels."""
    text = path.read_text()
    t0, t1 = runtime.compile(text, tier=0), runtime.compile(text, tier=1)
    args = t1.random_arguments()
    got, want = _leaves(t0(*args)), _leaves(t1(*args))
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert _same(g, w, 2).all(), f"output {k}"


def test_auto_builds_tier_one_where_the_generic_kernels_do_not_build(monkeypatch) -> None:
    from runtime.errors import DeviceError
    from runtime.execution import generic_kernels

    def refuse(dev):
        raise DeviceError("no generic kernels here")

    monkeypatch.setattr(generic_kernels, "generic_kernels", refuse)
    # a background build's failure is recorded for this test only
    monkeypatch.setattr(generic_kernels, "_failures", {})
    monkeypatch.setattr(generic_kernels, "_threads", {})
    text = _EXACT_CHAIN.replace("$T", "f32")
    x, y = _floats(np.float32, (6, 40)), _floats(np.float32, (6, 40), seed=3)
    exe = runtime.compile(text, tier="auto", force=True)
    assert exe.tier == 1
    want = _leaves(runtime.compile(text, tier=1)(x, y))
    assert all(_same(g, w, 0).all() for g, w in zip(_leaves(exe(x, y)), want))
    with pytest.raises(DeviceError, match="no generic kernels"):
        runtime.compile(text, tier=0, force=True)
