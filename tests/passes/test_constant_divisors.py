"""A float division by a constant is XLA's multiplication by the constant's reciprocal (its
algebraic simplifier's rewrite), which can differ from the quotient in the last place: a
``floor`` or a bit-level view then tells them apart. Expected values are XLA's CPU backend's
(jaxlib 0.10.2 through ``benchmarks/xla_cpu.py``) on this text: bins of ``x / 0.1`` (1.3 is
bin 13 multiplied, 12 divided), the bits of ``x / 3`` (an array constant), f16 and f64
divisions by broadcast constants, and bf16, which XLA divides in f32 and rounds."""

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.pipeline import optimise

TEXT = """HloModule div
ENTRY e {
  x = f32[6] parameter(0)
  h = f16[4] parameter(1)
  b16 = bf16[4] parameter(2)
  d = f64[3] parameter(3)
  tenth = f32[] constant(0.1)
  tenths = f32[6] broadcast(tenth), dimensions={}
  q = f32[6] divide(x, tenths)
  bins = f32[6] floor(q)
  third = f32[6] constant({3, 3, 3, 3, 3, 3})
  r = f32[6] divide(x, third)
  bits = s32[6] bitcast-convert(r)
  seven = f16[] constant(7)
  sevens = f16[4] broadcast(seven), dimensions={}
  hq = f16[4] divide(h, sevens)
  seven16 = bf16[] constant(7)
  sevens16 = bf16[4] broadcast(seven16), dimensions={}
  bq = bf16[4] divide(b16, sevens16)
  dtenth = f64[] constant(0.1)
  dtenths = f64[3] broadcast(dtenth), dimensions={}
  dq = f64[3] divide(d, dtenths)
  ROOT t = (f32[6], s32[6], f16[4], bf16[4], f64[3]) tuple(bins, bits, hq, bq, dq)
}"""

X = np.array([1.3, 2.1, 2.6, 3.1, 0.3, 5.7], np.float32)
H = np.array([1, 3, 10, 100], np.float16)
B16 = np.array([1, 3, 10, 100], ml_dtypes.bfloat16)
D = np.array([0.3, 0.7, 5.7])
XLA_BINS = [13, 21, 26, 31, 3, 57]
XLA_BITS = [1054727646, 1060320051, 1063116254, 1065632836, 1036831950, 1072902963]
XLA_HQ = np.array([0.1428, 0.4285, 1.428, 14.28], np.float16)
XLA_BQ = np.array([0.142578, 0.427734, 1.42969, 14.3125], ml_dtypes.bfloat16)
XLA_DQ_BITS = [4613937818241073152, 4619567317775286272, 4633218854145753088]


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_division_by_a_constant_matches_xla(fusion):
    bins, bits, hq, bq, dq = runtime.compile(TEXT, fusion=fusion)(X, H, B16, D)
    np.testing.assert_array_equal(bins, np.array(XLA_BINS, np.float32))
    np.testing.assert_array_equal(bits, np.array(XLA_BITS, np.int32))
    np.testing.assert_array_equal(hq.view(np.uint16), XLA_HQ.view(np.uint16))
    np.testing.assert_array_equal(bq.view(np.uint16), XLA_BQ.view(np.uint16))
    np.testing.assert_array_equal(dq.view(np.uint64), np.array(XLA_DQ_BITS, np.uint64))


def test_only_natively_computed_floats_are_rewritten():
    module = optimise(runtime.parse(TEXT), fusion=False)
    divides = {i.name for i in module.instructions() if i.opcode == "divide"}
    assert divides == {"bq"}


@pytest.mark.parametrize("t, divisor, dtype", [("f32", "-5.877471754111438e-39", np.float32),
                                               ("f64", "1e-308", np.float64)])
def test_a_denormal_divisor_is_flushed_as_xla_folds_it(t, divisor, dtype):
    """Found by the fuzzer (seed 18): XLA folds the reciprocal with denormals flushed, so
    dividing by a denormal constant multiplies by an infinity (1e-3 / -2^-127 is -inf; the
    exact reciprocal gave -1.7e35)."""
    text = (f"HloModule m\nENTRY e {{\n  p = {t}[3] parameter(0)\n"
            f"  c = {t}[] constant({divisor})\n  b = {t}[3] broadcast(c), dimensions={{}}\n"
            f"  ROOT d = {t}[3] divide(p, b)\n}}\n")
    x = np.array([1e-3, -2, 0], dtype)
    sign = -1 if divisor.startswith("-") else 1
    want = np.array([sign * np.inf, -sign * np.inf, np.nan], dtype)
    for fusion in (True, False):
        np.testing.assert_array_equal(runtime.compile(text, fusion=fusion)(x), want)
