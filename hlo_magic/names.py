"""Names a person can find: which instructions of the source module each fusion holds.

Fusion replaces a group of instructions by one ``fusion`` instruction with a new name
(``ROOT new_w = subtract(w, step)`` becomes ``subtract_fusion.0``), so a report that names
buffers after their defining instruction would name things the user never wrote. The fused
computation keeps the source names of the instructions it holds; this module collects them,
root first, so ``subtract_fusion.0`` can be shown as ``subtract_fusion.0 (new_w, step, lrb)``.
"""

from __future__ import annotations

from runtime.buffers import AssignedBuffer
from runtime.hlo.ir import HloComputation, HloInstruction, HloModule

SHOWN_MEMBERS = 3


def fused_members(fusion: HloInstruction) -> list[str]:
    """The source instructions a fusion holds, its root first, then nearest to the root."""
    names: list[str] = []
    for comp in fusion.called_computations:
        names += _members(comp)
    return names


def _members(comp: HloComputation) -> list[str]:
    names: list[str] = []
    for inst in reversed(comp.instructions):
        if inst.opcode == "parameter":
            continue
        if inst.opcode == "fusion":
            names += fused_members(inst)
        else:
            names.append(inst.name)
    if comp.root is not None and comp.root.name in names:
        names.remove(comp.root.name)
        names.insert(0, comp.root.name)
    return names


def fusions(module: HloModule) -> dict[str, list[str]]:
    """Every fusion instruction of ``module`` (outside fused computations) -> its members."""
    fused = {c for inst in _all(module) if inst.opcode == "fusion"
             for c in inst.called_computations}
    return {inst.name: fused_members(inst) for comp in module.computations
            if comp not in fused for inst in comp.instructions if inst.opcode == "fusion"}


def _all(module: HloModule):
    for comp in module.computations:
        yield from comp.instructions


def label(name: str, members: dict[str, list[str]]) -> str:
    """``subtract_fusion.0 (new_w, step, lrb)`` for a fusion, the name itself otherwise."""
    held = members.get(name)
    if not held:
        return name
    shown = ", ".join(held[:SHOWN_MEMBERS])
    more = f", \u2026 {len(held) - SHOWN_MEMBERS} more" if len(held) > SHOWN_MEMBERS else ""
    return f"{name} ({shown}{more})"


def buffer_label(placed: AssignedBuffer, members: dict[str, list[str]]) -> str:
    """A buffer's name, with the source instructions it holds when a fusion defines it."""
    inst = placed.buffer.first.instruction
    held = members.get(inst.name)
    if not held:
        return placed.name
    return label(inst.name, members).replace(inst.name, placed.name, 1)
