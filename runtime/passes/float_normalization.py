"""A convert of a narrow float's arithmetic into the type XLA computes it in takes the
unrounded result, as XLA's CPU backend gives it.

XLA's CPU backend has no arithmetic on bf16 or the 8-bit floats: its float normalisation
computes each such operation in the type ``ElementType.arithmetic_type`` names (f16 for the
8-bit floats, f32 for bf16 and f8e8m0fnu) and converts the result back, and a user that was
a convert to that very type reads the wide result directly instead (XLA's
``FloatNormalization``, its ``convert`` users simplified away). So ``convert(exp(x:bf16)) to
f32`` is f32's exp of x, never rounded to bf16, and an f8e5m2 sum converted to f16 is f16's
sum (a NaN keeps its sign and payload there instead of becoming 0x7f). Every other user
still reads the rounded value. Each such convert of an elementwise operation whose float
operands are all of its own type becomes that operation on converts of the operands; a
convert this pass adds is not rewritten again (its operand's value was rounded in XLA too).

Dots and convolutions (``OpcodeSpec.contraction_normalized``) are too: XLA computes them in
f32 and rounds the result to the narrow type (through f16 for the 8-bit floats but
f8e8m0fnu), so a convert of one to the arithmetic type becomes the contraction with that
result type, its operands narrow (``bf16 x bf16 -> f32``). Reductions and reduce-windows
keep their rounded results: XLA rounds their running value at every step, as the kernels
do. The other non-elementwise operations are not rewritten.

f8e8m0fnu widens its code 0 to the f32 denormal 2^-127, which f32 arithmetic flushes as
XLA's does (its negation converted to f32 is -2^-127, its floor 0), except in the operations
whose result there XLA folds at compile time (``OpcodeSpec.folds_exponent_float_tiny``): an
f32 operation on the converted operand would not know it came from code 0, so their widened
result is selected against XLA's folded one where the first operand is code 0 (``CODE_0``:
sign's 1, tan's 2^-127...).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..hlo.dtypes import ELEMENT_TYPES, EXPONENT_FLOATS
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ArrayShape
from ..target import CPU, Target
from .names import FreshNames
from .part_builder import PartBuilder, array, dims_of

F32 = ELEMENT_TYPES["f32"]
U8 = ELEMENT_TYPES["u8"]


def normalize_floats_in_place(module: HloModule, target: Target = CPU) -> None:
    names: FreshNames | None = None
    for comp in module.computations:
        widened: dict[tuple[int, str], HloInstruction] = {}
        for inst in list(comp.instructions):
            wide = _wide_type(inst)
            if wide is not None:
                names = names or FreshNames(module)
                _compute_wide(comp, inst, wide, widened, names)


def _wide_type(convert: HloInstruction) -> str | None:
    """The type ``convert`` reads its operand's unrounded result in, or None."""
    if convert.opcode != Opcode.CONVERT or not isinstance(convert.shape, ArrayShape):
        return None
    op = convert.operands[0]
    spec = OPCODES[op.opcode]
    if not isinstance(op.shape, ArrayShape) or op.control_predecessors \
            or convert.control_predecessors or op.opcode == Opcode.CONVERT \
            or not (spec.elementwise or spec.contraction_normalized):
        return None
    narrow = op.array_shape.element_type
    wide = convert.array_shape.element_type.name
    if narrow.arithmetic_type != wide or op.array_shape.dims != convert.array_shape.dims:
        return None
    types = {o.shape.element_type.name for o in op.operands
             if isinstance(o.shape, ArrayShape) and o.shape.element_type.is_float}
    return wide if types == {narrow.name} else None


def _compute_wide(comp: HloComputation, convert: HloInstruction, wide: str,
                  widened: dict[tuple[int, str], HloInstruction], names: FreshNames) -> None:
    """``convert`` becomes its operand's operation on ``wide`` converts of its operands (a
    contraction's operands stay narrow: it accumulates in f32 on them either way; an
    f8e8m0fnu operation XLA folds at code 0 selects that result there)."""
    op = convert.operands[0]
    convert.opcode = op.opcode
    convert.attrs = dict(op.attrs)
    if OPCODES[op.opcode].contraction_normalized:
        convert.operands = list(op.operands)
        return
    operands = []
    for o in op.operands:
        if not (isinstance(o.shape, ArrayShape) and o.shape.element_type.is_float):
            operands.append(o)          # a select's predicate
            continue
        key = (id(o), wide)
        if key not in widened:
            shape = ArrayShape(ELEMENT_TYPES[wide], o.shape.dims, o.shape.dynamic, o.shape.layout)
            widened[key] = HloInstruction(names.fresh(f"{o.name}.{wide}"), Opcode.CONVERT,
                                          shape, [o], parent=comp)
            comp.instructions.insert(comp.instructions.index(op) + 1, widened[key])
        operands.append(widened[key])
    convert.operands = operands
    if op.array_shape.element_type.name in EXPONENT_FLOATS \
            and OPCODES[op.opcode].folds_exponent_float_tiny:
        _fold_code_0(comp, convert, op.operands, names)


def _fold_code_0(comp: HloComputation, wide: HloInstruction, narrow: list[HloInstruction],
                 names: FreshNames) -> None:
    """``wide`` (the f32 operation on f8e8m0fnu operands widened) becomes a select of XLA's
    folded result where its first operand is code 0 (``CODE_0``), of its own elsewhere."""
    computed = HloInstruction(names.fresh(f"{wide.name}.wide"), wide.opcode, wide.shape,
                              wide.operands, dict(wide.attrs), parent=comp,
                              location=wide.location)
    parts: list[HloInstruction] = [computed]
    build = PartBuilder(comp, parts, names)
    build.of = wide
    is_code_0 = [_is_code_0(build, x) for x in narrow]
    folded = CODE_0[wide.opcode](build, computed, is_code_0)
    at = comp.instructions.index(wide)
    comp.instructions[at:at] = parts
    wide.opcode = Opcode.SELECT
    wide.attrs = {}
    wide.operands = [is_code_0[0], folded, computed]


def _is_code_0(build: PartBuilder, x: HloInstruction) -> HloInstruction:
    bits = build.add(Opcode.BITCAST_CONVERT, array(U8, dims_of(x)), [x])
    return build.compare(bits, build.full(0, U8, dims_of(x)), "EQ")


def _constant(value: float) -> Callable[[PartBuilder, HloInstruction, list[HloInstruction]],
                                        HloInstruction]:
    return lambda build, computed, _: build.full(value, F32, dims_of(computed))


def _atan2(build: PartBuilder, computed: HloInstruction,
           is_code_0: list[HloInstruction]) -> HloInstruction:
    """``a`` where ``b`` is 1, NaN where ``b`` is code 0 too, else f32's (``atan2(0, b)``)."""
    a, b = computed.operands
    dims = dims_of(computed)
    one = build.compare(b, build.full(1.0, F32, dims), "EQ")
    return build.select(one, a, build.select(is_code_0[1], build.full(np.nan, F32, dims),
                                             computed))


def _power(build: PartBuilder, computed: HloInstruction,
           is_code_0: list[HloInstruction]) -> HloInstruction:
    """``2^(-150 b)``."""
    dims = dims_of(computed)
    exponent = build.binary(Opcode.MULTIPLY, build.full(-150.0, F32, dims), computed.operands[1])
    return build.binary(Opcode.POWER, build.full(2.0, F32, dims), exponent)


# XLA's result where the first operand of an f8e8m0fnu operation converted to f32 is code 0
# (``OpcodeSpec.folds_exponent_float_tiny``; the rounded results: codegen.templates'
# ``EXPONENT_FLOAT_TINY``): built from the f32 operation ``computed`` and each operand's
# code-0 test; the widened code 0 (``x``) is the f32 denormal 2^-127, unflushed
CODE_0: dict[Opcode, Callable[[PartBuilder, HloInstruction, list[HloInstruction]],
                              HloInstruction]] = {
    Opcode.SIGN: _constant(1.0),
    Opcode.CEIL: _constant(1.0),
    Opcode.EXPONENTIAL_MINUS_ONE: lambda build, computed, _: computed.operands[0],
    Opcode.TAN: lambda build, computed, _: computed.operands[0],
    Opcode.ASIN: lambda build, computed, _: computed.operands[0],
    Opcode.POWER: _power,
    Opcode.ATAN2: _atan2,
}


__all__ = ["normalize_floats_in_place"]
