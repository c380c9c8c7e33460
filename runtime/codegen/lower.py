"""Lowering a buffer-assigned module to a plan and one OpenCL program.

The entry computation's schedule is walked in order; each instruction is lowered by the rule
the registry (``codegen.registry``) holds for its opcode on the target (the kernel families in
``codegen.families`` register them; importing that package registers them all). Instructions
that only forward values produce no steps; control flow becomes host steps over the callee
computations' own schedules; everything else is a kernel launch. Consecutive independent
launches merge into one (``launch_merging``) and, on CPUs, consecutive small ones chain into
one work-group's launch (``launch_chaining``), in the entry as in loop bodies and branches;
then runs of small copies become one launch each (``copy_batching``), and conditionals and
loops that depend on data are decided on the device where that costs less than reading their
selector back (``predication``).
"""

from __future__ import annotations

from ..buffers.assignment import BufferAssignment
from ..target import CPU, Target
from . import families  # noqa: F401  (registers every lowering rule)
from .context import LoweringContext
from .copy_batching import batch_copies
from .launch_chaining import chain_launches
from .launch_merging import merge_launches
from .predication import predicate
from .program import Program, ProgramBuilder


def lower(assignment: BufferAssignment, target: Target = CPU, alignment: int = 128,
          python_callbacks: tuple = ()) -> Program:
    """Plan and OpenCL source for a buffer-assigned module; ``python_callbacks`` are the
    functions of the JAX lowering it came from, which its Python-callback custom calls run."""
    builder = ProgramBuilder(alignment, target.subtracting_loop_pragma)
    ctx = LoweringContext(assignment, target, builder, python_callbacks=python_callbacks)
    entry = assignment.module.entry
    assert entry is not None
    merged = merge_launches(ctx, entry, ctx.lower_computation(entry))
    plan = predicate(ctx, batch_copies(ctx, chain_launches(ctx, entry, merged)))
    return builder.finish(plan)
