"""Common-subexpression elimination (XLA's HloCSE): one instruction per distinct value.

JAX traces every use of a value separately, so a module often computes the same thing twice:
a layer norm subtracts the row mean once for the variance and once more for the output, and
autodiff rebuilds forward values the backward pass needs. Each copy costs its kernel time and,
worse, a buffer that stays live until the backward pass reads it (24 layers of a residual MLP
kept 192 KB of duplicated centred activations). Two instructions of one computation are the
same when they have the same opcode, shape (layout included), operands (after CSE of the
operands, so whole duplicated chains collapse in one walk), attributes and literal, and the
computations they call are structurally equal (JAX writes a separate but identical reducer
for every reduce). Source metadata does not count.

Never merged: parameters, instructions with a side effect (``analysis.side_effects``: rng,
I/O, custom calls marked ``custom_call_has_side_effect``, or calling such a computation),
collectives on a channel, optimisation barriers and tokens (their identity is their point),
constants whose values were elided from the text (unknown, so perhaps different), and
instructions with control dependencies.
"""

from __future__ import annotations

from typing import Hashable, Mapping

from ..analysis.call_graph import sequential_computations
from ..analysis.side_effects import has_side_effect
from ..hlo.clone import clone_module
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.literal import Literal
from ..hlo.opcodes import OPCODES
from ..target import CPU, Target
from .dce import remove_dead_code
from ..analysis.fusion_cost import BYTE_COST, kernel_work

#: a duplicate not live at once with its first copy is merged when its kernel's work is at
#: least this many times its result's bytes (``fusion_cost`` units)
_HOLD_WORK_PER_BYTE = 4
#: attributes that say where an instruction came from, not what it computes
_IGNORED_ATTRIBUTES = frozenset({"metadata", "control-predecessors"})


def cse(module: HloModule, target: Target = CPU) -> HloModule:
    new, _ = clone_module(module)
    cse_in_place(new, target)
    return new


def cse_in_place(module: HloModule, target: Target = CPU) -> None:
    """Instructions are bucketed by a shallow key (called computations by their size only),
    and compared in full only when a bucket already holds one: most instructions of a large
    module are alone in theirs, and never pay for hashing their fused computations."""
    keys = _StructuralKeys()
    effects: dict[HloComputation, bool] = {}
    for comp in sequential_computations(module):
        order = comp.post_order()
        last_use = _last_uses(comp, order)
        ordered = {p for inst in order for p in inst.control_predecessors}
        buckets: dict[Hashable, list[HloInstruction]] = {}
        replacement: dict[HloInstruction, HloInstruction] = {}
        for n, inst in enumerate(order):
            inst.operands = [replacement.get(op, op) for op in inst.operands]
            if inst.control_predecessors or inst in ordered or not _mergeable(inst):
                continue
            operands = {id(op): id(op) for op in inst.operands}
            shallow = keys.instruction(inst, operands, deep=False)
            if shallow is None:
                continue
            bucket = buckets.setdefault(shallow, [])
            kept = _equal(keys, inst, operands, bucket, effects) if bucket else None
            if kept is None:
                bucket.append(inst)
            elif last_use[kept] > n or _worth_holding(inst):
                replacement[inst] = kept
                last_use[kept] = max(last_use[kept], last_use[inst])
        comp.root = replacement.get(comp.root_instruction, comp.root_instruction)
    remove_dead_code(module)


def _equal(keys: _StructuralKeys, inst: HloInstruction, operands: Mapping[int, Hashable],
           candidates: list[HloInstruction],
           effects: dict[HloComputation, bool]) -> HloInstruction | None:
    """The first of ``candidates`` that computes what ``inst`` does, if any may stand for it."""
    if has_side_effect(inst, effects):
        return None
    key = keys.instruction(inst, operands, deep=True)
    for other in candidates:
        if not has_side_effect(other, effects) and key == keys.instruction(
                other, {id(op): id(op) for op in other.operands}, deep=True):
            return other
    return None


def _last_uses(comp: HloComputation, order: list[HloInstruction]) -> dict[HloInstruction, int]:
    """Each instruction's last reader's position in ``order`` (past the end for the root)."""
    last = {inst: -1 for inst in order}
    for n, inst in enumerate(order):
        for op in inst.operands:
            last[op] = n
    last[comp.root_instruction] = len(order)
    return last


def _worth_holding(inst: HloInstruction) -> bool:
    """Whether computing ``inst`` costs more than keeping its result live between its uses:
    a duplicate whose first copy is dead by the time it is computed is recomputed, unless
    its kernel does real work beyond moving its bytes (a convert back to f32 of a bf16
    weight, read once in the forward pass and once in the backward pass, is cheaper to redo
    than to hold at twice the weight's size in between)."""
    if OPCODES[inst.opcode].runs_computations:
        return True
    held = sum(leaf.byte_size for _, leaf in inst.shape.leaves())
    return kernel_work(inst) >= _HOLD_WORK_PER_BYTE * held * BYTE_COST


def _mergeable(inst: HloInstruction) -> bool:
    """Not one of the instructions whose identity is their point (side effects are checked
    only for instructions that have an equal)."""
    if OPCODES[inst.opcode].distinct or "channel_id" in inst.attrs:
        return False
    return not any(leaf.is_token for _, leaf in inst.shape.leaves())


class _StructuralKeys:
    """Hashable descriptions of instructions and computations: equal keys, equal values."""

    def __init__(self) -> None:
        self._computations: dict[HloComputation, Hashable] = {}

    def instruction(self, inst: HloInstruction, operand_ids: Mapping[int, Hashable],
                    deep: bool = True) -> Hashable:
        """The key of ``inst`` with its operands named by ``operand_ids``; None when some
        part of it has no comparable form (an elided literal). ``deep=False`` stands for a
        called computation by its number of instructions: equal full keys have equal
        shallow ones."""
        attrs = []
        for name, value in inst.attrs.items():
            if name not in _IGNORED_ATTRIBUTES:
                attrs.append((name, self._attribute(value, deep)))
        literal = _literal_key(inst.literal) if inst.literal is not None else ()
        if literal is None:
            return None
        key = (inst.opcode, inst.shape, tuple(operand_ids[id(op)] for op in inst.operands),
               tuple(sorted(attrs, key=lambda a: a[0])), literal, inst.parameter_number)
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def computation(self, comp: HloComputation) -> Hashable:
        if comp not in self._computations:
            self._computations[comp] = self._computation_key(comp)
        return self._computations[comp]

    def _computation_key(self, comp: HloComputation) -> Hashable:
        positions: dict[int, Hashable] = {}
        body = []
        for n, inst in enumerate(comp.post_order()):
            positions[id(inst)] = n
            key = self.instruction(inst, positions, deep=True)
            if key is None:     # not comparable: equal to itself only
                return ("unique", id(comp))
            body.append((key, tuple(positions[id(p)] for p in inst.control_predecessors)))
        return tuple(body), positions[id(comp.root)]

    def _attribute(self, value: object, deep: bool) -> Hashable:
        if isinstance(value, HloComputation):
            return ("computation", self.computation(value) if deep else len(value.instructions))
        if isinstance(value, (tuple, list)):
            return tuple(self._attribute(v, deep) for v in value)
        if isinstance(value, dict):
            return tuple(sorted((k, self._attribute(v, deep)) for k, v in value.items()))
        return value


def _literal_key(literal: Literal) -> Hashable | None:
    if literal.shape.is_tuple:
        elements = tuple(_literal_key(e) for e in literal.elements)
        return None if any(e is None for e in elements) else elements
    if literal.elided or literal.data is None:
        return None
    return (str(literal.data.dtype), literal.data.shape, literal.data.tobytes())
