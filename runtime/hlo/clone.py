"""Copying modules and computations so that passes never mutate their caller's module.

A pass clones first and then edits the clone freely. The clone shares everything immutable
(shapes, literals, typed attribute values, source locations, written signatures) and copies
everything a pass may change (instruction lists, operand lists, attribute dicts, the module's
lists and dicts). Computation references inside attributes and instruction references in
``control-predecessors`` are redirected to the copies, so the clone is self-contained. Fields
are copied generically, so a field added to the IR later is carried along without changes here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, TypeVar

from .ir import HloComputation, HloInstruction, HloModule

_T = TypeVar("_T")


@dataclass
class CloneMap:
    """Original object -> its copy (instructions and computations hash by identity)."""

    instructions: dict[HloInstruction, HloInstruction] = field(default_factory=dict)
    computations: dict[HloComputation, HloComputation] = field(default_factory=dict)

    def instruction(self, original: HloInstruction) -> HloInstruction:
        return self.instructions[original]

    def computation(self, original: HloComputation) -> HloComputation:
        return self.computations[original]


def _shallow(obj: _T) -> _T:
    """A new object of the same class with the same attribute values."""
    copy = object.__new__(type(obj))
    copy.__dict__.update(obj.__dict__)
    return copy


def clone_module(module: HloModule, share: Collection[HloComputation] = ()
                 ) -> tuple[HloModule, CloneMap]:
    """A deep copy of ``module`` (callees before callers, as in the original), except that the
    computations in ``share`` are not copied: both modules hold the same objects, which
    neither may change from then on (the pipeline shares kernel bodies between the plans of
    one module, which only its sequential computations tell apart)."""
    mapping = CloneMap()
    new = _shallow(module)
    for key, value in module.__dict__.items():
        if isinstance(value, list):
            new.__dict__[key] = list(value)
        elif isinstance(value, dict):
            new.__dict__[key] = dict(value)
    new.computations = []
    for comp in module.computations:
        copy = comp if comp in share else clone_computation(comp, comp.name, mapping)
        new.computations.append(copy)
        if comp is module.entry:
            new.entry = copy
    return new, mapping


def clone_computation(comp: HloComputation, name: str, mapping: CloneMap | None = None,
                      instruction_suffix: str = "") -> HloComputation:
    """A copy of ``comp`` named ``name``; its instructions get ``instruction_suffix``.

    Called computations are looked up in ``mapping`` (so clone callees first to redirect them);
    ones not in it stay shared, which is what cloning a single computation inside its own
    module wants. The new instructions and the computation are recorded in ``mapping``.
    """
    mapping = mapping if mapping is not None else CloneMap()
    new = _shallow(comp)
    new.name = name
    new.instructions = []
    mapping.computations[comp] = new
    local: dict[HloInstruction, HloInstruction] = {}
    for inst in comp.instructions:
        copy = _shallow(inst)
        copy.name = inst.name + instruction_suffix
        copy.operands = [local[op] for op in inst.operands]
        copy.attrs = {key: _clone_attr(value, mapping, local) for key, value in inst.attrs.items()}
        copy.parent = new
        local[inst] = copy
        new.instructions.append(copy)
    new.root = local[comp.root] if comp.root is not None else None
    mapping.instructions.update(local)
    return new


def _clone_attr(value: object, mapping: CloneMap,
                local: dict[HloInstruction, HloInstruction]) -> object:
    if isinstance(value, HloComputation):
        return mapping.computations.get(value, value)
    if isinstance(value, tuple) and value and isinstance(value[0], HloComputation):
        return tuple(mapping.computations.get(c, c) for c in value)
    if isinstance(value, tuple) and value and isinstance(value[0], HloInstruction):
        return tuple(local[i] for i in value)
    return value
