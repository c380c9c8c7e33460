"""While loops with small bodies run on the device: one launch whose kernel loops.

A loop whose condition depends on data (a Collatz count, a Newton iteration, the rejection
loops of ``jax.random.gamma``) or whose body is a few tiny kernels costs a launch or more an
iteration, about 6 us of host time on PoCL however little the kernels do: a vmapped Collatz
``while_loop`` of 271 iterations took 4.5 ms, 0.4 ms of it in kernels, against XLA's 0.03.
Where every kernel of the condition and the body can be a stage of a chain
(``launch_chaining``: no local memory or barriers of its own) and an iteration's work is at
most ``Target.loop_max_work`` (``fusion_cost.kernel_work``: one work-group, one core, does
it all), the loop is one launch of one work-group: the condition's stages, a barrier, the
predicate read from its buffer (the same value for every work-item), then the body's stages
and a barrier, until the predicate is false. A loop inside is the same code inline (JAX's
threefry and rejection loops nest: discrete sampling 2.64 -> 0.28 ms). Buffers and loop state are the plan's, as the host
loop's kernels read and write them; copies of loop state the host would enqueue become
kernels of a work-item a byte. Anything else (a conditional, a custom call, a bigger body)
keeps the host loop (``HostWhile``), whose inner loops may still run on the device.
"""

from __future__ import annotations

from ..hlo.dtypes import ELEMENT_TYPES
from ..hlo.ir import HloInstruction
from ..analysis.fusion_cost import kernel_work
from .context import LoweringContext
from .launch_chaining import Stages, fits_arguments, is_stage
from .kernel import KernelBuilder
from .plan import CopyBytes, Launch, NestedLoop, Step


def device_loop(ctx: LoweringContext, loop: HloInstruction) -> Launch | None:
    """``loop`` as one launch that iterates on the device, or None where it cannot be."""
    if ctx.target.loop_max_work <= 0 or ctx.target.chain_max_work <= 0:
        return None
    stages = Stages(ctx)
    lines = _loop_lines(ctx, stages, loop)
    if lines is None or not fits_arguments(len(stages.bases)):
        return None
    return stages.launch(lines, loop.name)


def _loop_lines(ctx: LoweringContext, stages: Stages, loop: HloInstruction) -> list[str] | None:
    """The kernel lines running ``loop`` (and the loops inside it), or None."""
    cond, body = loop.condition, loop.body
    members = {i.name: i for c in (cond, body) for i in c.instructions}
    deferring, ctx.deferring_loops = ctx.deferring_loops, True
    try:
        cond_steps, body_steps = ctx.lower_computation(cond), ctx.lower_computation(body)
    finally:
        ctx.deferring_loops = deferring
    launches = [s for s in cond_steps + body_steps if isinstance(s, Launch)]
    if not body_steps or any(not isinstance(s, (Launch, CopyBytes, NestedLoop))
                             for s in cond_steps + body_steps) \
            or not all(is_stage(ctx, members, s, ctx.target.chain_max_work) for s in launches):
        return None
    work = sum(kernel_work(members[name]) for s in cond_steps + body_steps
               if not isinstance(s, NestedLoop) for name in s.instruction.split("+"))
    if work > ctx.target.loop_max_work:
        return None
    code = []
    for steps in (cond_steps, body_steps):
        part: list[str] = []
        run: list[Launch] = []
        for step in steps:
            if isinstance(step, NestedLoop):
                inner = _loop_lines(ctx, stages, step.instruction)
                if inner is None:
                    return None
                part += [*stages.code(run), "  barrier(CLK_GLOBAL_MEM_FENCE);", *inner,
                         "  barrier(CLK_GLOBAL_MEM_FENCE);"]
                run = []
            elif isinstance(step, CopyBytes):
                run.append(_copy_stage(ctx, step))
            elif isinstance(step, Launch):   # the only other kind _loop_lines admitted
                run.append(step)
        code.append(part + stages.code(run))
    base, offset = stages.buffer(ctx.ref(cond.root_instruction))
    return ["  for (;;) {", *code[0], "  barrier(CLK_GLOBAL_MEM_FENCE);",
            f"  if (*(__global const uchar*)({base} + {offset}) == 0) break;",
            *code[1], "  barrier(CLK_GLOBAL_MEM_FENCE);", "  }"]


_BYTES = ELEMENT_TYPES["u8"]


def _copy_stage(ctx: LoweringContext, step: CopyBytes) -> Launch:
    """A copy the host would enqueue (copy insertion's, of loop state) as a kernel of one
    work-item a byte, which a stage can be."""
    kb = KernelBuilder()
    dst = kb.buffer(_BYTES, step.dst, writable=True)
    src = kb.buffer(_BYTES, step.src)
    count = kb.param(step.nbytes)
    i = kb.let("long", "(long)get_global_id(0)", "i")
    with kb.block(f"if ({i} < {count})"):
        kb.line(f"{dst}[{i}] = {src}[{i}];")
    name = ctx.program.add_kernel(kb, step.instruction)
    return Launch(name, tuple(b.ref for b in kb.buffers), tuple(kb.scalar_arg_values()),
                  (step.nbytes,), (1,), step.instruction)
