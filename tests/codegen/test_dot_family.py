"""The register-tiled dot family: which form each layout gets, and values against numpy for
odd sizes, batch and multiple contracting/free dimensions, transposed operands and outputs,
every accumulation type, zero sizes and fused epilogues."""

import inspect
import re

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.codegen.families.dot import plan_dot
from runtime.codegen.families.tiles import contraction_parts
from runtime.codegen import registry
from runtime.opencl.device import get_device
from runtime.target import CPU, Target

RNG = np.random.default_rng(7)


def lowers_by_tiles(opcode: str, kind: str) -> bool:
    """Whether the register-tiled family is registered for ``opcode`` on a target kind."""
    return any(rule.__module__ == "runtime.codegen.families.tiles"
               for rule in registry.rules(opcode, kind))


def planners(opcode: str, kind: str) -> list[str]:
    """The family modules planning the contraction rules for ``opcode`` on a target kind."""
    return [inspect.getclosurevars(rule).nonlocals["plan"].__module__.rsplit(".", 1)[-1]
            for rule in registry.rules(opcode, kind)
            if rule.__module__ == "runtime.codegen.families.tiles"]


def dot_module(et: str, lhs: str, rhs: str, out: str, dims: str, out_et: str | None = None,
               layouts: tuple[str, str, str] = ("", "", "")) -> str:
    la, lb, lo = (f"{{{layout}}}" if layout else "" for layout in layouts)
    return f"""HloModule d
    ENTRY e {{
      a = {et}[{lhs}]{la} parameter(0)
      b = {et}[{rhs}]{lb} parameter(1)
      ROOT d = {out_et or et}[{out}]{lo} dot(a, b), {dims}
    }}"""


NN = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"


def entry_root(text: str):
    return runtime.parse(text).entry.root


def plan_of(text: str):
    return plan_dot(contraction_parts(entry_root(text), "dot"), CPU)


@pytest.mark.parametrize("lhs, rhs, out, dims, form, row_side", [
    ("f32[8,32]{1,0}", "f32[32,64]{1,0}", "f32[8,64]{1,0}", NN, "outer", "lhs"),
    # more rows than one work-group's tiles cover: each panel would be copied again
    ("f32[300,32]{1,0}", "f32[32,64]{1,0}", "f32[300,64]{1,0}", NN, "outer", "lhs"),
    # lhs transposed: its free dimension is contiguous, wider than the rhs's and the output's
    # contiguous one; 64 rows, one packed work-group's: the rows' panel of the lhs (2 MiB) is
    # copied once, packed ...
    ("f32[4096,128]{1,0}", "f32[4096,64]{1,0}", "f32[128,64]{0,1}",
     "lhs_contracting_dims={0}, rhs_contracting_dims={0}", "packed", "rhs"),
    # ... and read in place where it stays in the second-level cache (32 KiB)
    ("f32[64,128]{1,0}", "f32[64,64]{1,0}", "f32[128,64]{0,1}",
     "lhs_contracting_dims={0}, rhs_contracting_dims={0}", "outer", "rhs"),
    # ... but 32 rows, which one outer work-group covers: the outer form reads the lhs once
    ("f32[64,128]{1,0}", "f32[64,32]{1,0}", "f32[128,32]{0,1}",
     "lhs_contracting_dims={0}, rhs_contracting_dims={0}", "outer", "rhs"),
    # ... or a contraction too short for a panel to be worth copying (a weight gradient over
    # a batch of 32)
    ("f32[32,128]{1,0}", "f32[32,64]{1,0}", "f32[128,64]{0,1}",
     "lhs_contracting_dims={0}, rhs_contracting_dims={0}", "outer", "rhs"),
    # A @ B^T: both contiguous along the contraction
    ("f32[8,32]{1,0}", "f32[16,32]{1,0}", "f32[8,16]{1,0}",
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "inner", "lhs"),
    # ... with enough rows to reuse a packed panel of B
    ("f32[48,64]{1,0}", "f32[16,64]{1,0}", "f32[48,16]{1,0}",
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "packed", "lhs"),
    # ... but too few rows for that
    ("f32[32,500]{1,0}", "f32[64,500]{1,0}", "f32[32,64]{1,0}",
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "inner", "lhs"),
    # ... or, over a long contraction, fewer than pack_long_min_rows
    ("f32[48,1024]{1,0}", "f32[64,1024]{1,0}", "f32[48,64]{1,0}",
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "inner", "lhs"),
    ("f32[64,1024]{1,0}", "f32[64,1024]{1,0}", "f32[64,64]{1,0}",
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "packed", "lhs"),
    ("f32[48,768]{1,0}", "f32[64,768]{1,0}", "f32[48,64]{1,0}",
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "packed", "lhs"),
    # ... but a B read from memory goes to the inner form in work-groups over every row
    ("f32[32,768]{1,0}", "f32[3072,768]{1,0}", "f32[32,3072]{1,0}",
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "inner", "lhs"),
    ("f32[32,768]{1,0}", "f32[256,768]{1,0}", "f32[32,256]{1,0}",
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", "inner", "lhs"),
    # both free dimensions contiguous: the output's contiguous one takes the lanes (tile rows
    # stored as vectors), though the other is longer
    ("f32[256,1024]{1,0}", "f32[256,256]{1,0}", "f32[1024,256]{1,0}",
     "lhs_contracting_dims={0}, rhs_contracting_dims={0}", "outer", "lhs"),
    ("f32[256,1024]{1,0}", "f32[256,256]{1,0}", "f32[1024,256]{0,1}",
     "lhs_contracting_dims={0}, rhs_contracting_dims={0}", "outer", "rhs"),
    # matrix-vector
    ("f32[8,32]{1,0}", "f32[32]{0}", "f32[8]{0}", NN, "inner", "lhs"),
    # column-major operands: the lhs's free dimension is the contiguous one
    ("f32[48,8192]{0,1}", "f32[8192,64]{0,1}", "f32[48,64]{1,0}", NN, "packed", "rhs"),
    ("f32[48,64]{0,1}", "f32[64,64]{0,1}", "f32[48,64]{1,0}", NN, "outer", "rhs"),
    ("f32[400,32]{0,1}", "f32[32,160]{0,1}", "f32[400,160]{1,0}", NN, "outer", "rhs"),
])
def test_layout_chooses_the_form(lhs, rhs, out, dims, form, row_side):
    text = f"""HloModule d
    ENTRY e {{
      a = {lhs} parameter(0)
      b = {rhs} parameter(1)
      ROOT d = {out} dot(a, b), {dims}
    }}"""
    plan = plan_of(text)
    assert (plan.form, plan.row_side) == (form, row_side)


def test_declines_where_the_family_does_not_apply():
    nn = dot_module("f32", "8,32", "32,64", "8,64", NN)
    assert plan_of(nn) is not None
    # GPUs: the work-group-tiled family (tests/codegen/test_workgroup_families.py)
    assert lowers_by_tiles("dot", "cpu") and planners("dot", "gpu")[0] == "workgroup_dot"
    assert "dot" not in planners("dot", "gpu")
    assert plan_of(dot_module("pred", "8,32", "32,64", "8,64", NN)) is None
    assert plan_of(dot_module("s32", "8,32", "32,64", "8,64", NN, "f32")) is None
    assert plan_of(dot_module("f32", "8,32", "32,64", "8,64", NN, "f16")) is None
    # the only contiguous dimensions are the batch dimension and a 2-wide free one
    batch_minor = """HloModule d
    ENTRY e {
      a = f32[2,8,32]{0,2,1} parameter(0)
      b = f32[2,32,3]{0,1,2} parameter(1)
      ROOT d = f32[2,8,3] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},
        rhs_batch_dims={0}, rhs_contracting_dims={1}
    }"""
    assert plan_of(batch_minor) is None


def check(text: str, args, want, rtol=1e-5, atol=1e-5, family=True):
    exe = runtime.compile(text)
    got = exe(*args)
    if family:
        assert "get_global_id(2)" in exe.program.source
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=atol)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def matmul(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("m, k, n", [(37, 19, 45), (5, 3, 17), (1, 7, 16), (64, 40, 64),
                                     (9, 1, 20), (3, 70, 4)])
def test_f32_sizes_around_the_tile(m, k, n):
    a, b = rand(m, k), rand(k, n)
    check(dot_module("f32", f"{m},{k}", f"{k},{n}", f"{m},{n}", NN), [a, b], matmul(a, b))


@pytest.mark.parametrize("la, lb, lo", [("0,1", "1,0", "1,0"), ("1,0", "0,1", "0,1"),
                                        ("0,1", "0,1", "0,1")])
def test_transposed_layouts(la, lb, lo):
    a, b = rand(19, 23), rand(23, 29)
    check(dot_module("f32", "19,23", "23,29", "19,29", NN, layouts=(la, lb, lo)), [a, b],
          matmul(a, b))


def test_unit_strides_are_constants_in_the_text():
    """A dimension contiguous in memory is stepped by a constant, not by a stride argument:
    the contraction loop indexes a row-major row operand by the step itself, a column-major
    one by the step times its stride; both compute the product."""
    def row_steps(layout: str) -> set[str]:
        text = dot_module("f32", "64,48", "48,40", "64,40", NN, layouts=(layout, "1,0", "1,0"))
        rng = np.random.default_rng(5)
        a, b = (rng.standard_normal(s).astype(np.float32) for s in ((64, 48), (48, 40)))
        check(text, [a, b], matmul(a, b))
        source = runtime.compile(text).program.source
        return set(re.findall(r"int kx\d+ = (.*);", source))
    [step] = row_steps("1,0")
    assert re.fullmatch(r"k\d+", step)
    [step] = row_steps("0,1")
    assert re.fullmatch(r"k\d+ \* n\d+", step)


def test_transposed_operands_in_both_forms():
    a, b = rand(33, 21), rand(33, 18)
    check(dot_module("f32", "33,21", "33,18", "21,18",
                     "lhs_contracting_dims={0}, rhs_contracting_dims={0}"), [a, b],
          matmul(a.T, b))
    for k in (37, 64):           # inner form: a lane remainder, and none
        a, b = rand(7, k), rand(11, k)
        check(dot_module("f32", f"7,{k}", f"11,{k}", "7,11",
                         "lhs_contracting_dims={1}, rhs_contracting_dims={1}"), [a, b],
              matmul(a, b.T))


def test_matrix_vector_and_vector_matrix():
    a, v = rand(13, 37), rand(37)
    check(dot_module("f32", "13,37", "37", "13", NN), [a, v], matmul(a, v[:, None])[:, 0])
    w = rand(37, 20)
    check(dot_module("f32", "37", "37,20", "20", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
          [v, w], matmul(v[None, :], w)[0])


def test_batch_dimensions_anywhere():
    a, b = rand(20, 3, 17), rand(3, 20, 33)
    want = np.einsum("kbm,bkn->bmn", a.astype(np.float64), b)
    check(dot_module("f32", "20,3,17", "3,20,33", "3,17,33",
                     "lhs_batch_dims={1}, lhs_contracting_dims={0}, rhs_batch_dims={0}, "
                     "rhs_contracting_dims={1}"), [a, b], want)
    q, k = rand(2, 16, 32), rand(2, 16, 32)     # attention scores, inner form with a batch
    check(dot_module("f32", "2,16,32", "2,16,32", "2,16,16",
                     "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
                     "rhs_contracting_dims={2}"), [q, k],
          np.einsum("bik,bjk->bij", q.astype(np.float64), k))


def test_several_contracting_and_free_dimensions():
    a, b = rand(4, 5, 6, 7), rand(6, 7, 3, 20)
    check(dot_module("f32", "4,5,6,7", "6,7,3,20", "4,5,3,20",
                     "lhs_contracting_dims={2,3}, rhs_contracting_dims={0,1}"), [a, b],
          np.einsum("abij,ijcd->abcd", a.astype(np.float64), b))


def test_f64_accumulates_in_double():
    a, b = rand(13, 40, dtype=np.float64), rand(40, 21, dtype=np.float64)
    check(dot_module("f64", "13,40", "40,21", "13,21", NN), [a, b], a @ b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("et, dtype", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_half_types_accumulate_in_f32_and_round_once(et, dtype):
    # XLA's CPU backend upcasts f16/bf16 dots to f32; rounding after every step would be
    # off by far more than one ulp over 300 terms
    a, b = rand(9, 300, dtype=dtype), rand(300, 21, dtype=dtype)
    exact = matmul(a.astype(np.float32), b.astype(np.float32))
    got = runtime.compile(dot_module(et, "9,300", "300,21", "9,21", NN))(a, b)
    assert got.dtype == dtype
    ulp = np.abs(exact.astype(dtype).astype(np.float64)) * (2.0 ** -10 if et == "f16" else 2.0 ** -7)
    assert np.all(np.abs(got.astype(np.float64) - exact) <= ulp)


def test_mixed_precision_operands_widen_exactly():
    a, b = rand(6, 50, dtype=np.float16), rand(50, 20, dtype=np.float16)
    text = dot_module("f16", "6,50", "50,20", "6,20", NN, out_et="f32")
    check(text, [a, b], matmul(a, b), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("m, k, n", [(37, 19, 45), (160, 300, 96)])
@pytest.mark.parametrize("it, dtype", [("s8", np.int8), ("u16", np.uint16)])
def test_float_activations_times_integer_weights_widen_them_at_the_load(it, dtype, m, k, n):
    """A weight-only quantised layer (f32 x s8 -> f32): every s8 and u16 value is an f32, so
    the f32 tiles read the integers as they are (no f32 copy of the weights)."""
    info = np.iinfo(dtype)
    a = rand(m, k)
    b = RNG.integers(info.min, int(info.max) + 1, (k, n)).astype(dtype)
    text = f"""HloModule d
    ENTRY e {{
      a = f32[{m},{k}] parameter(0)
      b = {it}[{k},{n}] parameter(1)
      ROOT d = f32[{m},{n}] dot(a, b), {NN}
    }}"""
    assert "convert" not in runtime.analyze(text).module.to_text()
    check(text, [a, b], matmul(a, b), rtol=1e-5, atol=1e-4 * float(info.max))


def test_integer_dots_wrap_like_twos_complement():
    a = RNG.integers(-128, 128, (9, 300)).astype(np.int8)
    b = RNG.integers(-128, 128, (300, 33)).astype(np.int8)
    got = runtime.compile(dot_module("s8", "9,300", "300,33", "9,33", NN, out_et="s32"))(a, b)
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    big = np.full((3, 4), 2 ** 30, np.int32)
    got = runtime.compile(dot_module("s32", "3,4", "4,18", "3,18", NN))(big, np.full((4, 18), 3, np.int32))
    want = ((big.astype(np.int64) @ np.full((4, 18), 3)) + 2 ** 31) % 2 ** 32 - 2 ** 31
    np.testing.assert_array_equal(got, want)
    u = RNG.integers(0, 256, (5, 40)).astype(np.uint8)
    v = RNG.integers(0, 256, (40, 17)).astype(np.uint8)
    got = runtime.compile(dot_module("u8", "5,40", "40,17", "5,17", NN, out_et="u32"))(u, v)
    np.testing.assert_array_equal(got, u.astype(np.int64) @ v.astype(np.int64))


def pairs_target(base: Target) -> Target:
    from dataclasses import replace
    return replace(base, tiles=replace(base.tiles, pair_madd=True))


@pytest.mark.parametrize("a_et, b_et, out_et, m, pairs", [
    ("s8", "s8", "s32", 64, True),
    ("u8", "s8", "s32", 64, True),
    ("s16", "s16", "s32", 64, True),
    ("u8", "u8", "u32", 64, True),
    ("s8", "s8", "s32", 3, True),       # few rows: pairs, not the streamed order
    ("u16", "s8", "s32", 64, False),    # 65535 does not fit a signed 16-bit lane
    ("s8", "s8", "s64", 64, False),
    ("s32", "s32", "s32", 64, False),
])
def test_integer_dots_take_steps_in_pairs_where_the_target_multiplies_pairs(a_et, b_et, out_et,
                                                                             m, pairs):
    text = f"""HloModule d
    ENTRY e {{
      a = {a_et}[{m},300]{{1,0}} parameter(0)
      b = {b_et}[300,64]{{1,0}} parameter(1)
      ROOT d = {out_et}[{m},64]{{1,0}} dot(a, b), {NN}
    }}"""
    c = contraction_parts(entry_root(text), "dot")
    plan = plan_dot(c, pairs_target(CPU))
    assert plan.pairs is pairs and plan.stream_k is None if pairs else plan.pairs is pairs
    assert not plan_dot(c, CPU).pairs


def test_packed_integer_dots_take_pairs_too():
    from runtime.target import CPU_AVX2
    text = dot_module("s8", "300,1536", "1536,1024", "300,1024", NN, out_et="s32")
    plan = plan_dot(contraction_parts(entry_root(text), "dot"), pairs_target(CPU_AVX2))
    assert (plan.form, plan.pairs, plan.lanes) == ("packed", True, 8)


@pytest.mark.parametrize("a_et, b_et, m, k, n, lhs_layout", [
    ("s8", "s8", 9, 300, 33, "1,0"),
    ("s8", "s8", 37, 2, 50, "1,0"),
    ("s8", "s8", 64, 7, 96, "1,0"),
    ("s8", "s8", 64, 301, 96, "0,1"),      # the row operand strided along the contraction
    ("u8", "s8", 17, 255, 40, "1,0"),
    ("s16", "s16", 8, 64, 48, "1,0"),
    ("s8", "s8", 300, 1536, 1024, "1,0"),  # packed
    ("s8", "s8", 300, 1535, 1024, "0,1"),  # packed, odd, strided
])
def test_pair_steps_give_the_exact_sums(a_et, b_et, m, k, n, lhs_layout):
    """Odd contractions (a last step paired with zeros), both forms, strided rows; s16 at
    its extremes: each lane's pair sum reaches 2^31 and wraps as XLA's s32 sum does."""
    info = {t: np.iinfo(t) for t in (np.int8, np.uint8, np.int16)}
    dtype = {"s8": np.int8, "u8": np.uint8, "s16": np.int16}
    a = RNG.integers(info[dtype[a_et]].min, int(info[dtype[a_et]].max) + 1, (m, k)).astype(dtype[a_et])
    b = RNG.integers(info[dtype[b_et]].min, int(info[dtype[b_et]].max) + 1, (k, n)).astype(dtype[b_et])
    if a_et == "s16":
        a[0, :] = b[:, 0] = -32768
    text = dot_module("", f"{m},{k}", f"{k},{n}", f"{m},{n}", NN, out_et="s32",
                      layouts=(lhs_layout, "1,0", "1,0")).replace(
        "a = [", f"a = {a_et}[").replace("b = [", f"b = {b_et}[")
    exe = runtime.compile(text)
    upcast = m * n * k >= 1 << 20 and k <= 1024      # computed exactly in f32 instead
    if Target.for_device(get_device()).tiles.pair_madd and k > 1 and not upcast:
        assert "xla_pair_madd" in exe.program.source
    want = (a.astype(np.int64) @ b.astype(np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31
    np.testing.assert_array_equal(exe(a, b), want)


def test_zero_sizes():
    a, b = np.zeros((5, 0), np.float32), np.zeros((0, 18), np.float32)
    np.testing.assert_array_equal(
        runtime.compile(dot_module("f32", "5,0", "0,18", "5,18", NN))(a, b), np.zeros((5, 18)))
    exe = runtime.compile(dot_module("f32", "0,4", "4,18", "0,18", NN))
    assert exe(np.zeros((0, 4), np.float32), rand(4, 18)).shape == (0, 18)
    assert not exe.program.kernel_names


EPILOGUE = """HloModule fused_dot
fused {
  p0 = f32[37,45]{1,0} parameter(0)
  p1 = f32[45,50]{1,0} parameter(1)
  p2 = f32[50]{0} parameter(2)
  p3 = f32[37,50]{1,0} parameter(3)
  d = f32[37,50]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  b = f32[37,50]{1,0} broadcast(p2), dimensions={1}
  s = f32[37,50]{1,0} add(d, b)
  z = f32[] constant(0)
  zb = f32[37,50]{1,0} broadcast(z), dimensions={}
  m = f32[37,50]{1,0} maximum(s, zb)
  ROOT r = f32[37,50]{1,0} add(m, p3)
}
ENTRY e {
  a = f32[37,45]{1,0} parameter(0)
  w = f32[45,50]{1,0} parameter(1)
  bias = f32[50]{0} parameter(2)
  x = f32[37,50]{1,0} parameter(3)
  res = f32[37,50]{1,0} exponential(x)
  f = f32[37,50]{1,0} fusion(a, w, bias, res), kind=kOutput, calls=fused
  ROOT n = f32[37,50]{1,0} negate(f)
}"""


def test_fused_epilogue_writes_over_the_residual_it_reads():
    a, w, bias, x = rand(37, 45), rand(45, 50), rand(50), rand(37, 50)
    exe = runtime.compile(EPILOGUE, fusion=False)
    insts = {i.name: i for i in exe.buffer_assignment.module.entry.instructions}
    # buffer assignment lets the fusion take the residual's bytes: each element must be read
    # before it is written, by the work-item that writes it
    assert exe.buffer_assignment.slice(insts["res"]) == exe.buffer_assignment.slice(insts["f"])
    assert "fma(" in exe.program.source
    got = exe(a, w, bias, x)
    want = -(np.maximum(matmul(a, w) + bias, 0) + np.exp(x.astype(np.float64)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_fused_epilogue_using_the_dot_twice_and_narrowing():
    text = """HloModule gelu_like
    fused {
      p0 = f32[20,33]{1,0} parameter(0)
      p1 = f32[33,24]{0,1} parameter(1)
      d = f32[20,24]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      sq = f32[20,24]{1,0} multiply(d, d)
      t = f32[20,24]{1,0} tanh(sq)
      ROOT c = f16[20,24]{0,1} convert(t)
    }
    ENTRY e {
      a = f32[20,33]{1,0} parameter(0)
      w = f32[33,24]{0,1} parameter(1)
      ROOT f = f16[20,24]{0,1} fusion(a, w), kind=kOutput, calls=fused
    }"""
    a, w = rand(20, 33), rand(33, 24)
    exe = runtime.compile(text)
    assert "fma(" in exe.program.source
    got = exe(a, w)
    d = matmul(a, w)
    np.testing.assert_allclose(got.astype(np.float64), np.tanh(d * d), rtol=2e-3, atol=2e-3)


NT = "lhs_contracting_dims={1}, rhs_contracting_dims={1}"


@pytest.mark.parametrize("m, k, n", [(48, 64, 4), (53, 67, 45), (300, 70, 33), (50, 64, 7),
                                     (49, 200, 100), (48, 600, 40)])
def test_packed_form_sizes(m, k, n):
    # rows past one work-group's (16 tiles of 8) or not a multiple of a tile's, columns not a
    # multiple of the tile's width or narrower than a vector, odd contraction lengths, several
    # panel chunks (256 steps each for f32 and a 32-wide tile) with a remainder
    a, b = rand(m, k), rand(n, k)
    text = dot_module("f32", f"{m},{k}", f"{n},{k}", f"{m},{n}", NT)
    assert plan_of(text).form == "packed"
    check(text, [a, b], matmul(a, b.T), atol=1e-4)     # f32 sums of up to 600 products


def test_a_large_b_read_once_takes_the_inner_form_over_all_rows():
    """``A @ B^T`` with a ``B`` larger than the caches hold and an ``A`` that fits the
    second-level cache: the inner form in work-groups holding every row block (rows not a
    multiple of the block, columns not a multiple of its width, a contraction not a multiple
    of the lanes, a batch), and the product's values."""
    rng = np.random.default_rng(9)
    for m, k, n in [(50, 301, 4000), (7, 300, 5000)]:
        text = dot_module("f32", f"{m},{k}", f"{n},{k}", f"{m},{n}", NT)
        plan = plan_of(text)
        assert (plan.form, plan.group) == ("inner", -(-m // plan.tile_rows))
        a, b = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (n, k)))
        check(text, [a, b], matmul(a, b.T), atol=1e-4)
    batched = dot_module("f32", "2,30,260", "2,4100,260", "2,30,4100",
                         "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
                         "rhs_contracting_dims={2}")
    assert plan_of(batched).group == 8
    a, b = rng.standard_normal((2, 30, 260)).astype(np.float32), \
        rng.standard_normal((2, 4100, 260)).astype(np.float32)
    check(batched, [a, b], np.einsum("bmk,bnk->bmn", a.astype(np.float64), b), atol=1e-4)
    # a B that stays in cache, an A too large to, rows too many for a work-group: as before
    for m, k, n in [(50, 300, 3000), (1000, 600, 4000), (2000, 64, 20000)]:
        assert plan_of(dot_module("f32", f"{m},{k}", f"{n},{k}", f"{m},{n}", NT)).group is None


def test_packed_form_types_layouts_and_epilogue():
    a, b = rand(33, 50, dtype=np.float64), rand(21, 50, dtype=np.float64)
    check(dot_module("f64", "33,50", "21,50", "33,21", NT), [a, b], a @ b.T, rtol=1e-12,
          atol=1e-12)
    h, g = rand(24, 300, dtype=ml_dtypes.bfloat16), rand(19, 300, dtype=ml_dtypes.bfloat16)
    check(dot_module("bf16", "24,300", "19,300", "24,19", NT, out_et="f32"), [h, g],
          matmul(h.astype(np.float32), g.astype(np.float32).T), rtol=1e-5, atol=1e-4)
    u = RNG.integers(-128, 128, (20, 40)).astype(np.int8)
    v = RNG.integers(-128, 128, (40, 40)).astype(np.int8)
    got = runtime.compile(dot_module("s8", "20,40", "40,40", "20,40", NT, out_et="s32"))(u, v)
    np.testing.assert_array_equal(got, u.astype(np.int64) @ v.astype(np.int64).T)
    a, b = rand(40, 23), rand(29, 23)      # a column-major output: stored element by element
    check(dot_module("f32", "40,23", "29,23", "40,29", NT, layouts=("1,0", "1,0", "0,1")),
          [a, b], matmul(a, b.T))
    text = """HloModule packed_epilogue
    fused {
      p0 = f32[40,23]{1,0} parameter(0)
      p1 = f32[29,23]{1,0} parameter(1)
      d = f32[40,29]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={1}
      ROOT t = f32[40,29]{1,0} tanh(d)
    }
    ENTRY e {
      a = f32[40,23]{1,0} parameter(0)
      b = f32[29,23]{1,0} parameter(1)
      ROOT f = f32[40,29]{1,0} fusion(a, b), kind=kOutput, calls=fused
    }"""
    check(text, [a, b], np.tanh(matmul(a, b.T)))


def test_packed_form_attention_scores():
    # Q K^T with heads as a batch dimension between the sequence and the head features
    q, k = rand(1, 56, 3, 64), rand(1, 24, 3, 64)
    text = dot_module("f32", "1,56,3,64", "1,24,3,64", "1,3,56,24",
                      "lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
                      "rhs_contracting_dims={3}")
    assert plan_of(text).form == "packed"
    check(text, [q, k], np.einsum("xmhd,xnhd->xhmn", q.astype(np.float64), k))


@pytest.mark.parametrize("windows, seq, k, form", [
    (2, 49, 32, "packed"), (3, 49, 8, "packed"), (2, 16, 63, "packed"), (2, 33, 3, "packed"),
    # fewer rows than a packed panel is worth copying for: the inner form
    (2, 15, 32, "inner"),
    # fewer products than ``pack_min_products`` (5,202): the inner form, a possible stage
    (2, 17, 3, "inner"),
    # a contraction long enough for the inner form's vectors: as before, by the row count
    (2, 40, 64, "inner"), (2, 48, 64, "packed"),
])
def test_short_contractions_of_a_transposed_product_pack(windows, seq, k, form):
    """A @ B^T over a contraction shorter than ``pack_min_contraction`` (window attention's
    ``Q K^T`` over 32 head features) takes the packed form from ``pack_min_rows`` rows: the
    inner form would do a vector step or two and then a lane sum per output."""
    q, kk = rand(windows, seq, 3, k), rand(windows, seq, 3, k)
    text = dot_module("f32", f"{windows},{seq},3,{k}", f"{windows},{seq},3,{k}",
                      f"{windows},3,{seq},{seq}",
                      "lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
                      "rhs_contracting_dims={3}")
    assert plan_of(text).form == form
    check(text, [q, kk], np.einsum("xmhd,xnhd->xhmn", q.astype(np.float64), kk))


@pytest.mark.parametrize("m, n, transposed, groups, local", [
    # a decoding step's logits: one row block, 1,024 column blocks of the inner form's 4
    # columns -> 8 a group (128 groups)
    (4, 4096, True, 128, (8, 1, 1)),
    # 500 column blocks (ragged): as many a group as keep 16 groups, at most 8
    (4, 1999, True, 63, (8, 1, 1)),
    # the outer form over two row blocks: 32-column blocks, 96 of them -> 4 a group, 24 groups
    (12, 3072, False, 24, (4, 2, 1)),
    # ... over 4 rows or fewer the streamed order's 128-column blocks: 24, one a group
    (3, 3072, False, 24, (1, 4, 1)),
    # two row blocks of the inner form: half as many columns a group
    (8, 4096, True, 256, (4, 2, 1)),
    # 64 column blocks: 4 a group keeps 16 groups
    (4, 256, True, 16, (4, 1, 1)),
    # fewer than 32 column blocks keep one a group, and the target's row group
    (4, 32, True, 8, (1, 4, 1)),
    (12, 768, False, 24, (1, 4, 1)),
    (4, 768, False, 6, (1, 4, 1)),
])
def test_few_row_blocks_spread_column_blocks_over_a_work_group(m, n, transposed, groups, local):
    """Fewer row blocks than the target's row group (``tiles.row_group``, 4 on CPUs) leave
    work-items idle; with column blocks enough for ``MIN_COLUMN_GROUPS`` groups or more a
    work-group takes several of them instead."""
    k = 64
    a, b = rand(m, k), rand(n, k) if transposed else rand(k, n)
    dims = "lhs_contracting_dims={1}, rhs_contracting_dims={1}" if transposed else NN
    text = dot_module("f32", f"{m},{k}", f"{n},{k}" if transposed else f"{k},{n}", f"{m},{n}",
                      dims)
    exe = runtime.compile(text)
    np.testing.assert_allclose(exe(a, b), matmul(a, b.T if transposed else b), rtol=1e-5,
                               atol=1e-4)
    if Target.for_device(get_device()).name != CPU.name:
        return                   # other targets tile otherwise: the shapes below are the CPU's
    [launch] = exe.program.plan
    assert launch.local_size == local
    assert launch.global_size[0] // local[0] * launch.global_size[1] // local[1] == groups


# the inner form's per-element sums and an epilogue with many scalar arguments (each
# dynamic-slice's start, as JAX's scan reads xs[i]): a local named like an argument (s28)
# failed to build
MANY_SCALARS = """HloModule jit_f, entry_computation_layout={(f32[4,32]{1,0}, f32[32,32]{1,0}, s32[], f32[6,4,32]{2,1,0}, f32[6,4,32]{2,1,0}, /*index=5*/f32[6,4,32]{2,1,0}, f32[6,4,32]{2,1,0})->f32[4,32]{1,0}}

dynamic_index_in_dim.1 {
  Arg_0.1 = f32[6,4,32]{2,1,0} parameter(0)
  Arg_1.1 = s32[] parameter(1)
  constant.3 = s32[] constant(0)
  lt.1 = pred[] compare(Arg_1.1, constant.3), direction=LT
  constant.2 = s32[] constant(6)
  add.1 = s32[] add(Arg_1.1, constant.2)
  select_n.1 = s32[] select(lt.1, add.1, Arg_1.1)
  dynamic_slice.1 = f32[1,4,32]{2,1,0} dynamic-slice(Arg_0.1, select_n.1, constant.3, constant.3), dynamic_slice_sizes={1,4,32}
  ROOT squeeze.1 = f32[4,32]{1,0} reshape(dynamic_slice.1)
}

ENTRY main.2 {
  h.1 = f32[4,32]{1,0} parameter(0)
  W.1 = f32[32,32]{1,0} parameter(1)
  transpose.1 = f32[32,32]{0,1} transpose(W.1), dimensions={1,0}
  dot_general.1 = f32[4,32]{1,0} dot(h.1, transpose.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  xs_0_.1 = f32[6,4,32]{2,1,0} parameter(3)
  i.1 = s32[] parameter(2)
  jit_dynamic_index_in_dim_.4 = f32[4,32]{1,0} call(xs_0_.1, i.1), to_apply=dynamic_index_in_dim.1
  add.6 = f32[4,32]{1,0} add(dot_general.1, jit_dynamic_index_in_dim_.4)
  xs_1_.1 = f32[6,4,32]{2,1,0} parameter(4)
  jit_dynamic_index_in_dim_.5 = f32[4,32]{1,0} call(xs_1_.1, i.1), to_apply=dynamic_index_in_dim.1
  add.7 = f32[4,32]{1,0} add(add.6, jit_dynamic_index_in_dim_.5)
  xs_2_.1 = f32[6,4,32]{2,1,0} parameter(5)
  jit_dynamic_index_in_dim_.6 = f32[4,32]{1,0} call(xs_2_.1, i.1), to_apply=dynamic_index_in_dim.1
  add.8 = f32[4,32]{1,0} add(add.7, jit_dynamic_index_in_dim_.6)
  xs_3_.1 = f32[6,4,32]{2,1,0} parameter(6)
  jit_dynamic_index_in_dim_.7 = f32[4,32]{1,0} call(xs_3_.1, i.1), to_apply=dynamic_index_in_dim.1
  ROOT add.9 = f32[4,32]{1,0} add(add.8, jit_dynamic_index_in_dim_.7)
}"""


def test_locals_never_shadow_kernel_arguments():
    rng = np.random.default_rng(0)
    h = rng.standard_normal((4, 32)).astype(np.float32)
    w = rng.standard_normal((32, 32)).astype(np.float32)
    xs = [rng.standard_normal((6, 4, 32)).astype(np.float32) for _ in range(4)]
    got = runtime.compile(MANY_SCALARS)(h, w, np.int32(2), *xs)
    np.testing.assert_allclose(got, h @ w.T + sum(x[2] for x in xs), rtol=1e-5, atol=1e-5)
    from runtime.codegen.kernel import KernelBuilder
    kb = KernelBuilder("k")
    arguments = {kb.scalar("float", 1.0) for _ in range(8)} | {kb.param(3) for _ in range(8)}
    assert not arguments & {kb.fresh(p) for p in ("s", "n", "a") for _ in range(20)}


@pytest.mark.parametrize("layout, joined", [("2,1,0", True), ("2,0,1", False)])
def test_contracting_axes_laid_out_as_one_are_one_axis(layout, joined):
    """A weight gradient over a sequence of batches contracts [T, B, D] with [T, B, F] over
    T and B: row-major, the two axes are one contraction of T*B (the packed form's); with B
    outside T in memory they stay two."""
    text = dot_module("f32", "128,64,40", "128,64,48", "40,48",
                      "lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}",
                      layouts=(layout, layout, "1,0"))
    from runtime.target import CPU_AVX2
    plan = plan_dot(contraction_parts(entry_root(text), "dot"), CPU_AVX2)
    assert (len(plan.contracting), plan.form) == ((1, "packed") if joined else (2, "outer"))
    a, b = rand(128, 64, 40), rand(128, 64, 48)
    check(text, [a, b], np.einsum("tbd,tbf->df", a.astype(np.float64), b.astype(np.float64)),
          rtol=1e-4, atol=2e-3)     # f32 sums of 8192 products


@pytest.mark.parametrize("target", ["cpu", "cpu-avx2"])
def test_columns_the_second_level_cache_holds_are_read_in_place(target):
    """A column operand of at most ``pack_cached_bytes`` (per batch) is read in place by the
    outer form where one packed work-group would cover every row (a diffusion sampler's
    64x256x256, attention's P V per head) and, on the CPU target, under any number of rows
    (ViT's 1040x768x192); 2 MiB is packed, however many rows (a MoE layer's 256x16000x256
    embedding gradient), and AVX2 packs small columns under more rows than a panel serves."""
    from runtime.target import CPU_AVX2
    tgt = {"cpu": CPU, "cpu-avx2": CPU_AVX2}[target]

    def form(text):
        return plan_dot(contraction_parts(entry_root(text), "dot"), tgt).form
    assert form(dot_module("f32", "64,256", "256,256", "64,256", NN)) == "outer"
    assert form(dot_module("f32", "64,2048", "2048,256", "64,256", NN)) == "packed"
    assert form(dot_module("bf16", "64,1024", "1024,256", "64,256", NN, "f32")) == "outer"
    assert form(dot_module("f32", "256,16000", "16000,256", "256,256", NN)) == "packed"
    pv = dot_module("f32", "1,12,128,128", "1,128,12,64", "1,12,128,64",
                    "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
                    "rhs_contracting_dims={1}")
    assert form(pv) == "outer"
    many_rows = dot_module("f32", "1040,768", "768,192", "1040,192", NN)
    assert form(many_rows) == ("outer" if target == "cpu" else "packed")
    a, b = rand(64, 256), rand(256, 256)
    check(dot_module("f32", "64,256", "256,256", "64,256", NN), [a, b], matmul(a, b), atol=1e-4)


def test_the_outputs_contiguous_axis_takes_the_lanes_only_where_it_tiles_as_wide():
    """On AVX2 (tiles of three 8-lane vectors) 128 columns tile two vectors wide: the longer
    axis keeps the lanes there; 96 columns tile three wide and take them."""
    from runtime.target import CPU_AVX2
    for n, side in ((128, "rhs"), (96, "lhs")):
        text = dot_module("f32", "256,2048", f"256,{n}", f"2048,{n}",
                          "lhs_contracting_dims={0}, rhs_contracting_dims={0}")
        plan = plan_dot(contraction_parts(entry_root(text), "dot"), CPU_AVX2)
        assert plan.row_side == side
        a, b = rand(256, 2048), rand(256, n)
        check(text, [a, b], a.astype(np.float64).T @ b, atol=1e-3)


@pytest.mark.parametrize("m, form", [(16, "outer"), (24, "packed"), (64, "packed")])
def test_packing_contiguous_columns_needs_more_rows_than_an_outer_work_group(m, form):
    """On AVX2 (``pack_contiguous``; the outer form's work-group covers 16 rows) a 16x768x576
    product reads its columns once unpacked, and a copy would only cost; from 24 rows a
    packed panel is shared by more row blocks than that."""
    from runtime.target import CPU_AVX2
    text = dot_module("f32", f"{m},768", "768,576", f"{m},576", NN)
    plan = plan_dot(contraction_parts(entry_root(text), "dot"), CPU_AVX2)
    assert plan.form == form


def _compiled_for(text: str, target: Target):
    from runtime.analyzer import analyze_verified
    from runtime.execution.kernel_builds import KernelBuild
    from runtime.execution.executable import Executable
    dev = get_device()
    analysis = analyze_verified(runtime.parse(text), dev.mem_base_addr_align, True, target)
    return Executable(runtime.parse(text), analysis, dev, KernelBuild(analysis, dev)).build()


@pytest.mark.parametrize("lhs, rhs, out, dims, streamed", [
    ("f32[4,256]", "f32[256,1024]", "f32[4,1024]", NN, True),     # a decoding step's dot
    ("f32[1,100]", "f32[100,200]", "f32[1,200]", NN, True),
    ("f32[4,16]", "f32[16,128]", "f32[4,128]", NN, True),         # two steps exactly
    ("f32[8,256]", "f32[256,1024]", "f32[8,1024]", NN, True),     # 8 rows: 4 vectors a row
    ("f32[16,256]", "f32[256,1024]", "f32[16,1024]", NN, False),  # more rows than that
    ("f32[4,15]", "f32[15,1024]", "f32[4,1024]", NN, False),      # a contraction of one step
    ("f32[4,256]", "f32[256,100]", "f32[4,100]", NN, False),      # fewer columns than a tile
])
def test_few_rows_stream_the_contraction(lhs, rhs, out, dims, streamed):
    plan = plan_of(dot_module("f32", lhs[4:-1], rhs[4:-1], out[4:-1], dims))
    assert plan.form == "outer"
    assert (plan.stream_k is not None) == streamed
    if streamed:                         # a tile of at most 32 accumulators
        assert plan.tile_rows * plan.vectors == min(32, 8 * plan.tile_rows)


@pytest.mark.parametrize("m, k, n, epilogue", [
    (4, 256, 1024, False), (1, 100, 200, False), (3, 37, 130, True), (2, 16, 128, True),
    (4, 64, 1000, True), (8, 45, 300, True), (6, 64, 64, False)])
def test_the_streamed_order_gives_the_plain_orders_bits(m, k, n, epilogue):
    """Few rows through a wide operand: steps of ``stream_k`` sweeping the tile's vectors in
    turn (a tail of the contraction after them, a last tile overlapping the one before it, a
    fused bias and tanh) give each output the plain order's bits: its sum still runs over the
    contraction in order."""
    from dataclasses import replace
    root = (f"  d = f32[{m},{n}] dot(a, b), {NN}\n"
            f"  c = f32[{n}] parameter(2)\n"
            f"  cb = f32[{m},{n}] broadcast(c), dimensions={{1}}\n"
            f"  s = f32[{m},{n}] add(d, cb)\n"
            f"  ROOT t = f32[{m},{n}] tanh(s)") if epilogue else \
        f"  ROOT d = f32[{m},{n}] dot(a, b), {NN}"
    text = (f"HloModule streamed\nENTRY e {{\n  a = f32[{m},{k}] parameter(0)\n"
            f"  b = f32[{k},{n}] parameter(1)\n{root}\n}}")
    a, b, c = rand(m, k), rand(k, n), rand(n)
    args = (a, b, c) if epilogue else (a, b)
    streamed = _compiled_for(text, CPU)
    plain = _compiled_for(text, replace(CPU, tiles=replace(CPU.tiles, stream_rows=0)))
    assert "+= 8)" in streamed.program.source and "+= 8)" not in plain.program.source
    got, want = np.asarray(streamed(*args)), np.asarray(plain(*args))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    ref = a.astype(np.float64) @ b
    if epilogue:
        ref = np.tanh(ref + c)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
