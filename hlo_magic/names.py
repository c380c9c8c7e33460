"""Names a person can find: which instructions of the source module each fusion holds.

Fusion replaces a group of instructions by one ``fusion`` instruction with a new name
(``ROOT new_w = subtract(w, step)`` becomes ``subtract_fusion.0``), so a report that names
buffers after their defining instruction would name things the user never wrote. The fused
computation keeps the source names of the instructions it holds; this module collects them,
root first, so ``subtract_fusion.0`` can be shown as ``subtract_fusion.0 (new_w, step, lrb)``.
Passes also copy instructions under new names (inlining a call, duplicating a cheap value
into a fusion append ``.N``); given the source module's names, members are traced back to
the instruction the user wrote. The report, the annotated view and the timeline all name
fusions through this module, so they agree; ``source_of`` gives the Python op and line JAX
printed in an instruction's metadata.
"""

from __future__ import annotations

import re

from runtime.buffers import AssignedBuffer
from runtime.hlo.attributes import Metadata
from runtime.hlo.ir import HloComputation, HloInstruction, HloModule
from runtime.hlo.opcode_enum import Opcode
from runtime.hlo.source_locations import source_location

SHOWN_MEMBERS = 3
_DUPLICATE = re.compile(r"^(.*)\.\d+$")


def source_name(name: str, names: set[str]) -> str | None:
    """The source instruction (one of ``names``) that ``name`` comes from: itself, or the
    original of a copy a pass made (``.N`` appended, maybe more than once: ``constant.17.0.1``
    is a copy of ``constant.17``); None when it comes from none of them."""
    while name not in names:
        match = _DUPLICATE.match(name)
        if not match:
            return None
        name = match.group(1)
    return name


def fused_members(fusion: HloInstruction, source_names: set[str] | None = None) -> list[str]:
    """The instructions a fusion holds, its root first, then nearest to the root, each once;
    with ``source_names``, traced back to the source instructions (members with no source
    instruction are left out)."""
    names: list[str] = []
    for comp in fusion.called_computations:
        for name in _members(comp, source_names):
            if name not in names:
                names.append(name)
    return names


class SourceMembers:
    """``fused_members(fusion, source_names)`` kept per fused computation. The plans of one
    module share their kernel bodies (``pipeline.prepare``), so the donation panel's timeline
    traces a fusion's members back to the source once, not at every toggle."""

    def __init__(self, source_names: set[str]) -> None:
        self.source_names = source_names
        self._found: dict[HloComputation, list[str]] = {}

    def __call__(self, fusion: HloInstruction) -> list[str]:
        names: list[str] = []
        for comp in fusion.called_computations:
            if comp not in self._found:
                self._found[comp] = _members(comp, self.source_names)
            for name in self._found[comp]:
                if name not in names:
                    names.append(name)
        return names


def source_members(source: HloModule) -> SourceMembers:
    """``SourceMembers`` tracing back to the instructions of ``source``."""
    return SourceMembers({i.name for i in source.instructions()})


def _members(comp: HloComputation, source_names: set[str] | None) -> list[str]:
    names: list[str] = []
    for inst in reversed(comp.instructions):
        if inst.opcode == Opcode.PARAMETER:
            continue
        if inst.opcode == Opcode.FUSION:
            names += fused_members(inst, source_names)
        elif source_names is None:
            names.append(inst.name)
        elif (original := source_name(inst.name, source_names)) is not None:
            names.append(original)
    root = comp.root
    first = None if root is None else root.name if source_names is None else \
        source_name(root.name, source_names)
    if root is not None and first in names:
        names.remove(first)
        names.insert(0, first)
    return names


def fusions(module: HloModule) -> dict[str, list[str]]:
    """Every fusion instruction of ``module`` (outside fused computations) -> its members."""
    fused = {c for inst in _all(module) if inst.opcode == Opcode.FUSION
             for c in inst.called_computations}
    return {inst.name: fused_members(inst) for comp in module.computations
            if comp not in fused for inst in comp.instructions if inst.opcode == Opcode.FUSION}


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


def source_of(inst: HloInstruction, module: HloModule) -> str:
    """``jit(f)/dot_general (model.py:12)`` from the instruction's ``metadata`` and, for texts
    that name lines through stack-frame tables (jax 0.12, XLA's dumps), ``module``'s tables;
    '' where the module was printed without them."""
    metadata = inst.optional_attr("metadata", Metadata)
    op_name = metadata.fields.get("op_name", "") if metadata is not None else ""
    found = source_location(module, inst)
    where = found.where if found is not None else ""
    return " ".join(p for p in (op_name, f"({where})" if where else "") if p)
