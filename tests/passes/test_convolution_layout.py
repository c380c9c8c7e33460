"""Convolution kernels whose output features are strided get a copy with them minor (the
CPU family's vectors load them with one vload), on CPU targets only; values are unchanged and
the convolution kernel reads only contiguous vectors."""

import numpy as np

import runtime
from runtime.codegen.lower import lower
from runtime.passes.convolution_layout import relayout_convolution_kernels_in_place
from runtime.pipeline import optimise, run
from runtime.target import CPU, CPU_AVX2, GPU

# an input gradient as JAX writes it: the forward kernel [kh, kw, in, out] read with its
# feature roles swapped, so the output features (dimension 2) are strided by 16
INPUT_GRADIENT = """
HloModule input_gradient
ENTRY e {
  dy = f32[2,6,6,16]{3,2,1,0} parameter(0)
  w = f32[3,3,24,16]{3,2,1,0} parameter(1)
  ROOT dx = f32[2,6,6,24]{3,2,1,0} convolution(dy, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01oi->b01f
}
"""

FORWARD = INPUT_GRADIENT.replace("01oi", "01io").replace("f32[3,3,24,16]", "f32[3,3,16,24]")


def relayouts(text: str, target=CPU) -> list:
    module = runtime.parse(text)
    relayout_convolution_kernels_in_place(module, target)
    conv = module.entry.root
    return [op for op in conv.operands if op.opcode == "copy"]


def test_a_strided_output_feature_kernel_is_copied_output_feature_minor():
    [copy] = relayouts(INPUT_GRADIENT)
    assert copy.operands[0].opcode == "parameter"
    assert copy.shape.dims == (3, 3, 24, 16)
    assert copy.shape.minor_to_major == (2, 3, 1, 0)


def test_contiguous_kernels_and_gpus_are_left_alone():
    assert relayouts(FORWARD) == []
    assert relayouts(INPUT_GRADIENT, GPU) == []
    assert relayouts(INPUT_GRADIENT, CPU_AVX2) != []
    narrow = INPUT_GRADIENT.replace("24", "2")    # fewer output features than a vector
    assert relayouts(narrow) == []


def kernel_vectors(text: str) -> list[str]:
    """The lines of the convolution's kernel that make its vectors of kernel elements."""
    program = lower(run(runtime.parse(text)), CPU)
    [name] = [n for n in program.kernel_texts if n.endswith("_dx")]
    return [line.strip() for line in program.kernel_texts[name].splitlines()
            if line.strip().startswith("float16 yv")]


def test_the_copy_stays_its_own_kernel_and_the_convolution_loads_vectors():
    fused = optimise(runtime.parse(INPUT_GRADIENT))
    assert [i.opcode for i in fused.entry.instructions] == [
        "parameter", "parameter", "copy", "convolution"]
    vectors = kernel_vectors(INPUT_GRADIENT)
    assert vectors and all("vload16(" in line for line in vectors)


def test_values_are_unchanged():
    rng = np.random.default_rng(0)
    dy = rng.standard_normal((2, 6, 6, 16)).astype(np.float32)
    w = rng.standard_normal((3, 3, 24, 16)).astype(np.float32)
    got = np.asarray(runtime.compile(INPUT_GRADIENT)(dy, w))
    want = np.asarray(runtime.compile(INPUT_GRADIENT, fusion=False)(dy, w))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the reference: dx[b, y, x, i] = sum over taps and o of dy at the tap times w[.., i, o]
    padded = np.pad(dy, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.zeros((2, 6, 6, 24), np.float64)
    for ty in range(3):
        for tx in range(3):
            ref += np.einsum("byxo,io->byxi", padded[:, ty:ty + 6, tx:tx + 6], w[ty, tx])
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_a_narrow_kernel_is_copied_input_feature_minor_and_a_depthwise_one_is_left_alone():
    """Fewer output features than a vector: the narrow form vectorises over input features."""
    rgb = FORWARD.replace("f32[3,3,16,24]", "f32[3,3,16,3]").replace("f32[2,6,6,24]",
                                                                     "f32[2,6,6,3]")
    [copy] = relayouts(rgb)
    assert copy.shape.minor_to_major[0] == 2          # the kernel's input features
    depthwise = """
    HloModule depthwise
    ENTRY e {
      x = f32[2,6,6,16]{3,2,1,0} parameter(0)
      w = f32[3,3,1,16]{3,2,1,0} parameter(1)
      ROOT y = f32[2,6,6,16]{3,2,1,0} convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=16
    }"""
    assert relayouts(depthwise) == []
