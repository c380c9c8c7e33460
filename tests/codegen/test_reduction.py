"""Reduction kernels (row, column, layer-norm rows) against numpy: odd sizes, layouts, element
types, zero sizes, multi-operand reducers, non-identity inits, fused producers and consumers,
and both targets' kernel shapes."""

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.analyzer import analyze_verified
from runtime.codegen.families import reduction
from runtime.execution.kernel_builds import KernelBuild
from runtime.opencl.device import get_device
from runtime.execution import program_cache
from runtime.execution.executable import Executable
from runtime.target import TARGETS, Target

RNG = np.random.default_rng(7)


def reducer(name: str, op: str, t: str = "f32") -> str:
    return f"""
{name} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] {op}(a, b)
}}
"""


def compile_for(text: str, name: str) -> Executable:
    """Compile with the given target's fusion decisions and kernel shapes (the kernels run on
    the default device whatever the target: a GPU-shaped kernel is valid OpenCL anywhere)."""
    dev = get_device()
    module = runtime.parse(text)
    analysis = analyze_verified(module, dev.mem_base_addr_align, True, TARGETS[name])
    return Executable(module, analysis, dev, KernelBuild(analysis, dev)).build()


def reduce_module(shape: str, out: str, dims: str, t: str = "f32", op: str = "add",
                  init: str = "0", epilogue: str = "") -> str:
    root = "ROOT r" if not epilogue else "r"
    tail = f"\n  ROOT o = {out} {epilogue}(r)" if epilogue else ""
    return f"""
HloModule red
{reducer("f", op, t)}
ENTRY e {{
  x = {shape} parameter(0)
  z = {t}[] constant({init})
  {root} = {out} reduce(x, z), dimensions={{{dims}}}, to_apply=f{tail}
}}
"""


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("shape,out,dims,axis", [
    ("f32[37,300]{1,0}", "f32[37]", "1", 1),                     # rows, lanes + tail
    ("f32[300,37]{1,0}", "f32[37]", "0", 0),                     # columns, partial block
    ("f32[5,7,33]{2,1,0}", "f32[7]", "0,2", (0, 2)),            # outer and contiguous
    ("f32[37,300]{0,1}", "f32[37]", "1", 1),                     # column-major input
    ("f32[6,40,3]{2,1,0}", "f32[6,3]", "1", 1),                  # middle dimension
])
def test_sums_match_numpy(kind, shape, out, dims, axis):
    dims_list = [int(d) for d in shape[shape.index("[") + 1:shape.index("]")].split(",")]
    x = RNG.standard_normal(dims_list).astype(np.float32)
    exe = compile_for(reduce_module(shape, out, dims), kind)
    np.testing.assert_allclose(exe(x), x.sum(axis), rtol=1e-5, atol=1e-4)


def test_row_sums_use_vector_lanes_and_one_work_item_per_row():
    exe = compile_for(reduce_module("f32[37,300]{1,0}", "f32[37]", "1"), "cpu")
    assert "+= 16" in exe.program.source
    [launch] = exe.program.plan
    assert launch.scalars[0] == 37


@pytest.mark.parametrize("shape,dims,axis", [
    ("f32[6,37]{1,0}", "1", 1),                   # one vector of partials and a tail
    ("f32[3,6,37]{2,1,0}", "0,2", (0, 2)),        # ... kept across an outer reduced loop
])
def test_row_maxima_keep_their_partials_in_one_vector_with_xla_semantics(shape, dims, axis):
    dims_list = [int(d) for d in shape[shape.index("[") + 1:shape.index("]")].split(",")]
    x = RNG.standard_normal(dims_list).astype(np.float32)
    rows = np.moveaxis(x, -2, 0)                   # a view: writes land in x
    rows[0, ..., 3] = np.nan                       # in a vector lane
    rows[1, ..., 35] = np.nan                      # in the tail
    rows[2] = -0.0
    rows[2, ..., 20] = 0.0                         # max(-0, +0) is +0
    rows[3] = -0.0                                 # all -0 stays -0
    exe = runtime.compile(reduce_module(shape, "f32[6]", dims, op="maximum", init="-inf"))
    if Target.for_device(get_device()).reduction.lanes > 1:     # not where the compiler
        assert "accv" in exe.program.source                      # vectorises work-items
    got = exe(x)
    assert np.isnan(got[0]) and np.isnan(got[1])
    assert got[2] == 0 and not np.signbit(got[2]) and np.signbit(got[3])
    np.testing.assert_array_equal(got[4:], x.max(axis)[4:])


@pytest.mark.parametrize("op, init, np_op, zero", [
    ("maximum", "-inf", np.max, 0.0), ("minimum", "inf", np.min, -0.0)])
@pytest.mark.parametrize("lane", [0, 5, 9, 15, 32])
def test_order_free_row_reductions_combine_their_lanes_as_a_tree(op, init, np_op, zero, lane):
    """A maximum's or minimum's sixteen partials combine as halves (log2 16 vector steps, not
    a chain of sixteen), which gives the sequential result exactly: a NaN or the winning
    signed zero in any lane (either half, or the tail) still wins; a sum keeps its order."""
    x = np.full((5, 33), -zero, np.float32)
    x[0, lane] = zero                              # the signed zero that wins
    x[1, lane] = np.nan
    x[2] = RNG.standard_normal(33)
    x[3, lane] = -7.0 if op == "minimum" else 7.0  # the winner in that lane alone
    x[4] = np.nan
    exe = runtime.compile(reduce_module("f32[5,33]{1,0}", "f32[5]", "1", op=op, init=init))
    lanes = Target.for_device(get_device()).reduction.lanes > 1
    if lanes:
        assert "half" in exe.program.source
    got = exe(x)
    assert got[0] == 0 and np.signbit(got[0]) == np.signbit(np.float32(zero))
    assert np.isnan(got[1]) and np.isnan(got[4])
    np.testing.assert_array_equal(got[2:4], np_op(x[2:4], axis=1))
    sums = runtime.compile(reduce_module("f32[5,33]{1,0}", "f32[5]", "1"))
    if lanes:                                      # (a GPU's work-group tree has halves)
        assert "half" not in sums.program.source


@pytest.mark.parametrize("shape,out,dims,axis,run", [
    # a group norm's statistics over channels-last data: 4 channels of every 32, per image
    ("f32[2,6,5,8,4]{4,3,2,1,0}", "f32[2,8]", "1,2,4", (1, 2, 4), 4),
    ("f32[3,10,3]{2,1,0}", "f32[3]", "1,2", (1, 2), 2),          # RGB: two lanes and a tail
])
def test_short_contiguous_runs_take_as_many_lanes_as_fit(shape, out, dims, axis, run):
    dims_list = [int(d) for d in shape[shape.index("[") + 1:shape.index("]")].split(",")]
    x = RNG.standard_normal(dims_list).astype(np.float32)
    exe = runtime.compile(reduce_module(shape, out, dims))
    if Target.for_device(get_device()).reduction.lanes > 1:
        assert f"+= {run})" in exe.program.source and "+= 16)" not in exe.program.source
    np.testing.assert_allclose(exe(x), x.sum(axis), rtol=1e-5, atol=1e-4)


def test_column_sums_give_each_work_item_adjacent_outputs():
    exe = compile_for(reduce_module("f32[300,37]{1,0}", "f32[37]", "0"), "cpu")
    [launch] = exe.program.plan
    assert launch.scalars[0] == 3          # ceil(37 / 16) blocks of adjacent outputs


@pytest.mark.parametrize("t,op,init,np_op", [
    ("f64", "add", "0", np.sum),
    ("f16", "add", "0", np.sum),
    ("bf16", "maximum", "-inf", np.max),
    ("s32", "add", "0", np.sum),
    ("u8", "maximum", "0", np.max),
    ("s32", "minimum", "2147483647", np.min),
])
def test_element_types(t, op, init, np_op):
    dtype = {"f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
             "s32": np.int32, "u8": np.uint8}[t]
    x = (RNG.standard_normal((9, 70)) * 20).astype(dtype) if t[0] in "fb" else \
        RNG.integers(0, 100, (9, 70)).astype(dtype)
    got = runtime.compile(reduce_module(f"{t}[9,70]", f"{t}[9]", "1", t, op, init))(x)
    want = np_op(x.astype(np.float64), axis=1)
    rtol = {"f16": 5e-3, "bf16": 0}.get(t, 1e-9)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=0.5 if t == "f16" else 0)


def test_pred_and_reduction():
    text = reduce_module("pred[4,20]", "pred[4]", "1", "pred", "and", "true")
    x = np.ones((4, 20), bool)
    x[1, 7] = x[3, 19] = False
    np.testing.assert_array_equal(runtime.compile(text)(x), x.all(1))


@pytest.mark.parametrize("shape,out,dims,want_shape", [
    ("f32[0,5]", "f32[5]", "0", (5,)),
    ("f32[5,0]", "f32[5]", "1", (5,)),
    ("f32[0,5]", "f32[0]", "1", (0,)),
])
def test_zero_size_reductions_give_init(shape, out, dims, want_shape):
    x = np.zeros([int(d) for d in shape[4:-1].split(",")], np.float32)
    got = runtime.compile(reduce_module(shape, out, dims, init="2.5"))(x)
    np.testing.assert_array_equal(got, np.full(want_shape, 2.5, np.float32))


def test_non_identity_init_is_applied_as_xla_applies_it():
    """Once per window of XLA's tree (32 windows and the rest: XLA's CPU backend gives 1165,
    not 1005), each window summed in order (``test_initial_values``)."""
    x = np.ones((3, 1000), np.float32)
    exe = runtime.compile(reduce_module("f32[3,1000]", "f32[3]", "1", init="5"))
    assert "accv" not in exe.program.source        # no partial sums: one accumulator, in order
    np.testing.assert_array_equal(exe(x), np.full(3, 1000 + 5 * 33, np.float32))


ARGMAX = """
HloModule argmax
amax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(gt, tie)
  v = f32[] select(keep, av, bv)
  i = s32[] select(keep, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[11,45] parameter(0)
  idx = s32[11,45] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  r = (f32[11], s32[11]) reduce(x, idx, ninf, zero), dimensions={1}, to_apply=amax
  ROOT i = s32[11] get-tuple-element(r), index=1
}
"""


def test_argmax_with_a_two_operand_reducer():
    x = RNG.standard_normal((11, 45)).astype(np.float32)
    x[4, 3] = x[4, 30] = 10.0                          # a tie: the lower index wins
    got = runtime.compile(ARGMAX)(x)
    np.testing.assert_array_equal(got, x.argmax(1))


# Gumbel-max sampling: the noise (two logs of uniform floats made from random bits) is fused
# into an argmax whose reducer lets the first NaN win, so only the sequential order is right
GUMBEL_ARGMAX = ARGMAX.replace("""  x = f32[11,45] parameter(0)
  idx""", """  logits = f32[11,45] parameter(0)
  bits = u32[11,45] parameter(1)
  nine = u32[] constant(9)
  nines = u32[11,45] broadcast(nine), dimensions={}
  m = u32[11,45] shift-right-logical(bits, nines)
  one = u32[] constant(1065353216)
  ones = u32[11,45] broadcast(one), dimensions={}
  o = u32[11,45] or(m, ones)
  f = f32[11,45] bitcast-convert(o)
  c = f32[] constant(1)
  cs = f32[11,45] broadcast(c), dimensions={}
  u = f32[11,45] subtract(f, cs)
  l1 = f32[11,45] log(u)
  n1 = f32[11,45] negate(l1)
  l2 = f32[11,45] log(n1)
  n2 = f32[11,45] negate(l2)
  x = f32[11,45] add(n2, logits)
  idx""").replace("""  gt = pred[] compare(av, bv), direction=GT""", """  g = pred[] compare(av, bv), direction=GT
  isnan = pred[] compare(av, av), direction=NE
  gt = pred[] or(g, isnan)""")


@pytest.mark.parametrize("n", [45, 48])
def test_an_argmax_over_expensive_producers_keeps_its_order_with_vector_inputs(n):
    """The noise is computed on vectors, the reducer runs element by element in order: the
    first NaN and the lower of tied indices win, as in the element kernel."""
    text = GUMBEL_ARGMAX.replace(",45]", f",{n}]")
    logits = RNG.standard_normal((11, n)).astype(np.float32)
    bits = RNG.integers(0, 2 ** 32, (11, n), dtype=np.uint64).astype(np.uint32)
    logits[2, 10] = logits[2, 17] = np.nan     # the first NaN wins (17 is in a lower lane)
    logits[5, 1:] = -np.inf
    logits[5, 0] = -np.inf                             # all -inf: the init's index
    exe = runtime.compile(text)
    if Target.for_device(get_device()).reduction.lanes > 1:
        assert "block" in exe.program.source and "log(" in exe.program.source
    got = np.asarray(exe(logits, bits))
    want = np.asarray(runtime.compile(text, fusion=False)(logits, bits))
    np.testing.assert_array_equal(got, want)
    assert got[2] == 10 and got[5] == 0


def test_reduction_with_epilogue_computes_each_output_once():
    text = reduce_module("f32[20,64]", "f32[20]", "1", epilogue="sqrt")
    x = np.abs(RNG.standard_normal((20, 64))).astype(np.float32)
    exe = runtime.compile(text)
    assert len(exe.program.plan) == 1
    np.testing.assert_allclose(exe(x), np.sqrt(x.sum(1)), rtol=1e-5)


SOFTMAX = f"""
HloModule softmax
{reducer("mx", "maximum")}
{reducer("add", "add")}
ENTRY e {{
  x = f32[13,257]{{1,0}} parameter(0)
  ninf = f32[] constant(-inf)
  m = f32[13]{{0}} reduce(x, ninf), dimensions={{1}}, to_apply=mx
  mb = f32[13,257]{{1,0}} broadcast(m), dimensions={{0}}
  d = f32[13,257]{{1,0}} subtract(x, mb)
  ex = f32[13,257]{{1,0}} exponential(d)
  z = f32[] constant(0)
  s = f32[13]{{0}} reduce(ex, z), dimensions={{1}}, to_apply=add
  sb = f32[13,257]{{1,0}} broadcast(s), dimensions={{0}}
  ROOT y = f32[13,257]{{1,0}} divide(ex, sb)
}}
"""


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_softmax_is_one_row_kernel(kind):
    x = (RNG.standard_normal((13, 257)) * 3).astype(np.float32)
    exe = compile_for(SOFTMAX, kind)
    assert len(exe.program.plan) == 1
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(exe(x), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def scaled_softmax(n: int, name: str = "softmax") -> str:
    """Attention's softmax: the scores scaled, then max, exponentials, sum and quotient."""
    return f"""
HloModule {name}
{reducer("mx", "maximum")}
{reducer("add", "add")}
ENTRY e {{
  x = f32[13,{n}]{{1,0}} parameter(0)
  c = f32[] constant(0.125)
  cb = f32[13,{n}]{{1,0}} broadcast(c), dimensions={{}}
  xs = f32[13,{n}]{{1,0}} multiply(x, cb)
  ninf = f32[] constant(-inf)
  m = f32[13]{{0}} reduce(xs, ninf), dimensions={{1}}, to_apply=mx
  mb = f32[13,{n}]{{1,0}} broadcast(m), dimensions={{0}}
  d = f32[13,{n}]{{1,0}} subtract(xs, mb)
  ex = f32[13,{n}]{{1,0}} exponential(d)
  z = f32[] constant(0)
  s = f32[13]{{0}} reduce(ex, z), dimensions={{1}}, to_apply=add
  sb = f32[13,{n}]{{1,0}} broadcast(s), dimensions={{0}}
  ROOT y = f32[13,{n}]{{1,0}} divide(ex, sb)
}}
"""


@pytest.mark.parametrize("n", [49, 64, 16, 7, 65])
def test_short_rows_compute_each_fused_value_once_for_all_passes(n):
    """A softmax over rows of at most ``_UNROLLED_BLOCKS`` vectors is written out block by
    block: its max, its sum and its outputs read the scores at the same indices, so each
    exponential and each scaling is computed once (one per block, one per tail element); a
    longer row loops, each pass computing its own. The bits are the looped kernel's."""
    x = (RNG.standard_normal((13, n)) * 30).astype(np.float32)
    exe = runtime.compile(scaled_softmax(n))
    xs = x.astype(np.float64) * 0.125
    e = np.exp(xs - xs.max(1, keepdims=True))
    got = exe(x)
    np.testing.assert_allclose(got, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    lanes = Target.for_device(get_device()).reduction.lanes
    if lanes == 1:
        return
    width = min(lanes, 1 << (n.bit_length() - 1))
    if n > reduction._UNROLLED_BLOCKS * width:
        assert "for (" in exe.program.source
        return
    values = n // width + n % width
    assert exe.program.source.count(" exp(") == values
    # the scaling, and the quotient's product with the sum's reciprocal (XLA's rewrite of a
    # division by a broadcast, passes/algebraic_rewrites.py); a scaling recomputed by each of
    # the three passes would make it 3 per value
    assert exe.program.source.count(" * u") + exe.program.source.count("* s") <= 2 * values
    unrolled = reduction._UNROLLED_BLOCKS
    try:
        reduction._UNROLLED_BLOCKS = 0
        looped = runtime.compile(scaled_softmax(n, "looped"))
    finally:
        reduction._UNROLLED_BLOCKS = unrolled
    assert "for (" in looped.program.source
    np.testing.assert_array_equal(got.view(np.uint32), looped(x).view(np.uint32))


def test_xla_layernorm_fusion_computes_reductions_once_per_row():
    text = f"""
HloModule xla_ln
{reducer("add", "add")}
fused (p0: f32[64,1024], p1: f32[1024]) -> f32[64,1024] {{
  p0 = f32[64,1024]{{1,0}} parameter(0)
  z = f32[] constant(0)
  s = f32[64]{{0}} reduce(p0, z), dimensions={{1}}, to_apply=add
  k = f32[] constant(0.0009765625)
  kb = f32[64]{{0}} broadcast(k), dimensions={{}}
  mean = f32[64]{{0}} multiply(s, kb)
  mb = f32[64,1024]{{1,0}} broadcast(mean), dimensions={{0}}
  c = f32[64,1024]{{1,0}} subtract(p0, mb)
  c2 = f32[64,1024]{{1,0}} multiply(c, c)
  v = f32[64]{{0}} reduce(c2, z), dimensions={{1}}, to_apply=add
  var = f32[64]{{0}} multiply(v, kb)
  r = f32[64]{{0}} rsqrt(var)
  rb = f32[64,1024]{{1,0}} broadcast(r), dimensions={{0}}
  y = f32[64,1024]{{1,0}} multiply(c, rb)
  p1 = f32[1024]{{0}} parameter(1)
  gb = f32[64,1024]{{1,0}} broadcast(p1), dimensions={{1}}
  ROOT o = f32[64,1024]{{1,0}} multiply(y, gb)
}}
ENTRY e {{
  x = f32[64,1024]{{1,0}} parameter(0)
  g = f32[1024]{{0}} parameter(1)
  ROOT f = f32[64,1024]{{1,0}} fusion(x, g), kind=kLoop, calls=fused
}}
"""
    x = RNG.standard_normal((64, 1024)).astype(np.float32)
    g = RNG.standard_normal(1024).astype(np.float32)
    exe = runtime.compile(text)
    [launch] = exe.program.plan
    assert launch.scalars[0] == 64, "one work-item per row"
    c = x - x.mean(1, keepdims=True)
    want = c / np.sqrt((c * c).mean(1, keepdims=True)) * g
    np.testing.assert_allclose(exe(x, g), want, rtol=1e-4, atol=1e-5)


def bias_softmax(r: int, along: str = "") -> str:
    """A T5-style attention softmax row: scores plus a transposed bf16 bias and a length mask
    from ``iota``, to bf16; ``along`` puts an op on the row the lanes cannot follow."""
    x = "x1" if not along else "x2"
    extra = f"\n  x2 = f32[2,3,{r},{r}]{{3,2,1,0}} {along}(x1), dimensions={{3}}" if along else ""
    return f"""
HloModule bias_softmax
{reducer("mx", "maximum")}
{reducer("add", "add")}
ENTRY e {{
  s = f32[2,3,{r},{r}]{{3,2,1,0}} parameter(0)
  bias = bf16[{r},{r},3]{{2,1,0}} parameter(1)
  len = s32[2]{{0}} parameter(2)
  bt = bf16[3,{r},{r}]{{2,1,0}} transpose(bias), dimensions={{2,0,1}}
  bf = f32[3,{r},{r}]{{2,1,0}} convert(bt)
  bb = f32[2,3,{r},{r}]{{3,2,1,0}} broadcast(bf), dimensions={{1,2,3}}
  io = s32[2,3,{r},{r}]{{3,2,1,0}} iota(), iota_dimension=3
  lb = s32[2,3,{r},{r}]{{3,2,1,0}} broadcast(len), dimensions={{0}}
  keep = pred[2,3,{r},{r}]{{3,2,1,0}} compare(io, lb), direction=LT
  zero = f32[] constant(0)
  big = f32[] constant(-1e9)
  zb = f32[2,3,{r},{r}]{{3,2,1,0}} broadcast(zero), dimensions={{}}
  nb = f32[2,3,{r},{r}]{{3,2,1,0}} broadcast(big), dimensions={{}}
  mask = f32[2,3,{r},{r}]{{3,2,1,0}} select(keep, zb, nb)
  x0 = f32[2,3,{r},{r}]{{3,2,1,0}} add(s, bb)
  x1 = f32[2,3,{r},{r}]{{3,2,1,0}} add(x0, mask){extra}
  ninf = f32[] constant(-inf)
  m = f32[2,3,{r}]{{2,1,0}} reduce({x}, ninf), dimensions={{3}}, to_apply=mx
  mb = f32[2,3,{r},{r}]{{3,2,1,0}} broadcast(m), dimensions={{0,1,2}}
  d = f32[2,3,{r},{r}]{{3,2,1,0}} subtract({x}, mb)
  ex = f32[2,3,{r},{r}]{{3,2,1,0}} exponential(d)
  sm = f32[2,3,{r}]{{2,1,0}} reduce(ex, zero), dimensions={{3}}, to_apply=add
  sb = f32[2,3,{r},{r}]{{3,2,1,0}} broadcast(sm), dimensions={{0,1,2}}
  p = f32[2,3,{r},{r}]{{3,2,1,0}} divide(ex, sb)
  ROOT o = bf16[2,3,{r},{r}]{{3,2,1,0}} convert(p)
}}
"""


def bias_softmax_inputs(r: int):
    s = (RNG.standard_normal((2, 3, r, r)) * 3).astype(np.float32)
    bias = RNG.standard_normal((r, r, 3)).astype(ml_dtypes.bfloat16)
    lengths = np.array([r - 7, 37], np.int32)
    return s, bias, lengths


def bias_softmax_reference(s, bias, lengths, flip: bool = False):
    r = s.shape[-1]
    x = s + bias.astype(np.float32).transpose(2, 0, 1)[None] + np.where(
        np.arange(r) < lengths[:, None, None, None], 0.0, -1e9).astype(np.float32)
    if flip:
        x = x[..., ::-1]
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def compile_recording_lanes(text: str, kind: str, monkeypatch, enabled: bool = True):
    """Compile for ``kind``, recording the values a row kernel computed on vectors (none when
    not ``enabled``: the element form)."""
    real = reduction.lane_emitter
    took: list[str] = []

    def recording(em, inst, *rest):
        found = real(em, inst, *rest) if enabled else None
        if found is not None:
            took.append(inst.name)
        return found
    monkeypatch.setattr(reduction, "lane_emitter", recording)
    monkeypatch.setattr(program_cache, "load", lambda key: None)    # lower it here and now
    exe = compile_for(text, kind)
    monkeypatch.undo()
    return exe, took


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("r", [100, 128])
def test_row_kernel_computes_its_producers_on_vectors(kind, r, monkeypatch):
    """The row maximum, the row sum of exponentials and the normalised outputs are computed on
    vectors where the target keeps partial accumulators in vectors (gathering the transposed
    bias, the mask's iota and comparison lane-wise), the remainder of a row element by
    element; the values are the element form's to within one bf16 rounding."""
    s, bias, lengths = bias_softmax_inputs(r)
    exe, took = compile_recording_lanes(bias_softmax(r), kind, monkeypatch)
    scalar, none = compile_recording_lanes(bias_softmax(r), kind, monkeypatch, enabled=False)
    assert len(exe.program.plan) == 1 and not none
    assert len(took) == (3 if TARGETS[kind].reduction.lanes > 1 else 0), took   # 2 rows, 1 store
    got = np.asarray(exe(s, bias, lengths)).astype(np.float32)
    np.testing.assert_allclose(got, np.asarray(scalar(s, bias, lengths)).astype(np.float32),
                               rtol=2 ** -8, atol=1e-30)
    np.testing.assert_allclose(got, bias_softmax_reference(s, bias, lengths), rtol=2 ** -7,
                               atol=1e-6)


def test_row_kernel_keeps_elements_where_lanes_cannot_follow(monkeypatch):
    """A reverse along the row: its lanes would run backwards, so the row is computed element
    by element, and still right."""
    s, bias, lengths = bias_softmax_inputs(40)
    exe, took = compile_recording_lanes(bias_softmax(40, along="reverse"), "cpu", monkeypatch)
    assert took == []
    np.testing.assert_allclose(np.asarray(exe(s, bias, lengths)).astype(np.float32),
                               bias_softmax_reference(s, bias, lengths, flip=True),
                               rtol=2 ** -7, atol=1e-6)


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("n", [1000, 1024, 6, 3])
def test_layernorm_rows_on_vectors_with_a_remainder(kind, n, monkeypatch):
    """Layer-norm rows of any length: whole blocks on vectors, the rest element by element
    (a row of 3 is too short for the narrowest block)."""
    text = f"""
HloModule ln
{reducer("add", "add")}
ENTRY e {{
  x = f32[24,{n}]{{1,0}} parameter(0)
  g = f32[{n}]{{0}} parameter(1)
  z = f32[] constant(0)
  s = f32[24]{{0}} reduce(x, z), dimensions={{1}}, to_apply=add
  k = f32[] constant({1 / n!r})
  kb = f32[24]{{0}} broadcast(k), dimensions={{}}
  mean = f32[24]{{0}} multiply(s, kb)
  mb = f32[24,{n}]{{1,0}} broadcast(mean), dimensions={{0}}
  c = f32[24,{n}]{{1,0}} subtract(x, mb)
  c2 = f32[24,{n}]{{1,0}} multiply(c, c)
  v = f32[24]{{0}} reduce(c2, z), dimensions={{1}}, to_apply=add
  var = f32[24]{{0}} multiply(v, kb)
  eps = f32[] constant(1e-5)
  eb = f32[24]{{0}} broadcast(eps), dimensions={{}}
  ve = f32[24]{{0}} add(var, eb)
  r = f32[24]{{0}} rsqrt(ve)
  rb = f32[24,{n}]{{1,0}} broadcast(r), dimensions={{0}}
  y = f32[24,{n}]{{1,0}} multiply(c, rb)
  gb = f32[24,{n}]{{1,0}} broadcast(g), dimensions={{1}}
  ROOT o = f32[24,{n}]{{1,0}} multiply(y, gb)
}}
"""
    x = (RNG.standard_normal((24, n)) + 3).astype(np.float32)
    g = RNG.standard_normal(n).astype(np.float32)
    exe, took = compile_recording_lanes(text, kind, monkeypatch)
    vectors = TARGETS[kind].reduction.lanes > 1 and n >= 4
    assert len(took) == (3 if vectors else 0), took
    c = x - x.mean(1, keepdims=True)
    want = c / np.sqrt((c * c).mean(1, keepdims=True) + 1e-5) * g
    np.testing.assert_allclose(exe(x, g), want, rtol=1e-4, atol=1e-5)


GROUP_NORM = """
HloModule group_norm
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
fused {
  p = f32[2,16,16,32] parameter(0)
  x = f32[2,16,16,8,4] reshape(p)
  z = f32[] constant(0)
  s = f32[2,8] reduce(x, z), dimensions={1,2,4}, to_apply=add
  n = f32[] constant(1024)
  nb = f32[2,8] broadcast(n), dimensions={}
  mean = f32[2,8] divide(s, nb)
  m5 = f32[2,1,1,8,1] reshape(mean)
  mb = f32[2,16,16,8,4] broadcast(m5), dimensions={0,1,2,3,4}
  d = f32[2,16,16,8,4] subtract(x, mb)
  q = f32[2,16,16,8,4] multiply(d, d)
  v = f32[2,8] reduce(q, z), dimensions={1,2,4}, to_apply=add
  v5 = f32[2,1,1,8,1] reshape(v)
  ROOT r = f32[2,1,1,8,1] rsqrt(v5)
}
ENTRY e {
  a = f32[2,16,16,32] parameter(0)
  ROOT f = f32[2,1,1,8,1] fusion(a), kind=kInput, calls=fused
}
"""


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_group_norm_statistics_over_short_channel_runs(kind):
    """Reductions over (H, W, channels of a group) of channels-last data: runs of 4 contiguous
    elements. The GPU target gives each (batch, group) row a work-group striding over all its
    reduced elements, and its output [2,1,1,8,1] has a column dimension of one element: its
    work-items must not write past it (a loop ``for (c = lid; c < 1; c += G)`` did on PoCL)."""
    x = (RNG.standard_normal((2, 16, 16, 32)) + 3).astype(np.float32)
    exe = compile_for(GROUP_NORM, kind)
    g = x.reshape(2, 16, 16, 8, 4).astype(np.float64)
    mean = g.mean((1, 2, 4), keepdims=True)
    want = 1 / np.sqrt(((g - mean) ** 2).sum((1, 2, 4), keepdims=True))
    np.testing.assert_allclose(np.asarray(exe(x)), want, rtol=1e-4)
    if kind == "gpu":
        assert "barrier(CLK_LOCAL_MEM_FENCE)" in exe.program.source
