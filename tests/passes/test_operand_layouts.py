"""Relayout copies for operands a kernel reads in one layout only: JAX's ``jnp.sort(x.T)``,
``argsort`` and ``lax.top_k`` on a transposed matrix (a transpose printed as a free
relabelling, ``{0,1}``) sort the logical rows; an operand already in place gets no copy."""

import numpy as np

import runtime
from runtime.passes.operand_layouts import match_operand_layouts

SORT = """HloModule sort
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[5,3]{1,0} parameter(0)
  t = f32[3,5]{0,1} transpose(x), dimensions={1,0}
  io = s32[3,5]{1,0} iota(), iota_dimension=1
  ROOT s = (f32[3,5]{1,0}, s32[3,5]{1,0}) sort(t, io), dimensions={1}, is_stable=true, to_apply=less
}"""

TOP_K = """HloModule topk
ENTRY e {
  m = f32[4,7]{1,0} parameter(0)
  t = f32[7,4]{0,1} transpose(m), dimensions={1,0}
  ROOT k = (f32[7,2]{1,0}, s32[7,2]{1,0}) topk(t), k=2, largest=true
}"""


def _copies(text: str) -> list:
    module = runtime.parse(text)
    match_operand_layouts(module)
    return [i for i in module.entry.instructions if i.opcode == "copy"]


def test_a_transposed_operand_gets_a_copy_in_the_layout_the_kernel_reads():
    [copy] = _copies(SORT)
    assert copy.shape.minor_to_major == (1, 0) and copy.operands[0].opcode == "transpose"
    [copy] = _copies(TOP_K)
    assert copy.shape.minor_to_major == (1, 0)
    assert _copies(SORT.replace("f32[3,5]{0,1} transpose", "f32[3,5]{1,0} transpose")) == []


def test_sort_and_top_k_of_a_transposed_matrix_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    values, order = runtime.compile(SORT)(x)
    np.testing.assert_array_equal(values, np.sort(x.T, axis=1))
    np.testing.assert_array_equal(order, np.argsort(x.T, axis=1, kind="stable"))
    m = rng.standard_normal((4, 7)).astype(np.float32)
    top, index = runtime.compile(TOP_K)(m)
    want = np.argsort(-m.T, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(index, want)
    np.testing.assert_array_equal(top, np.take_along_axis(m.T, want, 1))


# found by the layout fuzzer (tests/fuzz): a dynamic-update-slice wrote its result over
# operand bytes laid out otherwise, and a root tuple handed out bytes in its operand's layout
# where its shape (the entry's result layout) names another: both read back permuted
UPDATE = """HloModule update
ENTRY e {
  x = f32[5,4,2]{1,0,2} parameter(0)
  u = f32[2,2,1]{2,1,0} parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  k = s32[] parameter(4)
  ROOT d = f32[5,4,2]{2,1,0} dynamic-update-slice(x, u, i, j, k)
}"""

ROOT_TUPLE = """HloModule root_tuple
ENTRY e {
  x = f32[5,8]{1,0} parameter(0)
  b = f32[5,8,3]{2,1,0} broadcast(x), dimensions={0,1}
  n = f32[5,8,3]{2,1,0} negate(b)
  ROOT t = (f32[5,8,3]{0,1,2}, f32[5,8,3]{1,2,0}) tuple(n, b)
}"""


def test_in_place_operands_and_tuple_elements_take_their_results_layouts():
    [copy] = _copies(UPDATE)
    assert copy.shape.minor_to_major == (2, 1, 0) and copy.operands[0].opcode == "parameter"
    assert [c.shape.minor_to_major for c in _copies(ROOT_TUPLE)] == [(0, 1, 2), (1, 2, 0)]
    assert _copies(UPDATE.replace("{1,0,2} parameter", "{2,1,0} parameter")) == []


def test_an_update_and_a_root_tuple_in_other_layouts_match_numpy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4, 2)).astype(np.float32)
    u = rng.standard_normal((2, 2, 1)).astype(np.float32)
    for fusion in (True, False):
        got = runtime.compile(UPDATE, fusion=fusion)(x, u, *map(np.int32, (1, 2, 1)))
        want = x.copy()
        want[1:3, 2:4, 1:2] = u
        np.testing.assert_array_equal(got, want)
        m = rng.standard_normal((5, 8)).astype(np.float32)
        n, b = runtime.compile(ROOT_TUPLE, fusion=fusion)(m)
        np.testing.assert_array_equal(b, np.broadcast_to(m[:, :, None], (5, 8, 3)))
        np.testing.assert_array_equal(n, -b)


# XLA's GpuKernelTilingTest.TransposedInputWithUserBitcastNotTiled: XLA's CPU backend gives
# the parameter back (its compile drops the text's layouts); read as bytes it was a transpose.
BITCAST_IN_FUSION = """HloModule TransposedInputWithUserBitcast
fused_computation {
  param_0 = f32[20,20]{1,0} parameter(0)
  ROOT bitcast = f32[20,20]{0,1} bitcast(param_0)
}
ENTRY kernel_entry {
  parameter.0 = f32[20,20]{1,0} parameter(0)
  ROOT fusion = f32[20,20]{0,1} fusion(parameter.0), kind=kLoop, calls=fused_computation
}"""

BITCAST_OF_A_COLUMN_MAJOR_PARAMETER = """HloModule m
ENTRY e {
  p = f32[2,3,4]{0,2,1} parameter(0)
  b = f32[2,3,4]{2,1,0} bitcast(p)
  ROOT n = f32[2,3,4]{2,1,0} negate(b)
}"""

RESHAPING_BITCAST = """HloModule m
ENTRY e {
  p = f32[4,6]{1,0} parameter(0)
  ROOT b = f32[24]{0} bitcast(p)
}"""


def test_a_bitcast_that_keeps_its_dimensions_keeps_the_values():
    x = np.arange(400, dtype=np.float32).reshape(20, 20)
    y = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for fusion in (True, False):
        np.testing.assert_array_equal(
            np.asarray(runtime.compile(BITCAST_IN_FUSION, fusion=fusion)(x)), x)
        np.testing.assert_array_equal(
            np.asarray(runtime.compile(BITCAST_OF_A_COLUMN_MAJOR_PARAMETER, fusion=fusion)(y)), -y)
    assert len(_copies(BITCAST_OF_A_COLUMN_MAJOR_PARAMETER)) == 1
    assert _copies(RESHAPING_BITCAST) == []
    np.testing.assert_array_equal(np.asarray(runtime.compile(RESHAPING_BITCAST)(y.reshape(4, 6))),
                                  y.ravel())
