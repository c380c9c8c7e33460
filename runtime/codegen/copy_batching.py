"""A plan's consecutive small byte copies done by one launch.

Copy insertion leaves a loop body that permutes its state (a threefry key schedule rotates
its key words every round, a swap passes through a temporary) with a chain of small copies,
and each was a device command of its own. On PoCL a command costs the host and the device
about what a small kernel launch costs (~10 µs), so a round of `jax.random`'s threefry spent
more time copying four-byte words than computing. A run of consecutive copies of at most
``SMALL`` bytes each becomes one launch of a kernel that does them in plan order in one
work-group, a barrier between two copies (a later copy may read what an earlier one wrote:
a rotation through a temporary). Its text depends only on how many copies it does; sizes and
places are arguments. Larger copies stay the runtime's own copy commands (a copy engine or
memcpy moves them faster than one work-group would).
"""

from __future__ import annotations

from dataclasses import replace

from ..hlo.dtypes import element_type
from .context import LoweringContext
from .kernel import KernelBuilder
from .plan import CopyBytes, HostConditional, HostWhile, Launch, Step
from .program import MAX_PARAMETER_BYTES

SMALL = 16 * 1024
# a copy's arguments in the batched kernel: two buffers (pointer and offset) and its size
_ARGUMENT_BYTES = 2 * 16 + 4
_BYTES = element_type("u8")


def batch_copies(ctx: LoweringContext, steps: list[Step]) -> list[Step]:
    """``steps`` with every run of consecutive small copies replaced by one launch, inside
    loops and branches too."""
    out: list[Step] = []
    run: list[CopyBytes] = []

    def close() -> None:
        out.extend([copy_chain(ctx, run)] if len(run) > 1 else run)
        run.clear()

    for step in steps:
        if isinstance(step, CopyBytes) and 0 < step.nbytes <= SMALL:
            if _ARGUMENT_BYTES * (len(run) + 1) + 4 > MAX_PARAMETER_BYTES:
                close()
            run.append(step)
            continue
        close()
        if isinstance(step, HostWhile):
            step = replace(step, condition=batch_copies(ctx, step.condition),
                           body=batch_copies(ctx, step.body))
        elif isinstance(step, HostConditional):
            step = replace(step, branches=[batch_copies(ctx, b) for b in step.branches])
        out.append(step)
    close()
    return out


def copy_chain(ctx: LoweringContext, run: list[CopyBytes]) -> Launch:
    """One launch doing ``run``'s copies in order (``predication`` makes a single small copy
    one too, to guard it)."""
    kb = KernelBuilder()
    total = kb.param(sum(step.nbytes for step in run), key="count")
    kb.line(f"if ({total} == 0) return;")
    lid = kb.let("int", "(int)get_local_id(0)", "lid")
    size = kb.let("int", "(int)get_local_size(0)", "size")
    for k, step in enumerate(run):
        dst = kb.buffer(_BYTES, step.dst, writable=True)
        src = kb.buffer(_BYTES, step.src)
        count = kb.param(step.nbytes)
        if k:
            kb.line("barrier(CLK_GLOBAL_MEM_FENCE);")
        i = kb.fresh("i")
        with kb.block(f"for (int {i} = {lid}; {i} < {count}; {i} += {size})"):
            kb.line(f"{dst}[{i}] = {src}[{i}];")
    local = ctx.target.loop_local_size
    instructions = [step.instruction for step in run]
    name = ctx.program.add_kernel(kb, *instructions)
    return Launch(name, tuple(b.ref for b in kb.buffers), tuple(kb.scalar_arg_values()),
                  (local,), (local,), "+".join(instructions))
