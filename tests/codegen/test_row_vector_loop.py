"""Row vector loop kernels: loop fusions whose lanes run along the output's rows through
index-mapping operations, with uniform values computed once per block. Each case is run
twice, with the row vector form and with the one-element kernel it replaces, and the two
must agree bit for bit; each asserts which form took the kernel."""

import ml_dtypes
import numpy as np
import pytest

from runtime.codegen.families import row_vector_loop
from runtime.opencl.device import get_device
from runtime.target import Target
from tests.codegen.rule_toggle import compile_with

RNG = np.random.default_rng(11)
LANES = Target.for_device(get_device()).lanes(32)


def check(text: str, *args, monkeypatch, taken: bool = True, exact: bool = True):
    """Both forms agree exactly (``exact=False``: to a few ulps, for library functions whose
    vector and scalar forms differ); ``taken``: the row vector form computed a kernel."""
    rows, took = compile_with(text, row_vector_loop.row_vector_loop, True, monkeypatch)
    scalar, _ = compile_with(text, row_vector_loop.row_vector_loop, False, monkeypatch)
    assert bool(took) is taken, rows.program.source
    got, want = rows(*args), scalar(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        if exact:
            np.testing.assert_array_equal(np.asarray(g).view(np.uint8),
                                          np.asarray(w).view(np.uint8))
        else:
            np.testing.assert_allclose(g, w, rtol=5e-7, atol=0)
    return got


def normal(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


UPSAMPLE_CONCAT = """HloModule up
fused {
  p0 = bf16[2,4,4,16] parameter(0)
  p1 = bf16[2,8,8,16] parameter(1)
  one = bf16[] constant(1)
  ones = bf16[2,4,4,16] broadcast(one), dimensions={}
  d = bf16[2,4,4,16] add(p0, ones)
  s = bf16[2,4,4,16] divide(p0, d)
  b0 = bf16[2,4,2,4,16] broadcast(s), dimensions={0,1,3,4}
  r0 = bf16[2,8,4,16] reshape(b0)
  b1 = bf16[2,8,4,2,16] broadcast(r0), dimensions={0,1,2,4}
  r1 = bf16[2,8,8,16] reshape(b1)
  ROOT c = bf16[2,8,8,32] concatenate(r1, p1), dimensions={3}
}
ENTRY e {
  a = bf16[2,4,4,16] parameter(0)
  b = bf16[2,8,8,16] parameter(1)
  ROOT f = bf16[2,8,8,32] fusion(a, b), kind=kLoop, calls=fused
}"""


@pytest.mark.parametrize("et, dtype", [("bf16", ml_dtypes.bfloat16), ("f16", np.float16)])
def test_a_narrow_float_upsample_and_skip_concatenation(et, dtype, monkeypatch):
    a = np.abs(normal((2, 4, 4, 16))).astype(dtype)
    b = normal((2, 8, 8, 16)).astype(dtype)
    got = check(UPSAMPLE_CONCAT.replace("bf16", et), a, b, monkeypatch=monkeypatch,
                taken=LANES <= 16)
    a32 = a.astype(np.float32)
    up = (a32 / (a32 + 1).astype(dtype).astype(np.float32)).astype(dtype)
    up = up.repeat(2, axis=1).repeat(2, axis=2)
    np.testing.assert_array_equal(got, np.concatenate([up, b], axis=3))


SOFTMAX_NUMERATOR = """HloModule sm
fused {
  p0 = f32[4,8] parameter(0)
  p1 = f32[4,8,64] parameter(1)
  ninf = f32[] constant(-inf)
  floor = f32[4,8] broadcast(ninf), dimensions={}
  m = f32[4,8] maximum(p0, floor)
  mb = f32[4,8,64] broadcast(m), dimensions={0,1}
  d = f32[4,8,64] subtract(p1, mb)
  ROOT e = f32[4,8,64] exponential(d)
}
ENTRY e {
  a = f32[4,8] parameter(0)
  b = f32[4,8,64] parameter(1)
  ROOT f = f32[4,8,64] fusion(a, b), kind=kLoop, calls=fused
}"""


def test_a_row_statistic_computed_before_its_broadcast_is_uniform(monkeypatch):
    x = normal((4, 8, 64))
    got = check(SOFTMAX_NUMERATOR, x.max(axis=2), x, monkeypatch=monkeypatch, exact=False)
    np.testing.assert_allclose(got, np.exp(x - x.max(axis=2, keepdims=True)), rtol=1e-6)


RELU_GRAD = """HloModule relu
fused {
  p0 = f32[8,32] parameter(0)
  p1 = f32[8,32]{0,1} parameter(1)
  zero = f32[] constant(0)
  zeros = f32[8,32] broadcast(zero), dimensions={}
  pos = pred[8,32] compare(p0, zeros), direction=GT
  ROOT s = f32[8,32] select(pos, p1, zeros)
}
ENTRY e {
  a = f32[8,32] parameter(0)
  g = f32[8,32]{0,1} parameter(1)
  ROOT f = f32[8,32] fusion(a, g), kind=kLoop, calls=fused
}"""


def test_a_select_on_a_compare_reading_one_operand_in_another_layout(monkeypatch):
    x, g = normal((8, 32)), normal((8, 32))
    got = check(RELU_GRAD, x, g, monkeypatch=monkeypatch)
    np.testing.assert_array_equal(got, np.where(x > 0, g, 0))


CAUSAL_MASK = """HloModule causal
fused {
  x = f32[2,32,32] parameter(0)
  flag = pred[] parameter(1)
  rows = s32[2,32,32] iota(), iota_dimension=1
  cols = s32[2,32,32] iota(), iota_dimension=2
  keep = pred[2,32,32] compare(rows, cols), direction=GE
  outside = pred[2,32,32] not(keep)
  neither = pred[2,32,32] and(keep, outside)
  any = pred[2,32,32] or(keep, neither)
  big = f32[] constant(-1e9)
  bigs = f32[2,32,32] broadcast(big), dimensions={}
  masked = f32[2,32,32] select(any, x, bigs)
  neg = f32[2,32,32] negate(masked)
  cf = f32[2,32,32] convert(cols)
  kf = f32[2,32,32] convert(keep)
  sum = f32[2,32,32] add(cf, kf)
  chosen = f32[2,32,32] select(flag, masked, neg)
  ROOT out = f32[2,32,32] add(chosen, sum)
}
ENTRY e {
  x = f32[2,32,32] parameter(0)
  flag = pred[] parameter(1)
  ROOT f = f32[2,32,32] fusion(x, flag), kind=kLoop, calls=fused
}"""


def test_a_causal_mask_from_iotas_with_pred_logic_and_a_scalar_select(monkeypatch):
    x = normal((2, 32, 32))
    keep = np.tril(np.ones((32, 32), bool))
    for flag in (True, False):
        got = check(CAUSAL_MASK, x, np.bool_(flag), monkeypatch=monkeypatch)
        masked = np.where(keep, x, np.float32(-1e9))
        want = (masked if flag else -masked) + (np.arange(32, dtype=np.float32) + keep)
        np.testing.assert_array_equal(got, want)


# JAX's einsum("ii->i") masks the diagonal with u32 iotas
DIAGONAL_MASK = """HloModule diag
ENTRY e {
  x = f32[6,64] parameter(0)
  rows = u32[6,64] iota(), iota_dimension=0
  cols = u32[6,64] iota(), iota_dimension=1
  eq = pred[6,64] compare(rows, cols), direction=EQ
  zero = f32[] constant(0)
  zeros = f32[6,64] broadcast(zero), dimensions={}
  kept = f32[6,64] select(eq, x, zeros)
  ROOT t = (f32[6,64], u32[6,64]) tuple(kept, cols)
}"""


def test_u32_iotas_are_uint_lanes(monkeypatch):
    x = normal((6, 64))
    kept, cols = check(DIAGONAL_MASK, x, monkeypatch=monkeypatch)
    np.testing.assert_array_equal(kept, np.where(np.eye(6, 64, dtype=bool), x, 0))
    np.testing.assert_array_equal(cols, np.broadcast_to(np.arange(64, dtype=np.uint32), (6, 64)))


GROUP_NORM = """HloModule gn
fused {
  p0 = bf16[2,4,4,32] parameter(0)
  p1 = f32[2,$G] parameter(1)
  p2 = f32[2,1,1,$G,1] parameter(2)
  x = f32[2,4,4,32] convert(p0)
  g = f32[2,4,4,$G,$C] reshape(x)
  mean = f32[2,1,1,$G,1] reshape(p1)
  mb = f32[2,4,4,$G,$C] broadcast(mean), dimensions={0,1,2,3,4}
  c = f32[2,4,4,$G,$C] subtract(g, mb)
  sb = f32[2,4,4,$G,$C] broadcast(p2), dimensions={0,1,2,3,4}
  n = f32[2,4,4,$G,$C] multiply(c, sb)
  back = f32[2,4,4,32] reshape(n)
  ROOT y = bf16[2,4,4,32] convert(back)
}
ENTRY e {
  a = bf16[2,4,4,32] parameter(0)
  m = f32[2,$G] parameter(1)
  s = f32[2,1,1,$G,1] parameter(2)
  ROOT f = bf16[2,4,4,32] fusion(a, m, s), kind=kLoop, calls=fused
}"""


@pytest.mark.parametrize("groups", [4, 8])
def test_a_group_norm_splitting_channels_into_groups_takes_lanes_across_groups(monkeypatch,
                                                                              groups):
    """Groups of 8 or 4 channels, shorter than a block of 16 lanes: the block spans whole
    groups, each lane reading its group's statistics."""
    size = 32 // groups
    text = GROUP_NORM.replace("$G", str(groups)).replace("$C", str(size))
    x = normal((2, 4, 4, 32)).astype(ml_dtypes.bfloat16)
    m, s = normal((2, groups)), normal((2, 1, 1, groups, 1))
    got = check(text, x, m, s, monkeypatch=monkeypatch)
    parts = x.astype(np.float32).reshape(2, 4, 4, groups, size)
    want = ((parts - m.reshape(2, 1, 1, groups, 1)) * s).reshape(2, 4, 4, 32)
    np.testing.assert_array_equal(got, want.astype(ml_dtypes.bfloat16))
    rows, _ = compile_with(text, row_vector_loop.row_vector_loop, True, monkeypatch)
    assert any(f"float{min(LANES, 32)} " in k for k in rows.program.kernel_texts.values())


GROUP_SUMS = """HloModule gs
fused {
  p0 = bf16[2,4,4,32] parameter(0)
  p1 = f32[2,$G] parameter(1)
  x = f32[2,4,4,32] convert(p0)
  g = f32[2,4,4,$G,$C] reshape(x)
  sums = f32[2,1,1,$G,1] reshape(p1)
  n = f32[] constant(16)
  ns = f32[2,1,1,$G,1] broadcast(n), dimensions={}
  mean = f32[2,1,1,$G,1] divide(sums, ns)
  mb = f32[2,4,4,$G,$C] broadcast(mean), dimensions={0,1,2,3,4}
  c = f32[2,4,4,$G,$C] subtract(g, mb)
  back = f32[2,4,4,32] reshape(c)
  ROOT y = bf16[2,4,4,32] convert(back)
}
ENTRY e {
  a = bf16[2,4,4,32] parameter(0)
  m = f32[2,$G] parameter(1)
  ROOT f = bf16[2,4,4,32] fusion(a, m), kind=kLoop, calls=fused
}"""


@pytest.mark.parametrize("groups", [4, 8])
def test_group_statistics_computed_after_a_reshape_adding_unit_dimensions(monkeypatch, groups):
    """A group norm whose per-group sums are reshaped to ``[B, 1, 1, G, 1]`` and divided by
    the group's size before their broadcast: the lanes follow the reshape part by part (it
    only adds dimensions of size 1), so a block still spans whole groups, 16 lanes, each
    computing its group's mean."""
    size = 32 // groups
    text = GROUP_SUMS.replace("$G", str(groups)).replace("$C", str(size))
    x = normal((2, 4, 4, 32)).astype(ml_dtypes.bfloat16)
    sums = normal((2, groups))
    got = check(text, x, sums, monkeypatch=monkeypatch)
    parts = x.astype(np.float32).reshape(2, 4, 4, groups, size)
    want = (parts - (sums / np.float32(16)).reshape(2, 1, 1, groups, 1)).reshape(2, 4, 4, 32)
    np.testing.assert_array_equal(got, want.astype(ml_dtypes.bfloat16))
    rows, _ = compile_with(text, row_vector_loop.row_vector_loop, True, monkeypatch)
    assert any(f"float{min(LANES, 32)} " in k for k in rows.program.kernel_texts.values())


MOVES = """HloModule moves
fused {
  p0 = f32[6,48] parameter(0)
  p1 = f32[4,32] parameter(1)
  p2 = s32[] parameter(2)
  p3 = f32[16,4] parameter(3)
  sl = f32[4,32] slice(p0), slice={[1:5], [3:35]}
  c0 = s32[] constant(0)
  ds = f32[1,32] dynamic-slice(p1, p2, c0), dynamic_slice_sizes={1,32}
  r = f32[32] reshape(ds)
  db = f32[4,32] broadcast(r), dimensions={1}
  rv = f32[4,32] reverse(sl), dimensions={0}
  tr = f32[4,16] transpose(p3), dimensions={1,0}
  half = f32[] constant(0.5)
  pd = f32[4,32] pad(tr, half), padding=0_0x0_16
  a = f32[4,32] add(rv, db)
  ROOT m = f32[4,32] multiply(a, pd)
}
ENTRY e {
  x = f32[6,48] parameter(0)
  y = f32[4,32] parameter(1)
  i = s32[] parameter(2)
  z = f32[16,4] parameter(3)
  ROOT f = f32[4,32] fusion(x, y, i, z), kind=kLoop, calls=fused
}"""


def test_slices_reverse_transpose_and_padding_along_and_across_the_rows(monkeypatch):
    x, y, z = normal((6, 48)), normal((4, 32)), normal((16, 4))
    pad = np.concatenate([z.T, np.full((4, 16), 0.5, np.float32)], axis=1)
    for i in (2, 9):
        got = check(MOVES, x, y, np.int32(i), z, monkeypatch=monkeypatch)
        np.testing.assert_array_equal(got, (x[1:5, 3:35][::-1] + y[min(i, 3)]) * pad)


@pytest.mark.parametrize("shape, tail, want", [
    ("4,32", "reverse(s), dimensions={1}", lambda s: s[:, ::-1]),   # lanes run backwards
    ("8,6", "copy(s)", lambda s: s),                              # rows of 6: no 4 lanes
])
def test_what_the_lanes_cannot_follow_stays_one_element_per_work_item(shape, tail, want,
                                                                      monkeypatch):
    text = f"""HloModule no
    ENTRY e {{
      p0 = f32[{shape}] parameter(0)
      z = f32[] constant(0)
      zs = f32[{shape}] broadcast(z), dimensions={{}}
      p = pred[{shape}] compare(p0, zs), direction=LT
      s = f32[{shape}] select(p, zs, p0)
      ROOT r = f32[{shape}] {tail}
    }}"""
    x = normal(tuple(int(n) for n in shape.split(",")))
    got = check(text, x, monkeypatch=monkeypatch, taken=False)
    np.testing.assert_array_equal(got, want(np.maximum(x, 0)))


@pytest.mark.parametrize("root, want", [
    ("select(gt, b1, b0)", lambda y: np.maximum(y[None, :], y[:, None])),  # y: along, once a row
    ("select(gt, s, st)", lambda y: y[None, :] + y[:, None]),             # s: along both ways
])
def test_an_operand_read_both_along_and_across_the_rows_is_not_a_lane_value(
        root, want, monkeypatch):
    text = f"""HloModule both
    ENTRY e {{
      y = f32[32] parameter(0)
      b1 = f32[32,32] broadcast(y), dimensions={{1}}
      b0 = f32[32,32] broadcast(y), dimensions={{0}}
      s = f32[32,32] add(b1, b0)
      st = f32[32,32] transpose(s), dimensions={{1,0}}
      gt = pred[32,32] compare(b1, b0), direction=GT
      ROOT r = f32[32,32] {root}
    }}"""
    y = normal(32)
    got = check(text, y, monkeypatch=monkeypatch, taken=False)
    np.testing.assert_array_equal(got, want(y))


IN_PLACE_UPDATE = """HloModule scan_step
double {
  p = f32[6,4,32] parameter(0)
  ROOT d = f32[6,4,32] add(p, p)
}
update {
  acc = f32[6,4,32] parameter(0)
  h = f32[4,32] parameter(1)
  t = s32[] parameter(2)
  one = f32[] constant(1)
  ones = f32[4,32] broadcast(one), dimensions={}
  d = f32[4,32] add(h, ones)
  g = f32[4,32] divide(ones, d)
  pos = pred[4,32] compare(h, ones), direction=GT
  s = f32[4,32] select(pos, g, h)
  r = f32[1,4,32] reshape(s)
  z = s32[] constant(0)
  ROOT u = f32[6,4,32] dynamic-update-slice(acc, r, t, z, z)
}
ENTRY e {
  a = f32[6,4,32] parameter(0)
  h = f32[4,32] parameter(1)
  t = s32[] parameter(2)
  x = f32[6,4,32] fusion(a), kind=kLoop, calls=double
  ROOT y = f32[6,4,32] fusion(x, h, t), kind=kLoop, calls=update
}"""


def test_an_update_in_place_writes_only_its_window_in_blocks(monkeypatch):
    a, h = normal((6, 4, 32)), np.abs(normal((4, 32))) * 2
    for t in (0, 3, 7):
        rows, took = compile_with(IN_PLACE_UPDATE, row_vector_loop.row_vector_loop, True,
                                  monkeypatch)
        assert "y" in took
        got = check(IN_PLACE_UPDATE, a, h, np.int32(t), monkeypatch=monkeypatch)
        want = 2 * a
        want[min(t, 5)] = np.where(h > 1, 1 / (h + 1), h)
        np.testing.assert_array_equal(got, want)


def test_a_clamp_with_scalar_bounds_beside_a_select(monkeypatch):
    text = """HloModule clamp
    ENTRY e {
      x = f32[4,32] parameter(0)
      lo = f32[] parameter(1)
      hi = f32[] parameter(2)
      c = f32[4,32] clamp(lo, x, hi)
      z = f32[] constant(0)
      zs = f32[4,32] broadcast(z), dimensions={}
      pos = pred[4,32] compare(x, zs), direction=GT
      d = f32[4,32] add(x, x)
      ROOT r = f32[4,32] select(pos, c, d)
    }"""
    x = normal((4, 32))
    x[0, :3] = [np.nan, -0.0, 0.0]
    got = check(text, x, np.float32(0.25), np.float32(0.75), monkeypatch=monkeypatch)
    np.testing.assert_array_equal(got, np.where(x > 0, np.clip(x, 0.25, 0.75), x + x))


# an int8 quantisation of rows (per-row scale from a row maximum, rounded, clamped by s32
# bounds converted to f32) stored as s8, and the same values fed on as floats
QUANTISE_ROWS = """HloModule quantise
ENTRY e {{
  x = f32[8,48] parameter(0)
  m = f32[8] parameter(1)
  k = f32[] constant(127)
  ks = f32[8] broadcast(k), dimensions={{}}
  s = f32[8] divide(m, ks)
  sb = f32[8,48] broadcast(s), dimensions={{0}}
  d = f32[8,48] divide(x, sb)
  r = f32[8,48] round-nearest-even(d)
  lo = s32[] constant(-127)
  hi = s32[] constant(127)
  lof = f32[] convert(lo)
  hif = f32[] convert(hi)
  los = f32[8,48] broadcast(lof), dimensions={{}}
  his = f32[8,48] broadcast(hif), dimensions={{}}
  c = f32[8,48] clamp(los, r, his)
  ROOT q = {root}
}}"""


@pytest.mark.parametrize("root, dtype", [
    ("s8[8,48] convert(c)", np.int8),
    ("f32[8,48] convert(s8[8,48] convert(c))", np.float32),
    ("bf16[8,48] convert(s16[8,48] convert(c))", ml_dtypes.bfloat16)],
    ids=["stored-as-s8", "s8-fed-on-as-f32", "s16-fed-on-as-bf16"])
def test_quantised_rows_stored_as_integers_or_fed_on_as_floats(root, dtype, monkeypatch):
    text = QUANTISE_ROWS.format(root=root)
    if "(s8[8,48] convert" in root or "(s16[8,48] convert" in root:
        inner = root.split("(", 1)[1].rsplit(")", 1)[0]
        text = text.replace(f"ROOT q = {root}", f"i = {inner}\n  ROOT q = {root.split(' ')[0]} convert(i)")
    x = normal((8, 48)) * 200
    x[0, :4] = [np.nan, np.inf, -np.inf, 0.5]
    m = np.abs(np.nan_to_num(x, posinf=0, neginf=0)).max(1).astype(np.float32)
    got = check(text, x, m, monkeypatch=monkeypatch)
    scaled = np.rint(x / (m / np.float32(127))[:, None])
    want = np.clip(np.nan_to_num(scaled, nan=0.0), -127, 127).astype(np.int8)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float64), want.astype(dtype).astype(np.float64))


# a counter-based generator's round (threefry's mix: add, rotate by a scalar amount, xor) and
# the uniform floats and keep mask drawn from its bits (bits >> 9 | 1.0's exponent, as f32)
RANDOM_BITS = """HloModule bits
ENTRY e {{
  x0 = u32[4,64] parameter(0)
  x1 = u32[4,64] parameter(1)
  r = u32[] parameter(2)
  w = u32[] constant(32)
  rr = u32[4,64] broadcast(r), dimensions={{}}
  ws = u32[4,64] broadcast(w), dimensions={{}}
  s = u32[4,64] add(x0, x1)
  l = u32[4,64] shift-left(x1, rr)
  back = u32[4,64] subtract(ws, rr)
  h = u32[4,64] shift-right-logical(x1, back)
  rot = u32[4,64] or(l, h)
  mixed = u32[4,64] xor(s, rot)
  nine = u32[] constant(9)
  nines = u32[4,64] broadcast(nine), dimensions={{}}
  m = u32[4,64] shift-right-logical(mixed, nines)
  one = u32[] constant(1065353216)
  ones = u32[4,64] broadcast(one), dimensions={{}}
  bits = u32[4,64] or(m, ones)
  f = f32[4,64] bitcast-convert(bits)
  p = f32[] constant({p})
  ps = f32[4,64] broadcast(p), dimensions={{}}
  keep = pred[4,64] compare(f, ps), direction=LT
  big = pred[4,64] compare(mixed, x0), direction=GT, type=UNSIGNED
  ROOT t = (u32[4,64], u32[4,64], pred[4,64], pred[4,64]) tuple(s, mixed, keep, big)
}}"""


@pytest.mark.parametrize("rotation", [13, 0, 32, 40])
def test_random_bits_rounds_on_u32_lanes_and_a_pred_mask(rotation, monkeypatch):
    """Shifts by 32 or more give 0, as XLA's do; both forms agree bit for bit."""
    x0 = RNG.integers(0, 2 ** 32, (4, 64), dtype=np.uint64).astype(np.uint32)
    x1 = RNG.integers(0, 2 ** 32, (4, 64), dtype=np.uint64).astype(np.uint32)
    s, mixed, keep, big = check(RANDOM_BITS.format(p=1.9), x0, x1, np.uint32(rotation),
                                monkeypatch=monkeypatch)
    a, b = x0.astype(np.uint64), x1.astype(np.uint64)
    left = (b << rotation) % 2 ** 32 if rotation < 32 else 0
    right = b >> (32 - rotation) if 1 <= rotation <= 32 else 0    # 32 - r wraps past 31
    want_mixed = (((a + b) % 2 ** 32) ^ (left | right)).astype(np.uint32)
    np.testing.assert_array_equal(s, (a + b).astype(np.uint32))
    np.testing.assert_array_equal(mixed, want_mixed)
    uniform = ((want_mixed >> 9) | np.uint32(0x3F800000)).view(np.float32)
    np.testing.assert_array_equal(keep, uniform < np.float32(1.9))
    np.testing.assert_array_equal(big, want_mixed > x0)


# message passing: rows of a node table gathered by edge (indices out of range clamp, as
# XLA's gather does), scaled, and a window of each row gathered at a start of its own
GATHER_ROWS = """HloModule gather
ENTRY e {{
  table = f32[50,{f}] parameter(0)
  ids = s32[37] parameter(1)
  starts = s32[37,2] parameter(2)
  rows = f32[37,{f}] gather(table, ids), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,{f}}}
  two = f32[] constant(2)
  twos = f32[37,{f}] broadcast(two), dimensions={{}}
  scaled = f32[37,{f}] multiply(rows, twos)
  window = f32[37,16] gather(table, starts), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0,1}}, index_vector_dim=1, slice_sizes={{1,16}}
  ROOT t = (f32[37,{f}], f32[37,16]) tuple(scaled, window)
}}"""


@pytest.mark.parametrize("f", [64, 48])
def test_gathered_rows_are_vector_loads_at_uniform_starts(f, monkeypatch):
    table = normal((50, f))
    ids = RNG.integers(-3, 53, 37).astype(np.int32)
    starts = np.stack([RNG.integers(0, 50, 37), RNG.integers(-4, f, 37)], 1).astype(np.int32)
    scaled, window = check(GATHER_ROWS.format(f=f), table, ids, starts, monkeypatch=monkeypatch)
    np.testing.assert_array_equal(scaled, table[np.clip(ids, 0, 49)] * 2)
    cols = np.clip(starts[:, 1], 0, f - 16)[:, None] + np.arange(16)
    np.testing.assert_array_equal(window, table[starts[:, 0][:, None], cols])
