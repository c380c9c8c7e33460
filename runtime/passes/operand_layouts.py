"""Relayout copies for operations whose kernels read an operand in one layout only.

Most kernels index their operands through any layout, but a sort permutes its operands'
bytes into its results' (each row in place), and a top-k reads each row as contiguous
elements. JAX writes such an operand as a transpose printed in the layout that makes it a
free relabelling (``jnp.sort(x.T, 1)``: a ``{0,1}`` transpose into a call whose parameter is
``{1,0}``); once the call is inlined, the sort reads the transpose's layout. XLA's layout
assignment constrains these operands the same way. ``LAYOUT_RULES`` gives, per opcode, the
layout each operand must have; an operand in another one is read through a ``copy`` to it
(a transpose kernel). A bitcast between the same dimensions reads its operand in its own
layout, so it keeps the values, as XLA's CPU backend computes it.
"""

from __future__ import annotations

from typing import Callable

from ..hlo.ir import HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape, Layout, TupleShape, default_layout
from .names import FreshNames

# opcode -> (operand index, the layout it must have) pairs
LayoutRule = Callable[[HloInstruction], list[tuple[int, Layout | None]]]


def _sort(inst: HloInstruction) -> list[tuple[int, Layout | None]]:
    """Each operand in its result's layout (the sort permutes it in place there)."""
    results = [shape for _, shape in inst.shape.leaves()]
    return [(k, result.layout) for k, result in enumerate(results)]


def _top_k(inst: HloInstruction) -> list[tuple[int, Layout | None]]:
    """Rows contiguous: the last dimension minor."""
    operand: ArrayShape = inst.operands[0].array_shape
    return [(0, default_layout(operand.rank))]


def _in_place(inst: HloInstruction) -> list[tuple[int, Layout | None]]:
    """A dynamic-update-slice or scatter writes its result over its in-place operands'
    bytes, so each must be laid out as its result (XLA's layout assignment asks the same)."""
    results = [shape for _, shape in inst.shape.leaves()]
    return [(k, result.layout) for k, result in enumerate(results)]


def _tuple(inst: HloInstruction) -> list[tuple[int, Layout | None]]:
    """A tuple forwards its operands' bytes, which its shape says are in its elements'
    layouts (a root tuple's shape is the entry's result layout)."""
    elements = inst.shape.elements if isinstance(inst.shape, TupleShape) else ()
    return [(k, shape.layout) for k, shape in enumerate(elements) if isinstance(shape, ArrayShape)]


def _bitcast(inst: HloInstruction) -> list[tuple[int, Layout | None]]:
    """A bitcast that keeps its operand's dimensions and element type is the identity on
    values in XLA's CPU backend: compiling HLO text there (through StableHLO, as JAX and
    ``benchmarks/xla_cpu.py`` do) drops the text's layouts, so ``f32[20,20]{0,1}
    bitcast(f32[20,20]{1,0} p)`` is ``p``, not its transpose. The operand in the result's
    layout makes the bytes say that. A bitcast that changes the dimensions reinterprets
    the bytes as laid out (XLA's CPU backend rejects those whose layouts are not the
    default ones)."""
    operand, result = inst.operands[0].shape, inst.shape
    if (isinstance(operand, ArrayShape) and isinstance(result, ArrayShape)
            and operand.dims == result.dims and operand.element_type == result.element_type):
        return [(0, result.layout)]
    return []


LAYOUT_RULES: dict[Opcode, LayoutRule] = {
    Opcode.BITCAST: _bitcast,
    Opcode.SORT: _sort,
    Opcode.TOPK: _top_k,
    Opcode.DYNAMIC_UPDATE_SLICE: _in_place,
    Opcode.SCATTER: _in_place,
    Opcode.TUPLE: _tuple,
}


def _order(shape: ArrayShape, layout: Layout | None) -> tuple[int, ...]:
    return shape.with_layout(layout).minor_to_major


def match_operand_layouts(module: HloModule) -> None:
    """Insert the relayout copies, in place (see the module docstring)."""
    names = FreshNames(module)
    for comp in module.computations:
        for inst in list(comp.instructions):
            rule = LAYOUT_RULES.get(inst.opcode)
            if rule is None:
                continue
            for k, layout in rule(inst):
                operand = inst.operands[k]
                shape = operand.shape
                if (not isinstance(shape, ArrayShape) or shape.rank < 2
                        or shape.minor_to_major == _order(shape, layout)):
                    continue
                copy = HloInstruction(names.fresh(f"{operand.name}.relayout"), Opcode.COPY,
                                      shape.with_layout(layout), [operand], parent=comp)
                comp.instructions.insert(comp.instructions.index(inst), copy)
                inst.operands[k] = copy


__all__ = ["match_operand_layouts", "LAYOUT_RULES"]
