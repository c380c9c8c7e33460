"""Two-stage reductions: a long reduction to few outputs becomes partial sums, then a small
reduction of the partials (XLA's tree reduction rewriter).

A reduction of 8M elements to one scalar gives a row kernel one work-item: one core, one
thread. Rewritten as ``reduce(reduce(reshape(x) to [S, K]) over K) over S`` the first stage
has S independent contiguous chunks (all cores busy, each chunk summed with vector lanes) and
the second is tiny. Both stages are ordinary HLO, so the partials are an ordinary temp that
buffer assignment places (no executor-private scratch), and the order is fixed, so results
are deterministic. Runs after fusion on fusions rooted at such a reduce: the first stage
stays in the fusion (its producers still fused), the second follows it.

Only reductions that start from the reducer's identity are split (the partials each start
from ``init`` again, and padding to a multiple of S uses it too), over trailing dimensions of
a row-major input (contiguous chunks).
"""

from __future__ import annotations

import dataclasses

from ..analysis.reducers import reorderable
from ..hlo.attributes import PadDim, PaddingConfig
from ..hlo.clone import clone_module
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape, default_layout
from ..target import CPU, SplitRules, Target
from .names import FreshNames


def split_reductions(module: HloModule, target: Target = CPU) -> HloModule:
    new, _ = clone_module(module)
    split_reductions_in_place(new, target)
    return new


def split_reductions_in_place(module: HloModule, target: Target = CPU) -> None:
    rules = target.split
    names = FreshNames(module)
    for comp in list(module.computations):
        for inst in list(comp.instructions):
            if inst.opcode == Opcode.FUSION:
                _split_fusion(comp, inst, rules, names)


def _split_fusion(comp: HloComputation, fusion: HloInstruction, rules: SplitRules,
                  names: FreshNames) -> None:
    fused: HloComputation = fusion.calls
    red = fused.root
    chunks = _chunks(red, rules) if red is not None and red.opcode == Opcode.REDUCE else None
    if chunks is None:
        return
    assert red is not None
    x, init = red.operands
    src: ArrayShape = x.array_shape
    kept = src.rank - len(red.dimensions)
    outer = src.dims[:kept]
    length = src.element_count // max(1, _product(outer))
    padded = -(-length // chunks) * chunks

    def add(name: str, opcode: Opcode, dims: tuple[int, ...], operands, **attrs) -> HloInstruction:
        shape = ArrayShape(src.element_type, dims, layout=default_layout(len(dims)))
        inst = HloInstruction(names.fresh(name), opcode, shape, list(operands), dict(attrs),
                              parent=fused)
        fused.instructions.insert(fused.instructions.index(red), inst)
        return inst

    flat = x if src.dims == outer + (length,) else \
        add(f"{red.name}.flat", Opcode.RESHAPE, outer + (length,), [x])
    if padded != length:
        flat = add(f"{red.name}.pad", Opcode.PAD, outer + (padded,), [flat, init],
                   padding=PaddingConfig(tuple(PadDim(0, 0) for _ in outer)
                                         + (PadDim(0, padded - length),)))
    rows = add(f"{red.name}.chunks", Opcode.RESHAPE, outer + (chunks, padded // chunks), [flat])
    partial = add(f"{red.name}.partial", Opcode.REDUCE, outer + (chunks,), [rows, init],
                  dimensions=(kept + 1,), to_apply=red.to_apply)
    fused.instructions.remove(red)
    fused.root = partial
    fused.signature = None      # the result changed; the printer writes the new one
    fusion.shape = partial.shape
    constant = dataclasses.replace(init, name=names.fresh(f"{init.name}.final"), operands=[],
                                   attrs=dict(init.attrs), parent=comp)
    final = HloInstruction(names.fresh(f"{fusion.name}.final"), Opcode.REDUCE, red.shape,
                           [fusion, constant], {"dimensions": (kept,),
                                                "to_apply": red.to_apply},
                           location=fusion.location, parent=comp)
    for user in comp.instructions:
        user.operands = [final if op is fusion else op for op in user.operands]
    at = comp.instructions.index(fusion) + 1
    comp.instructions[at:at] = [constant, final]
    if comp.root is fusion:
        comp.root = final


def _chunks(red: HloInstruction, rules: SplitRules) -> int | None:
    """How many chunks each output's reduction splits into, or None to leave it alone."""
    if len(red.operands) != 2 or not reorderable(red):
        return None
    src = red.operands[0].shape
    if not isinstance(src, ArrayShape) or src.minor_to_major != tuple(range(src.rank - 1, -1, -1)):
        return None
    dims = tuple(red.dimensions)
    if sorted(dims) != list(range(src.rank - len(dims), src.rank)) or not dims:
        return None
    outputs = _product(src.dims[:src.rank - len(dims)])
    length = src.element_count // max(1, outputs)
    if length < rules.min_length or outputs >= rules.max_outputs or outputs == 0:
        return None
    wanted = max(2, min(rules.target_rows // outputs, length // rules.min_chunk))
    exact = [s for s in range(wanted, max(1, wanted // 2), -1) if length % s == 0]
    return exact[0] if exact else wanted


def _product(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n
