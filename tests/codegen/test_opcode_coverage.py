"""Exhaustiveness of the backend against the opcode table: every opcode lowers on every target
(a registered rule, or the loop kernel through the elemental emitter) or is refused with a
stated reason, and every elementwise opcode has a template for each element type of each
class its ``operand_types`` column accepts (complex aside: the backend has no complex types,
and ``cltypes`` refuses them with that reason)."""

import pytest

from runtime.codegen import cltypes, registry
from runtime.codegen import lower  # noqa: F401  (registers every family)
from runtime.codegen.elemental import RULES, arithmetic
from runtime.errors import HloUnsupportedError
from runtime.hlo.dtypes import ELEMENT_TYPES, PRED
from runtime.hlo.opcodes import OPCODES
from runtime.target import TARGETS

UNSUPPORTED = {op for op, spec in OPCODES.items() if spec.unsupported is not None}


def _how_lowered(opcode: str, kind: str) -> str | None:
    if registry.rules(opcode, kind):
        return "rule"
    if opcode in RULES:
        return "loop kernel"
    return None


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_every_opcode_lowers_or_has_a_reason(kind):
    missing = [op for op in OPCODES if _how_lowered(op, kind) is None and op not in UNSUPPORTED]
    assert not missing, f"opcodes with no lowering on {kind} and no stated reason: {missing}"


def test_unsupported_reasons_name_only_known_opcodes_without_rules():
    assert set(UNSUPPORTED) <= set(OPCODES)
    for op in UNSUPPORTED:
        assert all(rule.__module__ == "runtime.codegen.families.control"
                   for kind in TARGETS for rule in registry.rules(op, kind))


def _types_of(kind: str) -> list:
    return [et for et in ELEMENT_TYPES.values() if et.kind == kind and et.name in cltypes.CL_TYPES]


ARITHMETIC = sorted(op for op, spec in OPCODES.items()
                    if spec.elementwise and RULES.get(op) is RULES["add"])


def test_arithmetic_opcodes_have_operand_type_classes():
    assert "add" in ARITHMETIC and "clamp" in ARITHMETIC and "tanh" in ARITHMETIC
    assert [op for op in ARITHMETIC if OPCODES[op].operand_types is None] == \
        ["clamp", "complex", "stochastic-convert"]


@pytest.mark.parametrize("opcode", ARITHMETIC)
def test_every_accepted_element_type_has_a_template(opcode):
    spec = OPCODES[opcode]
    if opcode in UNSUPPORTED:
        return
    classes = spec.operand_types or frozenset({"pred", "sint", "uint", "float"})
    if opcode == "complex":
        classes = frozenset()          # its result is complex: refused by cltypes
    for kind in sorted(classes - {"complex"}):
        for et in _types_of(kind):
            out = PRED if opcode == "is-finite" else et
            args = ["a", "b", "c"][:spec.max_operands]
            expr = arithmetic(opcode, et, out, args)
            used = args if opcode != "imag" else []     # imag of a real number is 0
            assert all(a in expr for a in used), (opcode, et.name, expr)


def test_complex_operands_are_refused_with_a_reason():
    """Complex values reach kernels as pairs of reals only (``passes/complex_lowering``)."""
    with pytest.raises(HloUnsupportedError, match="pairs of reals"):
        arithmetic("add", ELEMENT_TYPES["c64"], ELEMENT_TYPES["c64"], ["a", "b"])


def test_real_and_imag_of_floats_and_clamp_of_preds_run():
    import itertools

    import numpy as np

    import runtime
    exe = runtime.compile("""HloModule m
ENTRY e {
  x = f16[3] parameter(0)
  lo = pred[8] parameter(1)
  p = pred[8] parameter(2)
  hi = pred[8] parameter(3)
  r = f16[3] real(x)
  i = f16[3] imag(x)
  c = pred[8] clamp(lo, p, hi)
  ROOT t = (f16[3], f16[3], pred[8]) tuple(r, i, c)
}""")
    x = np.array([1.5, -0.0, np.inf], np.float16)
    lo, p, hi = (np.array(bits, bool) for bits in zip(*itertools.product([0, 1], repeat=3)))
    r, i, c = exe(x, lo, p, hi)
    np.testing.assert_array_equal(r, x)
    np.testing.assert_array_equal(i, np.zeros(3, np.float16))
    np.testing.assert_array_equal(c, np.minimum(hi, np.maximum(lo, p)))
