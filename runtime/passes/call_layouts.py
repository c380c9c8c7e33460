"""Relayout copies where an array crosses into a computation that declares another layout.

JAX's pre-optimisation text prints a layout on every instruction, but XLA treats most of them
as free: its layout assignment re-derives them and inserts copies wherever a value crosses a
computation boundary in another layout. The runtime takes printed layouts as the real order
of the bytes, and a call parameter shares its operand's bytes, so a mismatch there would read
the operand's elements in the wrong order. JAX emits exactly that for batched
``jnp.linalg.solve`` (a ``transpose`` printed ``{1,2,0}`` passed to a parameter printed
``{2,1,0}``), and for ``lax.scan`` over a transposed input (the while's init printed
``{2,0,1}``, its body's parameter ``{2,1,0}``). This pass adds the physical transpose
(``copy`` to the declared layout) for operands of calls and conditional branches, and for
callee roots whose layout differs from the calling instruction's; tuples are taken apart and
rebuilt around the leaves that move. A while's loop state follows its body's parameter: the
init and the body's root are copied to it, and the condition's parameter and the while's
result are declared in it, their readers reading a copy in the layouts they were written
for. It runs after flatten_call_graph, so rewriting a callee affects only its one call site.
"""

from __future__ import annotations

from typing import Callable

from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape, Shape, TupleShape
from .names import FreshNames

# opcode -> ((operand index, callee, parameter number) pairs, callees whose root is the result)
Boundaries = tuple[list[tuple[int, HloComputation, int]], list[HloComputation]]


def _call(inst: HloInstruction) -> Boundaries:
    callee: HloComputation = inst.to_apply
    return [(k, callee, k) for k in range(len(inst.operands))], [callee]


def _conditional(inst: HloInstruction) -> Boundaries:
    branches = list(inst.optional_attr("branch_computations", tuple) or
                    (inst.true_computation, inst.false_computation))
    return [(b + 1, comp, 0) for b, comp in enumerate(branches)], branches


BOUNDARIES: dict[Opcode, Callable[[HloInstruction], Boundaries]] = {
    Opcode.CALL: _call,
    Opcode.CONDITIONAL: _conditional,
}


def relayout_needed(have: Shape, want: Shape) -> bool:
    return (isinstance(have, ArrayShape) and isinstance(want, ArrayShape) and have.rank > 1
            and have.minor_to_major != want.minor_to_major)


def _differs(have: Shape, want: Shape) -> bool:
    if isinstance(have, TupleShape) and isinstance(want, TupleShape):
        return any(_differs(h, w) for h, w in zip(have.elements, want.elements))
    return relayout_needed(have, want)


def _relayout(value: HloInstruction, want: Shape, names: FreshNames,
              made: list[HloInstruction]) -> HloInstruction:
    """``value`` in ``want``'s layouts: a copy of each array leaf in another layout (a tuple
    taken apart and rebuilt around them), or ``value`` itself; new instructions go to
    ``made`` in order."""
    if not _differs(value.shape, want):
        return value
    if not isinstance(want, TupleShape):
        made.append(HloInstruction(names.fresh("copy"), Opcode.COPY, want, [value]))
        return made[-1]
    have: TupleShape = value.tuple_shape
    parts = []
    for k, element in enumerate(want.elements):
        part = HloInstruction(names.fresh("get-tuple-element"), Opcode.GET_TUPLE_ELEMENT,
                              have.elements[k], [value], {"index": k})
        made.append(part)
        parts.append(_relayout(part, element, names, made))
    made.append(HloInstruction(names.fresh("tuple"), Opcode.TUPLE,
                               TupleShape(tuple(p.shape for p in parts)), parts))
    return made[-1]


def _insert_before(comp: HloComputation, user: HloInstruction | None,
                   made: list[HloInstruction]) -> None:
    at = comp.instructions.index(user) if user is not None else len(comp.instructions)
    for inst in made:
        inst.parent = comp
    comp.instructions[at:at] = made


def _relayout_operand(inst: HloInstruction, k: int, want: Shape, names: FreshNames) -> None:
    made: list[HloInstruction] = []
    inst.operands[k] = _relayout(inst.operands[k], want, names, made)
    assert inst.parent is not None   # the pass walks computations' instructions
    _insert_before(inst.parent, inst, made)


def _relayout_root(callee: HloComputation, want: Shape, names: FreshNames) -> None:
    made: list[HloInstruction] = []
    root = _relayout(callee.root_instruction, want, names, made)
    _insert_before(callee, None, made)
    callee.root = root


def _redeclare(inst: HloInstruction, want: Shape, names: FreshNames) -> None:
    """Give ``inst`` (a computation's parameter or an instruction's result) the shape
    ``want``; its readers read a relayout of it in the layouts they were written for."""
    comp = inst.parent
    assert comp is not None   # the pass walks computations' instructions
    if not _differs(inst.shape, want):
        return
    declared = inst.shape
    inst.shape = want
    made: list[HloInstruction] = []
    value = _relayout(inst, declared, names, made)
    for user in comp.instructions:
        if user not in made:
            user.operands = [value if op is inst else op for op in user.operands]
    if comp.root is inst:
        comp.root = value
    after = comp.instructions.index(inst) + 1
    _insert_before(comp, comp.instructions[after] if after < len(comp.instructions) else None,
                   made)


def _match_while(inst: HloInstruction, names: FreshNames) -> None:
    """The loop state is laid out as the body's parameter declares: the init, the body's
    root, the condition's parameter and the while's own result follow it."""
    state = inst.body.parameter(0).shape
    _relayout_operand(inst, 0, state, names)
    _relayout_root(inst.body, state, names)
    _redeclare(inst.condition.parameter(0), state, names)
    _redeclare(inst, state, names)


def match_call_layouts(module: HloModule) -> None:
    """Insert the relayout copies, in place (see the module docstring)."""
    names = FreshNames(module)
    for comp in list(module.computations):
        for inst in list(comp.instructions):
            if inst.opcode == Opcode.WHILE:
                _match_while(inst, names)
                continue
            rule = BOUNDARIES.get(inst.opcode)
            if rule is None:
                continue
            passes, callees = rule(inst)
            for k, callee, number in passes:
                _relayout_operand(inst, k, callee.parameter(number).shape, names)
            for callee in callees:
                if callee.root is not None:
                    _relayout_root(callee, inst.shape, names)


__all__ = ["match_call_layouts", "relayout_needed", "BOUNDARIES"]
