"""Consecutive launches of small kernels chained into one launch of one work-group, whether or
not they depend on each other.

A launch costs a few microseconds of host and device time whatever its size (PoCL: 1.6 to 5
us, growing with its arguments), and many programs are chains of kernels smaller than that:
a deep narrow network's layers one after another (an Adam step over 24 layers of 32 x 64:
335 launches of 0.3 to 4 us each, 0.57 ms of kernel time in a 2.7 ms run), a scan step's
elementwise gates. Merging independent launches (``launch_merging``) cannot shorten a chain
whose every kernel reads the one before.

A chain is one work-group that runs its stages in plan order: each stage is a kernel made a
function of its work-item ids (``ProgramBuilder.add_function``); the work-group's items share
out the stage's items (a multi-dimensional launch's ids are recovered from a flat index), and
a barrier separates the stages, so each stage sees everything the ones before it wrote, as
consecutive launches on an in-order queue do. Only kernels that do not use local memory,
barriers, work-group ids or sizes are stages, and only launches whose estimated cost
(``fusion_cost.kernel_work``) is at most the target's ``chain_max_work``, or that are one
work-group anyway: one work-group runs on one core (a GPU's one compute unit), so a chain
must be made of kernels too small to gain from the others (where the host enqueues slower
than such kernels run, the device waits on it anyway). The chained kernel's text names no size
or offset: each stage's arguments other than buffers (offsets, sizes, scalars) are read from a
block of 8-byte slots in the embedded constants, so the chains of identical layers share one
kernel (a long run is cut into chains of whole periods where it repeats, ``_chunks``), and its
arguments are the distinct buffers the stages use (each at offset 0: the stages' offsets are
in the block), that block and the work bound (0: the warm-up launch touches nothing).
"""

from __future__ import annotations

import math

import numpy as np

from ..hlo.ir import HloComputation, HloInstruction
from ..analysis.fusion_cost import kernel_work
from .context import LoweringContext
from ..hlo.dtypes import ELEMENT_TYPES
from .kernel import SCALAR_DTYPES, BufferRef, KernelBuilder
from .plan import CopyBytes, Launch, Step
from .program import MAX_PARAMETER_BYTES

# what a kernel may not use to be called on a share of another launch's work-items (a stage
# of a chain, a part of a merged launch): it could not share a work-group with other kernels'
# work-items, or would see that launch's sizes instead of its own
WORK_GROUP_BOUND = ("barrier", "__local", "get_local_id", "get_group_id", "get_local_size",
                    "get_num_groups", "get_global_size", "get_global_offset")
_SLOT = 8   # bytes per argument in a chain's block
# the most stages a chain takes: its kernel's source grows with them, and so its build time
_MAX_STAGES = 16
_MIN_PERIODIC = 4
# the largest copy a chain takes as a stage (``copy_stage``): a byte a work-item, the
# work-group's items looping over it, as ``copy_batching``'s kernels do
COPY_STAGE_BYTES = 16 * 1024
_BYTES = ELEMENT_TYPES["u8"]


def chain_launches(ctx: LoweringContext, comp: HloComputation, steps: list[Step]) -> list[Step]:
    """``steps`` (``comp``'s) with each run of two or more consecutive small launches replaced
    by one chained launch; small copies among them are stages too (``copy_stage``)."""
    limit = ctx.target.chain_max_work
    if limit <= 0:
        return steps
    members = {inst.name: inst for inst in comp.instructions}
    out: list[Step] = []
    run: list[Launch | CopyBytes] = []

    def close() -> None:
        if all(isinstance(step, CopyBytes) for step in run):   # ``copy_batching``'s
            out.extend(run)
        else:
            stages = [copy_stage(ctx, s) if isinstance(s, CopyBytes) else s for s in run]
            original = {id(stage): step for stage, step in zip(stages, run)}
            for chunk in (piece for chunk in _chunks(stages) for piece in _within_arguments(chunk)):
                out.append(_chained(ctx, chunk) if len(chunk) > 1 else original[id(chunk[0])])
        run.clear()

    for step in steps:
        if isinstance(step, CopyBytes) and 0 < step.nbytes <= COPY_STAGE_BYTES:
            run.append(step)
        elif is_stage(ctx, members, step, limit):
            assert isinstance(step, Launch)
            run.append(step)
        else:
            close()
            out.append(step)
    close()
    return out


def copy_stage(ctx: LoweringContext, step: CopyBytes) -> Launch:
    """A copy the host would enqueue (copy insertion's, of loop state) as a kernel of one
    work-item a byte, which a stage can be: a scan body's kernels and the copy of its counter
    after them are one launch instead of a launch and a copy command (each ~5-10 us on
    PoCL)."""
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


def _chunks(run: list[Launch]) -> list[list[Launch]]:
    """``run`` cut into chains of at most ``_MAX_STAGES`` that repeat where the run repeats
    (a network's layers): a chunk starting where the run turns periodic covers whole periods,
    and one before that ends there, so the layers' chains have one text, built once."""
    keys = [(step.kernel, len(step.global_size)) for step in run]
    out = []
    i = 0
    while i < len(run):
        length = _periodic_length(keys, i) or next(
            (j - i for j in range(i + 1, min(i + _MAX_STAGES, len(run)))
             if _periodic_length(keys, j)), _MAX_STAGES)
        out.append(run[i:i + length])
        i += length
    return out


def _within_arguments(chunk: list[Launch]) -> list[list[Launch]]:
    """``chunk`` cut where its chain's arguments would pass ``MAX_PARAMETER_BYTES``: 16 bytes
    a distinct buffer (and the block's), 4 the work bound."""
    pieces: list[list[Launch]] = [[]]
    seen: set[int] = set()
    for step in chunk:
        new = {ref.allocation for ref in step.buffers} - seen
        if pieces[-1] and not fits_arguments(len(seen) + len(new)):
            pieces.append([])
            seen = set()
            new = {ref.allocation for ref in step.buffers}
        pieces[-1].append(step)
        seen |= new
    return pieces


def fits_arguments(buffers: int) -> bool:
    """Whether a one-work-group kernel of ``buffers`` distinct buffers keeps within
    ``MAX_PARAMETER_BYTES``: 16 bytes a buffer and its block's, 4 the work bound."""
    return 16 * (buffers + 1) + 4 <= MAX_PARAMETER_BYTES


def _periodic_length(keys: list[tuple], i: int) -> int:
    """The longest chunk from ``i`` made of whole repeats of a period that repeats at least
    twice, covering at least ``_MIN_PERIODIC`` stages (0: none): two equal kernels in a row
    are not yet a pattern."""
    best = 0
    for p in range(1, min(_MAX_STAGES, (len(keys) - i) // 2) + 1):
        fit = _MAX_STAGES // p          # whole periods a chain holds
        repeats = 1
        while repeats < max(fit, 2) \
                and keys[i + repeats * p:i + (repeats + 1) * p] == keys[i:i + p]:
            repeats += 1
        length = p * min(repeats, fit)
        if repeats >= 2 and length >= _MIN_PERIODIC and length > best:
            best = length
    return best


def is_stage(ctx: LoweringContext, members: dict[str, HloInstruction], step: Step,
              limit: int) -> bool:
    """Whether ``step`` is a launch of ``comp``'s whose kernel may run as a stage and gains
    nothing from more than one core: cheap, or one work-group anyway."""
    if not isinstance(step, Launch):
        return False
    names = step.instruction.split("+")
    insts = [inst for name in names if (inst := members.get(name)) is not None]
    if len(insts) != len(names):
        return False
    groups = math.prod(g // w for g, w in zip(step.global_size, step.local_size))
    if groups > 1 and sum(kernel_work(inst) for inst in insts) > limit:
        return False
    text = ctx.program.kernel_text(step.kernel)
    return not any(word in text for word in WORK_GROUP_BOUND)


def _chained(ctx: LoweringContext, run: list[Launch]) -> Launch:
    """One launch running ``run``'s kernels as stages, in order."""
    stages = Stages(ctx)
    return stages.launch(stages.code(run), "+".join(step.instruction for step in run))


class Stages:
    """The text and arguments of kernels run as stages of one work-group's kernel: each
    stage's buffers become the kernel's (each distinct allocation once), its offsets, sizes
    and scalars slots of the block (``_load``)."""

    def __init__(self, ctx: LoweringContext) -> None:
        self.ctx = ctx
        self.bases: dict[int, int] = {}           # allocation -> its buffer argument
        self.slots: list[bytes] = []

    def buffer(self, ref: BufferRef) -> tuple[str, str]:
        """The argument expressions (base, offset) of ``ref`` inside the kernel."""
        j = self.bases.setdefault(ref.allocation, len(self.bases))
        self.slots.append(np.uint64(ref.offset).tobytes())
        return f"ch_b{j}", _load("ulong", len(self.slots) - 1)

    def code(self, run: list[Launch], guard: str = "") -> list[str]:
        """``run``'s stages in order, a barrier between consecutive ones; with ``guard`` (a
        condition every work-item evaluates alike) each stage does its work only where it
        holds, while the barriers stay unconditional (PoCL duplicates the code after a
        barrier under a branch: nested conditionals took minutes to build)."""
        program = self.ctx.program
        body: list[str] = []
        for k, step in enumerate(run):
            params = program.kernel_params(step.kernel)
            assert len(params) == 2 * len(step.buffers) + len(step.scalars), (step.kernel, params)
            first = len(self.slots)
            g0, g1 = (*step.global_size[:2], 1, 1)[:2]
            values: list[np.generic] = [np.int32(math.prod(step.global_size)), np.int32(g0),
                                        np.int32(g1)]
            self.slots.extend(np.asarray(v).tobytes() for v in values)
            args: list[str] = []
            for ref in step.buffers:
                args.extend(self.buffer(ref))
            for param, value in zip(params[2 * len(step.buffers):], step.scalars):
                kind = param.rpartition(" ")[0]
                assert np.dtype(type(value)) == SCALAR_DTYPES[kind], (step.kernel, param, value)
                args.append(_load(kind, len(self.slots)))
                self.slots.append(np.asarray(value).tobytes())
            ids = {1: "i, 0, 0", 2: "i % g0, i / g0, 0",
                   3: "i % g0, (i / g0) % g1, i / (g0 * g1)"}[len(step.global_size)]
            function = program.add_function(step.kernel)
            if k:
                body.append("  barrier(CLK_GLOBAL_MEM_FENCE);")
            body += ["  {",
                     f"    const long n = {_load('int', first)}, g0 = {_load('int', first + 1)}, "
                     f"g1 = {_load('int', first + 2)};",
                     # uniform loop bounds: PoCL miscompiled a loop started at the local id
                     "    for (long c = 0; c < n; c += ch_items) {",
                     "      const long i = c + ch_lid;",
                     f"      if ({guard}i < n) {function}({', '.join(args)}, {ids});",
                     "    }", "  }"]
        return body

    def launch(self, body: list[str], instruction: str) -> Launch:
        """One launch of one work-group running ``body``."""
        program = self.ctx.program
        block = program.embed_bytes(b"".join(slot.ljust(_SLOT, b"\0") for slot in self.slots))
        params = [f"__global uchar* ch_b{j}, ulong ch_b{j}_off" for j in range(len(self.bases))]
        lines = ["__kernel void __KERNEL__(" + ", ".join(
                     [*params, "__global uchar* ch_blk_base, ulong ch_blk_off", "int ch_count"])
                 + ") {",
                 "  if (ch_count == 0) return;",
                 "  __global const uchar* ch_blk = ch_blk_base + ch_blk_off;",
                 "  const long ch_lid = get_local_id(0), ch_items = get_local_size(0);",
                 *body, "}"]
        name = program.add_text("\n".join(lines), instruction.split("+"))
        buffers = tuple(BufferRef(allocation, 0) for allocation in self.bases) + (block,)
        items = self.ctx.target.chain_local_size
        return Launch(name, buffers, (np.int32(1),), (items,), (items,), instruction)


def _load(kind: str, slot: int) -> str:
    return f"*(__global const {kind}*)(ch_blk + {slot * _SLOT})"
