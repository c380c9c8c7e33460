"""Inlining ``call`` instructions (XLA's CallInliner), so fusion sees across them.

JAX writes every nested ``jit`` (``jnp.where``, ``round``, ``remainder``...) as a ``call`` of a
private computation. A call is a wall for fusion: its result must be materialised, and nothing
inside can join the caller's kernels. Replacing each call by a copy of its body (parameters
become the call's operands, the call's users read the copied root) removes the wall. Bodies
are inlined innermost first, so nested calls disappear in one walk. Calls with control
dependencies are left alone. A body returning a tuple hands its elements straight to the
get-tuple-elements that read the call (as XLA's tuple simplifier does after inlining), so the
inlined tuple needs no pointer table of its own.
"""

from __future__ import annotations

import dataclasses

from ..hlo.clone import clone_module
from ..hlo.opcode_enum import Opcode
from ..target import CPU, Target
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from .dce import remove_dead_code
from .names import FreshNames


def inline_calls(module: HloModule, target: Target = CPU) -> HloModule:
    new, _ = clone_module(module)
    inline_calls_in_place(new, target)
    return new


def inline_calls_in_place(module: HloModule, target: Target = CPU) -> None:
    names = FreshNames(module)
    for comp in module.computations:          # callees come before their callers
        _inline_in(comp, names)
    remove_dead_code(module)


def _inline_in(comp: HloComputation, names: FreshNames) -> None:
    ordered = {p for inst in comp.instructions for p in inst.control_predecessors}
    replacement: dict[HloInstruction, HloInstruction] = {}
    body: list[HloInstruction] = []
    elements: dict[HloInstruction, list[HloInstruction]] = {}   # inlined root tuple -> operands
    for inst in comp.instructions:
        inst.operands = [replacement.get(op, op) for op in inst.operands]
        if (inst.opcode == Opcode.GET_TUPLE_ELEMENT and inst.operands[0] in elements
                and not inst.control_predecessors and inst not in ordered):
            replacement[inst] = elements[inst.operands[0]][inst.index]
            continue
        if inst.opcode != Opcode.CALL or inst.control_predecessors or inst in ordered:
            body.append(inst)
            continue
        callee: HloComputation = inst.to_apply
        copies: dict[HloInstruction, HloInstruction] = {}
        for c in callee.instructions:
            if c.opcode == Opcode.PARAMETER:
                copies[c] = inst.operands[c.param_number]
                continue
            copies[c] = dataclasses.replace(
                c, name=names.fresh(c.name), operands=[copies[op] for op in c.operands],
                attrs=dict(c.attrs), parent=comp)
            body.append(copies[c])
        root = copies[callee.root_instruction]
        replacement[inst] = root
        if root.opcode == Opcode.TUPLE and callee.root_instruction.opcode == Opcode.TUPLE:
            elements[root] = list(root.operands)
    comp.instructions = body
    if comp.root in replacement:
        comp.root = replacement[comp.root]
