"""The fusion cost model: no fusion makes a kernel recompute a reduction (or any op whose cost
grows with its operand) for outputs that share it, and cheaper merges still happen. Each case
is a whole HLO program checked twice: the fusion decisions (every reduction computes each of
its outputs once, see ``fusion_cost.reduction_evaluations``) and the values against numpy."""

import math
from dataclasses import replace

import numpy as np
import pytest

import runtime
from runtime.analysis.fusion_cost import (FusionCost, is_operand_bound, may_evaluate_repeatedly,
                                        reduction_evaluations, work_per_element)
from runtime.pipeline import optimise
from runtime.target import CPU

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""

# Batch norm backward (training mode) over NHWC: per-channel sums over N, H, W broadcast back
# over the whole activation. The input gradient alone is the output, so every sum is read only
# by the kernel computing it (the case where a row merge would be allowed).
BATCH_NORM_BACKWARD = """
HloModule bn_backward
""" + ADD + """
ENTRY e {
  x = f32[4,8,8,16] parameter(0)
  dy = f32[4,8,8,16] parameter(1)
  gamma = f32[16] parameter(2)
  zero = f32[] constant(0)
  inv_m = f32[] constant(0.00390625)
  eps = f32[] constant(1e-5)
  inv_m_c = f32[16] broadcast(inv_m), dimensions={}
  eps_c = f32[16] broadcast(eps), dimensions={}
  sum_x = f32[16] reduce(x, zero), dimensions={0,1,2}, to_apply=add
  mean = f32[16] multiply(sum_x, inv_m_c)
  mean_b = f32[4,8,8,16] broadcast(mean), dimensions={3}
  xc = f32[4,8,8,16] subtract(x, mean_b)
  xc2 = f32[4,8,8,16] multiply(xc, xc)
  sum_xc2 = f32[16] reduce(xc2, zero), dimensions={0,1,2}, to_apply=add
  var = f32[16] multiply(sum_xc2, inv_m_c)
  var_eps = f32[16] add(var, eps_c)
  inv = f32[16] rsqrt(var_eps)
  inv_b = f32[4,8,8,16] broadcast(inv), dimensions={3}
  xhat = f32[4,8,8,16] multiply(xc, inv_b)
  dbeta = f32[16] reduce(dy, zero), dimensions={0,1,2}, to_apply=add
  dy_xhat = f32[4,8,8,16] multiply(dy, xhat)
  dgamma = f32[16] reduce(dy_xhat, zero), dimensions={0,1,2}, to_apply=add
  m = f32[] constant(256)
  m_b = f32[4,8,8,16] broadcast(m), dimensions={}
  m_dy = f32[4,8,8,16] multiply(dy, m_b)
  dbeta_b = f32[4,8,8,16] broadcast(dbeta), dimensions={3}
  t1 = f32[4,8,8,16] subtract(m_dy, dbeta_b)
  dgamma_b = f32[4,8,8,16] broadcast(dgamma), dimensions={3}
  t2 = f32[4,8,8,16] multiply(xhat, dgamma_b)
  t3 = f32[4,8,8,16] subtract(t1, t2)
  scale = f32[16] multiply(gamma, inv)
  scale_m = f32[16] multiply(scale, inv_m_c)
  scale_b = f32[4,8,8,16] broadcast(scale_m), dimensions={3}
  ROOT dx = f32[4,8,8,16] multiply(t3, scale_b)
}
"""


def batch_norm_backward(x, dy, gamma):
    m = x.shape[0] * x.shape[1] * x.shape[2]
    mean = x.mean(axis=(0, 1, 2))
    xc = x - mean
    inv = 1 / np.sqrt((xc * xc).mean(axis=(0, 1, 2)) + 1e-5)
    xhat = xc * inv
    dbeta = dy.sum(axis=(0, 1, 2))
    dgamma = (dy * xhat).sum(axis=(0, 1, 2))
    return gamma * inv / m * (m * dy - dbeta - xhat * dgamma)


SOFTMAX = """
HloModule softmax
""" + ADD + """
ENTRY e {
  x = f32[64,256] parameter(0)
  ninf = f32[] constant(-inf)
  zero = f32[] constant(0)
  mx = f32[64] reduce(x, ninf), dimensions={1}, to_apply=max
  mx_b = f32[64,256] broadcast(mx), dimensions={0}
  xs = f32[64,256] subtract(x, mx_b)
  ex = f32[64,256] exponential(xs)
  s = f32[64] reduce(ex, zero), dimensions={1}, to_apply=add
  s_b = f32[64,256] broadcast(s), dimensions={0}
  ROOT y = f32[64,256] divide(ex, s_b)
}
"""

# Layer norm backward over the last dimension: row sums (broadcast back along the row) and the
# column sums of the parameter gradients (over the batch).
LAYERNORM_BACKWARD = """
HloModule layernorm_backward
""" + ADD + """
ENTRY e {
  x = f32[128,96] parameter(0)
  dy = f32[128,96] parameter(1)
  gamma = f32[96] parameter(2)
  zero = f32[] constant(0)
  inv_n = f32[] constant(0.010416667)
  inv_n_r = f32[128] broadcast(inv_n), dimensions={}
  eps = f32[] constant(1e-5)
  eps_r = f32[128] broadcast(eps), dimensions={}
  sx = f32[128] reduce(x, zero), dimensions={1}, to_apply=add
  mean = f32[128] multiply(sx, inv_n_r)
  mean_b = f32[128,96] broadcast(mean), dimensions={0}
  xc = f32[128,96] subtract(x, mean_b)
  xc2 = f32[128,96] multiply(xc, xc)
  sxc2 = f32[128] reduce(xc2, zero), dimensions={1}, to_apply=add
  var = f32[128] multiply(sxc2, inv_n_r)
  ve = f32[128] add(var, eps_r)
  inv = f32[128] rsqrt(ve)
  inv_b = f32[128,96] broadcast(inv), dimensions={0}
  xhat = f32[128,96] multiply(xc, inv_b)
  dbeta = f32[96] reduce(dy, zero), dimensions={0}, to_apply=add
  dyx = f32[128,96] multiply(dy, xhat)
  dgamma = f32[96] reduce(dyx, zero), dimensions={0}, to_apply=add
  gamma_b = f32[128,96] broadcast(gamma), dimensions={1}
  g = f32[128,96] multiply(dy, gamma_b)
  sg = f32[128] reduce(g, zero), dimensions={1}, to_apply=add
  gx = f32[128,96] multiply(g, xhat)
  sgx = f32[128] reduce(gx, zero), dimensions={1}, to_apply=add
  n = f32[] constant(96)
  n_b = f32[128,96] broadcast(n), dimensions={}
  ng = f32[128,96] multiply(g, n_b)
  sg_b = f32[128,96] broadcast(sg), dimensions={0}
  t1 = f32[128,96] subtract(ng, sg_b)
  sgx_b = f32[128,96] broadcast(sgx), dimensions={0}
  t2 = f32[128,96] multiply(xhat, sgx_b)
  t3 = f32[128,96] subtract(t1, t2)
  k = f32[128] multiply(inv, inv_n_r)
  k_b = f32[128,96] broadcast(k), dimensions={0}
  dx = f32[128,96] multiply(t3, k_b)
  ROOT out = (f32[128,96], f32[96], f32[96]) tuple(dx, dgamma, dbeta)
}
"""


def layernorm_backward(x, dy, gamma):
    n = x.shape[1]
    xc = x - x.mean(axis=1, keepdims=True)
    inv = 1 / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + 1e-5)
    xhat = xc * inv
    g = dy * gamma
    dx = inv / n * (n * g - g.sum(axis=1, keepdims=True) - xhat * (g * xhat).sum(axis=1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)


# One attention head per batch: softmax(q k^T / 8) v, with the scores' reductions over keys.
ATTENTION = """
HloModule attention
""" + ADD + """
ENTRY e {
  q = f32[4,32,64] parameter(0)
  k = f32[4,32,64] parameter(1)
  v = f32[4,32,64] parameter(2)
  s = f32[4,32,32] dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
  c = f32[] constant(0.125)
  c_b = f32[4,32,32] broadcast(c), dimensions={}
  ss = f32[4,32,32] multiply(s, c_b)
  ninf = f32[] constant(-inf)
  zero = f32[] constant(0)
  mx = f32[4,32] reduce(ss, ninf), dimensions={2}, to_apply=max
  mx_b = f32[4,32,32] broadcast(mx), dimensions={0,1}
  d = f32[4,32,32] subtract(ss, mx_b)
  ex = f32[4,32,32] exponential(d)
  sum = f32[4,32] reduce(ex, zero), dimensions={2}, to_apply=add
  sum_b = f32[4,32,32] broadcast(sum), dimensions={0,1}
  p = f32[4,32,32] divide(ex, sum_b)
  ROOT o = f32[4,32,64] dot(p, v), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention(q, k, v):
    return softmax(np.einsum("bqd,bkd->bqk", q, k) * 0.125) @ v


def _fused_computations(module):
    return [i.attrs["calls"] for c in module.computations for i in c.instructions
            if i.opcode == "fusion"]


def _evaluations(text: str) -> dict[str, float]:
    """reduce name -> how many times the fused kernels compute each of its outputs."""
    module = optimise(runtime.parse(text))
    found = {}
    for comp in _fused_computations(module):
        found.update({r.name: n for r, n in reduction_evaluations(comp).items()})
    return found


def _rng_inputs(*shapes):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def test_batch_norm_backward_keeps_per_channel_sums_out_of_the_elementwise_kernel():
    module = optimise(runtime.parse(BATCH_NORM_BACKWARD))
    for comp in _fused_computations(module):
        for r, n in reduction_evaluations(comp).items():
            assert n == 1, f"{r.name} computed {n} times per output in {comp.name}"
    dx_fusion = module.entry.root
    assert dx_fusion.opcode == "fusion"
    assert "reduce" not in {i.opcode for i in dx_fusion.attrs["calls"].instructions}
    assert len(_fused_computations(module)) == 5          # four sums, then dx


def test_batch_norm_backward_values():
    x, dy, gamma = _rng_inputs((4, 8, 8, 16), (4, 8, 8, 16), (16,))
    got = runtime.compile(BATCH_NORM_BACKWARD)(x, dy, gamma)
    want = batch_norm_backward(x.astype(np.float64), dy, gamma)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)


def test_softmax_reductions_fuse_into_one_row_kernel():
    module = optimise(runtime.parse(SOFTMAX))
    assert module.entry.root.opcode == "fusion"
    comp = module.entry.root.attrs["calls"]
    assert reduction_evaluations(comp) and set(reduction_evaluations(comp).values()) == {1.0}
    assert sum(i.opcode == "reduce" for i in comp.instructions) == 2
    [x] = _rng_inputs((64, 256))
    np.testing.assert_allclose(runtime.compile(SOFTMAX)(x), softmax(x), rtol=1e-5, atol=1e-6)


def test_layernorm_backward_row_sums_fuse_and_column_sums_stay_apart():
    evaluations = _evaluations(LAYERNORM_BACKWARD)
    assert {"sx", "sxc2", "sg", "sgx", "dbeta", "dgamma"} <= set(evaluations)
    assert all(n == 1 for n in evaluations.values()), evaluations
    module = optimise(runtime.parse(LAYERNORM_BACKWARD))
    dx = module.entry.root.operands[0]
    row_sums = {i.name for i in dx.attrs["calls"].instructions if i.opcode == "reduce"}
    # dx's own row sums join its kernel (sx and sxc2 also feed dgamma, so they stay apart)
    assert row_sums == {"sg", "sgx"}


def test_layernorm_backward_values():
    x, dy, gamma = _rng_inputs((128, 96), (128, 96), (96,))
    got = runtime.compile(LAYERNORM_BACKWARD)(x, dy, gamma)
    for g, w in zip(got, layernorm_backward(x.astype(np.float64), dy, gamma)):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4)


def test_attention_fuses_the_softmax_but_no_dot_into_a_repeated_read():
    module = optimise(runtime.parse(ATTENTION))
    evaluations = _evaluations(ATTENTION)
    assert set(evaluations) == {"mx", "sum"} and set(evaluations.values()) == {1.0}
    for comp in _fused_computations(module):
        for inst in comp.instructions:
            if inst.opcode == "dot":
                assert comp.root is inst or str(comp.root.opcode) != "reduce"
    q, k, v = _rng_inputs((4, 32, 64), (4, 32, 64), (4, 32, 64))
    np.testing.assert_allclose(runtime.compile(ATTENTION)(q, k, v), attention(q, k, v),
                               rtol=1e-4, atol=1e-5)


def _inst(module_text: str, name: str):
    module = runtime.parse(module_text)
    return next(i for i in module.entry.instructions if i.name == name)


def test_operand_bound_work_grows_with_the_operand():
    sum_x = _inst(BATCH_NORM_BACKWARD, "sum_x")
    assert is_operand_bound(sum_x) and work_per_element(sum_x) == 4 * 8 * 8
    dot = _inst(ATTENTION, "s")
    assert is_operand_bound(dot) and work_per_element(dot) == 64
    assert not may_evaluate_repeatedly(dot) and not may_evaluate_repeatedly(sum_x)
    assert not may_evaluate_repeatedly(_inst(SOFTMAX, "ex"))      # exp: expensive
    assert may_evaluate_repeatedly(_inst(SOFTMAX, "xs"))          # subtract: cheap
    assert work_per_element(_inst(SOFTMAX, "mx_b")) == 0          # data movement
    conv = _inst("""
HloModule conv
ENTRY e {
  x = f32[2,8,8,3] parameter(0)
  k = f32[3,3,3,16] parameter(1)
  ROOT c = f32[2,8,8,16] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
""", "c")
    assert is_operand_bound(conv) and work_per_element(conv) == 3 * 3 * 3


@pytest.mark.parametrize("cost,pays", [
    (FusionCost(bytes_saved=4096, work_duplicated=0), True),
    (FusionCost(bytes_saved=4096, work_duplicated=1e6), False),
    (FusionCost(bytes_saved=math.inf, work_duplicated=1, recomputes_operand_bound=object()), False),
])
def test_a_merge_pays_when_saved_bytes_outweigh_duplicated_work(cost, pays):
    assert cost.pays is pays


SCALAR_EPILOGUE = """
HloModule epilogue
""" + ADD + """
ENTRY e {
  x = f32[SIZE] parameter(0)
  zero = f32[] constant(0)
  s = f32[] reduce(x, zero), dimensions={0}, to_apply=add
  limit = f32[] constant(1000)
  ROOT lt = pred[] compare(s, limit), direction=LT
}
"""


@pytest.mark.parametrize("n,kernels", [(8, 1), (1 << 20, 2)])
def test_a_scalar_epilogue_joins_only_a_short_reduction(n, kernels):
    """One work-item may do a short reduction and its epilogue alone; a long one keeps its
    parallel kernel and the epilogue its own."""
    text = SCALAR_EPILOGUE.replace("SIZE", str(n))
    module = optimise(runtime.parse(text))
    assert len(_fused_computations(module)) == kernels
    x = np.linspace(0, 1, n, dtype=np.float32)
    assert bool(runtime.compile(text)(x)) == bool(x.astype(np.float64).sum() < 1000)


# erf-style GELU with its backward pass, as JAX emits it: a polynomial in 1/z^2 and exp(-z^2),
# both read by the forward output and by the gradient. Every cheap value goes back to x and
# the bias alone; the exponential (expensive, two readers) is the one value worth keeping.
POLY = [0.5, -0.25, 0.125, -0.0625, 0.03125, -0.015625, 0.0078125, -0.00390625, 0.001953125,
        -0.0009765625, 0.00048828125, -0.000244140625]
_POLY_TEXT = "\n".join(
    f"  c{k} = f32[] constant({c})\n  cb{k} = f32[64,256] broadcast(c{k}), dimensions={{}}\n"
    f"  m{k} = f32[64,256] multiply(p{k}, t)\n  p{k + 1} = f32[64,256] add(m{k}, cb{k})"
    for k, c in enumerate(POLY))
GELU_BACKWARD = f"""
HloModule gelu_backward
ENTRY e {{
  x = f32[64,256] parameter(0)
  b = f32[256] parameter(1)
  dy = f32[64,256] parameter(2)
  bb = f32[64,256] broadcast(b), dimensions={{1}}
  h = f32[64,256] add(x, bb)
  half = f32[] constant(0.5)
  halfb = f32[64,256] broadcast(half), dimensions={{}}
  z = f32[64,256] multiply(h, halfb)
  z2 = f32[64,256] multiply(z, z)
  one = f32[] constant(1)
  oneb = f32[64,256] broadcast(one), dimensions={{}}
  z2p = f32[64,256] add(z2, oneb)
  t = f32[64,256] divide(oneb, z2p)
  p0 = f32[64,256] broadcast(one), dimensions={{}}
{_POLY_TEXT}
  nz2 = f32[64,256] negate(z2)
  ex = f32[64,256] exponential(nz2)
  erfish = f32[64,256] multiply(p{len(POLY)}, ex)
  y = f32[64,256] multiply(h, erfish)
  dpoly = f32[64,256] multiply(p{len(POLY)}, z)
  g = f32[64,256] add(dpoly, ex)
  dx = f32[64,256] multiply(dy, g)
  ROOT out = (f32[64,256], f32[64,256]) tuple(y, dx)
}}
"""


def gelu_backward(x, b, dy):
    h = x + b
    z = h * 0.5
    z2 = z * z
    t = 1 / (z2 + 1)
    p = np.ones_like(x)
    for c in POLY:
        p = p * t + c
    ex = np.exp(-z2)
    return h * (p * ex), dy * (p * z + ex)


def _materialised(module) -> list[str]:
    """Entry values computed by a kernel that another kernel reads back (an output of a
    multi-output fusion is its get-tuple-element)."""
    entry = module.entry
    read = {op for i in entry.instructions if i.opcode not in ("tuple", "get-tuple-element")
            for op in i.operands}
    return sorted(i.name for i in entry.instructions
                  if i in read and i.opcode not in ("parameter", "constant"))


def _computed(value):
    """The fused instruction computing an entry value (through a multi-output fusion's
    get-tuple-element)."""
    if value.opcode == "get-tuple-element":
        return value.operands[0].attrs["calls"].root.operands[value.index]
    return value.attrs["calls"].root


def test_cheap_cone_is_recomputed_from_its_source_rather_than_kept():
    """The polynomial's values (dozens of cheap ops) are recomputed for the forward and the
    backward results from x and b, never kept in memory: without multi-output fusion only
    the exponential they share is (in a kernel of its own), and with it one kernel computes
    the exponential and both results."""
    single = replace(CPU, fusion=replace(CPU.fusion, multi_output=False))
    apart = optimise(runtime.parse(GELU_BACKWARD), target=single)
    kept = _materialised(apart)
    assert len(kept) == 1, kept
    (only,) = [i for i in apart.entry.instructions if i.name == kept[0]]
    assert _computed(only).opcode == "exponential"
    module = optimise(runtime.parse(GELU_BACKWARD))
    assert _materialised(module) == []
    [kernel] = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(kernel.shape.elements) == 2


def test_cheap_cone_recomputed_values():
    x, b, dy = _rng_inputs((64, 256), (256,), (64, 256))
    got = runtime.compile(GELU_BACKWARD)(x, b, dy)
    for g, want in zip(got, gelu_backward(x, b, dy)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


# A residual stream: each layer adds its output to the running sum, and each sum is also
# normalised (a row reduction reads it). Recomputing a sum in a later kernel would read every
# earlier layer's output again and keep them all live; each sum is computed once instead.
RESIDUAL_STREAM = """
HloModule residual
""" + ADD + """
ENTRY e {
  zero = f32[] constant(0)
  x0 = f32[32,128] parameter(0)
  d1 = f32[32,128] parameter(1)
  d2 = f32[32,128] parameter(2)
  d3 = f32[32,128] parameter(3)
  d4 = f32[32,128] parameter(4)
  x1 = f32[32,128] add(x0, d1)
  x2 = f32[32,128] add(x1, d2)
  x3 = f32[32,128] add(x2, d3)
  x4 = f32[32,128] add(x3, d4)
  r1 = f32[32] reduce(x1, zero), dimensions={1}, to_apply=add
  r2 = f32[32] reduce(x2, zero), dimensions={1}, to_apply=add
  r3 = f32[32] reduce(x3, zero), dimensions={1}, to_apply=add
  r4 = f32[32] reduce(x4, zero), dimensions={1}, to_apply=add
  ROOT out = (f32[32], f32[32], f32[32], f32[32], f32[32,128]) tuple(r1, r2, r3, r4, x4)
}
"""


def test_residual_stream_is_computed_once_not_recomputed_per_reader():
    module = optimise(runtime.parse(RESIDUAL_STREAM))
    adds = sum(i.opcode == "add" and i.shape.dims == (32, 128)
               for c in _fused_computations(module) + [module.entry] for i in c.instructions)
    assert adds == 4


def test_residual_stream_values():
    xs = _rng_inputs(*[(32, 128)] * 5)
    got = runtime.compile(RESIDUAL_STREAM)(*xs)
    sums = np.cumsum(np.stack(xs), axis=0)[1:]
    for g, s in zip(got[:4], sums):
        np.testing.assert_allclose(g, s.sum(axis=1), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[4], sums[-1], rtol=1e-6, atol=1e-6)


# A ResNeXt/DeepLab block: a convolution's ReLU feeds two more convolutions (which read it
# from memory whatever the fusion does) and a pooled branch. Recomputing the ReLU in the
# pooled branch's kernel would keep the first convolution's output alive beside it.
MATERIALIZED = """
HloModule block
""" + ADD + """
ENTRY e {
  x = f32[2,16,16,32] parameter(0)
  w = f32[3,3,32,32] parameter(1)
  v = f32[3,3,32,32] parameter(2)
  c = f32[2,16,16,32] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  zero = f32[] constant(0)
  zeros = f32[2,16,16,32] broadcast(zero), dimensions={}
  h = f32[2,16,16,32] maximum(c, zeros)
  a = f32[2,16,16,32] convolution(h, v), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  p = f32[2,16,16,32] reduce-window(h, zero), window={size=1x3x3x1 pad=0_0x1_1x1_1x0_0}, to_apply=add
  ROOT o = f32[2,16,16,32] add(a, p)
}
"""


def test_a_value_convolutions_read_anyway_is_not_recomputed_from_a_temp():
    """The pooled branch reads the ReLU itself: recomputing it from the convolution's output
    saves no bytes (the ReLU is in memory for the second convolution) and would keep that
    output live longer; the values are the module's."""
    module = optimise(runtime.parse(MATERIALIZED))
    maxima = sum(i.opcode == "maximum" for c in _fused_computations(module) + [module.entry]
                 for i in c.instructions)
    assert maxima == 1
    exe = runtime.compile(MATERIALIZED)
    x, w, v = _rng_inputs((2, 16, 16, 32), (3, 3, 32, 32), (3, 3, 32, 32))
    got = np.asarray(exe(x, w, v))
    want = np.asarray(runtime.compile(MATERIALIZED, fusion=False)(x, w, v))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


KERNEL_WORK = """
HloModule kernel_work
""" + ADD + """
fused_update {
  buf = f32[64,256] parameter(0)
  row = f32[1,256] parameter(1)
  i = s32[] parameter(2)
  t = f32[1,256] tanh(row)
  zero = s32[] constant(0)
  ROOT u = f32[64,256] dynamic-update-slice(buf, t, i, zero)
}
ENTRY e {
  a = f32[32,64] parameter(0)
  b = f32[64,48] parameter(1)
  d = f32[32,48] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  buf = f32[64,256] parameter(2)
  row = f32[1,256] parameter(3)
  i = s32[] parameter(4)
  u = f32[64,256] fusion(buf, row, i), kind=kLoop, calls=fused_update
  ROOT r = (f32[32,48], f32[64,256]) tuple(d, u)
}"""


def test_kernel_work_counts_operations_and_bytes_and_an_updates_own_elements():
    """``kernel_work`` (what chaining launches compares with a target's limit): a dot costs
    its contraction per output element plus the bytes it reads and writes; an in-place
    update computes and writes its update, not the buffer it writes into."""
    from runtime.analysis.fusion_cost import kernel_work
    module = runtime.parse(KERNEL_WORK)
    insts = {i.name: i for i in module.entry.instructions}
    assert kernel_work(insts["d"]) == 32 * 48 * 64 + 4 * (32 * 64 + 64 * 48) + 4 * 32 * 48
    # reads: the row and the index (the buffer is not read); computes: the row's tanh
    # (a transcendental), the zero constant and the update; writes: the row
    tanh_ops = 256 * work_per_element(next(i for i in insts["u"].calls.instructions
                                           if i.opcode == "tanh"))
    assert kernel_work(insts["u"]) == (4 * 256 + 4) + tanh_ops + 1 + 256 + 4 * 256
