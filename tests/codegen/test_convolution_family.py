"""The direct register-tiled convolution family against a numpy definition of XLA's
convolution: dimension labels, strides, padding (negative too), lhs/rhs dilation, reversal,
feature and batch groups, 1-D and 3-D, element types, zero sizes and a fused epilogue; and
the narrow form for fewer output features than a vector."""

import re

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.codegen.families.convolution import plan_convolution
from runtime.codegen.families.tiles import contraction_parts
from runtime.codegen import registry
from runtime.target import CPU

from .contraction_reference import convolution

RNG = np.random.default_rng(11)


def lowers_by_tiles(opcode: str, kind: str) -> bool:
    """Whether the register-tiled family is registered for ``opcode`` on a target kind."""
    return any(rule.__module__ == "runtime.codegen.families.tiles"
               for rule in registry.rules(opcode, kind))


def conv_module(et, x_shape, w_shape, out_shape, window, labels, groups="", layouts=("", "", "")):
    la, lw, lo = (f"{{{layout}}}" if layout else "" for layout in layouts)
    return f"""HloModule c
    ENTRY e {{
      x = {et}[{x_shape}]{la} parameter(0)
      w = {et}[{w_shape}]{lw} parameter(1)
      ROOT c = {et}[{out_shape}]{lo} convolution(x, w), window={{{window}}}, dim_labels={labels}{groups}
    }}"""


def dims(shape):
    return ",".join(map(str, shape))


CASES = [
    # (x shape, w shape, window text, dim_labels, reference keyword arguments, groups text)
    ((1, 10, 10, 32), (3, 3, 32, 32), "size=3x3 pad=1_1x1_1", "b01f_01io->b01f",
     dict(size=(3, 3), pad=((1, 1), (1, 1))), ""),
    ((2, 9, 11, 5), (3, 2, 5, 19), "size=3x2 stride=2x1 pad=1_2x0_1 rhs_dilate=1x2",
     "b01f_01io->b01f", dict(size=(3, 2), stride=(2, 1), pad=((1, 2), (0, 1)), rhs_dilate=(1, 2)), ""),
    # NCHW / OIHW: the kernel's output features are strided (gathered)
    ((2, 5, 9, 11), (19, 5, 3, 2), "size=3x2 stride=2x1 pad=1_2x0_1 lhs_dilate=2x1",
     "bf01_oi01->bf01", dict(size=(3, 2), stride=(2, 1), pad=((1, 2), (0, 1)), lhs_dilate=(2, 1)), ""),
    ((1, 8, 7, 6), (3, 3, 6, 8), "size=3x3 pad=-1_1x0_2 rhs_reversal=1x0", "b01f_01io->b01f",
     dict(size=(3, 3), pad=((-1, 1), (0, 2)), reversal=(1, 0)), ""),
    ((2, 9, 11, 8), (3, 3, 2, 32), "size=3x3 pad=1_1x1_1", "b01f_01io->b01f",
     dict(size=(3, 3), pad=((1, 1), (1, 1)), feature_groups=4), ", feature_group_count=4"),
    ((4, 9, 11, 6), (3, 3, 6, 16), "size=3x3", "b01f_01io->b01f",
     dict(size=(3, 3), batch_groups=2), ", batch_group_count=2"),
    ((3, 17, 4), (5, 4, 12), "size=5 stride=2 pad=2_2", "b0f_0io->b0f",
     dict(size=(5,), stride=(2,), pad=((2, 2),)), ""),
    ((1, 5, 6, 7, 3), (2, 3, 2, 3, 8), "size=2x3x2 pad=0_1x1_1x0_0", "b012f_012io->b012f",
     dict(size=(2, 3, 2), pad=((0, 1), (1, 1), (0, 0))), ""),
    # no padding along the last window dimension: its taps join the input-feature loop
    ((2, 8, 12, 3), (4, 4, 3, 24), "size=4x4 stride=4x4", "b01f_01io->b01f",
     dict(size=(4, 4), stride=(4, 4)), ""),
    ((2, 7, 9, 5), (3, 3, 5, 20), "size=3x3 stride=1x2 pad=1_1x0_0", "b01f_01io->b01f",
     dict(size=(3, 3), stride=(1, 2), pad=((1, 1), (0, 0))), ""),
    # transposed convolutions: rows taken phase by phase of the lhs dilation where it divides
    # the output (8x10 in 2x2 phases; 9x9 in 3x3; 7 rows not divisible, 12 columns in phases)
    ((2, 4, 5, 16), (3, 3, 16, 24), "size=3x3 pad=2_1x2_1 lhs_dilate=2x2", "b01f_01io->b01f",
     dict(size=(3, 3), pad=((2, 1), (2, 1)), lhs_dilate=(2, 2)), ""),
    ((2, 3, 3, 16), (1, 1, 16, 20), "size=1x1 pad=0_2x0_2 lhs_dilate=3x3", "b01f_01io->b01f",
     dict(size=(1, 1), pad=((0, 2), (0, 2)), lhs_dilate=(3, 3)), ""),
    ((1, 3, 6, 16), (3, 3, 16, 17), "size=3x3 pad=2_2x2_1 lhs_dilate=2x2", "b01f_01io->b01f",
     dict(size=(3, 3), pad=((2, 2), (2, 1)), lhs_dilate=(2, 2)), ""),
]


@pytest.mark.parametrize("x_shape, w_shape, window, labels, ref, groups", CASES)
def test_f32_against_the_definition(x_shape, w_shape, window, labels, ref, groups):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    want = convolution(x.astype(np.float64), w.astype(np.float64), labels, **ref)
    exe = runtime.compile(conv_module("f32", dims(x_shape), dims(w_shape), dims(want.shape),
                                      window, labels, groups))
    assert "fma(" in exe.program.source
    np.testing.assert_allclose(exe(x, w), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("x_shape, w_shape, labels, zeros_read", [
    ((2, 4, 4, 64), (3, 3, 64, 32), "b01f_01io->b01f", True),
    # features 32x32 apart: the zeros a row would read span more than the region allowed
    ((1, 64, 32, 32), (3, 3, 64, 32), "bf01_01io->b01f", False)])
def test_rows_in_padding_read_zeros(x_shape, w_shape, labels, zeros_read):
    """A tile whose rows straddle the padding reads zeros for the rows outside the input:
    from a region of zeros each such row's pointer is set to once a tap, or (where the region
    would be too large) by a select per row and step; the values are the definition's."""
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    want = convolution(x.astype(np.float64), w.astype(np.float64), labels, size=(3, 3),
                       pad=((1, 1), (1, 1)))
    exe = runtime.compile(conv_module("f32", dims(x_shape), dims(w_shape), dims(want.shape),
                                      "size=3x3 pad=1_1x1_1", labels))
    source = exe.program.source
    assert ("__global const float* xp" in source) == zeros_read
    assert (": (float)0" in source) != zeros_read
    np.testing.assert_allclose(exe(x, w), want, rtol=1e-5, atol=1e-4)


def test_last_window_dimension_joins_the_feature_loop_where_it_never_pads():
    """A window whose last dimension never reaches the padding (ViT's patch embedding) loops
    over its taps and the input features as one run: one tap loop fewer in the kernel than
    the same convolution padded along that dimension."""
    def tap_loops(window: str) -> int:
        text = conv_module("f32", "2,8,12,3", "4,4,3,24", "2,2,3,24" if "pad" not in window
                           else "2,2,4,24", window, "b01f_01io->b01f")
        return len(re.findall(r"for \(int t\d+ = 0;", runtime.compile(text).program.source))
    assert tap_loops("size=4x4 stride=4x4") == 1
    assert tap_loops("size=4x4 stride=4x4 pad=0_0x1_3") == 2


def test_transposed_output_layout_and_f64():
    x = RNG.standard_normal((2, 7, 6, 5))
    w = RNG.standard_normal((3, 3, 5, 20))
    want = convolution(x, w, "b01f_01io->b01f", size=(3, 3), pad=((1, 1), (1, 1)))
    text = conv_module("f64", "2,7,6,5", "3,3,5,20", "2,7,6,20", "size=3x3 pad=1_1x1_1",
                       "b01f_01io->b01f", layouts=("", "", "0,3,2,1"))
    got = runtime.compile(text)(x, w)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_f16_accumulates_in_f32():
    x = RNG.standard_normal((1, 6, 6, 40)).astype(np.float16)
    w = RNG.standard_normal((3, 3, 40, 16)).astype(np.float16)
    exact = convolution(x.astype(np.float32).astype(np.float64), w.astype(np.float64),
                        "b01f_01io->b01f", size=(3, 3))
    got = runtime.compile(conv_module("f16", "1,6,6,40", "3,3,40,16", "1,4,4,16", "size=3x3",
                                      "b01f_01io->b01f"))(x, w)
    ulp = np.abs(exact) * 2.0 ** -10 + 1e-3
    assert np.all(np.abs(got.astype(np.float64) - exact) <= ulp)


def test_plan_declines_few_output_features_and_gpus():
    few = conv_module("f32", "1,5,5,3", "3,3,3,2", "1,3,3,2", "size=3x3", "b01f_01io->b01f")
    conv = runtime.parse(few).entry.root
    assert plan_convolution(contraction_parts(conv, "convolution"), CPU) is None
    many = conv_module("f32", "1,5,5,3", "3,3,3,16", "1,3,3,16", "size=3x3", "b01f_01io->b01f")
    conv = runtime.parse(many).entry.root
    assert plan_convolution(contraction_parts(conv, "convolution"), CPU) is not None
    assert lowers_by_tiles("convolution", "cpu") and not lowers_by_tiles("convolution", "gpu")
    x = RNG.standard_normal((1, 5, 5, 3)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 3, 2)).astype(np.float32)
    want = convolution(x.astype(np.float64), w.astype(np.float64), "b01f_01io->b01f", size=(3, 3))
    np.testing.assert_allclose(runtime.compile(few)(x, w), want, rtol=1e-5, atol=1e-5)


def test_zero_batch():
    exe = runtime.compile(conv_module("f32", "0,5,5,3", "3,3,3,16", "0,3,3,16", "size=3x3",
                                      "b01f_01io->b01f"))
    got = exe(np.zeros((0, 5, 5, 3), np.float32), np.zeros((3, 3, 3, 16), np.float32))
    assert got.shape == (0, 3, 3, 16)


def test_fused_bias_and_relu():
    text = """HloModule conv_relu
    fused {
      p0 = f32[2,8,8,6]{3,2,1,0} parameter(0)
      p1 = f32[3,3,6,24]{3,2,1,0} parameter(1)
      p2 = f32[24]{0} parameter(2)
      c = f32[2,8,8,24]{3,2,1,0} convolution(p0, p1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
      b = f32[2,8,8,24]{3,2,1,0} broadcast(p2), dimensions={3}
      s = f32[2,8,8,24]{3,2,1,0} add(c, b)
      z = f32[] constant(0)
      zb = f32[2,8,8,24]{3,2,1,0} broadcast(z), dimensions={}
      ROOT r = f32[2,8,8,24]{3,2,1,0} maximum(s, zb)
    }
    ENTRY e {
      x = f32[2,8,8,6]{3,2,1,0} parameter(0)
      w = f32[3,3,6,24]{3,2,1,0} parameter(1)
      bias = f32[24]{0} parameter(2)
      ROOT f = f32[2,8,8,24]{3,2,1,0} fusion(x, w, bias), kind=kOutput, calls=fused
    }"""
    x = RNG.standard_normal((2, 8, 8, 6)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 6, 24)).astype(np.float32)
    bias = RNG.standard_normal(24).astype(np.float32)
    exe = runtime.compile(text)
    assert "fma(" in exe.program.source
    want = np.maximum(convolution(x.astype(np.float64), w.astype(np.float64), "b01f_01io->b01f",
                                  size=(3, 3), pad=((1, 1), (1, 1))) + bias, 0)
    np.testing.assert_allclose(exe(x, w, bias), want, rtol=1e-5, atol=1e-5)


NARROW_CASES = [
    # (x shape, w shape, window text, dim_labels, reference keyword arguments): fewer output
    # features than a vector, input features contiguous, some beyond the last full vector
    ((2, 9, 11, 37), (3, 3, 37, 3), "size=3x3 pad=1_1x1_1", "b01f_01io->b01f",
     dict(size=(3, 3), pad=((1, 1), (1, 1)))),
    ((2, 9, 11, 40), (3, 2, 40, 1), "size=3x2 stride=2x1 pad=1_2x0_1 rhs_dilate=1x2",
     "b01f_01io->b01f", dict(size=(3, 2), stride=(2, 1), pad=((1, 2), (0, 1)), rhs_dilate=(1, 2))),
    ((1, 5, 6, 33), (3, 3, 33, 2), "size=3x3 pad=1_1x1_1 lhs_dilate=2x2 rhs_reversal=1x1",
     "b01f_01io->b01f", dict(size=(3, 3), pad=((1, 1), (1, 1)), lhs_dilate=(2, 2),
                             reversal=(1, 1))),
    ((3, 17, 64), (5, 64, 3), "size=5 stride=2 pad=2_2", "b0f_0io->b0f",
     dict(size=(5,), stride=(2,), pad=((2, 2),))),
]


@pytest.mark.parametrize("x_shape, w_shape, window, labels, ref", NARROW_CASES)
def test_narrow_outputs_vectorise_over_input_features(x_shape, w_shape, window, labels, ref):
    """An RGB output layer's shape: the narrow form, against the definition."""
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    want = convolution(x.astype(np.float64), w.astype(np.float64), labels, **ref)
    text = conv_module("f32", dims(x_shape), dims(w_shape), dims(want.shape), window, labels)
    plan = plan_convolution(contraction_parts(runtime.parse(text).entry.root, "convolution"), CPU)
    assert plan is not None and plan.narrow and plan.vectors == w_shape[-1]
    exe = runtime.compile(text)
    assert "fma(" in exe.program.source
    np.testing.assert_allclose(exe(x, w), want, rtol=1e-5, atol=1e-4)


def test_narrow_bf16_output_with_a_fused_bias_and_tanh():
    text = """HloModule rgb
    ENTRY e {
      x = bf16[2,8,8,32] parameter(0)
      w = bf16[3,3,32,3] parameter(1)
      b = bf16[3] parameter(2)
      c = bf16[2,8,8,3] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
      bb = bf16[2,8,8,3] broadcast(b), dimensions={3}
      s = bf16[2,8,8,3] add(c, bb)
      ROOT t = bf16[2,8,8,3] tanh(s)
    }"""
    bf16 = ml_dtypes.bfloat16
    x = RNG.standard_normal((2, 8, 8, 32)).astype(bf16)
    w = (RNG.standard_normal((3, 3, 32, 3)) * 0.1).astype(bf16)
    b = RNG.standard_normal(3).astype(bf16)
    exe = runtime.compile(text)
    assert "fma(" in exe.program.source
    conv = convolution(x.astype(np.float64), w.astype(np.float64), "b01f_01io->b01f",
                       size=(3, 3), pad=((1, 1), (1, 1)))
    want = np.tanh(conv.astype(bf16).astype(np.float64) + b.astype(np.float64))
    np.testing.assert_allclose(np.asarray(exe(x, w, b), np.float64), want, rtol=2e-2, atol=2e-2)


def test_narrow_form_needs_contiguous_input_features_and_no_groups():
    nchw = conv_module("f32", "1,32,5,5", "3,3,32,3", "1,3,3,3", "size=3x3", "bf01_01io->bf01")
    conv = runtime.parse(nchw).entry.root
    assert plan_convolution(contraction_parts(conv, "convolution"), CPU) is None
    grouped = conv_module("f32", "1,5,5,32", "3,3,16,2", "1,3,3,2", "size=3x3", "b01f_01io->b01f",
                          ", feature_group_count=2")
    conv = runtime.parse(grouped).entry.root
    assert plan_convolution(contraction_parts(conv, "convolution"), CPU) is None


GROUP_LANE_CASES = [
    # depthwise 7x7 (NHWC, channels contiguous: vector loads), strided 3x3 with a ragged
    # channel block, and NCHW (channels strided: gathers)
    ((2, 12, 12, 32), (7, 7, 1, 32), "size=7x7 pad=3_3x3_3", "b01f_01io->b01f",
     dict(size=(7, 7), pad=((3, 3), (3, 3)), feature_groups=32), ", feature_group_count=32"),
    ((1, 9, 9, 20), (3, 3, 1, 20), "size=3x3 stride=2x2 pad=1_1x1_1", "b01f_01io->b01f",
     dict(size=(3, 3), stride=(2, 2), pad=((1, 1), (1, 1)), feature_groups=20),
     ", feature_group_count=20"),
    ((2, 16, 7, 7), (16, 1, 3, 3), "size=3x3 pad=1_1x1_1", "bf01_oi01->bf01",
     dict(size=(3, 3), pad=((1, 1), (1, 1)), feature_groups=16), ", feature_group_count=16"),
    # two input features per group, and a depthwise kernel's gradient (JAX's form: batch
    # groups, the image batch as the input features, channels as the batch)
    ((1, 8, 8, 32), (3, 3, 2, 16), "size=3x3 pad=1_1x1_1", "b01f_01io->b01f",
     dict(size=(3, 3), pad=((1, 1), (1, 1)), feature_groups=16), ", feature_group_count=16"),
    ((4, 10, 10, 32), (4, 10, 10, 32), "size=10x10 pad=1_1x1_1", "f01b_i01o->01bf",
     dict(size=(10, 10), pad=((1, 1), (1, 1)), batch_groups=32), ", batch_group_count=32"),
]


@pytest.mark.parametrize("x_shape, w_shape, window, labels, ref, groups", GROUP_LANE_CASES)
def test_one_output_feature_per_group_runs_groups_across_lanes(x_shape, w_shape, window, labels,
                                                               ref, groups):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    want = convolution(x.astype(np.float64), w.astype(np.float64), labels, **ref)
    text = conv_module("f32", dims(x_shape), dims(w_shape), dims(want.shape), window, labels,
                       groups)
    plan = plan_convolution(contraction_parts(runtime.parse(text).entry.root, "convolution"),
                            CPU)
    assert plan is not None and plan.group_lanes
    exe = runtime.compile(text)
    assert "fma(" in exe.program.source
    np.testing.assert_allclose(exe(x, w), want, rtol=1e-5, atol=1e-4)
