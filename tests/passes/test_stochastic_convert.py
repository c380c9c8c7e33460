"""stochastic-convert runs as XLA's decomposition computes it. Expected values are XLA's CPU
backend's (jaxlib 0.10.2 through ``benchmarks/xla_cpu.py``) on these inputs: rounding up when
the random bits are below the scaled fraction, the sign restored, saturation at the target's
bounds, NaN to 0, and an f16 operand's fraction scaled in f32."""

import numpy as np
import pytest

import runtime
from runtime.errors import HloUnsupportedError
from runtime.pipeline import optimise

TEXT = """HloModule sc
ENTRY e {
  x = f32[12] parameter(0)
  r = u32[12] parameter(1)
  h = f16[6] parameter(2)
  q = u16[6] parameter(3)
  a = s8[12] stochastic-convert(x, r)
  b = s32[6] stochastic-convert(h, q)
  ROOT t = (s8[12], s32[6]) tuple(a, b)
}"""

X = np.array([2.5, -2.5, 0.75, -0.25, 1e10, -1e10, np.nan, np.inf, -np.inf, 127.9, -128.5, 3.0],
             np.float32)
R = np.array([0, 2**31, 2**32 - 1, 2**30, 5, 7, 0, 0, 0, 2**32 - 1, 0, 123456], np.uint32)
H = np.array([0.5, -0.5, 1.25, -7.75, 65504, 0.0], np.float16)
Q = np.array([0, 2**15, 2**14 - 1, 2**16 - 1, 3, 0], np.uint16)
XLA_A = [3, -2, 0, 0, 127, -128, 0, 127, -128, 127, -128, 3]
XLA_B = [1, 0, 2, -7, 65504, 0]


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_stochastic_convert_matches_xla(fusion):
    a, b = runtime.compile(TEXT, fusion=fusion)(X, R, H, Q)
    np.testing.assert_array_equal(a, np.array(XLA_A, np.int8))
    np.testing.assert_array_equal(b, np.array(XLA_B, np.int32))


def test_no_stochastic_convert_reaches_the_kernels():
    module = optimise(runtime.parse(TEXT), fusion=False)
    assert not any(i.opcode == "stochastic-convert" for i in module.instructions())


def test_a_conversion_xla_does_not_implement_is_refused_at_its_line():
    text = TEXT.replace("a = s8[12] stochastic-convert", "a = u8[12] stochastic-convert") \
               .replace("(s8[12], s32[6])", "(u8[12], s32[6])")
    with pytest.raises(HloUnsupportedError) as caught:
        runtime.compile(text)
    assert caught.value.line == 7
