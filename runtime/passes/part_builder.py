"""Appending plain HLO instructions to a computation being rebuilt, shapes worked out here.

The complex lowering (``complex_lowering``) and the FFT decomposition (``fft_lowering``) write
each complex operation as several real ones: slices taking a value's real and imaginary
parts, elementwise arithmetic, dots against constant DFT matrices, and a concatenation
putting the parts back together; the one-device collectives and stochastic-convert passes
write one instruction as a few (``expand_in_place``). ``PartBuilder`` makes those instructions with default
layouts, named after the instruction they replace and carrying its source location (errors
and reports still point at the user's line).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..hlo.attributes import Identifier, PadDim, PaddingConfig, SliceDim, SliceSpec
from ..hlo.dtypes import ELEMENT_TYPES, ElementType
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.literal import Literal
from ..hlo.shape import ArrayShape, Shape, default_layout
from ..hlo.opcode_enum import Opcode
from .names import FreshNames

PRED = ELEMENT_TYPES["pred"]


def array(et: ElementType, dims: Sequence[int]) -> ArrayShape:
    return ArrayShape(et, tuple(dims), layout=default_layout(len(dims)))


def dims_of(inst: HloInstruction) -> tuple[int, ...]:
    assert isinstance(inst.shape, ArrayShape)
    return inst.shape.dims


def type_of(inst: HloInstruction) -> ElementType:
    assert isinstance(inst.shape, ArrayShape)
    return inst.shape.element_type


class PartBuilder:
    """Appends new instructions to ``out`` (the computation's instruction list being built),
    each named ``<of>.<what>.<n>`` after ``of``, the instruction being replaced."""

    def __init__(self, comp: HloComputation, out: list[HloInstruction], names: FreshNames) -> None:
        self.comp = comp
        self.out = out
        self.names = names
        self.of: HloInstruction | None = None

    def add(self, opcode: Opcode, shape: Shape, operands: Sequence[HloInstruction] = (),
            literal: Literal | None = None, **attrs: object) -> HloInstruction:
        base = self.of.name if self.of is not None else self.comp.name
        inst = HloInstruction(self.names.fresh(f"{base}.{opcode}"), opcode, shape,
                              list(operands), dict(attrs), literal=literal,
                              location=self.of.location if self.of is not None else None,
                              parent=self.comp)
        self.out.append(inst)
        return inst

    # --- constants --------------------------------------------------------------------------
    def constant(self, data: np.ndarray, et: ElementType) -> HloInstruction:
        data = np.array(data, dtype=et.numpy, order="C")
        shape = array(et, data.shape)
        return self.add(Opcode.CONSTANT, shape, literal=Literal(shape, data))

    def full(self, value: float, et: ElementType, dims: Sequence[int]) -> HloInstruction:
        """``value`` broadcast to ``dims``."""
        scalar = self.constant(np.array(value), et)
        return scalar if not dims else self.broadcast(scalar, dims, ())

    # --- data movement ----------------------------------------------------------------------
    def broadcast(self, x: HloInstruction, dims: Sequence[int],
                  mapping: Sequence[int]) -> HloInstruction:
        return self.add(Opcode.BROADCAST, array(type_of(x), dims), [x], dimensions=tuple(mapping))

    def reshape(self, x: HloInstruction, dims: Sequence[int]) -> HloInstruction:
        if tuple(dims) == dims_of(x):
            return x
        return self.add(Opcode.RESHAPE, array(type_of(x), dims), [x])

    def transpose(self, x: HloInstruction, perm: Sequence[int]) -> HloInstruction:
        if tuple(perm) == tuple(range(len(perm))):
            return x
        d = dims_of(x)
        return self.add(Opcode.TRANSPOSE, array(type_of(x), [d[p] for p in perm]), [x],
                        dimensions=tuple(perm))

    def slice(self, x: HloInstruction, axis: int, start: int, limit: int,
              stride: int = 1) -> HloInstruction:
        d = dims_of(x)
        if (start, limit, stride) == (0, d[axis], 1):
            return x
        spec = tuple(SliceDim(start, limit, stride) if i == axis else SliceDim(0, n, 1)
                     for i, n in enumerate(d))
        size = len(range(start, limit, stride))
        return self.add(Opcode.SLICE, array(type_of(x), d[:axis] + (size,) + d[axis + 1:]), [x],
                        slice=SliceSpec(spec))

    def concatenate(self, parts: Sequence[HloInstruction], axis: int) -> HloInstruction:
        if len(parts) == 1:
            return parts[0]
        d = dims_of(parts[0])
        size = sum(dims_of(p)[axis] for p in parts)
        return self.add(Opcode.CONCATENATE,
                        array(type_of(parts[0]), d[:axis] + (size,) + d[axis + 1:]),
                        list(parts), dimensions=(axis,))

    def pad(self, x: HloInstruction, value: HloInstruction, axis: int, high: int) -> HloInstruction:
        if high == 0:
            return x
        d = dims_of(x)
        config = tuple(PadDim(0, high if i == axis else 0) for i in range(len(d)))
        return self.add(Opcode.PAD, array(type_of(x), d[:axis] + (d[axis] + high,) + d[axis + 1:]),
                        [x, value], padding=PaddingConfig(config))

    def reverse(self, x: HloInstruction, axis: int) -> HloInstruction:
        return self.add(Opcode.REVERSE, x.shape, [x], dimensions=(axis,))

    # --- arithmetic -------------------------------------------------------------------------
    def unary(self, opcode: Opcode, x: HloInstruction) -> HloInstruction:
        return self.add(opcode, array(type_of(x), dims_of(x)), [x])

    def binary(self, opcode: Opcode, a: HloInstruction, b: HloInstruction) -> HloInstruction:
        return self.add(opcode, array(type_of(a), dims_of(a)), [a, b])

    def compare(self, a: HloInstruction, b: HloInstruction, direction: str) -> HloInstruction:
        return self.add(Opcode.COMPARE, array(PRED, dims_of(a)), [a, b],
                        direction=Identifier(direction))

    def select(self, p: HloInstruction, a: HloInstruction, b: HloInstruction) -> HloInstruction:
        return self.add(Opcode.SELECT, array(type_of(a), dims_of(a)), [p, a, b])

    def scaled(self, x: HloInstruction, factor: float) -> HloInstruction:
        return self.binary(Opcode.MULTIPLY, x, self.full(factor, type_of(x), dims_of(x)))

    def complex_multiply(self, x: tuple[HloInstruction, HloInstruction],
                         y: tuple[HloInstruction, HloInstruction]
                         ) -> tuple[HloInstruction, HloInstruction]:
        """The parts of the product of two complex values given as parts: ``(ac - bd, ad + bc)``."""
        (ar, ai), (br, bi) = x, y
        products = [self.binary(Opcode.MULTIPLY, p, q)
                    for p, q in ((ar, br), (ai, bi), (ar, bi), (ai, br))]
        return self.binary(Opcode.SUBTRACT, *products[:2]), self.binary(Opcode.ADD, *products[2:])

    def dot(self, a: HloInstruction, b: HloInstruction, a_contracting: int,
            b_contracting: int, **batch: tuple[int, ...]) -> HloInstruction:
        """A dot contracting one dimension of each operand (no batch dimensions unless given as
        ``lhs_batch_dims``/``rhs_batch_dims``)."""
        da, db = dims_of(a), dims_of(b)
        lb = tuple(batch.get("lhs_batch_dims", ()))
        rb = tuple(batch.get("rhs_batch_dims", ()))
        free_a = [n for i, n in enumerate(da) if i != a_contracting and i not in lb]
        free_b = [n for i, n in enumerate(db) if i != b_contracting and i not in rb]
        out = [da[i] for i in lb] + free_a + free_b
        batch_dims: dict[str, Any] = {"lhs_batch_dims": lb, "rhs_batch_dims": rb} if lb else {}
        return self.add(Opcode.DOT, array(type_of(a), out), [a, b], **batch_dims,
                        lhs_contracting_dims=(a_contracting,),
                        rhs_contracting_dims=(b_contracting,))


def expand_in_place(comp: HloComputation, names: FreshNames,
                    expand: Callable[[PartBuilder, HloInstruction], HloInstruction | None]
                    ) -> None:
    """Rebuild ``comp`` in order, replacing each instruction for which ``expand`` (given a
    builder appending to the new list) returns the instruction computing its value; None
    keeps it. Operands, control predecessors and the root follow the replacements."""
    out: list[HloInstruction] = []
    build = PartBuilder(comp, out, names)
    replaced: dict[int, HloInstruction] = {}
    for inst in comp.instructions:
        inst.operands = [replaced.get(id(op), op) for op in inst.operands]
        build.of = inst
        value = expand(build, inst)
        if value is None:
            out.append(inst)
        else:
            replaced[id(inst)] = value
    for inst in out:
        inst.operands = [replaced.get(id(op), op) for op in inst.operands]
        preds = inst.control_predecessors
        if preds:
            inst.attrs["control-predecessors"] = tuple(replaced.get(id(p), p) for p in preds)
    comp.instructions = out
    assert comp.root is not None
    comp.root = replaced.get(id(comp.root), comp.root)


def expand_matching_in_place(module: HloModule, matches: Callable[[HloInstruction], bool],
                             expand: Callable[[PartBuilder, HloInstruction],
                                              HloInstruction | None]) -> None:
    """``expand_in_place`` on every computation holding an instruction ``matches`` picks,
    with one set of fresh names for the module; a module with none is left untouched (no
    names are reserved), which is most modules for the expanding passes."""
    names: FreshNames | None = None
    for comp in module.computations:
        if any(matches(i) for i in comp.instructions):
            names = names or FreshNames(module)
            expand_in_place(comp, names, expand)
