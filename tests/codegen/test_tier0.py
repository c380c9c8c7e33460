"""Tier 0: elementwise steps on the generic kernels (``runtime.codegen.tier0``) give the same
bits as tier 1's specialised kernels, NaN, infinities, signed zeros and denormals included,
over layouts, broadcasts, transposes, slices, reshapes, bitcasts, converts, compares,
selects, iotas and constants; so do reductions wherever their order does not show or tier 1
keeps it (maxima, minima, integers, pred, inits that are not the identity, narrow float
sums, argmax); wide float sums and dots match XLA within the corpus's tolerance; a module of
such steps builds no program of its own; what a generic kernel cannot compute keeps its
specialised kernel; "auto" swaps tier 1 in."""

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
    """A pad is not tier 0's: its own kernel is built, the elementwise steps around it run
    generic, and the results are tier 1's."""
    text = """HloModule m
ENTRY e {
  x = f32[32,64]{1,0} parameter(0)
  e = f32[32,64]{1,0} multiply(x, x)
  z = f32[] constant(0)
  p = f32[32,66]{1,0} pad(e, z), padding=0_0x1_1
  s = f32[32,64]{1,0} slice(p), slice={[0:32], [0:64]}
  ROOT d = f32[32,64]{1,0} divide(e, s)
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
    on the same random arguments, or, where a wide float sum or a dot runs on tier 0 in
    another order than tier 1's, XLA's reference within the corpus's tolerance."""
    from tests.corpus_data import mismatches, programs
    text = path.read_text()
    t0, t1 = runtime.compile(text, tier=0), runtime.compile(text, tier=1)
    args = t1.random_arguments()
    got, want = _leaves(t0(*args)), _leaves(t1(*args))
    if all(_same(g, w, 2).all() for g, w in zip(got, want)):
        return
    program = next(p for p in programs() if path.name in p.entry["files"].values())
    kind = "opt_hlo" if ".opt." in path.name else "hlo"
    problems = mismatches(program, _leaves(t0(*program.inputs())))
    assert not problems and program.text(kind) == text, "\n".join(problems)


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


# --- reductions and dots ------------------------------------------------------------------

_REDUCERS = """
max {
  a = $T[] parameter(0)
  b = $T[] parameter(1)
  ROOT r = $T[] maximum(a, b)
}
min {
  a = $T[] parameter(0)
  b = $T[] parameter(1)
  ROOT r = $T[] minimum(a, b)
}
add {
  a = $T[] parameter(0)
  b = $T[] parameter(1)
  ROOT r = $T[] add(a, b)
}
"""

# rows, columns (in memory) and whole arrays over row- and column-major layouts; maxima and
# minima from their identity (tier 1 takes them in lanes, whose order does not show), sums
# from a parameter (whose order tier 1 keeps, after XLA's tree where it is rewritten)
_EXACT_REDUCTIONS = "HloModule m\n" + _REDUCERS + """
ENTRY e {
  x = $T[6,40]{1,0} parameter(0)
  y = $T[40,6]{0,1} parameter(1)
  s = $T[] parameter(2)
  lo = $T[] constant($LO)
  hi = $T[] constant($HI)
  r1 = $T[6]{0} reduce(x, lo), dimensions={1}, to_apply=max
  r2 = $T[6]{0} reduce(y, hi), dimensions={0}, to_apply=min
  r3 = $T[40]{0} reduce(y, lo), dimensions={1}, to_apply=max
  r4 = $T[] reduce(x, hi), dimensions={0,1}, to_apply=min
  r5 = $T[6]{0} reduce(x, s), dimensions={1}, to_apply=add
  r6 = $T[40]{0} reduce(y, s), dimensions={1}, to_apply=add
  ROOT t = ($T[6], $T[6], $T[40], $T[], $T[6], $T[40]) tuple(r1, r2, r3, r4, r5, r6)
}
"""


@pytest.mark.parametrize("name,dtype", [*_FLOATS, ("s32", np.int32), ("u8", np.uint8),
                                        ("s64", np.int64)])
@pytest.mark.parametrize("fusion", [True, False])
def test_reductions_as_tier_one(name: str, dtype, fusion: bool) -> None:
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = str(info.min), str(info.max)
        args = [_ints(dtype, (6, 40)), np.asfortranarray(_ints(dtype, (40, 6), 2)),
                dtype(3)]
    else:
        lo, hi = "-inf", "inf"
        args = [_floats(dtype, (6, 40)), np.asfortranarray(_floats(dtype, (40, 6), 2)),
                np.asarray(0.75, dtype)]
    text = _EXACT_REDUCTIONS.replace("$T", name).replace("$LO", lo).replace("$HI", hi)
    # an init that is not the identity goes through XLA's tree: a reduce-window kernel
    assert_same_bits(text, args, fusion=fusion, generic=False)
    plan = runtime.compile(text, tier=0, fusion=fusion).program.plan
    reduces = {s.instruction for s in iter_steps(plan) if isinstance(s, GenericLaunch)}
    assert {"r1", "r2", "r3", "r4"} <= reduces or fusion


def test_narrow_float_sums_in_xla_order() -> None:
    """f16 and bf16 sums from zero: rows of 32 in order, longer ones after
    ``passes.tree_reductions``' windows; NaN and infinities left out (a sum of them is NaN
    in any order)."""
    for name, dtype in _FLOATS[1:3]:
        text = "HloModule m\n" + _REDUCERS.replace("$T", name) + f"""
ENTRY e {{
  x = {name}[8,32]{{1,0}} parameter(0)
  y = {name}[100,5]{{1,0}} parameter(1)
  z = {name}[] constant(0)
  r1 = {name}[8]{{0}} reduce(x, z), dimensions={{1}}, to_apply=add
  r2 = {name}[5]{{0}} reduce(y, z), dimensions={{0}}, to_apply=add
  ROOT t = ({name}[8], {name}[5]) tuple(r1, r2)
}}
"""
        rng = np.random.default_rng(9)
        x, y = (rng.normal(0, 3, s).astype(dtype) for s in ((8, 32), (100, 5)))
        assert_same_bits(text, [x, y], generic=False)


def test_pred_and_or_reductions() -> None:
    text = """HloModule m
and {
  a = pred[] parameter(0)
  b = pred[] parameter(1)
  ROOT r = pred[] and(a, b)
}
or {
  a = pred[] parameter(0)
  b = pred[] parameter(1)
  ROOT r = pred[] or(a, b)
}
ENTRY e {
  p = pred[16,12]{0,1} parameter(0)
  t = pred[] constant(true)
  f = pred[] constant(false)
  n = pred[16,12]{0,1} not(p)
  a = pred[16]{0} reduce(p, t), dimensions={1}, to_apply=and
  o = pred[12]{0} reduce(n, f), dimensions={0}, to_apply=or
  ROOT r = (pred[16], pred[12]) tuple(a, o)
}
"""
    rng = np.random.default_rng(3)
    p = rng.random((16, 12)) < 0.8
    p[3] = True
    p[5], p[5, -1] = True, False          # a row's last element decides
    p[:, 2], p[-1, 2] = True, False       # so does a column's (of not p)
    p = np.asfortranarray(p)
    assert_same_bits(text, [p])


def test_argmax_and_multi_output_reduce_fusion() -> None:
    """JAX's argmax (a variadic reduce: the first NaN, the lowest index of equal values) and
    a fusion of two reductions of one exponential, as tier 1 gives them."""
    text = """HloModule m
argmax {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  ne = pred[] compare(a, a), direction=NE
  keep = pred[] or(gt, ne)
  v = f32[] select(keep, a, b)
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  first = pred[] or(keep, tie)
  i = s32[] select(first, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b)
}
min {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] minimum(a, b)
}
fused {
  p = f32[12,50]{1,0} parameter(0)
  e = f32[12,50]{1,0} exponential(p)
  lo = f32[] constant(-inf)
  hi = f32[] constant(inf)
  m = f32[12]{0} reduce(e, lo), dimensions={1}, to_apply=max
  n = f32[12]{0} reduce(e, hi), dimensions={1}, to_apply=min
  ROOT t = (f32[12]{0}, f32[12]{0}) tuple(m, n)
}
ENTRY e {
  x = f32[12,50]{1,0} parameter(0)
  i = s32[12,50]{1,0} iota(), iota_dimension=1
  lo = f32[] constant(-inf)
  z = s32[] constant(0)
  r = (f32[12]{0}, s32[12]{0}) reduce(x, i, lo, z), dimensions={1}, to_apply=argmax
  v = f32[12]{0} get-tuple-element(r), index=0
  k = s32[12]{0} get-tuple-element(r), index=1
  f = (f32[12]{0}, f32[12]{0}) fusion(x), kind=kInput, calls=fused
  ROOT t = (f32[12], s32[12], (f32[12], f32[12])) tuple(v, k, f)
}
"""
    x = _floats(np.float32, (12, 50))
    x[4, 7:20:3] = 5.0
    assert_same_bits(text, [x], fusion=False, ulps=2)


def _xla(text: str, args: list[np.ndarray]) -> list[np.ndarray]:
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    jax.config.update("jax_enable_x64", True)      # f64 and s64 arguments as they are
    out = xla_cpu.compile_hlo(text).executable.execute([jax.device_put(a) for a in args])
    return [np.asarray(o) for o in out]


def assert_near_xla(text: str, args: list[np.ndarray], rtol: float, atol: float,
                    reference: str | None = None) -> None:
    """Tier 0 against XLA's outputs (of ``reference``, the same module as XLA accepts it,
    where that is not ``text``) within the corpus's tolerance (``compare_scaled``: NaN and
    infinities where XLA's are, integers exactly), every step on the generic kernels."""
    from tests.corpus_data import output_differences
    t0 = runtime.compile(text, tier=0)
    got = _leaves(t0(*args))
    problems = output_differences(got, _xla(reference or text, args), rtol, atol)
    assert not problems, "\n".join(problems)
    assert t0.program.kernel_names == [] and _generic(t0) > 0


_SUMS = "HloModule m\n" + _REDUCERS + """
ENTRY e {
  x = $T[33,70]{1,0} parameter(0)
  y = $T[70,33]{0,1} parameter(1)
  z = $T[] constant(0)
  sq = $T[33,70]{1,0} multiply(x, x)
  r1 = $T[33]{0} reduce(sq, z), dimensions={1}, to_apply=add
  r2 = $T[70]{0} reduce(x, z), dimensions={0}, to_apply=add
  r3 = $T[] reduce(y, z), dimensions={0,1}, to_apply=add
  ROOT t = ($T[33], $T[70], $T[]) tuple(r1, r2, r3)
}
"""


@pytest.mark.parametrize("name,dtype,rtol", [("f32", np.float32, 1e-4),
                                             ("f64", np.float64, 1e-12)])
def test_wide_float_sums_near_xla(name: str, dtype, rtol: float) -> None:
    """Sums from zero that tier 1 splits into partial sums: tier 0 adds in memory order."""
    rng = np.random.default_rng(4)
    x, y = rng.normal(0, 3, (33, 70)).astype(dtype), rng.normal(0, 3, (70, 33)).astype(dtype)
    assert_near_xla(_SUMS.replace("$T", name), [x, np.asfortranarray(y)], rtol, rtol / 10)


_DOTS = """HloModule m
ENTRY e {
  x = $T[3,5,7]{2,1,0} parameter(0)
  y = $T[3,7,4]{1,2,0} parameter(1)
  u = $T[5,3,7]{0,1,2} parameter(2)
  v = $T[4,7,3]{2,1,0} parameter(3)
  b = $T[3,5,4]{2,1,0} dot(x, y), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
  t = $T[4,5]{0,1} dot(v, u), lhs_contracting_dims={1,2}, rhs_contracting_dims={2,1}
  ROOT r = ($T[3,5,4], $T[4,5]) tuple(b, t)
}
"""


@pytest.mark.parametrize("name,dtype,rtol", [("f32", np.float32, 1e-4),
                                             ("f64", np.float64, 1e-12),
                                             ("f16", np.float16, 1e-3),
                                             ("bf16", ml_dtypes.bfloat16, 1e-2),
                                             ("s32", np.int32, 0.0)])
def test_dots_near_xla(name: str, dtype, rtol: float) -> None:
    """Batch dimensions, two contracting dimensions in another order, transposed layouts."""
    rng = np.random.default_rng(6)
    shapes = [(3, 5, 7), (3, 7, 4), (5, 3, 7), (4, 7, 3)]
    if np.dtype(dtype).kind == "i":
        args = [rng.integers(-50, 50, s).astype(dtype) for s in shapes]
    else:
        args = [rng.normal(0, 2, s).astype(dtype) for s in shapes]
    args[1] = np.asfortranarray(args[1].transpose(0, 2, 1)).transpose(0, 2, 1)
    args[2] = np.asfortranarray(args[2])
    assert_near_xla(_DOTS.replace("$T", name), args, rtol, rtol / 10)


def test_dot_with_an_elementwise_epilogue() -> None:
    """A dot fused with a bias and a maximum: the tail of the dot's program (XLA's
    reference from the unfused module: its CPU backend takes no such fusion as text)."""
    body = """
  d = f32[16,8]{1,0} dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  cb = f32[16,8]{1,0} broadcast(c), dimensions={1}
  s = f32[16,8]{1,0} add(d, cb)
  z = f32[] constant(0)
  zb = f32[16,8]{1,0} broadcast(z), dimensions={}
  ROOT m = f32[16,8]{1,0} maximum(s, zb)
"""
    params = """
  a = f32[16,24]{1,0} parameter(0)
  w = f32[24,8]{1,0} parameter(1)
  c = f32[8]{0} parameter(2)"""
    text = f"""HloModule m
fused {{{params}{body}}}
ENTRY e {{{params}
  ROOT f = f32[16,8]{{1,0}} fusion(a, w, c), kind=kOutput, calls=fused
}}
"""
    reference = f"HloModule m\nENTRY e {{{params}{body}}}\n"
    rng = np.random.default_rng(8)
    args = [rng.normal(0, 1, s).astype(np.float32) for s in ((16, 24), (24, 8), (8,))]
    assert_near_xla(text, args, 1e-4, 1e-5, reference)
    plan = runtime.compile(text, tier=0).program.plan
    assert [s.instruction for s in iter_steps(plan)] == ["f"]


def test_reductions_too_long_to_interpret_keep_their_kernels() -> None:
    """A dot of more than ``MAX_BODY_RUNS`` products keeps its specialised kernel; one of
    exactly that many is generic (lowering only)."""
    from runtime.codegen.lower import lower
    from runtime.codegen.tier0.lowering import Tier0
    from runtime.codegen.tier0.op_program import MAX_BODY_RUNS
    text = """HloModule m
ENTRY e {
  a = f32[64,256]{1,0} parameter(0)
  b = f32[256,256]{1,0} parameter(1)
  c = f32[128,256]{1,0} parameter(2)
  short = f32[64,256]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  long = f32[128,256]{1,0} dot(c, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[64,256], f32[128,256]) tuple(short, long)
}
"""
    assert 64 * 256 * 256 == MAX_BODY_RUNS
    dev = runtime.get_device()
    analysis = runtime.analyze(text, device=dev)
    program = lower(analysis.buffer_assignment, analysis.target, analysis.alignment,
                    analysis.python_callbacks, Tier0(dev.has_fp64))
    generic = {s.instruction for s in iter_steps(program.plan) if isinstance(s, GenericLaunch)}
    assert generic == {"short"} and program.kernel_names
