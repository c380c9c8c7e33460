"""Transposes folded into the dots that read them (XLA's TransposeFolding).

``dot(transpose(x), y)`` computes the same values as a dot of ``x`` itself whose dimension
numbers name ``x``'s dimensions: the dot kernels index their operands through any dimension
numbers and layouts, so the transposed copy (147 MiB for GPT-2's tied embedding read as the
logits' weight) is never made. A dot lists its output dimensions as batch, then the lhs free
dimensions in the operand's order, then the rhs ones, so a transpose is folded only when it
keeps the operand's free dimensions in the same relative order (moving batch and contracting
dimensions is always fine: the dot names them). A transpose with other readers stays for
them. Instructions with control dependencies are left alone.
"""

from __future__ import annotations

from ..hlo.ir import HloInstruction, HloModule
from ..target import CPU, Target
from .dce import remove_dead_code

_SIDES = (("lhs", 0), ("rhs", 1))


def fold_transposes_in_place(module: HloModule, target: Target = CPU) -> None:
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode == "dot" and not inst.control_predecessors:
                for side, k in _SIDES:
                    _fold(inst, side, k)
    remove_dead_code(module)


def _fold(dot: HloInstruction, side: str, k: int) -> None:
    operand = dot.operands[k]
    if operand.opcode != "transpose" or operand.control_predecessors:
        return
    perm = operand.dimensions
    batch = tuple(dot.attrs.get(f"{side}_batch_dims", ()))  # type: ignore[arg-type]
    contracting = tuple(dot.attrs.get(f"{side}_contracting_dims", ()))  # type: ignore[arg-type]
    free = [d for d in range(len(perm)) if d not in batch and d not in contracting]
    mapped = [perm[d] for d in free]
    if mapped != sorted(mapped):
        return
    dot.attrs[f"{side}_batch_dims"] = tuple(perm[d] for d in batch)
    dot.attrs[f"{side}_contracting_dims"] = tuple(perm[d] for d in contracting)
    dot.operands[k] = operand.operands[0]
