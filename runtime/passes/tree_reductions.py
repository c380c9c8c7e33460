"""Reductions over floats narrower than f32 in XLA's order (XLA's TreeReductionRewriter).

XLA's CPU backend rounds the running value of an f16, bf16 or 8-bit float reduction to its
type at every step (an 8-bit float's computed in f16), so the order of the steps decides the
result (a sum of 40 e4m3 values: 0.875 summed exactly, 2.25 in XLA's order, 0.5 left to
right; bf16's 1 and 63 times 2^-9: 1.0625 in XLA's order, 1.117 regrouped). XLA first reduces
windows of 32 elements along every reduced dimension longer than 32 (a ``reduce-window``
whose windows cover the dimension padded with the init value to a multiple of 32, half the
padding before and half after; dimensions of at most 32 are one window), then reduces the
windows' results the same way until every reduced dimension is at most 32, then reduces
what is left. This pass writes that tree in HLO, so every later stage keeps the order: the
window loops and the final reduction walk their elements in row-major order, as XLA's do.
f32 and wider types keep their reductions (their per-step rounding is below what a
different order changes in practice, and their kernels reorder sums for speed).
"""

from __future__ import annotations

from ..hlo.attributes import Window, WindowDim
from ..hlo.dtypes import STEP_ROUNDED_FLOATS
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape, default_layout
from ..target import CPU, Target
from .names import FreshNames

WINDOW = 32


def tree_reductions_in_place(module: HloModule, target: Target = CPU) -> None:
    names = FreshNames(module)
    for comp in module.computations:
        for inst in list(comp.instructions):
            if _applies(inst):
                _rewrite(comp, inst, names)


def _applies(inst: HloInstruction) -> bool:
    if inst.opcode != Opcode.REDUCE or len(inst.operands) != 2 or inst.control_predecessors:
        return False
    shape = inst.operands[0].shape
    return isinstance(shape, ArrayShape) and shape.element_type.name in STEP_ROUNDED_FLOATS \
        and any(shape.dims[d] > WINDOW for d in inst.dimensions)


def _rewrite(comp: HloComputation, reduce: HloInstruction, names: FreshNames) -> None:
    """Window reductions ahead of ``reduce`` until its reduced dimensions are all short."""
    x, init = reduce.operands
    at = comp.instructions.index(reduce)
    while any(x.array_shape.dims[d] > WINDOW for d in reduce.dimensions):
        shape: ArrayShape = x.array_shape
        window, dims = [], []
        for d, n in enumerate(shape.dims):
            if d not in reduce.dimensions:
                window.append(WindowDim(1))
                dims.append(n)
            elif n <= WINDOW:
                window.append(WindowDim(n, n))
                dims.append(1)
            else:
                pad = -(-n // WINDOW) * WINDOW - n
                window.append(WindowDim(WINDOW, WINDOW, pad // 2, pad - pad // 2))
                dims.append(-(-n // WINDOW))
        x = HloInstruction(names.fresh(f"{reduce.name}.window"), Opcode.REDUCE_WINDOW,
                           ArrayShape(shape.element_type, tuple(dims),
                                      layout=default_layout(len(dims))),
                           [x, init], {"window": Window(tuple(window)),
                                       "to_apply": reduce.to_apply},
                           location=reduce.location, parent=comp)
        comp.instructions.insert(at, x)
        at += 1
    reduce.operands[0] = x
