"""Vector loop kernels (as wide as the default device's target: 16 floats or 8 doubles per
work-item on AVX-512, 8 or 4 on AVX2): values with a partial last block, NaN/-0 semantics of
the vector helpers, in-place updates, scalar operands, bf16 kernels computing in f32 vectors,
and the kernels that must stay scalar."""

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.codegen.kernel import argument_value
from runtime.hlo.dtypes import F32
from runtime.opencl.device import get_device
from runtime.target import Target


def vector(scalar: str, bits: int) -> str:
    """The OpenCL vector type of the default device's vector loops."""
    return f"{scalar}{Target.for_device(get_device()).lanes(bits)}"

RNG = np.random.default_rng(3)

CHAIN = """HloModule chain
fused {{
  p0 = {et}[{n}]{{0}} parameter(0)
  p1 = {et}[] parameter(1)
  t = {et}[{n}]{{0}} tanh(p0)
  ng = {et}[{n}]{{0}} negate(p0)
  m = {et}[{n}]{{0}} multiply(ng, p0)
  e = {et}[{n}]{{0}} exponential(m)
  te = {et}[{n}]{{0}} multiply(t, e)
  a = {et}[{n}]{{0}} abs(p0)
  b = {et}[{n}]{{0}} broadcast(p1), dimensions={{}}
  s = {et}[{n}]{{0}} add(a, b)
  q = {et}[{n}]{{0}} sqrt(s)
  ROOT r = {et}[{n}]{{0}} add(te, q)
}}
ENTRY e {{
  x = {et}[{n}]{{0}} parameter(0)
  c = {et}[] parameter(1)
  ROOT f = {et}[{n}]{{0}} fusion(x, c), kind=kLoop, calls=fused
}}"""


@pytest.mark.parametrize("et, dtype, scalar", [("f32", np.float32, ("float", 32)),
                                               ("f64", np.float64, ("double", 64))])
@pytest.mark.parametrize("n", [1, 16, 37, 1000])
def test_fused_chain_with_a_partial_last_block(et, dtype, scalar, n):
    x = RNG.standard_normal(n).astype(dtype)
    exe = runtime.compile(CHAIN.format(et=et, n=n))
    assert f"{vector(*scalar)} " in exe.program.source
    got = exe(x, np.array(1.5, dtype))
    x64 = x.astype(np.float64)
    want = np.tanh(x64) * np.exp(-x64 * x64) + np.sqrt(np.abs(x64) + 1.5)
    tol = 2e-6 if et == "f32" else 1e-14
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_maximum_minimum_clamp_keep_nan_and_signed_zero_lane_by_lane():
    text = """HloModule mm
    ENTRY e {
      a = f32[19] parameter(0)
      b = f32[19] parameter(1)
      lo = f32[] parameter(2)
      hi = f32[] parameter(3)
      mx = f32[19] maximum(a, b)
      mn = f32[19] minimum(a, b)
      cl = f32[19] clamp(lo, a, hi)
      ROOT t = (f32[19], f32[19], f32[19]) tuple(mx, mn, cl)
    }"""
    nan = np.float32(np.nan)
    a = np.array([nan, 1, -0.0, 0.0, 2, -3, 5] + [0.5] * 12, np.float32)
    b = np.array([1, nan, 0.0, -0.0, 2, 4, -7] + [-0.5] * 12, np.float32)
    exe = runtime.compile(text)
    assert f"xla_fmax_{vector('float', 32)}" in exe.program.source
    mx, mn, cl = exe(a, b, np.float32(-1), np.float32(1))
    assert np.isnan(mx[0]) and np.isnan(mx[1]) and np.isnan(mn[0]) and np.isnan(mn[1])
    assert not np.signbit(mx[2]) and not np.signbit(mx[3])
    assert np.signbit(mn[2]) and np.signbit(mn[3])
    np.testing.assert_array_equal(mx[4:], np.maximum(a[4:], b[4:]))
    np.testing.assert_array_equal(mn[4:], np.minimum(a[4:], b[4:]))
    assert np.isnan(cl[0])
    np.testing.assert_array_equal(cl[1:], np.clip(a[1:], -1, 1))


def test_in_place_update_with_a_partial_last_block():
    text = """HloModule inplace
    ENTRY e {
      x = f32[37] parameter(0)
      y = f32[37] exponential(x)
      one = f32[] constant(1)
      ones = f32[37] broadcast(one), dimensions={}
      z = f32[37] add(y, ones)
      ROOT w = f32[37] multiply(z, z)
    }"""
    exe = runtime.compile(text, fusion=False)   # three kernels, each over the last's bytes
    insts = {i.name: i for i in exe.buffer_assignment.module.entry.instructions}
    assert exe.buffer_assignment.slice(insts["y"]) == exe.buffer_assignment.slice(insts["z"])
    x = RNG.standard_normal(37).astype(np.float32)
    np.testing.assert_allclose(exe(x), (np.exp(x.astype(np.float64)) + 1) ** 2, rtol=1e-6)


@pytest.mark.parametrize("body, expected", [
    # a pred result, a select and a transpose stay scalar kernels
    ("ROOT r = f32[5,6]{1,0} transpose(b), dimensions={1,0}", lambda a: a.T),
    ("ROOT r = pred[6,5]{1,0} compare(a, a), direction=LT", lambda a: np.zeros_like(a, bool)),
    ("p = pred[6,5]{1,0} compare(a, a), direction=EQ\n      ROOT r = f32[6,5]{1,0} select(p, a, a)",
     lambda a: a),
])
def test_kernels_that_stay_scalar(body, expected):
    text = f"""HloModule scalar
    ENTRY e {{
      a = f32[6,5]{{1,0}} parameter(0)
      b = f32[6,5]{{0,1}} parameter(1)
      {body}
    }}"""
    exe = runtime.compile(text)
    assert vector("float", 32) not in exe.program.source
    a = np.abs(RNG.standard_normal((6, 5))).astype(np.float32)
    want = expected(a)
    np.testing.assert_allclose(np.asarray(exe(a, a.copy()), np.float64),
                               np.asarray(want, np.float64), rtol=1e-3 if want.dtype == np.float16 else 1e-6)


@pytest.mark.parametrize("rows, cols", [(64, 32), (37, 45), (3, 5), (1, 40)])
def test_broadcast_rows_columns_and_a_strided_operand(rows, cols):
    # per-row statistic, per-column scale, and an operand whose minor dimension is strided;
    # odd sizes put blocks across rows (the per-lane path)
    text = f"""HloModule bcast
    fused {{
      x = f32[{rows},{cols}]{{1,0}} parameter(0)
      m = f32[{rows}]{{0}} parameter(1)
      g = f32[{cols}]{{0}} parameter(2)
      t = f32[{rows},{cols}]{{0,1}} parameter(3)
      mb = f32[{rows},{cols}]{{1,0}} broadcast(m), dimensions={{0}}
      gb = f32[{rows},{cols}]{{1,0}} broadcast(g), dimensions={{1}}
      tb = f32[{rows},{cols}]{{1,0}} broadcast(t), dimensions={{0,1}}
      s = f32[{rows},{cols}]{{1,0}} subtract(x, mb)
      p = f32[{rows},{cols}]{{1,0}} multiply(s, gb)
      ROOT r = f32[{rows},{cols}]{{1,0}} add(p, tb)
    }}
    ENTRY e {{
      x = f32[{rows},{cols}]{{1,0}} parameter(0)
      m = f32[{rows}]{{0}} parameter(1)
      g = f32[{cols}]{{0}} parameter(2)
      t = f32[{rows},{cols}]{{0,1}} parameter(3)
      ROOT f = f32[{rows},{cols}]{{1,0}} fusion(x, m, g, t), kind=kLoop, calls=fused
    }}"""
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    m, g = RNG.standard_normal(rows).astype(np.float32), RNG.standard_normal(cols).astype(np.float32)
    t = RNG.standard_normal((rows, cols)).astype(np.float32)
    exe = runtime.compile(text)
    assert f"{vector('float', 32)} " in exe.program.source
    np.testing.assert_allclose(exe(x, m, g, t), (x - m[:, None]) * g + t, rtol=1e-6, atol=1e-6)


def test_broadcast_into_a_column_major_output_and_from_a_degenerate_dimension():
    text = """HloModule bcast_cm
    ENTRY e {
      x = f32[20,33]{0,1} parameter(0)
      b = f32[1,33]{1,0} parameter(1)
      bb = f32[20,33]{0,1} broadcast(b), dimensions={0,1}
      ROOT r = f32[20,33]{0,1} multiply(x, bb)
    }"""
    x = RNG.standard_normal((20, 33)).astype(np.float32)
    b = RNG.standard_normal((1, 33)).astype(np.float32)
    exe = runtime.compile(text)
    assert f"{vector('float', 32)} " in exe.program.source
    np.testing.assert_allclose(exe(x, b), x * b, rtol=1e-6)


def test_operands_in_another_layout_directly_and_through_copy_or_degenerate_reshape():
    text = """HloModule relayout
    fused {
      a = f32[21,35]{1,0} parameter(0)
      b = f32[21,35]{0,1} parameter(1)
      c = f32[21,35]{0,1} parameter(2)
      d = f32[21,1,35]{0,2,1} parameter(3)
      cc = f32[21,35]{1,0} copy(c)
      dr = f32[21,35]{1,0} reshape(d)
      s = f32[21,35]{1,0} add(a, b)
      t = f32[21,35]{1,0} multiply(s, cc)
      ROOT r = f32[21,35]{1,0} subtract(t, dr)
    }
    ENTRY e {
      a = f32[21,35]{1,0} parameter(0)
      b = f32[21,35]{0,1} parameter(1)
      c = f32[21,35]{0,1} parameter(2)
      d = f32[21,1,35]{0,2,1} parameter(3)
      ROOT f = f32[21,35]{1,0} fusion(a, b, c, d), kind=kLoop, calls=fused
    }"""
    a, b, c = (RNG.standard_normal((21, 35)).astype(np.float32) for _ in range(3))
    d = RNG.standard_normal((21, 1, 35)).astype(np.float32)
    exe = runtime.compile(text)
    assert f"{vector('float', 32)} " in exe.program.source
    np.testing.assert_allclose(exe(a, b, c, d), (a + b) * c - d[:, 0], rtol=1e-6, atol=1e-6)


def test_scalar_output_through_a_degenerate_reshape():
    text = """HloModule scalar_reshape
    ENTRY e {
      a = f32[1] parameter(0)
      r = f32[] reshape(a)
      ROOT n = f32[] negate(r)
    }"""
    np.testing.assert_array_equal(runtime.compile(text)(np.array([2.5], np.float32)), -2.5)


MIXED_NARROW = """HloModule mixed
ENTRY e {{
  x = {et}[{r},{c}] parameter(0)
  mean = f32[{r}] parameter(1)
  scale = {et}[] parameter(2)
  xf = f32[{r},{c}] convert(x)
  m = f32[{r},{c}] broadcast(mean), dimensions={{0}}
  d = f32[{r},{c}] subtract(xf, m)
  db = {et}[{r},{c}] convert(d)
  s = {et}[{r},{c}] broadcast(scale), dimensions={{}}
  p = {et}[{r},{c}] multiply(db, s)
  q = {et}[{r},{c}] divide(p, x)
  n = {et}[{r},{c}] negate(q)
  ROOT o = {et}[{r},{c}] add(n, x)
}}"""

# narrow float types: numpy's dtype and a large finite value of it
NARROW = [("bf16", ml_dtypes.bfloat16, 3.0e38), ("f16", np.float16, 65504.0)]


@pytest.mark.parametrize("et, dtype, big", NARROW, ids=["bf16", "f16"])
@pytest.mark.parametrize("rows, cols", [(5, 37), (3, 64), (1, 7)])
def test_mixed_narrow_and_f32_kernel_rounds_each_narrow_result_like_the_scalar_form(
        rows, cols, et, dtype, big):
    """A group norm's shape: bf16 (or f16) activations, f32 statistics, converts both ways.
    Each narrow result is rounded to nearest even, bit for bit; rows that do not fill a vector
    and a partial last block take the lane-by-lane paths."""
    x = (RNG.standard_normal((rows, cols)) * 3).astype(dtype)
    flat = x.reshape(-1)
    flat[:6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, big]
    mean = RNG.standard_normal(rows).astype(np.float32)
    scale = np.array(1.7, dtype)
    exe = runtime.compile(MIXED_NARROW.format(r=rows, c=cols, et=et))
    assert f"{vector('float', 32)} " in exe.program.source
    assert f"xla_round_{et}x" in exe.program.source
    got = np.asarray(exe(x, mean, scale)).astype(np.float32)
    xf = x.astype(np.float32)

    def narrow(v: np.ndarray) -> np.ndarray:
        """``v`` rounded to the narrow type (to nearest even) and widened again, as each of
        its ops does."""
        return v.astype(dtype).astype(np.float32)

    with np.errstate(all="ignore"):
        db = narrow(xf - mean[:, None])
        q = narrow(narrow(db * np.float32(scale)) / xf)
        want = narrow(-q + xf)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(want)
    np.testing.assert_array_equal(got[keep].view(np.uint32), want[keep].view(np.uint32))


@pytest.mark.parametrize("et, dtype, tie, to_inf", [
    ("bf16", ml_dtypes.bfloat16, 2.0 ** -8, 3.3961e38), ("f16", np.float16, 2.0 ** -11, 65520.0)],
    ids=["bf16", "f16"])
def test_f32_to_narrow_convert_rounds_ties_to_even_and_keeps_nan_and_infinities(
        et, dtype, tie, to_inf):
    n = 45
    base = np.float32(1.0) + np.arange(n, dtype=np.float32) * np.float32(tie)
    x = base.copy()             # odd multiples of ``tie`` are exact ties between narrow values
    x[:5] = [np.nan, np.inf, -np.inf, -0.0, np.float32(to_inf)]   # the last rounds to inf
    x[5] = -x[7]
    exe = runtime.compile(f"""HloModule c
    ENTRY e {{
      x = f32[{n}] parameter(0)
      ROOT y = {et}[{n}] convert(x)
    }}""")
    assert f"xla_float_to_{et}x" in exe.program.source
    got = np.asarray(exe(x))
    with np.errstate(over="ignore"):
        want = x.astype(dtype)
    assert np.isnan(got[0].astype(np.float32))
    np.testing.assert_array_equal(got[1:].view(np.uint16), want[1:].view(np.uint16))
    # a NaN keeps its sign and comes out quiet, as the scalar helpers make it: bf16's
    # canonical NaN; f16 keeps the payload bits it has room for, the quiet bit set
    x.view(np.uint32)[:16] = 0xFFA00000      # a signalling NaN: payload bit 21, sign set
    bits = np.asarray(exe(x)).view(np.uint16)[:16]
    np.testing.assert_array_equal(bits, 0xFFC0 if et == "bf16" else 0xFF00)


QUANTISE = """HloModule quantise
ENTRY e {{
  x = f32[{n}]{{0}} parameter(0)
  s = f32[] parameter(1)
  b = f32[{n}]{{0}} broadcast(s), dimensions={{}}
  d = f32[{n}]{{0}} divide(x, b)
  r = f32[{n}]{{0}} round-nearest-even(d)
  ROOT q = {it}[{n}]{{0}} convert(r)
}}"""


def _xla_convert(values: np.ndarray, dtype) -> np.ndarray:
    """XLA's float -> integer convert: toward zero, saturating, NaN to 0."""
    info = np.iinfo(dtype)
    v = np.nan_to_num(values.astype(np.float64), nan=0.0, posinf=info.max, neginf=info.min)
    return np.clip(np.trunc(v), info.min, info.max).astype(dtype)


@pytest.mark.parametrize("it, dtype", [("s8", np.int8), ("u8", np.uint8), ("s16", np.int16),
                                       ("s32", np.int32), ("u32", np.uint32)])
@pytest.mark.parametrize("n", [16, 37])
def test_an_integer_output_converted_from_floats_is_a_vector_loop(it, dtype, n):
    """Quantising (scale, round, convert) stores each float vector converted: saturating at
    both ends, NaN to 0, as the element kernel converts."""
    x = (RNG.standard_normal(n) * 300).astype(np.float32)
    x[:6] = [np.nan, np.inf, -np.inf, 2.5e9, -2.5e9, -0.75]
    exe = runtime.compile(QUANTISE.format(n=n, it=it))
    assert "_sat_rtz(select(" in exe.program.source
    got = exe(x, np.float32(0.5))
    np.testing.assert_array_equal(got, _xla_convert(np.rint(x / np.float32(0.5)), dtype))


# an Equinox MLP with one output unit (jax 0.12): Lion's f32[1] constants became kernel
# scalars as one-element arrays, which launch chaining refused with an AssertionError
ONE_ELEMENT_CONSTANTS = """HloModule one_element_constants
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  g = f32[64,1]{1,0} parameter(0)
  m = f32[1]{0} parameter(1)
  zero = f32[] constant(0)
  r = f32[1]{0} reduce(g, zero), dimensions={0}, to_apply=add
  c1 = f32[1]{0} constant({0.1})
  c9 = f32[1]{0} constant({0.9})
  a = f32[1]{0} multiply(r, c1)
  b = f32[1]{0} multiply(m, c9)
  s = f32[1]{0} add(a, b)
  sg = f32[1]{0} sign(s)
  ROOT t = (f32[1]{0}, f32[1]{0}) tuple(sg, s)
}"""


def test_one_element_array_constants_become_scalar_arguments():
    value = argument_value(F32, np.array([0.1], np.float32))
    assert isinstance(value, np.float32) and value == np.float32(0.1)
    g, m = np.arange(64, dtype=np.float32).reshape(64, 1) / 64, np.float32([-3.0])
    want = g.sum(0) * np.float32(0.1) + m * np.float32(0.9)
    for fusion in (True, False):
        sg, s = runtime.compile(ONE_ELEMENT_CONSTANTS, fusion=fusion)(g, m)
        np.testing.assert_allclose(s, want, rtol=1e-6)
        np.testing.assert_array_equal(sg, np.sign(want))
