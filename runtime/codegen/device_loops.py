"""While loops with small bodies run on the device: one launch whose kernel loops.

A loop whose condition depends on data (a Collatz count, a Newton iteration, the rejection
loops of ``jax.random.gamma``) or whose body is a few tiny kernels costs a launch or more an
iteration, about 6 us of host time on PoCL however little the kernels do: a vmapped Collatz
``while_loop`` of 271 iterations took 4.5 ms, 0.4 ms of it in kernels, against XLA's 0.03.
Where every kernel of the condition and the body can be a stage of a chain
(``launch_chaining``: no local memory or barriers of its own) and an iteration's work in
kernels of more than one work-group is at most ``Target.loop_max_work``
(``fusion_cost.kernel_work``: one work-group, one core, does it all, where a host loop would
have used more; a launch of one work-group, or a host loop's chain, runs on one core anyway),
the loop is one launch of one work-group: the condition's stages, a barrier, the
predicate read from its buffer (the same value for every work-item), then the body's stages
and a barrier, until the predicate is false. A loop inside is the same code inline (JAX's
threefry and rejection loops nest: discrete sampling 2.64 -> 0.28 ms). Buffers and loop state are the plan's, as the host
loop's kernels read and write them; copies of loop state the host would enqueue become
kernels of a work-item a byte. A conditional is every branch's stages, each guarded by the
selector naming its branch, with the barriers left unconditional: PoCL duplicates the code
after a barrier under a branch, and Optax's L-BFGS (conditionals in a line search's loop in a
counted loop) then took minutes to build. Anything else (a loop inside a branch, a custom
call, a bigger body) keeps the host loop (``HostWhile``), whose inner loops may still run on
the device.
"""

from __future__ import annotations

import math

from ..hlo.ir import HloComputation, HloInstruction
from ..hlo.opcode_enum import Opcode
from ..analysis.fusion_cost import kernel_work
from .context import LoweringContext
from .launch_chaining import COPY_STAGE_BYTES, Stages, copy_stage, fits_arguments, is_stage
from .plan import CopyBytes, HostConditional, Launch, NestedLoop, Step


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
    """The kernel lines running ``loop`` (and the loops and conditionals inside it), or None."""
    cond, body = loop.condition, loop.body
    members = _members([cond, body])
    deferring, ctx.deferring_loops = ctx.deferring_loops, True
    try:
        cond_steps, body_steps = ctx.lower_computation(cond), ctx.lower_computation(body)
    finally:
        ctx.deferring_loops = deferring
    if not body_steps:
        return None
    work = _work(ctx, members, cond_steps + body_steps)
    if work is None or work > ctx.target.loop_max_work:
        return None
    cond_code = _lines(ctx, stages, cond_steps)
    body_code = _lines(ctx, stages, body_steps)
    if cond_code is None or body_code is None:
        return None
    base, offset = stages.buffer(ctx.ref(cond.root_instruction))
    return ["  for (;;) {", *cond_code, "  barrier(CLK_GLOBAL_MEM_FENCE);",
            f"  if (*(__global const uchar*)({base} + {offset}) == 0) break;",
            *body_code, "  barrier(CLK_GLOBAL_MEM_FENCE);", "  }"]


def _members(comps: list[HloComputation]) -> dict[str, HloInstruction]:
    """The instructions of ``comps`` and of the branches of their conditionals, by name."""
    members: dict[str, HloInstruction] = {}
    for comp in comps:
        for inst in comp.instructions:
            members[inst.name] = inst
            if inst.opcode == Opcode.CONDITIONAL:
                members.update(_members(_branches(inst)))
    return members


def _branches(inst: HloInstruction) -> list[HloComputation]:
    if "branch_computations" in inst.attrs:
        return list(inst.branch_computations)
    return [inst.true_computation, inst.false_computation]


def _work(ctx: LoweringContext, members: dict[str, HloInstruction],
          steps: list[Step]) -> float | None:
    """An iteration's work in ``steps`` that a host loop would spread over the device's cores
    (every branch of a conditional counted), loops inside left to their own limit; None where
    a step cannot be part of the loop's kernel (a copy too big for a chain's stage, too). A
    launch of one work-group runs on one core wherever it runs (and the host loop chains such
    launches into one anyway), and so does a copy that is a chain's stage, so their work
    costs the device loop nothing:
    an Equinox GRU scan's backward body, one chain of 20 small kernels (37,000-55,000 units),
    stayed a host loop of a launch an iteration."""
    total = 0.0
    for step in steps:
        if isinstance(step, NestedLoop):
            continue
        if isinstance(step, HostConditional):
            for branch in step.branches:
                work = _work(ctx, members, branch)
                if work is None:
                    return None
                total += work
            continue
        if isinstance(step, Launch) and not is_stage(ctx, members, step,
                                                     ctx.target.chain_max_work):
            return None
        if isinstance(step, CopyBytes) and step.nbytes > COPY_STAGE_BYTES:
            return None     # one command on the host, byte by byte on one work-item
        if not isinstance(step, (Launch, CopyBytes)):
            return None
        names = step.instruction.split("+")
        if any(name not in members for name in names):
            return None
        if isinstance(step, Launch) and math.prod(
                g // w for g, w in zip(step.global_size, step.local_size)) > 1:
            total += sum(kernel_work(members[name]) for name in names)
    return total


def _lines(ctx: LoweringContext, stages: Stages, steps: list[Step],
           guard: str = "") -> list[str] | None:
    """The kernel lines running ``steps`` (``_work`` admitted them) in order, each stage's
    work done only where ``guard`` holds (inside a conditional's branch: ``_conditional``)."""
    part: list[str] = []
    run: list[Launch] = []
    for step in steps:
        if isinstance(step, NestedLoop):
            inner = None if guard else _loop_lines(ctx, stages, step.instruction)
            if inner is None:   # a loop in a branch would put its barriers under the branch
                return None
            part += [*stages.code(run), _BARRIER, *inner, _BARRIER]
            run = []
        elif isinstance(step, HostConditional):
            chosen = _conditional(ctx, stages, step, guard)
            if chosen is None:
                return None
            part += [*stages.code(run, guard), _BARRIER, *chosen, _BARRIER]
            run = []
        elif isinstance(step, CopyBytes):
            run.append(copy_stage(ctx, step))
        elif isinstance(step, Launch):   # the only other kind _work admitted
            run.append(step)
    return part + stages.code(run, guard)


def _conditional(ctx: LoweringContext, stages: Stages, step: HostConditional,
                 guard: str) -> list[str] | None:
    """Every branch's stages, each guarded by its branch being the one the selector names
    (a pred selects branch 0 when true; an index out of range, the last branch, as in XLA).
    Each work-item reads the selector into a variable of its own, then a barrier, since a
    branch may write the selector's bytes (its value is dead once the branch is chosen)."""
    base, offset = stages.buffer(step.selector)
    kind = "uchar" if step.selector_is_pred else "int"
    sel = f"sel{len(stages.slots)}"
    count = len(step.branches)
    if step.selector_is_pred:
        tests = [f"{sel} != 0", f"{sel} == 0"]
    else:
        tests = [f"{sel} == {k}" for k in range(count - 1)]
        tests.append(f"({sel} < 0 || {sel} >= {count - 1})")
    lines = [f"  const int {sel} = (int)*(__global const {kind}*)({base} + {offset});", _BARRIER]
    for test, branch in zip(tests, step.branches):
        code = _lines(ctx, stages, branch, f"{guard}({test}) && ")
        if code is None:
            return None
        lines += [*code, _BARRIER]
    return lines


_BARRIER = "  barrier(CLK_GLOBAL_MEM_FENCE);"
