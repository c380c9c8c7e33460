"""Lowerings that launch no kernel of their own: forwarding, byte copies, control flow as
host steps, and the opcodes this backend does not lower, each with its reason.

A bitcast onto other bytes and a layout-changing copy decline (None), so the loop kernel
(the registry's ``ANY`` rule) moves them.
"""

from __future__ import annotations

from typing import Callable

from ...analysis.trip_count import counter_values, selector_values
from ...errors import HloUnsupportedError
from ...hlo.ir import HloComputation, HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.opcodes import OPCODES
from ...hlo.shape import ArrayShape
from ..context import LoweringContext
from ..device_loops import device_loop
from ..plan import CopyBytes, HostConditional, HostWhile, NestedLoop, Step
from ..plan_passes import lowered_steps
from ..registry import add, register


@register(Opcode.PARAMETER, Opcode.CONSTANT, Opcode.GET_TUPLE_ELEMENT, Opcode.TUPLE,
          Opcode.AFTER_ALL,
          Opcode.ADD_DEPENDENCY, Opcode.OPT_BARRIER, Opcode.DOMAIN, packed=True)
def _forwarding(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    return []


@register(Opcode.BITCAST, packed=True)
def _bitcast(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    return [] if ctx.same_bytes(inst, inst.operands[0]) else None


@register(Opcode.COPY, packed=True)
def _copy(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    src = inst.operands[0]
    if inst.shape.is_tuple:
        return []       # a shallow copy defines only the tuple table, which holds no data here
    assert isinstance(inst.shape, ArrayShape) and isinstance(src.shape, ArrayShape)
    if inst.shape.minor_to_major == src.shape.minor_to_major or inst.shape.rank <= 1:
        if ctx.same_bytes(inst, src) or inst.shape.byte_size == 0:
            return []
        return [CopyBytes(ctx.ref(src), ctx.ref(inst), inst.shape.byte_size, inst.name)]
    return None


@register(Opcode.CALL, packed=True)
def _call(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    return ctx.lower_computation(inst.to_apply)


@register(Opcode.WHILE, packed=True)
def _while(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    if ctx.deferring_loops:
        return [NestedLoop(inst)]
    looped = device_loop(ctx, inst)
    if looped is not None:
        return [looped]
    cond: HloComputation = inst.condition
    body: HloComputation = inst.body
    steps = lowered_steps(ctx, body)
    values = counter_values(inst)
    if values is not None:
        members = {i.name: i for i in body.instructions}
        for step in steps:
            if isinstance(step, HostConditional) and step.instruction in members:
                step.selected = selector_values(inst, members[step.instruction].operands[0],
                                                len(values))
    return [HostWhile(condition=ctx.lower_computation(cond), predicate=ctx.ref(cond.root_instruction),
                      body=steps, instruction=inst.name, counter_values=values)]


@register(Opcode.CONDITIONAL, packed=True)
def _conditional(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    if "branch_computations" in inst.attrs:
        branches = list(inst.branch_computations)
        is_pred = False
    else:
        branches = [inst.true_computation, inst.false_computation]
        is_pred = True
    # in a loop tried on the device (``device_loops``) the branches' kernels stay unchained:
    # they become stages of the loop's kernel
    lower = ctx.lower_computation if ctx.deferring_loops else \
        (lambda comp: lowered_steps(ctx, comp))
    return [HostConditional(selector=ctx.ref(inst.operands[0]), selector_is_pred=is_pred,
                            branches=[lower(b) for b in branches],
                            instruction=inst.name)]


def _unsupported(reason: str) -> Callable:
    def rule(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
        raise HloUnsupportedError(f"{inst.opcode} {inst.name}: {reason}", instruction=inst.name,
                                  location=inst.location)
    return rule


# the opcode table's ``unsupported`` column: each refused with its reason
for _op, _spec in OPCODES.items():
    if _spec.unsupported is not None:
        add(_op, _unsupported(_spec.unsupported), packed=True)
