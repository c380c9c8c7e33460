"""Dead tuple elements: a value held only in a tuple, at an index no reader of the tuple
reads, is dead, and the tuple is bypassed to let it go (XLA's algebraic simplifier and DCE).

XLA's own tests build a tuple holding an rng-bit-generator's result and read another element
of it: XLA forwards the element read and removes the tuple and the generator, which never
runs. Here the get-tuple-elements of such a tuple read the tuple's operands directly, the
tuple is dead, and dead-code elimination removes it with what only it held, so the module
runs where the generator could not have been lowered. Only such tuples are bypassed: one
that is its computation's root, is read by anything but a get-tuple-element, or holds
nothing that dies with it (parameters never do) is a value in its own right, whose buffers
are what the tutorials show. Instructions with control dependencies stay.
"""

from __future__ import annotations

from ..hlo.clone import clone_module
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..target import CPU, Target
from .dce import remove_dead_code


def remove_dead_tuple_elements(module: HloModule, target: Target = CPU) -> HloModule:
    new, _ = clone_module(module)
    remove_dead_tuple_elements_in_place(new, target)
    return new


def remove_dead_tuple_elements_in_place(module: HloModule, target: Target = CPU) -> None:
    changed = False
    for comp in module.computations:
        changed |= _bypass_in(comp)
    if changed:
        remove_dead_code(module)


def _bypass_in(comp: HloComputation) -> bool:
    users = comp.users()
    ordered = {p for inst in comp.instructions for p in inst.control_predecessors}
    forwarded: dict[HloInstruction, HloInstruction] = {}
    for tup in comp.instructions:
        if tup.opcode != Opcode.TUPLE or tup is comp.root or tup in ordered \
                or tup.control_predecessors:
            continue
        readers = users[id(tup)]
        if not readers or any(r.opcode != Opcode.GET_TUPLE_ELEMENT or r in ordered
                              or r.control_predecessors for r in readers):
            continue
        read = {r.index for r in readers}
        if any(k not in read and _dies_with(op, tup, users)
               for k, op in enumerate(tup.operands)):
            forwarded.update((r, tup.operands[r.index]) for r in readers)
    if not forwarded:
        return False
    for inst in comp.instructions:
        inst.operands = [_resolve(op, forwarded) for op in inst.operands]
    if comp.root in forwarded:
        comp.root = _resolve(comp.root, forwarded)
    return True


def _dies_with(value: HloInstruction, tup: HloInstruction,
               users: dict[int, list[HloInstruction]]) -> bool:
    """Whether ``value`` is read by ``tup`` alone (and is not a parameter, which stays)."""
    return value.opcode != Opcode.PARAMETER and all(u is tup for u in users[id(value)])


def _resolve(inst: HloInstruction, forwarded: dict[HloInstruction, HloInstruction]) -> HloInstruction:
    """``inst``'s replacement, through chains (a get-tuple-element of a forwarded one)."""
    while inst in forwarded:
        inst = forwarded[inst]
    return inst
