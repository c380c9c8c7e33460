"""Dot operands with a batch dimension minor get a batch-major copy
(``passes/dot_operand_layouts``)."""

from __future__ import annotations

import numpy as np

import runtime
from runtime.codegen.families.dot import plan_dot
from runtime.codegen.families.tiles import contraction_parts
from runtime.passes.dot_operand_layouts import relayout_dot_operands_in_place
from runtime.target import CPU

# an MoE layer's expert-batched product as JAX writes it: the experts are the lhs's minor
# dimension, relabelled by a transpose printed in the layout of the producer's bytes
EXPERTS_MINOR = """HloModule moe
ENTRY e {
  h = f32[16,12,4] parameter(0)
  w = f32[4,20,12] parameter(1)
  t = f32[4,16,12]{0,2,1} transpose(h), dimensions={2,0,1}
  ROOT d = f32[4,16,20] dot(t, w), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
}
"""


def _dot(module):
    return next(i for i in module.entry.instructions if i.opcode == "dot")


def test_a_batch_minor_operand_is_read_through_a_batch_major_copy():
    module = runtime.parse(EXPERTS_MINOR)
    relayout_dot_operands_in_place(module)
    lhs, rhs = _dot(module).operands
    assert lhs.opcode == "copy" and lhs.shape.minor_to_major == (2, 1, 0)
    assert rhs.opcode == "parameter"


def test_other_layouts_are_left_alone():
    module = runtime.parse(EXPERTS_MINOR.replace("{0,2,1}", "{2,1,0}"))
    before = module.to_text()
    relayout_dot_operands_in_place(module)
    assert module.to_text() == before


def test_the_dot_family_takes_the_copy_and_the_values_hold():
    module = runtime.parse(EXPERTS_MINOR)
    dot = _dot(module)
    assert plan_dot(contraction_parts(dot, "dot"), CPU) is None     # element by element
    relayout_dot_operands_in_place(module)
    assert plan_dot(contraction_parts(_dot(module), "dot"), CPU) is not None
    rng = np.random.default_rng(3)
    h = rng.standard_normal((16, 12, 4)).astype(np.float32)
    w = rng.standard_normal((4, 20, 12)).astype(np.float32)
    np.testing.assert_allclose(runtime.compile(EXPERTS_MINOR)(h, w),
                               np.einsum("tke,ejk->etj", h, w), rtol=1e-5, atol=1e-5)
