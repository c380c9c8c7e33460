"""XLA's CPU backend flushes denormals, and its pow of a denormal base is that of 2^-150
(f32) or 2^-1075 (f64), signed as a negative base's: pow(1e-40, 0.5) is 2^-75, pow(1e-40, 2)
is 0 and pow(1e-40, -1) inf. OpenCL's pow on PoCL gave 1.9e-4 for 1e-40^2 and 72.7 for
1e-39^-1, a wrong answer a rewrite of pow(A, 2) no longer hides for other exponents. Expected
bits are XLA's (jaxlib 0.10.2 through ``benchmarks/xla_cpu.py``) on this text."""

import numpy as np
import pytest

import runtime

TEXT = """HloModule power
ENTRY e {
  a = f32[8] parameter(0)
  b = f32[8] parameter(1)
  x = f64[4] parameter(2)
  y = f64[4] parameter(3)
  p = f32[8] power(a, b)
  q = f64[4] power(x, y)
  ROOT t = (f32[8], f64[4]) tuple(p, q)
}"""

A = np.array([1e-40, 1e-40, 1e-40, -1e-40, -1e-40, -1e-40, 1e-39, 2.0], np.float32)
B = np.array([0.01, -0.01, 0.5, 2.0, 3.0, -3.0, -1.0, 2.0], np.float32)
X = np.array([1e-310, 1e-310, -1e-310, 1e-300])
Y = np.array([0.01, 0.5, -3.0, 0.5])
XLA_P_BITS = [1052050675, 1077216499, 436207616, 0, 2147483648, 4286578688, 2139095040,
              1082130432]
XLA_Q = np.array([5.80667537e-004, 1.57172778e-162, -np.inf, 1e-150])


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_power_of_a_denormal_base_is_xlas(fusion):
    p, q = runtime.compile(TEXT, fusion=fusion)(A, B, X, Y)
    np.testing.assert_array_equal(p.view(np.uint32), np.array(XLA_P_BITS, np.uint32))
    np.testing.assert_allclose(q, XLA_Q, rtol=1e-8)     # f64: within an ulp of XLA's
