"""bf16 and f16 dots and convolutions computed on f32 operands on CPUs (XLA's CPU compiler
upcasts them too).

The CPU contraction families accumulate narrow floats in f32 either way; what differs is where
the operands are widened. Read as bf16, every element of the row operand is widened and then
broadcast from a register, an operation on the vector port the 512-bit FMAs need, and every
vector of the column operand is widened again by each row block: T5's 512x256x256 bf16
projection took 294 us of kernel time against 164 us for the same dot in f32 (Intel Xeon,
AVX-512). Converting each operand to f32 once (a kernel that fusion merges with the
operand's producer where the dot is its only reader) and the result back makes the dot an
f32 one: 234 us with both converts. A convolution reads its input the same way, a broadcast a
row and step, and gains more: a bf16 UNet's 3x3 convolutions took 17.7 ms in bf16 and 13.8
ms on f32 copies, 33.1 and 21.2 ms where PoCL compiles for AVX2 (whose broadcasts and widening
shifts share ports with its FMAs). The values are the same: widening bf16 and f16 to f32 is
exact, the accumulation was in f32 already, and the result is rounded once, as before.

8-bit integer contractions take the same path where f32 computes them exactly: their
products are integers of at most 2^16 and every partial sum stays within f32's 2^24 integers
when the contraction is short enough (``_EXACT_INTEGERS``: an s8 x s8 dot up to 1024 deep),
so the f32 sum is the exact sum and converting it to s32 is XLA's s32 result (no partial sum
comes near s32's wrap-around). Only the first operand (the one broadcast a row and step) gets
an f32 copy; the second, the weights of a quantised layer, stays 8-bit in memory and the
kernels widen it at the load (``families/tiles``: float accumulations take integer operands
their type holds exactly). PoCL has no 8-bit dot instruction to offer the integer kernel,
whose 32-bit vector multiplies ran at half the FMAs' rate: an int8-quantised MLP's
256x512x2048 s8 dots took 5.1 ms as integers and 2.4 ms this way (x86's 16-bit pair
multiply-add, ``TileShape.pair_madd``, closes most of that gap for the dots too deep for f32:
a 256x2048x512 s8 dot 1,256 us in pairs, 1,108 us this way, AVX-512); converting the weights too was no
faster (24.4 against 23.7 ms for the MLP) and cost their f32 copies (1.27x XLA's bytes).

Only contractions worth the converts change: at least ``MIN_MULTIPLY_ADDS`` multiply-adds,
both operands narrow floats with a narrow float or f32 result, or both 8-bit integers with
an s32 or s64 result and a depth ``_EXACT_INTEGERS`` allows."""

from __future__ import annotations

import math
from typing import Callable

from ..hlo.dtypes import BYTE_FLOATS, ELEMENT_TYPES, EXPONENT_FLOATS
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape
from ..target import CPU, Target
from .names import FreshNames

NARROW_FLOATS = frozenset({"bf16", "f16"}) | frozenset(BYTE_FLOATS)
# XLA rounds these contractions' f32 results to f16 first (the exponent-only formats'
# arithmetic is f32's)
ROUNDED_THROUGH_F16 = frozenset(BYTE_FLOATS) - frozenset(EXPONENT_FLOATS)
MIN_MULTIPLY_ADDS = 1 << 20
F32 = ELEMENT_TYPES["f32"]
F16 = ELEMENT_TYPES["f16"]


def upcast_narrow_contractions_in_place(module: HloModule, target: Target = CPU) -> None:
    if not target.upcasts_narrow_contractions:
        return
    names = FreshNames(module)
    for comp in module.computations:
        widened: dict[int, HloInstruction] = {}
        for inst in list(comp.instructions):
            operands = _widened_operands(inst)
            if operands:
                _upcast(comp, inst, operands, widened, names)


def _dot_depth(dot: HloInstruction, lhs: ArrayShape, rhs: ArrayShape) -> int:
    return math.prod(lhs.dims[d] for d in dot.ints_attr("lhs_contracting_dims"))


def _convolution_depth(conv: HloInstruction, lhs: ArrayShape, rhs: ArrayShape) -> int:
    """Window taps x input features of a group: the kernel's elements per output feature."""
    return rhs.element_count // rhs.dims[conv.dim_labels.kernel_output_feature]


# the contractions upcast, with their multiply-adds per output element
_DEPTH: dict[Opcode, Callable[[HloInstruction, ArrayShape, ArrayShape], int]] = {
    Opcode.DOT: _dot_depth,
    Opcode.CONVOLUTION: _convolution_depth,
}


# the largest magnitude of each integer operand type f32 contractions may take
_INTEGER_MAGNITUDE = {"s8": 128, "u8": 255}
# integers f32 holds exactly: a sum of products of at most this stays exact in f32
_EXACT_INTEGERS = 1 << 24


def _widened_operands(inst: HloInstruction) -> tuple[int, ...]:
    """The operands a contraction computed in f32 reads as f32 copies; () where it stays."""
    depth_of = _DEPTH.get(inst.opcode)
    if depth_of is None or inst.control_predecessors:
        return ()
    shapes = [s for s in [op.shape for op in inst.operands] + [inst.shape]
              if isinstance(s, ArrayShape)]
    if len(shapes) != len(inst.operands) + 1:
        return ()
    lhs, rhs, out = shapes
    depth = depth_of(inst, lhs, rhs)
    if out.element_count * depth < MIN_MULTIPLY_ADDS:
        return ()
    a, b, o = (s.element_type.name for s in shapes)
    if a in NARROW_FLOATS and b in NARROW_FLOATS and o in NARROW_FLOATS | {"f32"}:
        return (0, 1)
    if a in _INTEGER_MAGNITUDE and b in _INTEGER_MAGNITUDE and o in ("s32", "s64") \
            and depth * _INTEGER_MAGNITUDE[a] * _INTEGER_MAGNITUDE[b] <= _EXACT_INTEGERS:
        return (0,)
    return ()


def _upcast(comp: HloComputation, contraction: HloInstruction, operands: tuple[int, ...],
            widened: dict[int, HloInstruction], names: FreshNames) -> None:
    at = comp.instructions.index(contraction)
    for k in operands:
        op = contraction.operands[k]
        wide = widened.get(id(op))
        if wide is None:
            wide = HloInstruction(names.fresh(f"{op.name}.f32"), Opcode.CONVERT,
                                  _as_f32(op.shape), [op], parent=comp)
            comp.instructions.insert(at, wide)
            at += 1
            widened[id(op)] = wide
        contraction.operands[k] = wide
    out = contraction.array_shape
    if out.element_type.name == "f32":
        return
    contraction.shape = _as_f32(out)
    result = contraction
    if out.element_type.name in ROUNDED_THROUGH_F16:
        # XLA rounds an 8-bit float contraction's f32 result to f16 first
        result = HloInstruction(names.fresh(f"{contraction.name}.f16"), Opcode.CONVERT,
                                ArrayShape(F16, out.dims, out.dynamic, out.layout),
                                [contraction], parent=comp)
        comp.instructions.insert(at + 1, result)
        at += 1
    narrow = HloInstruction(names.fresh(f"{contraction.name}.{out.element_type.name}"), Opcode.CONVERT,
                            out, [result], parent=comp)
    for inst in comp.instructions:
        if inst is not result:
            inst.operands = [narrow if op is contraction else op for op in inst.operands]
    comp.instructions.insert(at + 1, narrow)
    if comp.root is contraction:
        comp.root = narrow


def _as_f32(shape) -> ArrayShape:
    return ArrayShape(F32, shape.dims, shape.dynamic, shape.layout)


__all__ = ["upcast_narrow_contractions_in_place", "MIN_MULTIPLY_ADDS"]
