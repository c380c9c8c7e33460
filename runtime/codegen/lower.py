"""Lowering a buffer-assigned module to a plan and one OpenCL program.

The entry computation's schedule is walked in order; each instruction is lowered by the rule
the registry (``codegen.registry``) holds for its opcode on the target (the kernel families in
``codegen.families`` register them; importing that package registers them all). Instructions
that only forward values produce no steps; control flow becomes host steps over the callee
computations' own schedules; everything else is a kernel launch. The steps are then rewritten
by the plan passes, listed in order in ``plan_passes.PLAN_PASSES`` (merging and chaining
launches, batching copies, predication).
"""

from __future__ import annotations

from ..buffers.assignment import BufferAssignment
from ..target import CPU, Target
from . import families  # noqa: F401  (registers every lowering rule)
from .context import LoweringContext
from .plan_passes import finished_plan
from .program import Program, ProgramBuilder
from .tier0.lowering import Tier0


def lower(assignment: BufferAssignment, target: Target = CPU, alignment: int = 128,
          python_callbacks: tuple = (), tier0: Tier0 | None = None) -> Program:
    """Plan and OpenCL source for a buffer-assigned module; ``python_callbacks`` are the
    functions of the JAX lowering it came from, which its Python-callback custom calls run.
    With ``tier0``, the entry's elementwise steps launch the generic kernels
    (``tier0.lowering``) and the program holds only the other kernels."""
    builder = ProgramBuilder(alignment, target.subtracting_loop_pragma)
    ctx = LoweringContext(assignment, target, builder, python_callbacks=python_callbacks,
                          retier=tier0)
    entry = assignment.module.entry
    assert entry is not None
    return builder.finish(finished_plan(ctx, entry))
