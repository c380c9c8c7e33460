"""bf16 and f16 dots and convolutions computed on f32 operands on CPUs: same values, f32
tiles."""

import re

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.passes.contraction_upcast import (MIN_MULTIPLY_ADDS,
                                               upcast_narrow_contractions_in_place)
from runtime.target import CPU, GPU

PROJECTIONS = """HloModule qk
ENTRY e {
  x = bf16[512,256]{1,0} parameter(0)
  wq = bf16[256,256]{1,0} parameter(1)
  wk = bf16[256,256]{1,0} parameter(2)
  q = bf16[512,256]{1,0} dot(x, wq), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  k = bf16[512,256]{1,0} dot(x, wk), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (bf16[512,256]{1,0}, bf16[512,256]{1,0}) tuple(q, k)
}"""


def upcast(text, target=CPU):
    module = runtime.parse(text)
    upcast_narrow_contractions_in_place(module, target)
    printed = module.to_text()
    runtime.parse(printed)          # still valid HLO
    return module


def test_narrow_dots_take_f32_operands_each_converted_once_and_round_their_result_once():
    module = upcast(PROJECTIONS)
    dots = [i for i in module.entry.instructions if i.opcode == "dot"]
    assert all(d.shape.element_type.name == "f32" for d in dots)
    assert all(op.opcode == "convert" and op.shape.element_type.name == "f32"
               for d in dots for op in d.operands)
    assert dots[0].operands[0] is dots[1].operands[0]          # x converted once for both
    converts = [i for i in module.entry.instructions if i.opcode == "convert"]
    assert len(converts) == 3 + 2                                # x, wq, wk; q and k back
    assert module.entry.root.opcode == "tuple"
    assert 512 * 256 * 256 >= MIN_MULTIPLY_ADDS > 8 * 256 * 256
    assert all(op.opcode == "convert" and op.shape.element_type.name == "bf16"
               for op in module.entry.root.operands)


@pytest.mark.parametrize("et, dtype", [("bf16", ml_dtypes.bfloat16), ("f16", np.float16)])
def test_the_values_are_those_of_the_narrow_dot(et, dtype):
    """Widening is exact and the accumulation was in f32 already: the upcast module returns
    the bits the module without the pass (``fusion=False``: one kernel per instruction)
    returns."""
    text = PROJECTIONS.replace("bf16", et)
    rng = np.random.default_rng(0)
    x, wq, wk = (rng.standard_normal(s).astype(dtype) for s in ((512, 256), (256, 256), (256, 256)))
    assert "convert" in runtime.analyze(text).module.to_text()
    got = runtime.compile(text)(x, wq, wk)
    want = runtime.compile(text, fusion=False)(x, wq, wk)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint16), np.asarray(w).view(np.uint16))


# a UNet block: a 3x3 convolution over a SiLU, and a grouped one over its result
CONVOLUTIONS = """HloModule unet_block
ENTRY e {
  x = bf16[2,16,16,32]{3,2,1,0} parameter(0)
  w = bf16[3,3,32,32]{3,2,1,0} parameter(1)
  g = bf16[3,3,8,32]{3,2,1,0} parameter(2)
  s = bf16[2,16,16,32]{3,2,1,0} logistic(x)
  a = bf16[2,16,16,32]{3,2,1,0} multiply(x, s)
  c = bf16[2,16,16,32]{3,2,1,0} convolution(a, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ROOT d = bf16[2,8,8,32]{3,2,1,0} convolution(c, g), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=4
}"""


def test_narrow_convolutions_take_f32_operands_and_round_their_result_once():
    """Multiply-adds count output elements x taps x a group's input features: the first
    convolution has enough to pay, the grouped one, a quarter of the features and outputs,
    stays narrow until it has four times the batch."""
    assert 2 * 16 * 16 * 32 * 9 * 32 >= MIN_MULTIPLY_ADDS > 2 * 8 * 8 * 32 * 9 * 8
    module = upcast(CONVOLUTIONS)
    first, grouped = [i for i in module.entry.instructions if i.opcode == "convolution"]
    assert first.shape.element_type.name == "f32"
    assert all(op.opcode == "convert" and op.shape.element_type.name == "f32"
               for op in first.operands)
    assert grouped.shape.element_type.name == "bf16"
    assert grouped.operands[0].opcode == "convert"     # the first's result, rounded once
    assert grouped.operands[0].operands == [first]
    module = upcast(CONVOLUTIONS.replace("[2,", "[8,"))
    assert [i.shape.element_type.name for i in module.entry.instructions
            if i.opcode == "convolution"] == ["f32", "f32"]


def test_the_values_are_those_of_the_narrow_convolutions():
    text = CONVOLUTIONS.replace("2,16,16,32]", "4,32,32,32]").replace("2,8,8,32]", "4,16,16,32]")
    assert text.count("4,32,32,32]") == 4
    assert runtime.analyze(text).module.to_text().count("f32[") >= 4
    rng = np.random.default_rng(2)
    x, w, g = (rng.standard_normal(s).astype(ml_dtypes.bfloat16)
               for s in ((4, 32, 32, 32), (3, 3, 32, 32), (3, 3, 8, 32)))
    got = runtime.compile(text)(x, w, g)
    want = runtime.compile(text, fusion=False)(x, w, g)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16), np.asarray(want).view(np.uint16))


MIXED = """HloModule mixed
ENTRY e {
  x = bf16[512,256]{1,0} parameter(0)
  w = f32[256,256]{1,0} parameter(1)
  ROOT d = f32[512,256]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""


GELU = """HloModule gelu
ENTRY e {
  x = bf16[512,256]{1,0} parameter(0)
  w = bf16[256,256]{1,0} parameter(1)
  d = bf16[512,256]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = bf16[512,256]{1,0} tanh(d)
  ROOT m = bf16[512,256]{1,0} multiply(d, t)
}"""


def test_a_narrow_epilogue_stays_on_vectors_with_the_same_bits():
    """The dot's f32 result is rounded to bf16 by the convert in its output fusion, then the
    bf16 epilogue runs on f32 vectors rounded after each op: the bits of the unfused module."""
    exe = runtime.compile(GELU)
    assert "convert" in runtime.analyze(GELU).module.to_text()
    # the epilogue's tanh on rounded vectors (element by element it is a scalar call)
    assert re.search(r"xla_round_bf16x\d+\(xla_nan_tanh_f32_float\d+\(", exe.program.source)
    rng = np.random.default_rng(1)
    x, w = (rng.standard_normal(s).astype(ml_dtypes.bfloat16) for s in ((512, 256), (256, 256)))
    got, want = exe(x, w), runtime.compile(GELU, fusion=False)(x, w)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16), np.asarray(want).view(np.uint16))


@pytest.mark.parametrize("text", [MIXED, PROJECTIONS.replace("512", "8")],
                         ids=["mixed-operand-types", "too-small-to-pay"])
def test_mixed_or_small_dots_stay(text):
    module = runtime.parse(text)
    before = module.to_text()
    upcast_narrow_contractions_in_place(module, CPU)
    assert module.to_text() == before


def test_gpus_keep_narrow_dots():
    module = runtime.parse(PROJECTIONS)
    before = module.to_text()
    upcast_narrow_contractions_in_place(module, GPU)
    assert module.to_text() == before


INT8 = """HloModule int8
ENTRY e {{
  x = {a}[256,{k}]{{1,0}} parameter(0)
  w = {b}[{k},256]{{1,0}} parameter(1)
  ROOT d = {o}[256,256]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""


@pytest.mark.parametrize("a, b, o, k, widened", [
    ("s8", "s8", "s32", 1024, True), ("s8", "s8", "s32", 1040, False),
    ("u8", "u8", "s32", 256, True), ("u8", "u8", "s32", 264, False),
    ("s8", "u8", "s64", 512, True), ("s8", "s8", "s16", 64, False),
    ("s8", "s32", "s32", 64, False)])
def test_8_bit_integer_dots_upcast_only_where_f32_sums_them_exactly(a, b, o, k, widened):
    """Every partial sum of an upcast dot is an integer of at most 2^24 (f32's exact
    integers): 1024 products of -128 x -128 reach it exactly. Only the first operand gets an
    f32 copy; the weights stay 8-bit, widened by the tiles at the load. Narrower results
    (which wrap) and wider operands keep the integer dot."""
    text = INT8.format(a=a, b=b, o=o, k=k)
    module = upcast(text)
    dot = next(i for i in module.entry.instructions if i.opcode == "dot")
    assert (dot.shape.element_type.name == "f32") is widened
    if not widened:
        return
    assert module.entry.root.opcode == "convert" and module.entry.root.shape.element_type.name == o
    assert dot.operands[0].opcode == "convert" and dot.operands[1].opcode == "parameter"
    dtypes = {"s8": np.int8, "u8": np.uint8}
    rng = np.random.default_rng(4)
    x = rng.integers(np.iinfo(dtypes[a]).min, np.iinfo(dtypes[a]).max + 1, (256, k)).astype(dtypes[a])
    w = rng.integers(np.iinfo(dtypes[b]).min, np.iinfo(dtypes[b]).max + 1, (k, 256)).astype(dtypes[b])
    x[0], w[:, 0] = np.iinfo(dtypes[a]).min, np.iinfo(dtypes[b]).min     # the largest sum
    x[1], w[:, 1] = np.iinfo(dtypes[a]).max, np.iinfo(dtypes[b]).max
    got = runtime.compile(text)(x, w)
    want = x.astype(np.int64) @ w.astype(np.int64)
    np.testing.assert_array_equal(np.asarray(got), want)
