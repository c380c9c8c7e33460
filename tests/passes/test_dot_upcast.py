"""bf16 and f16 dots computed on f32 operands on CPUs: same values, f32 tiles."""

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.passes.dot_upcast import MIN_MULTIPLY_ADDS, upcast_narrow_dots_in_place
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
    upcast_narrow_dots_in_place(module, target)
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


def test_the_values_are_those_of_the_narrow_dot():
    """Widening is exact and the accumulation was in f32 already: the upcast module returns
    the bits the module without the pass (``fusion=False``: one kernel per instruction)
    returns."""
    rng = np.random.default_rng(0)
    x, wq, wk = (rng.standard_normal(s).astype(ml_dtypes.bfloat16)
                 for s in ((512, 256), (256, 256), (256, 256)))
    assert "convert" in runtime.analyze(PROJECTIONS).module.to_text()
    got = runtime.compile(PROJECTIONS)(x, wq, wk)
    want = runtime.compile(PROJECTIONS, fusion=False)(x, wq, wk)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint16), np.asarray(w).view(np.uint16))


MIXED = """HloModule mixed
ENTRY e {
  x = bf16[512,256]{1,0} parameter(0)
  w = f32[256,256]{1,0} parameter(1)
  ROOT d = f32[512,256]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""


EPILOGUE = PROJECTIONS.replace(
    "ROOT t = (bf16[512,256]{1,0}, bf16[512,256]{1,0}) tuple(q, k)",
    "ROOT s = bf16[512,256]{1,0} add(q, k)")


@pytest.mark.parametrize("text", [MIXED, PROJECTIONS.replace("512", "8"), EPILOGUE],
                         ids=["mixed-operand-types", "too-small-to-pay", "narrow-epilogue"])
def test_mixed_or_small_dots_stay(text):
    module = runtime.parse(text)
    before = module.to_text()
    upcast_narrow_dots_in_place(module, CPU)
    assert module.to_text() == before


def test_gpus_keep_narrow_dots():
    module = runtime.parse(PROJECTIONS)
    before = module.to_text()
    upcast_narrow_dots_in_place(module, GPU)
    assert module.to_text() == before
