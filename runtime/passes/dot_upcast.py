"""bf16 and f16 dots computed on f32 operands on CPUs (XLA's CPU compiler upcasts them too).

The CPU dot family accumulates narrow floats in f32 either way; what differs is where the
operands are widened. Read as bf16, every element of the row operand is widened and then
broadcast from a register, an operation on the vector port the 512-bit FMAs need, and every
vector of the column operand is widened again by each row block: T5's 512x256x256 bf16
projection took 294 us of kernel time against 164 us for the same dot in f32 (Intel Xeon,
AVX-512). Converting each operand to f32 once (a kernel that fusion merges with the
operand's producer where the dot is its only reader) and the result back makes the dot an
f32 one: 234 us with both converts. The values are the same: widening bf16 and f16 to f32 is
exact, the accumulation was in f32 already, and the result is rounded once, as before.

Only dots worth the converts change: at least ``MIN_MULTIPLY_ADDS`` multiply-adds, both
operands narrow floats, the result a narrow float or f32. An operand read by several dots (a
layer's normalised input feeding its query, key and value projections) is converted once. A
narrow result's convert joins the dot's output fusion, and its epilogue stays on vectors
(``families/epilogue``: f32 and bf16 mix there, each bf16 result rounded as before).
"""

from __future__ import annotations

import math

from ..hlo.dtypes import ELEMENT_TYPES
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.shape import ArrayShape
from ..target import CPU, Target
from .names import FreshNames

NARROW_FLOATS = frozenset({"bf16", "f16"})
MIN_MULTIPLY_ADDS = 1 << 20
F32 = ELEMENT_TYPES["f32"]


def upcast_narrow_dots_in_place(module: HloModule, target: Target = CPU) -> None:
    if target.kind != "cpu":
        return
    names = FreshNames(module)
    for comp in module.computations:
        widened: dict[int, HloInstruction] = {}
        for dot in list(comp.instructions):
            if _upcasts(dot):
                _upcast(comp, dot, widened, names)


def _upcasts(dot: HloInstruction) -> bool:
    if dot.opcode != "dot" or dot.control_predecessors:
        return False
    shapes = [op.shape for op in dot.operands] + [dot.shape]
    if not all(isinstance(s, ArrayShape) for s in shapes):
        return False
    lhs, rhs, out = shapes
    if lhs.element_type.name not in NARROW_FLOATS or rhs.element_type.name not in NARROW_FLOATS \
            or out.element_type.name not in NARROW_FLOATS | {"f32"}:
        return False
    contracting = dot.attrs.get("lhs_contracting_dims", ())
    depth = math.prod(lhs.dims[d] for d in contracting)   # type: ignore[union-attr]
    return out.element_count * depth >= MIN_MULTIPLY_ADDS  # type: ignore[union-attr]


def _upcast(comp: HloComputation, dot: HloInstruction, widened: dict[int, HloInstruction],
            names: FreshNames) -> None:
    at = comp.instructions.index(dot)
    for k, op in enumerate(dot.operands):
        wide = widened.get(id(op))
        if wide is None:
            wide = HloInstruction(names.fresh(f"{op.name}.f32"), "convert",
                                  _as_f32(op.shape), [op], parent=comp)
            comp.instructions.insert(at, wide)
            at += 1
            widened[id(op)] = wide
        dot.operands[k] = wide
    out = dot.shape
    if out.element_type.name == "f32":   # type: ignore[union-attr]
        return
    dot.shape = _as_f32(out)
    narrow = HloInstruction(names.fresh(f"{dot.name}.{out.element_type.name}"), "convert",  # type: ignore[union-attr]
                            out, [dot], parent=comp)
    for inst in comp.instructions:
        inst.operands = [narrow if op is dot else op for op in inst.operands]
    comp.instructions.insert(at + 1, narrow)
    if comp.root is dot:
        comp.root = narrow


def _as_f32(shape) -> ArrayShape:
    return ArrayShape(F32, shape.dims, shape.dynamic, shape.layout)


__all__ = ["upcast_narrow_dots_in_place", "MIN_MULTIPLY_ADDS"]
