"""Reductions over narrow floats (f16, bf16 and narrower), and reductions from an initial
value that is not the reducer's identity, in XLA's order (XLA's TreeReductionRewriter).

XLA's CPU backend rounds the running value of a narrow-float reduction to its type at every
step (an 8-bit float's steps are computed in f16), so the order of the steps decides the
result (a sum of 40 e4m3 values: 0.875 summed exactly, 2.25 in XLA's order, 0.5 left to
right; an f16 row of 64 normal values is off by a few units in the last place in any other
order). XLA first reduces windows of 32 elements along every reduced dimension longer than 32
(a ``reduce-window`` whose windows cover the dimension padded to a multiple of 32, half the
padding before and half after, the padding skipped; dimensions of at most 32 are one
window), then reduces the windows' results the same way until every reduced dimension is at
most 32, then reduces what is left. Each window starts from the initial value, which shows
where it is not the identity (``_init_counts``). This pass writes that tree in HLO, so every
later stage keeps the order: the window loops and the final reduction walk their elements in
row-major order, as XLA's do. Wider types from their identity keep their reductions (their
per-step rounding is below what a different order changes in practice, and their kernels
reorder sums for speed).
"""

from __future__ import annotations

from ..analysis.reducers import init_is_identity
from ..hlo.attributes import Window, WindowDim
from ..hlo.dtypes import STEP_ROUNDED_FLOATS
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape, default_layout
from ..target import CPU, Target
from .names import FreshNames

WINDOW = 32
# f32 reductions of this many elements or more XLA's CPU backend does not rewrite (measured
# against jax 0.10: a sum of 4095 elements takes the tree, one of 4096 does not)
WHOLE_F32_FROM = 4096


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
    if not (isinstance(shape, ArrayShape) and any(shape.dims[d] > WINDOW for d in inst.dimensions)):
        return False
    return shape.element_type.name in STEP_ROUNDED_FLOATS or _init_counts(inst)


def _init_counts(reduce: HloInstruction) -> bool:
    """Whether the number of times XLA applies ``reduce``'s initial value shows: it is not the
    reducer's identity (a parameter, say), and XLA's tree starts every window from it (a sum
    of 2048 ones from 5 is 2383, 67 times 5 where the value is read once). XLA's CPU backend
    hands f32 reductions of ``WHOLE_F32_FROM`` elements or more to another kernel, which
    reads it once."""
    if init_is_identity(reduce):
        return False
    shape = reduce.operands[0].array_shape
    return shape.element_type.name != "f32" or shape.element_count < WHOLE_F32_FROM


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
