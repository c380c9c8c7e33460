"""A computation's independent launches merged into one (XLA's horizontal loop fusion, done
on the plan): every loop body's, and the entry computation's.

Every launch costs the device a few microseconds of scheduling, whatever its size, and a loop
body pays that once per iteration for each of its kernels: a scan step's small elementwise
kernels and the in-place updates that stack its outputs are mostly that cost (an LSTM train
step: 1,800 launches, 9 ms of the device's time between kernels). A straight-line program
pays it once a kernel, and an optimiser step updates each parameter in a kernel of its own
(an Adam step over 96 small tensors 7.1 -> 5.8 ms; cold compiles within noise, BERT's 12.3
against 12.5 s). Consecutive launches of a computation that touch no bytes another of them writes, each a one-dimensional kernel using no
local memory, barriers or work-group ids, become one launch: each kernel becomes a function
of its work-item id, and a kernel over all their work-items calls each on its own range. The
merged kernel's first argument is the total work bound, so a launch with it zero (the
warm-up build) touches nothing.
"""

from __future__ import annotations

import numpy as np

from ..hlo.ir import HloComputation, HloInstruction
from .context import LoweringContext
from .launch_chaining import WORK_GROUP_BOUND
from .plan import Launch, Step
from .program import MAX_PARAMETER_BYTES

# a merged launch is one-dimensional: its parts must be too
_WORK_GROUP_BOUND = (*WORK_GROUP_BOUND, "get_global_id(1)", "get_global_id(2)")
_MAX_ITEMS = 2 ** 31 - 1


def merge_launches(ctx: LoweringContext, comp: HloComputation, steps: list[Step]) -> list[Step]:
    """``steps`` (``comp``'s) with each run of consecutive independent
    mergeable launches replaced by one launch."""
    members = {inst.name: inst for inst in comp.instructions}
    out: list[Step] = []
    run: list[tuple[Launch, list, list]] = []

    def close() -> None:
        if len(run) > 1:
            out.append(_merged(ctx, [step for step, _, _ in run]))
        else:
            out.extend(step for step, _, _ in run)
        run.clear()

    for step in steps:
        footprint = _footprint(ctx, members, step)
        if footprint is None:
            close()
            out.append(step)
            continue
        writes, reads = footprint
        assert isinstance(step, Launch)
        items = sum(s.global_size[0] for s, _, _ in run) + step.global_size[0]
        # the merged kernel's arguments: the parts' and an int bound for each (8 bytes a part
        # with padding), and the count
        arguments = sum(ctx.program.parameter_bytes(s.kernel) + 8 for s, _, _ in run) \
            + ctx.program.parameter_bytes(step.kernel) + 16
        # launches of another work-group size stay apart (a sort's one row a group would
        # otherwise share one thread with its neighbours)
        if items > _MAX_ITEMS or arguments > MAX_PARAMETER_BYTES \
                or (run and run[0][0].local_size != step.local_size) \
                or any(_overlap(writes, w + r) or _overlap(reads, w) for _, w, r in run):
            close()
        run.append((step, writes, reads))
    close()
    return out


def _footprint(ctx: LoweringContext, members: dict[str, HloInstruction], step: Step):
    """(bytes written, bytes read) of a mergeable launch as (allocation, start, end) ranges,
    else None."""
    if not isinstance(step, Launch) or len(step.global_size) != 1 \
            or step.global_size[0] > _MAX_ITEMS or step.instruction not in members:
        return None
    text = ctx.program.kernel_text(step.kernel)
    if any(word in text for word in _WORK_GROUP_BOUND):
        return None
    inst = members[step.instruction]
    writes = _ranges(ctx, [inst])
    reads = _ranges(ctx, inst.operands)
    return writes, reads


def _ranges(ctx: LoweringContext, insts: list[HloInstruction]) -> list[tuple[int, int, int]]:
    ranges = []
    for inst in insts:
        for index, shape in inst.shape.leaves():
            if shape.is_array:
                s = ctx.assignment.slice(inst, index)
                ranges.append((s.allocation, s.offset, s.offset + max(s.size, 1)))
    return ranges


def _overlap(a, b) -> bool:
    return any(x[0] == y[0] and x[1] < y[2] and y[1] < x[2] for x in a for y in b)


def _merged(ctx: LoweringContext, run: list[Launch]) -> Launch:
    program = ctx.program
    buffer_params: list[str] = []
    scalar_params: list[str] = []
    calls: list[str] = []
    ends, end = [], 0
    for k, step in enumerate(run):
        params = program.kernel_params(step.kernel)
        nb = 2 * len(step.buffers)
        assert len(params) == nb + len(step.scalars), (step.kernel, params)
        names = []
        for p, param in enumerate(params):
            kind, _, _ = param.rpartition(" ")
            name = f"m{k}_{p}"
            (buffer_params if p < nb else scalar_params).append(f"{kind} {name}")
            names.append(name)
        start = f"mg_end{k - 1}" if k else "0"
        end += step.global_size[0]
        ends.append(end)
        function = program.add_function(step.kernel)
        calls.append(f"  if (mg < mg_end{k}) {{ {function}({', '.join(names)}, "
                     f"mg - {start}, 0, 0); return; }}")
    bounds = ["int mg_count"] + [f"int mg_end{k}" for k in range(len(run))]
    lines = ["__kernel void __KERNEL__(" + ", ".join(buffer_params + bounds + scalar_params)
             + ") {",
             "  long mg = (long)get_global_id(0);",
             "  if (mg >= mg_count) return;", *calls, "}"]
    local = run[0].local_size
    size = -(-end // local[0]) * local[0]
    scalars = (np.int32(end), *(np.int32(e) for e in ends),
               *(s for step in run for s in step.scalars))
    name = program.add_text("\n".join(lines), [step.instruction for step in run])
    return Launch(name, tuple(b for step in run for b in step.buffers), scalars, (size,),
                  local, "+".join(step.instruction for step in run))
