"""While loops with small bodies run on the device: one launch whose kernel loops.

A loop whose condition depends on data (a Collatz count, a Newton iteration, the rejection
loops of ``jax.random.gamma``) or whose body is a few tiny kernels costs a launch or more an
iteration, about 6 us of host time on PoCL however little the kernels do: a vmapped Collatz
``while_loop`` of 271 iterations took 4.5 ms, 0.4 ms of it in kernels, against XLA's 0.03.
Where every kernel of the condition and the body can be a stage of a chain
(``launch_chaining``: no local memory or barriers of its own) and an iteration's work is at
most ``Target.loop_max_work`` (``fusion_cost.kernel_work``: one work-group, one core, does
it all),
the loop is one launch of one work-group: the condition's stages, a barrier, the predicate
read from its buffer (the same value for every work-item), then the body's stages and a
barrier, until the predicate is false. Buffers and loop state are the plan's, as the host
loop's kernels read and write them; copies of loop state the host would enqueue become
kernels of a work-item a byte. Anything else (a nested loop or conditional, a custom call, a
bigger body) keeps the host loop (``HostWhile``).
"""

from __future__ import annotations

from ..hlo.dtypes import ELEMENT_TYPES
from ..hlo.ir import HloInstruction
from ..passes.fusion_cost import kernel_work
from .context import LoweringContext
from .launch_chaining import Stages, is_stage
from .kernel import KernelBuilder
from .plan import CopyBytes, Launch, Step
from .program import MAX_PARAMETER_BYTES


def device_loop(ctx: LoweringContext, loop: HloInstruction) -> Launch | None:
    """``loop`` as one launch that iterates on the device, or None where it cannot be."""
    if ctx.target.loop_max_work <= 0 or ctx.target.chain_max_work <= 0:
        return None
    cond, body = loop.condition, loop.body
    members = {i.name: i for c in (cond, body) for i in c.instructions}
    cond_steps, body_steps = (
        [_copy_stage(ctx, s) if isinstance(s, CopyBytes) else s for s in ctx.lower_computation(c)]
        for c in (cond, body))
    steps = cond_steps + body_steps
    if not body_steps or not all(is_stage(ctx, members, s, ctx.target.chain_max_work)
                                 for s in steps):
        return None
    work = sum(kernel_work(members[name]) for s in steps
               for name in s.instruction.split("+"))                # type: ignore[union-attr]
    if work > ctx.target.loop_max_work:
        return None
    stages = Stages(ctx)
    base, offset = stages.buffer(ctx.ref(cond.root))
    lines = ["  for (;;) {", *stages.code(cond_steps),            # type: ignore[arg-type]
             "  barrier(CLK_GLOBAL_MEM_FENCE);",
             f"  if (*(__global const uchar*)({base} + {offset}) == 0) break;",
             *stages.code(body_steps),                              # type: ignore[arg-type]
             "  barrier(CLK_GLOBAL_MEM_FENCE);", "  }"]
    if 16 * (len(stages.bases) + 1) + 4 > MAX_PARAMETER_BYTES:
        return None
    return stages.launch(lines, loop.name)


_BYTES = ELEMENT_TYPES["u8"]


def _copy_stage(ctx: LoweringContext, step: CopyBytes) -> Step:
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
