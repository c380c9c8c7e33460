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
