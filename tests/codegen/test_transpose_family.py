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


# XLA's transpose-fusion emitter tests (kInput fusions as XLA prints them): roots of mixed
# rank, side outputs, and side outputs updated in place. Each output of a multi-output
# fusion is computed at its own index (they crashed with an IndexError: the whole root tuple
# was computed at the first output's index). Values checked against XLA's CPU backend when
# written; the references here are numpy's.
MIXED_RANKS = """HloModule m

fused_computation {
  %p0 = f64[24,2,6,4] parameter(0)
  %bc = f64[24,2,24] bitcast(%p0)
  %t1 = f64[6,4,2,24] transpose(%p0), dimensions={2,3,1,0}
  %t2 = f64[24,2,24] transpose(%bc), dimensions={2,1,0}
  %p1 = f64[] parameter(1)
  %bc1 = f64[6,4,2,24] broadcast(%p1), dimensions={}
  %bc2 = f64[24,2,24] broadcast(%p1), dimensions={}
  %a1 = f64[6,4,2,24] add(%t1, %bc1)
  %a2 = f64[24,2,24] add(%t2, %bc2)
  ROOT %t = (f64[6,4,2,24], f64[24,2,24]) tuple(%a1, %a2)
}

ENTRY main {
  %p0 = f64[24,2,6,4] parameter(0)
  %p1 = f64[] parameter(1)
  ROOT %fusion = (f64[6,4,2,24], f64[24,2,24]) fusion(%p0, %p1),
    kind=kInput, calls=%fused_computation
}"""

SIDE_OUTPUT_IN_PLACE = """HloModule m, input_output_alias={ {1}: (1, {}, may-alias) }

fused_computation {
  %p0 = f32[64,48] parameter(0)
  %p1 = f32[4,64,48] parameter(1)
  %p2 = s32[] parameter(2)
  %tr = f32[48,64] transpose(%p0), dimensions={1,0}
  %r = f32[1,64,48] reshape(%p0)
  %z = s32[] constant(0)
  %dus = f32[4,64,48] dynamic-update-slice(%p1, %r, %p2, %z, %z)
  ROOT %t = (f32[48,64], f32[4,64,48]) tuple(%tr, %dus)
}

ENTRY main {
  %p0 = f32[64,48] parameter(0)
  %p1 = f32[4,64,48] parameter(1)
  %p2 = s32[] parameter(2)
  ROOT %fusion = (f32[48,64], f32[4,64,48]) fusion(%p0, %p1, %p2), kind=kInput,
    calls=fused_computation
}"""

SIDE_OUTPUTS = """HloModule m

fused_computation {
  %p0 = f64[24,2,36] parameter(0)
  %p1 = f64[36,2,24] parameter(1)
  %tr = f64[36,2,24] transpose(%p0), dimensions={2,1,0}
  %neg = f64[36,2,24] negate(%p1)
  %log = f64[24,2,36] log(%p0)
  ROOT %t = (f64[36,2,24], f64[36,2,24], f64[24,2,36])
    tuple(%neg, %tr, %log)
}

ENTRY main {
  %p0 = f64[24,2,36] parameter(0)
  %p1 = f64[36,2,24] parameter(1)
  ROOT %fusion = (f64[36,2,24], f64[36,2,24], f64[24,2,36])
    fusion(%p0, %p1), kind=kInput, calls=%fused_computation
}"""

SIDE_OUTPUT_BROADCAST = """HloModule module

fusion {
  %input0 = f32[100,32,64] parameter(0)
  %input1 = f32[100,32] parameter(1)
  %transpose = f32[100,64,32] transpose(%input0), dimensions={0,2,1}
  %broadcast = f32[100,32,64] broadcast(%input1), dimensions={0,1}
  ROOT %tuple = (f32[100,64,32], f32[100,32,64]) tuple(%transpose, %broadcast)
}

ENTRY entry {
  %input0 = f32[100,32,64] parameter(0)
  %input1 = f32[100,32] parameter(1)
  ROOT %fusion = (f32[100,64,32], f32[100,32,64]) fusion(%input0, %input1), kind=kInput,
    calls=fusion
}"""


# a side output read back from a tuple of mixed rank inside the fusion
TUPLE_OF_MIXED_RANK = """HloModule module

fusion {
  %input0 = f32[100,32,64] parameter(0)
  %input1 = f32[100,32] parameter(1)
  %transpose = f32[100,64,32] transpose(%input0), dimensions={0,2,1}
  %neg = f32[100,32] negate(%input1)
  %inner = (f32[100,64,32], f32[100,32]) tuple(%transpose, %neg)
  %g = f32[100,32] get-tuple-element(%inner), index=1
  ROOT %tuple = (f32[100,64,32], f32[100,32]) tuple(%transpose, %g)
}

ENTRY entry {
  %input0 = f32[100,32,64] parameter(0)
  %input1 = f32[100,32] parameter(1)
  ROOT %fusion = (f32[100,64,32], f32[100,32]) fusion(%input0, %input1), kind=kInput,
    calls=fusion
}"""


def _uniform(*shape):
    return RNG.random(shape) + 0.5


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_transpose_fusion_with_roots_of_mixed_rank(fusion):
    x, c = _uniform(24, 2, 6, 4), np.float64(1.25)
    a1, a2 = runtime.compile(MIXED_RANKS, fusion=fusion)(x, c)
    np.testing.assert_array_equal(a1, x.transpose(2, 3, 1, 0) + c)
    np.testing.assert_array_equal(a2, x.reshape(24, 2, 24).transpose(2, 1, 0) + c)


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_transpose_fusion_with_a_side_output_updated_in_place(fusion):
    x, stack = _uniform(64, 48).astype(np.float32), _uniform(4, 64, 48).astype(np.float32)
    tr, updated = runtime.compile(SIDE_OUTPUT_IN_PLACE, fusion=fusion)(
        x, stack, np.int32(2))
    want = stack.copy()
    want[2] = x
    np.testing.assert_array_equal(tr, x.T)
    np.testing.assert_array_equal(updated, want)


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_transpose_fusion_with_side_outputs(fusion):
    x, y = _uniform(24, 2, 36), _uniform(36, 2, 24)
    neg, tr, log = runtime.compile(SIDE_OUTPUTS, fusion=fusion)(x, y)
    np.testing.assert_array_equal(neg, -y)
    np.testing.assert_array_equal(tr, x.transpose(2, 1, 0))
    np.testing.assert_allclose(log, np.log(x), rtol=1e-15)


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_transpose_fusion_with_a_side_output_of_another_shape(fusion):
    x, y = _uniform(100, 32, 64).astype(np.float32), _uniform(100, 32).astype(np.float32)
    tr, b = runtime.compile(SIDE_OUTPUT_BROADCAST, fusion=fusion)(x, y)
    np.testing.assert_array_equal(tr, x.transpose(0, 2, 1))
    np.testing.assert_array_equal(b, np.broadcast_to(y[:, :, None], (100, 32, 64)))


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_side_output_read_from_a_tuple_of_mixed_rank(fusion):
    x, y = _uniform(100, 32, 64).astype(np.float32), _uniform(100, 32).astype(np.float32)
    tr, neg = runtime.compile(TUPLE_OF_MIXED_RANK, fusion=fusion)(x, y)
    np.testing.assert_array_equal(tr, x.transpose(0, 2, 1))
    np.testing.assert_array_equal(neg, -y)
