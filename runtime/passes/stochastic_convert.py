"""``stochastic-convert`` written as the plain HLO XLA decomposes it into.

XLA's CPU backend never generates code for it: ``StochasticConvertDecomposer`` rewrites each
one (float to signed integer, the only conversion XLA implements) into ordinary elementwise
HLO, and this pass writes the same instructions, so every rounding, saturation and NaN case
is the one XLA computes: the magnitude's fractional part, scaled by 2^bits of the random
operand's type (in f32 for an f16 operand), is compared with the random bits; smaller random
bits round the truncated magnitude up; the sign is restored; operands at or beyond the
target's range give its minimum or maximum. A conversion to any other type is refused at its
line, as XLA refuses it.
"""

from __future__ import annotations

import numpy as np

from ..errors import HloUnsupportedError
from ..hlo.dtypes import ELEMENT_TYPES
from ..hlo.ir import HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..target import CPU, Target
from .part_builder import PartBuilder, array, dims_of, expand_matching_in_place, type_of


def expand_stochastic_converts_in_place(module: HloModule, target: Target = CPU) -> None:
    expand_matching_in_place(module, lambda i: i.opcode == Opcode.STOCHASTIC_CONVERT, _expand)


def _expand(build: PartBuilder, inst: HloInstruction) -> HloInstruction | None:
    return _decompose(build, inst) if inst.opcode == Opcode.STOCHASTIC_CONVERT else None


def _decompose(build: PartBuilder, inst: HloInstruction) -> HloInstruction:
    x, random = inst.operands
    to = inst.array_shape.element_type
    if not (to.is_integer and to.is_signed) or not type_of(x).is_float:
        raise HloUnsupportedError(
            f"stochastic-convert {inst.name} converts {type_of(x)} to {to}; XLA implements "
            "only floats to signed integers", instruction=inst.name, location=inst.location)
    dims = dims_of(x)
    negative = build.compare(build.unary(Opcode.SIGN, x), build.full(0, type_of(x), dims), "LT")
    magnitude = build.unary(Opcode.ABS, x)
    whole = build.unary(Opcode.FLOOR, magnitude)
    fraction = build.binary(Opcode.SUBTRACT, magnitude, whole)
    if type_of(x).name == "f16":
        fraction = build.add(Opcode.CONVERT, array(ELEMENT_TYPES["f32"], dims), [fraction])
    fixed = build.scaled(fraction, float(2 ** type_of(random).bits))
    fixed_bits = build.add(Opcode.CONVERT, array(type_of(random), dims), [fixed])
    round_up = build.compare(random, fixed_bits, "LT")
    truncated = build.add(Opcode.CONVERT, array(to, dims), [whole])
    up = build.binary(Opcode.ADD, truncated, build.full(1, to, dims))
    result = build.select(round_up, up, truncated)
    result = build.select(negative, build.unary(Opcode.NEGATE, result), result)
    low, high = -(1 << (to.bits - 1)), (1 << (to.bits - 1)) - 1
    with np.errstate(over="ignore"):         # as XLA's: an f16 bound of s32 rounds to inf
        at_low = build.compare(x, build.full(low, type_of(x), dims), "LE")
        at_high = build.compare(x, build.full(high, type_of(x), dims), "GE")
    result = build.select(at_low, build.full(low, to, dims), result)
    return build.add(Opcode.SELECT, inst.shape, [at_high, build.full(high, to, dims), result])
