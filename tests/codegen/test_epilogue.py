"""Output fusions' epilogues on tile vectors (``families.epilogue``): a bias row, a tanh-GELU,
a residual of the output's shape and a degenerate broadcast (``[1,n,c]`` over a batch) are
computed on vectors and stored whole, with XLA's values, on full tiles and ragged edges; an
epilogue without a vector form keeps the element-by-element path."""

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.codegen.elemental import BufferLeaf, ElementalEmitter
from runtime.codegen.families.epilogue import vectorizes
from runtime.codegen.kernel import BufferRef, KernelBuilder
from runtime.codegen.lower import lower
from runtime.passes.pipeline import optimise, run
from runtime.target import CPU, CPU_AVX2

MLP = """HloModule mlp
ENTRY e {{
  x = f32[{b},{n},{k}]{{2,1,0}} parameter(0)
  w = f32[{k},{c}]{{1,0}} parameter(1)
  bias = f32[{c}]{{0}} parameter(2)
  pos = f32[1,{n},{c}]{{2,1,0}} parameter(3)
  res = f32[{b},{n},{c}]{{2,1,0}} parameter(4)
  d = f32[{b},{n},{c}]{{2,1,0}} dot(x, w), lhs_contracting_dims={{2}}, rhs_contracting_dims={{0}}
  bb = f32[{b},{n},{c}]{{2,1,0}} broadcast(bias), dimensions={{2}}
  h = f32[{b},{n},{c}]{{2,1,0}} add(d, bb)
  c3 = f32[] constant(0.044715)
  k3 = f32[{b},{n},{c}]{{2,1,0}} broadcast(c3), dimensions={{}}
  h2 = f32[{b},{n},{c}]{{2,1,0}} multiply(h, h)
  h3 = f32[{b},{n},{c}]{{2,1,0}} multiply(h2, h)
  t0 = f32[{b},{n},{c}]{{2,1,0}} multiply(h3, k3)
  t1 = f32[{b},{n},{c}]{{2,1,0}} add(h, t0)
  th = f32[{b},{n},{c}]{{2,1,0}} tanh(t1)
  half = f32[] constant(0.5)
  kh = f32[{b},{n},{c}]{{2,1,0}} broadcast(half), dimensions={{}}
  g = f32[{b},{n},{c}]{{2,1,0}} multiply(th, kh)
  pb = f32[{b},{n},{c}]{{2,1,0}} broadcast(pos), dimensions={{0,1,2}}
  r = f32[{b},{n},{c}]{{2,1,0}} add(g, pb)
  ROOT o = f32[{b},{n},{c}]{{2,1,0}} add(r, res)
}}"""


def expected(x, w, bias, pos, res):
    h = np.einsum("bnk,kc->bnc", x.astype(np.float64), w) + bias
    return np.tanh(h + 0.044715 * h * h * h) * 0.5 + pos + res


@pytest.mark.parametrize("b, n, k, c", [(2, 16, 24, 64), (3, 13, 20, 40), (1, 8, 8, 128)])
def test_fused_epilogue_values_on_full_and_ragged_tiles(b, n, k, c):
    text = MLP.format(b=b, n=n, k=k, c=c)
    rng = np.random.default_rng(b * n + c)
    args = [rng.standard_normal(s).astype(np.float32) * 0.3
            for s in ((b, n, k), (k, c), (c,), (1, n, c), (b, n, c))]
    got = np.asarray(runtime.compile(text)(*args))
    np.testing.assert_allclose(got, expected(*args), rtol=2e-5, atol=2e-5)
    reference = np.asarray(runtime.compile(text, fusion=False)(*args))
    np.testing.assert_allclose(got, reference, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", [CPU, CPU_AVX2])
def test_the_epilogue_is_stored_as_vectors(target):
    text = MLP.format(b=2, n=16, k=24, c=64)
    [fusion] = [i for i in optimise(runtime.parse(text)).entry.instructions
                if i.opcode == "fusion"]
    assert fusion.calls.root.opcode == "add"        # the whole epilogue is one output fusion
    source = lower(run(runtime.parse(text), target), target).source
    lanes = target.tile_lanes(32)
    assert f"vstore{lanes}(" in source and f"float{lanes} ev" in source


def has_vector_form(text: str) -> bool:
    """Whether the one output fusion of ``text`` has a vector epilogue (columns: dimension 2)."""
    [fusion] = [i for i in optimise(runtime.parse(text)).entry.instructions
                if i.opcode == "fusion"]
    dot = next(i for i in fusion.calls.instructions if i.opcode == "dot")
    leaves = {(id(p), ()): BufferLeaf(p.shape, BufferRef(0, 0), ("in", k, ()))
              for k, p in enumerate(fusion.calls.parameters)}
    return vectorizes(fusion.calls.root, dot, ElementalEmitter(KernelBuilder(), leaves), 2, 512)


def test_an_epilogue_without_a_vector_form_keeps_the_element_path():
    text = MLP.format(b=2, n=16, k=24, c=64)
    assert has_vector_form(text)
    sliced = text.replace("res = f32[2,16,64]{2,1,0} parameter(4)",
                          "wide = f32[2,16,72]{2,1,0} parameter(4)\n"
                          "  res = f32[2,16,64]{2,1,0} slice(wide), slice={[0:2], [0:16], [0:64]}")
    assert not has_vector_form(sliced)



BF16_MLP = MLP.replace("f32[", "bf16[")


@pytest.mark.parametrize("target", [CPU, CPU_AVX2])
def test_a_bf16_epilogue_is_computed_on_f32_vectors_and_stored_as_bf16_vectors(target):
    source = lower(run(runtime.parse(BF16_MLP.format(b=2, n=16, k=24, c=64)), target),
                   target).source
    lanes = target.tile_lanes(32)
    assert f"vstore{lanes}(xla_float_to_bf16x{lanes}(" in source
    assert f"xla_round_bf16x{lanes}(xla_tanh_float{lanes}(" in source


@pytest.mark.parametrize("b, n, k, c", [(2, 16, 24, 64), (3, 13, 20, 40)])
def test_a_bf16_epilogue_has_the_bits_of_one_kernel_per_op(b, n, k, c):
    """Each op's result is rounded to bf16 as the unfused program stores it, so the fused
    vector epilogue and one kernel per op agree bit for bit, on full and ragged tiles."""
    text = BF16_MLP.format(b=b, n=n, k=k, c=c)
    rng = np.random.default_rng(b * n + c)
    args = [(rng.standard_normal(s) * 0.3).astype(ml_dtypes.bfloat16)
            for s in ((b, n, k), (k, c), (c,), (1, n, c), (b, n, c))]
    got = np.asarray(runtime.compile(text)(*args))
    reference = np.asarray(runtime.compile(text, fusion=False)(*args))
    np.testing.assert_array_equal(got.view(np.uint16), reference.view(np.uint16))
    want = expected(*(a.astype(np.float32) for a in args))
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=0.05, atol=0.05)
