"""A counted loop's induction variables read from a table, not computed on the device.

A scan's counter (and a ``fori_loop``'s index beside it) is a loop-state scalar that the body
increments with a kernel of its own: a launch every iteration for one addition, which the
in-place state update orders after every reader. Where the trip count analysis knows every
value such a variable takes (``analysis.trip_count.induction_values``), the values go in a
table among the embedded constants; the body's kernels that read the variable read the table's
entry for the iteration instead (their buffer's offset argument moves one entry a step:
``Launch.per_iteration``, set by the executor before each launch), the incrementing launch is
dropped, and after the loop one copy puts the value the loop leaves where its result expects
it. A GRU scan step: 3 -> 2 launches forward.

It applies only where that is plain: the update is one launch writing the variable in place
and nothing else, no step after it reads the variable, and no copy or nested host step
touches it; otherwise the body keeps its kernel.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..analysis.trip_count import induction_values
from ..hlo.ir import HloInstruction
from ..hlo.shape import ArrayShape
from .context import LoweringContext
from .kernel import BufferRef
from .plan import CopyBytes, FillBytes, HostCall, HostConditional, HostWhile, Launch, Step


def tabulate_inductions(ctx: LoweringContext, loop: HloInstruction, steps: list[Step],
                        count: int) -> tuple[list[Step], list[Step]]:
    """(``loop``'s body ``steps`` with its induction variables tabulated, the steps that put
    their final values in place after the loop). ``count``: the trip count."""
    body = loop.body
    after: list[Step] = []
    if not count or body.root is None or body.root.opcode != "tuple":
        return steps, after
    state = body.parameter(0)
    for element, update in enumerate(body.root.operands):
        shape = update.shape
        if not isinstance(shape, ArrayShape) or shape.rank or update.opcode == "parameter":
            continue
        slot = ctx.ref(state, (element,))
        at = _update_at(ctx, steps, update, slot)
        if at is None:
            continue
        values = induction_values(loop, element, count + 1)
        if values is None:
            continue
        data = np.asarray(values, dtype=np.int64).astype(shape.element_type.numpy)
        table = ctx.program.embed_bytes(data.tobytes())
        stride = data.itemsize
        steps = [_reading(s, slot, table, stride) if isinstance(s, Launch) else s
                 for k, s in enumerate(steps) if k != at]
        after.append(CopyBytes(BufferRef(table.allocation, table.offset + count * stride),
                               ctx.ref(loop, (element,)), stride, update.name))
    return steps, after


def _update_at(ctx: LoweringContext, steps: list[Step], update: HloInstruction,
               slot: BufferRef) -> int | None:
    """Where in ``steps`` the one launch computing ``update`` into ``slot`` is, if the
    variable can be tabulated: nothing after it reads the slot, and nothing but launches
    directly in the body does before it."""
    if ctx.ref(update) != slot:
        return None
    found = [k for k, s in enumerate(steps)
             if isinstance(s, Launch) and s.instruction == update.name]
    if len(found) != 1:
        return None
    at = found[0]
    for k, step in enumerate(steps):
        if k == at:
            continue
        if isinstance(step, Launch):
            if k > at and slot in step.buffers:
                return None
        elif _touches(step, slot):
            return None
    return at


def _touches(step: Step, slot: BufferRef) -> bool:
    if isinstance(step, Launch):
        return slot in step.buffers
    if isinstance(step, CopyBytes):
        return slot in (step.src, step.dst)
    if isinstance(step, FillBytes):
        return step.dst == slot
    if isinstance(step, HostCall):
        return slot in step.buffers
    if isinstance(step, HostWhile):
        return step.predicate == slot or any(_touches(s, slot)
                                             for s in step.condition + step.body)
    if isinstance(step, HostConditional):
        return step.selector == slot or any(_touches(s, slot)
                                            for b in step.branches for s in b)
    return True


def _reading(step: Launch, slot: BufferRef, table: BufferRef, stride: int) -> Launch:
    positions = [p for p, b in enumerate(step.buffers) if b == slot]
    if not positions:
        return step
    buffers = tuple(table if p in positions else b for p, b in enumerate(step.buffers))
    return replace(step, buffers=buffers,
                   per_iteration=step.per_iteration + tuple((p, stride) for p in positions))
