"""Relayout copies where an array crosses into a computation that declares another layout.

JAX's pre-optimisation text prints a layout on every instruction, but XLA treats most of them
as free: its layout assignment re-derives them and inserts copies wherever a value crosses a
computation boundary in another layout. The runtime takes printed layouts as the real order
of the bytes, and a call parameter shares its operand's bytes, so a mismatch there would read
the operand's elements in the wrong order. JAX emits exactly that for batched
``jnp.linalg.solve`` (a ``transpose`` printed ``{1,2,0}`` passed to a parameter printed
``{2,1,0}``). This pass adds the physical transpose (``copy`` to the declared layout) for
array operands of calls and conditional branches, and for callee roots whose layout differs
from the calling instruction's. It runs after flatten_call_graph, so rewriting a callee's
root affects only its one call site.
"""

from __future__ import annotations

from typing import Callable

from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.shape import ArrayShape, Shape
from .names import FreshNames

# opcode -> ((operand index, callee, parameter number) pairs, callees whose root is the result)
Boundaries = tuple[list[tuple[int, HloComputation, int]], list[HloComputation]]


def _call(inst: HloInstruction) -> Boundaries:
    callee: HloComputation = inst.to_apply
    return [(k, callee, k) for k in range(len(inst.operands))], [callee]


def _conditional(inst: HloInstruction) -> Boundaries:
    branches = list(inst.attrs.get("branch_computations") or
                    (inst.true_computation, inst.false_computation))
    return [(b + 1, comp, 0) for b, comp in enumerate(branches)], branches


BOUNDARIES: dict[str, Callable[[HloInstruction], Boundaries]] = {
    "call": _call,
    "conditional": _conditional,
}


def relayout_needed(have: Shape, want: Shape) -> bool:
    return (isinstance(have, ArrayShape) and isinstance(want, ArrayShape) and have.rank > 1
            and have.minor_to_major != want.minor_to_major)


def match_call_layouts(module: HloModule) -> None:
    """Insert the relayout copies, in place (see the module docstring)."""
    names = FreshNames(module)
    for comp in list(module.computations):
        for inst in list(comp.instructions):
            rule = BOUNDARIES.get(inst.opcode)
            if rule is None:
                continue
            passes, callees = rule(inst)
            for k, callee, number in passes:
                parameter = callee.parameter(number)
                if relayout_needed(inst.operands[k].shape, parameter.shape):
                    copy = HloInstruction(names.fresh("copy"), "copy", parameter.shape,
                                          [inst.operands[k]], parent=comp)
                    comp.instructions.insert(comp.instructions.index(inst), copy)
                    inst.operands[k] = copy
            for callee in callees:
                root = callee.root
                if root is not None and relayout_needed(root.shape, inst.shape):
                    copy = HloInstruction(names.fresh("copy"), "copy", inst.shape, [root],
                                          parent=callee)
                    callee.instructions.append(copy)
                    callee.root = copy


__all__ = ["match_call_layouts", "relayout_needed", "BOUNDARIES"]
