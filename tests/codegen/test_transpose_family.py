"""Blocked transposition (copy between layouts, transpose): odd sizes with shifted-back last
blocks, more dimensions, element types moved bit for bit, fusion roots, and the cases that
stay on the one-element-per-work-item kernel."""

import ml_dtypes
import numpy as np
import pytest

import runtime

RNG = np.random.default_rng(5)


def compiled(text: str):
    exe = runtime.compile(text)
    return exe, ".s" in exe.program.source and "vload16" in exe.program.source


@pytest.mark.parametrize("n, m", [(16, 16), (37, 50), (100, 17), (64, 48)])
def test_copy_between_layouts(n, m):
    exe, blocked = compiled(f"""HloModule t
    ENTRY e {{
      x = f32[{n},{m}]{{1,0}} parameter(0)
      ROOT c = f32[{n},{m}]{{0,1}} copy(x)
    }}""")
    assert blocked
    x = RNG.standard_normal((n, m)).astype(np.float32)
    np.testing.assert_array_equal(exe(x), x)


@pytest.mark.parametrize("et, dtype", [("f32", np.float32), ("s8", np.int8), ("f16", np.float16),
                                       ("bf16", ml_dtypes.bfloat16), ("f64", np.float64),
                                       ("pred", np.bool_)])
def test_transpose_moves_bits_of_every_type(et, dtype):
    exe, blocked = compiled(f"""HloModule t
    ENTRY e {{
      x = {et}[3,20,5,33] parameter(0)
      ROOT t = {et}[5,33,3,20] transpose(x), dimensions={{2,3,0,1}}
    }}""")
    assert blocked
    x = (RNG.standard_normal((3, 20, 5, 33)) * 50).astype(dtype)
    np.testing.assert_array_equal(exe(x), x.transpose(2, 3, 0, 1))


def test_nan_payloads_survive():
    exe, _ = compiled("""HloModule t
    ENTRY e {
      x = f32[17,19]{1,0} parameter(0)
      ROOT c = f32[17,19]{0,1} copy(x)
    }""")
    bits = RNG.integers(0x7F800001, 0x7FFFFFFF, (17, 19), dtype=np.int64).astype(np.uint32)
    got = exe(bits.view(np.float32))
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint32), bits)


def test_fusion_rooted_at_a_transpose_of_a_parameter():
    exe, blocked = compiled("""HloModule t
    fused {
      p = f32[40,24]{1,0} parameter(0)
      ROOT t = f32[24,40]{1,0} transpose(p), dimensions={1,0}
    }
    ENTRY e {
      x = f32[40,24]{1,0} parameter(0)
      ROOT f = f32[24,40]{1,0} fusion(x), kind=kLoop, calls=fused
    }""")
    assert blocked
    x = RNG.standard_normal((40, 24)).astype(np.float32)
    np.testing.assert_array_equal(exe(x), x.T)


@pytest.mark.parametrize("text", [
    # the contiguous dimension stays contiguous, or a side is shorter than a block
    """HloModule t
    ENTRY e {
      x = f32[4,40,30]{2,1,0} parameter(0)
      ROOT c = f32[4,40,30]{2,0,1} copy(x)
    }""",
    """HloModule t
    ENTRY e {
      x = f32[40,8]{1,0} parameter(0)
      ROOT c = f32[40,8]{0,1} copy(x)
    }""",
])
def test_stays_elementwise_when_no_block_fits(text):
    exe, blocked = compiled(text)
    assert not blocked
    shape = runtime.parse(text).entry.parameters[0].shape.dims
    x = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(exe(x), x)
