"""Tier 0's lowering: an entry instruction whose specialised steps are kernel launches runs on
the generic kernels instead, where an op program computes it (``op_program``: elementwise
steps, reductions and dots).

The specialised lowering runs first and decides what is a launch at all (a copy that is a
byte copy, a forwarded value, a host step stay as they are); its kernels are left out of the
program when no launch uses them (``ProgramBuilder.finish``), so a module every launch of
which is generic builds no program of its own. The op program goes into the embedded
constants blob, which the executable uploads once, and is the launch's last buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...hlo.dtypes import S32, S64
from ...hlo.ir import HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.shape import ArrayShape
from ..context import LoweringContext
from ..families.loop import all_shapes, fused_parts
from ..kernel import needs_long_index
from ..plan import GenericLaunch, Launch, Step
from .kernels import LOCAL_SIZE, MAX_BUFFERS, kernel_for
from .op_program import NotTier0, OpProgram, start


@dataclass(frozen=True)
class Tier0:
    """How a module's steps are lowered for tier 0: which kernels the device has."""

    has_fp64: bool

    def __call__(self, ctx: LoweringContext, inst: HloInstruction,
                 steps: list[Step]) -> list[Step]:
        if not steps or not all(isinstance(s, Launch) for s in steps):
            return steps
        generic = generic_steps(ctx, inst, self.has_fp64)
        return steps if generic is None else generic


def generic_steps(ctx: LoweringContext, inst: HloInstruction,
                  has_fp64: bool) -> list[Step] | None:
    """``inst``'s launches of generic kernels: one per group of same-dimension outputs (as
    the loop kernel groups them), or None where some value is not tier 0's."""
    root, params = fused_parts(inst)
    if inst.opcode == Opcode.FUSION and inst.shape.is_tuple \
            and root.opcode not in (Opcode.TUPLE, Opcode.REDUCE):
        return None
    groups: dict[tuple, list[tuple[tuple[int, ...], ArrayShape]]] = {}
    for idx, s in inst.shape.leaves():
        if isinstance(s, ArrayShape) and s.element_count:
            groups.setdefault(s.dims, []).append((idx, s))
    try:
        return [_launch(ctx, inst, root, params, group, has_fp64) for group in groups.values()]
    except NotTier0:
        return None


def _launch(ctx: LoweringContext, inst: HloInstruction, root: HloInstruction, params,
            group: list[tuple[tuple[int, ...], ArrayShape]], has_fp64: bool) -> GenericLaunch:
    operands = params if params is not None else inst.operands
    leaves = {}
    for op, bound in zip(inst.operands, operands):    # read as the loop kernel reads them
        if isinstance(op.shape, ArrayShape) and op.shape.byte_size:
            leaves[id(bound)] = (bound.array_shape, ctx.ref(op))
    index_et = S64 if needs_long_index(*all_shapes(inst)) else S32
    space = group[0][1]
    program = OpProgram(space, index_et, lambda i: leaves.get(id(i)), ctx.program.embed)
    values = [program.output(root, idx, start(space)) for idx, _ in group]
    for (idx, shape), register in zip(group, values):
        program.store(shape, ctx.ref(inst, idx), register)
    cls = kernel_for(program.cases, has_fp64)
    if cls is None:
        raise NotTier0("no kernel holds every case")
    words = ctx.program.embed_bytes(program.words().tobytes())
    buffers = program.buffers + [words] * (MAX_BUFFERS - len(program.buffers))
    count = space.element_count
    size = -(-count // (program.per * LOCAL_SIZE)) * LOCAL_SIZE
    return GenericLaunch(cls.kernel, (*buffers, words), (np.int64(count),), (size,),
                         (LOCAL_SIZE,), inst.name)
