"""Dead-code elimination: drop instructions whose results nobody needs, and dead computations.

An instruction survives if the root needs it (through operands or control predecessors) or if
it has a side effect: its opcode row says so (rng, infeed/outfeed, send/recv...), it is a
custom-call marked ``custom_call_has_side_effect=true``, or it runs a computation that contains
one. Parameters always survive (they are the signature). Removing a dead instruction also
removes it from other instructions' control-predecessor lists, since ordering against an
instruction that never runs means nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..analysis.side_effects import SideEffects, has_side_effect
from ..hlo.clone import clone_module
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode


def dce(module: HloModule) -> HloModule:
    new, _ = clone_module(module)
    remove_dead_code(new)
    return new


def remove_dead_code(module: HloModule,
                     computations: Iterable[HloComputation] | None = None,
                     effects: SideEffects | None = None) -> None:
    """DCE in place, for passes that work on a clone they own. ``computations``: the ones to
    clean (default: all), for a pass that edited only these; unreachable computations go
    either way. ``effects``: a ``has_side_effect`` memo the caller already holds for this
    module."""
    assert module.entry is not None
    memo: SideEffects = effects if effects is not None else {}
    for comp in module.computations if computations is None else computations:
        _remove_dead_instructions(comp, memo)
    module.computations = _reachable_computations(module)


def _remove_dead_instructions(comp: HloComputation, memo: SideEffects) -> None:
    live: set[HloInstruction] = set()
    stack = [i for i in comp.instructions
             if i is comp.root or i.opcode == Opcode.PARAMETER or has_side_effect(i, memo)]
    while stack:
        inst = stack.pop()
        if inst in live:
            continue
        live.add(inst)
        stack.extend(inst.operands)
        stack.extend(inst.control_predecessors)
    comp.instructions = [i for i in comp.instructions if i in live]
    for inst in comp.instructions:
        preds = inst.control_predecessors
        if preds and any(p not in live for p in preds):
            inst.attrs["control-predecessors"] = tuple(p for p in preds if p in live)


def _reachable_computations(module: HloModule) -> list[HloComputation]:
    assert module.entry is not None
    reachable = {module.entry}
    stack = [module.entry]
    while stack:
        # most kernel instructions have no attributes at all (so call nothing)
        for inst in stack.pop().instructions:
            for callee in inst.called_computations if inst.attrs else ():
                if callee not in reachable:
                    reachable.add(callee)
                    stack.append(callee)
    return [c for c in module.computations if c in reachable]
