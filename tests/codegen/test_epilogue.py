"""Output fusions' epilogues on tile vectors (``families.epilogue``): a bias row, a tanh-GELU,
a residual of the output's shape and a degenerate broadcast (``[1,n,c]`` over a batch) are
computed on vectors and stored whole, with XLA's values, on full tiles and ragged edges; so are
values computed off the tile's columns (a scalar chain through a dynamic slice, a computed bias
row, a per-row statistic, clamp's scalar bounds); an epilogue without a vector form keeps the
element-by-element path."""

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.codegen.elemental import BufferLeaf, ElementalEmitter
from runtime.codegen.families.epilogue import vectorizes
from runtime.codegen.kernel import BufferRef, KernelBuilder
from runtime.codegen.lower import lower
from runtime.pipeline import optimise, run
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


def has_vector_form(text: str, column_dim: int = 2) -> bool:
    """Whether the output fusion of ``text`` has a vector epilogue (columns: ``column_dim``)."""
    [fusion] = [i for i in optimise(runtime.parse(text)).entry.instructions
                if i.opcode == "fusion" and any(x.opcode == "dot" for x in i.calls.instructions)]
    return fusion_vectorizes(fusion, column_dim)


def fusion_vectorizes(fusion, column_dim: int) -> bool:
    """Whether the output fusion ``fusion`` over a dot has a vector epilogue."""
    dot = next(i for i in fusion.calls.instructions if i.opcode == "dot")
    leaves = {(id(p), ()): BufferLeaf(p.shape, BufferRef(0, 0), ("in", k, ()))
              for k, p in enumerate(fusion.calls.parameters)}
    return vectorizes(fusion.calls.root, dot, ElementalEmitter(KernelBuilder(), leaves),
                      column_dim, 512)


def test_an_epilogue_without_a_vector_form_keeps_the_element_path():
    text = MLP.format(b=2, n=16, k=24, c=64)
    assert has_vector_form(text)
    sliced = text.replace("res = f32[2,16,64]{2,1,0} parameter(4)",
                          "wide = f32[2,16,72]{2,1,0} parameter(4)\n"
                          "  res = f32[2,16,64]{2,1,0} slice(wide), slice={[0:2], [0:16], [0:64]}")
    assert not has_vector_form(sliced)


# a diffusion sampler's step: the step size is a scalar read by a dynamic slice at a wrapped
# integer index, the bias row is computed from two rows, each row is scaled by a statistic
# computed from its own values, and the result is clamped by scalars
STEP = """HloModule step
ENTRY e {{
  x = f32[{m},{k}]{{1,0}} parameter(0)
  w = f32[{k},{c}]{{1,0}} parameter(1)
  t = s32[] parameter(2)
  sizes = f32[50]{{0}} parameter(3)
  b = f32[{c}]{{0}} parameter(4)
  g = f32[{c}]{{0}} parameter(5)
  var = f32[{m}]{{0}} parameter(6)
  d = f32[{m},{c}]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  zero = s32[] constant(0)
  fifty = s32[] constant(50)
  neg = pred[] compare(t, zero), direction=LT
  wrapped = s32[] add(t, fifty)
  i = s32[] select(neg, wrapped, t)
  ds = f32[1]{{0}} dynamic-slice(sizes, i), dynamic_slice_sizes={{1}}
  size = f32[] reshape(ds)
  one = f32[] constant(1)
  ones = f32[{c}]{{0}} broadcast(one), dimensions={{}}
  g1 = f32[{c}]{{0}} add(g, ones)
  row = f32[{c}]{{0}} divide(b, g1)
  eps = f32[] constant(0.001)
  epss = f32[{m}]{{0}} broadcast(eps), dimensions={{}}
  ve = f32[{m}]{{0}} add(var, epss)
  inv = f32[{m}]{{0}} rsqrt(ve)
  rows = f32[{m},{c}]{{1,0}} broadcast(row), dimensions={{1}}
  biased = f32[{m},{c}]{{1,0}} add(d, rows)
  invs = f32[{m},{c}]{{1,0}} broadcast(inv), dimensions={{0}}
  scaled = f32[{m},{c}]{{1,0}} multiply(biased, invs)
  sizes2 = f32[{m},{c}]{{1,0}} broadcast(size), dimensions={{}}
  stepped = f32[{m},{c}]{{1,0}} multiply(scaled, sizes2)
  lo = f32[] constant(-2)
  hi = f32[] constant(2)
  ROOT o = f32[{m},{c}]{{1,0}} clamp(lo, stepped, hi)
}}"""


def step_args(m, k, c, t, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, c)).astype(
        np.float32) * 0.5, np.int32(t), rng.uniform(0.1, 1.0, 50).astype(np.float32),
        rng.standard_normal(c).astype(np.float32), rng.uniform(0.0, 2.0, c).astype(np.float32),
        rng.uniform(0.5, 2.0, m).astype(np.float32)]


def step_expected(x, w, t, sizes, b, g, var):
    d = x.astype(np.float64) @ w + b / (g + 1.0)
    d = d / np.sqrt(var.astype(np.float64) + 0.001)[:, None] * sizes[t + 50 if t < 0 else t]
    return np.clip(d, -2, 2)


# an output fusion (written as one: the fusion pass never builds it) whose per-row value
# reduces the dot itself: one value a row, but it reads the dot, so it cannot be computed
# before the tile is: no vector form
READS_DOT = """HloModule reads_dot
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused {
  x = f32[16,24]{1,0} parameter(0)
  w = f32[24,64]{1,0} parameter(1)
  d = f32[16,64]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zero = f32[] constant(0)
  r = f32[16]{0} reduce(d, zero), dimensions={1}, to_apply=sum
  rs = f32[16,64]{1,0} broadcast(r), dimensions={0}
  ROOT o = f32[16,64]{1,0} add(d, rs)
}
ENTRY e {
  x = f32[16,24]{1,0} parameter(0)
  w = f32[24,64]{1,0} parameter(1)
  ROOT f = f32[16,64]{1,0} fusion(x, w), kind=kOutput, calls=fused
}"""


def test_values_off_the_columns_have_a_vector_form():
    assert has_vector_form(STEP.format(m=16, k=24, c=64), column_dim=1)
    assert not fusion_vectorizes(runtime.parse(READS_DOT).entry.root, column_dim=1)


@pytest.mark.parametrize("target", [CPU, CPU_AVX2])
def test_a_scalar_chain_is_computed_once_and_splat(target):
    source = lower(run(runtime.parse(STEP.format(m=16, k=24, c=64)), target), target).source
    lanes = target.tile_lanes(32)
    vectors = source[source.index("if (skip"):source.index("float tile")]
    assert f"vstore{lanes}(" in vectors and f"xla_fmin_float{lanes}(" in vectors
    assert vectors.count("? ") == 1           # the step's index is selected once per tile


@pytest.mark.parametrize("m, k, c, t", [(16, 24, 64, 7), (13, 20, 40, -3), (9, 8, 128, 49)])
def test_values_off_the_columns_on_full_and_ragged_tiles(m, k, c, t):
    text = STEP.format(m=m, k=k, c=c)
    args = step_args(m, k, c, t, m * c + t)
    got = np.asarray(runtime.compile(text)(*args))
    np.testing.assert_allclose(got, step_expected(*args), rtol=2e-5, atol=2e-5)
    reference = np.asarray(runtime.compile(text, fusion=False)(*args))
    np.testing.assert_allclose(got, reference, rtol=1e-6, atol=1e-6)


# narrow float types with numpy's dtype for each
NARROW = [("bf16", ml_dtypes.bfloat16), ("f16", np.float16)]


@pytest.mark.parametrize("et", [et for et, _ in NARROW])
@pytest.mark.parametrize("target", [CPU, CPU_AVX2])
def test_a_narrow_epilogue_is_computed_on_f32_vectors_and_stored_as_narrow_vectors(target, et):
    source = lower(run(runtime.parse(MLP.replace("f32[", f"{et}[").format(b=2, n=16, k=24, c=64)),
                       target), target).source
    lanes = target.tile_lanes(32)
    assert f"vstore{lanes}(xla_float_to_{et}x{lanes}(" in source
    # tanh in f32 lanes, its NaN made XLA's for ``et`` (``OpcodeSpec.nan``), then rounded
    nan_format = "f16" if et == "f16" else "f32"
    assert f"xla_round_{et}x{lanes}(xla_nan_tanh_{nan_format}_float{lanes}(" in source


@pytest.mark.parametrize("et, dtype", NARROW, ids=[et for et, _ in NARROW])
@pytest.mark.parametrize("b, n, k, c", [(2, 16, 24, 64), (3, 13, 20, 40)])
def test_a_narrow_epilogue_has_the_bits_of_one_kernel_per_op(b, n, k, c, et, dtype):
    """Each op's result is rounded to bf16 (f16) as the unfused program stores it, so the
    fused vector epilogue and one kernel per op agree bit for bit, on full and ragged
    tiles."""
    text = MLP.replace("f32[", f"{et}[").format(b=b, n=n, k=k, c=c)
    rng = np.random.default_rng(b * n + c)
    args = [(rng.standard_normal(s) * 0.3).astype(dtype)
            for s in ((b, n, k), (k, c), (c,), (1, n, c), (b, n, c))]
    got = np.asarray(runtime.compile(text)(*args))
    reference = np.asarray(runtime.compile(text, fusion=False)(*args))
    np.testing.assert_array_equal(got.view(np.uint16), reference.view(np.uint16))
    want = expected(*(a.astype(np.float32) for a in args))
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=0.05, atol=0.05)


# dropout after a projection: a mask read along the columns, and a scalar flag
DROPOUT = """HloModule dropout
ENTRY e {{
  x = f32[{m},{k}]{{1,0}} parameter(0)
  w = f32[{k},{c}]{{1,0}} parameter(1)
  keep = pred[{m},{c}]{{1,0}} parameter(2)
  train = pred[] parameter(3)
  d = f32[{m},{c}]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  z = f32[] constant(0)
  zs = f32[{m},{c}]{{1,0}} broadcast(z), dimensions={{}}
  s = f32[] constant(1.25)
  ss = f32[{m},{c}]{{1,0}} broadcast(s), dimensions={{}}
  scaled = f32[{m},{c}]{{1,0}} multiply(d, ss)
  dropped = f32[{m},{c}]{{1,0}} select(keep, scaled, zs)
  ROOT o = f32[{m},{c}]{{1,0}} select(train, dropped, d)
}}"""


@pytest.mark.parametrize("m, k, c", [(32, 24, 64), (13, 20, 40)])
def test_selects_on_a_mask_and_on_a_scalar_flag_stay_on_vectors(m, k, c):
    text = DROPOUT.format(m=m, k=k, c=c)
    assert has_vector_form(text, column_dim=1)
    rng = np.random.default_rng(m + c)
    x, w = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, c)).astype(np.float32)
    keep = rng.random((m, c)) < 0.8
    exe = runtime.compile(text)
    assert "!= (int" in exe.program.source           # the mask loaded as lanes
    d = x.astype(np.float64) @ w
    for train in (True, False):
        got = np.asarray(exe(x, w, keep, np.bool_(train)))
        want = np.where(keep, d * 1.25, 0.0) if train else d
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    unfused = runtime.compile(text, fusion=False)(x, w, keep, np.bool_(True))
    np.testing.assert_array_equal(np.asarray(exe(x, w, keep, np.bool_(True))), np.asarray(unfused))

# jax 0.12 prints a dense layer's activations as a transposed dot in {0,1}; its gradient's
# epilogue reads them column-major while the dot's tile is row-major. The gathered vector's
# offset was written `col + 0 * stride` (the tile's compound column index unparenthesised),
# which read the wrong elements on every full tile: Equinox's Lion optimiser states were off
# by up to a third of their largest value, fused only
TRANSPOSED_OPERAND = """HloModule transposed_operand
ENTRY e {
  a = f32[8,2]{1,0} parameter(0)
  b = f32[2,16]{1,0} parameter(1)
  p = f32[8,16]{0,1} parameter(2)
  d = f32[8,16]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  one = f32[] constant(1)
  ones = f32[8,16]{1,0} broadcast(one), dimensions={}
  plus = f32[8,16]{0,1} add(p, ones)
  minus = f32[8,16]{1,0} subtract(ones, p)
  g = f32[8,16]{0,1} multiply(plus, minus)
  ROOT m = f32[8,16]{1,0} multiply(d, g)
}"""


@pytest.mark.parametrize("rows,cols", [(8, 16), (13, 40), (4, 8)])
def test_an_epilogue_reads_an_operand_laid_out_column_major(rows, cols):
    text = TRANSPOSED_OPERAND.replace("8,", f"{rows},").replace(",16]", f",{cols}]")
    rng = np.random.default_rng(rows)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((rows, 2), (2, cols)))
    p = rng.standard_normal((rows, cols)).astype(np.float32)
    want = (a.astype(np.float64) @ b) * (1 - p.astype(np.float64) ** 2)
    for fusion in (True, False):
        got = runtime.compile(text, fusion=fusion)(a, b, p)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# XLA's onednn ConvolutionTest.Conv2DWithBiasAndGeluExactPattern2Test writes a scalar's
# broadcast without ``dimensions`` (XLA reads it as {}): the epilogue read the missing
# attribute and raised KeyError inside the compiler.
SCALE_BY_A_BROADCAST_WITHOUT_DIMENSIONS = """HloModule m
ENTRY e {
  x = f32[1,22,22,1] parameter(0)
  k = f32[8,8,1,10] parameter(1)
  c = f32[1,11,11,10] convolution(x, k), window={size=8x8 stride=2x2 pad=3_3x3_3}, dim_labels=b01f_01io->b01f
  h = f32[] constant(0.5)
  b = f32[1,11,11,10] broadcast(h)
  ROOT m = f32[1,11,11,10] multiply(c, b)
}"""


def test_a_scalar_broadcast_without_dimensions_in_an_epilogue():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 22, 22, 1)).astype(np.float32)
    k = rng.standard_normal((8, 8, 1, 10)).astype(np.float32)
    fused = np.asarray(runtime.compile(SCALE_BY_A_BROADCAST_WITHOUT_DIMENSIONS)(x, k))
    unfused = np.asarray(runtime.compile(SCALE_BY_A_BROADCAST_WITHOUT_DIMENSIONS,
                                         fusion=False)(x, k))
    np.testing.assert_allclose(fused, unfused, rtol=1e-5, atol=1e-5)
