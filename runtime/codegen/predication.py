"""Control flow decided on the device: branches and loop iterations whose kernels test their
selector themselves, so the host reads nothing back or reads it back less often.

A conditional whose selector the device computes, and a while loop whose condition it
computes, were host steps that read the selector (or predicate) back. A read drains the
queue: the device idles from the read until the host has enqueued the next kernel, about
40 µs on PoCL against 5 µs a launch. In a loop (a ``lax.cond`` inside a ``scan``, a
Newton iteration or a Collatz count in a ``while_loop``) that was paid every iteration, and
such programs ran 20-60x XLA's time.

A *guard* is a test at the top of a kernel (``ProgramBuilder.add_guarded``): read the
selector and return unless it selects this launch. Every work-item returns before its first
barrier, so a launch whose guard fails touches nothing. Then:

- a conditional whose branches are only launches, small copies (``copy_batching``) and such
  conditionals enqueues every branch, each launch guarded by its branch number, and reads
  nothing back, where the launches of the branches not taken cost less than a read:
  at most ``MAX_UNTAKEN`` of them;
- a while loop whose condition is computed by kernels and enqueues no host step, and whose
  body is such a region, runs condition and guarded body ``k`` times between two reads of
  the predicate (``Executable._speculate``): once false it stays false (the state no longer
  changes, so the condition recomputes false), and iterations past the end do nothing;
  ``k`` grows to ``CHUNK_LAUNCHES`` launches' worth of iterations, where that is two or more.

Liveness keeps a selector live through its branches and a condition's result through the
body (``analysis.liveness``), so nothing a guard protects overwrites what the guard reads; a
loop whose condition only forwards a state element the body replaces is not speculated.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..hlo.ir import HloInstruction
from .context import LoweringContext
from .copy_batching import SMALL, copy_chain
from .kernel import BufferRef
from .plan import CopyBytes, HostConditional, HostWhile, Launch, Step

MAX_UNTAKEN = 8
CHUNK_LAUNCHES = 32


@dataclass(frozen=True)
class _Guard:
    selector: BufferRef
    pred: bool
    want: int
    count: int


def predicate(ctx: LoweringContext, steps: list[Step]) -> list[Step]:
    """``steps`` with the conditionals and while loops that qualify decided on the device,
    inner ones first."""
    insts = {i.name: i for c in ctx.assignment.module.computations for i in c.instructions}
    return _walk(ctx, insts, steps)


def _walk(ctx: LoweringContext, insts: dict[str, HloInstruction],
          steps: list[Step]) -> list[Step]:
    out: list[Step] = []
    for step in steps:
        if isinstance(step, HostWhile):
            step = _speculated(ctx, insts[step.instruction],
                               replace(step, condition=_walk(ctx, insts, step.condition),
                                       body=_walk(ctx, insts, step.body)))
        elif isinstance(step, HostConditional):
            step = replace(step, branches=[_walk(ctx, insts, b) for b in step.branches])
            if step.selected is None:
                step = _predicated(ctx, step)
        out.append(step)
    return out


def _predicated(ctx: LoweringContext, step: HostConditional) -> HostConditional:
    if not all(_guardable(b) for b in step.branches):
        return step
    counts = [_launches(b) for b in step.branches]
    if sum(counts) - min(counts) > MAX_UNTAKEN:
        return step
    n = len(step.branches)
    branches = [_guarded(ctx, b, _Guard(step.selector, step.selector_is_pred,
                                        int(k == 0) if step.selector_is_pred else k, n))
                for k, b in enumerate(step.branches)]
    return replace(step, branches=branches, predicated=True)


def _speculated(ctx: LoweringContext, inst: HloInstruction, step: HostWhile) -> HostWhile:
    if step.counter_values is not None or not _kept_through_body(ctx, inst) \
            or not _guardable(step.body) or not all(_on_device(s) for s in step.condition):
        return step
    chunk = CHUNK_LAUNCHES // max(1, _launches(step.condition) + _launches(step.body))
    if chunk < 2:
        return step
    body = _guarded(ctx, step.body, _Guard(step.predicate, True, 1, 1))
    return replace(step, body=body, chunk=chunk)


def _kept_through_body(ctx: LoweringContext, loop: HloInstruction) -> bool:
    """Whether the condition's result lives until the body ends (``analysis.liveness`` keeps
    a result the condition computes; a state element it forwards the body may overwrite)."""
    assignment = ctx.assignment
    value = assignment.dataflow.value_at(loop.condition.root_instruction)
    return assignment.liveness[value].end >= assignment.schedule.spans[loop.body][1]


def _on_device(step: Step) -> bool:
    """Whether ``step`` runs without the host reading anything back."""
    return isinstance(step, (Launch, CopyBytes)) or (
        isinstance(step, HostConditional) and step.predicated)


def _guardable(steps: list[Step]) -> bool:
    return all(isinstance(s, Launch) or (isinstance(s, CopyBytes) and s.nbytes <= SMALL)
               or (isinstance(s, HostConditional) and s.predicated) for s in steps)


def _launches(steps: list[Step]) -> int:
    n = 0
    for s in steps:
        if isinstance(s, HostConditional):
            n += sum(_launches(b) for b in s.branches)
        else:
            n += 1
    return n


def _guarded(ctx: LoweringContext, steps: list[Step], guard: _Guard) -> list[Step]:
    out: list[Step] = []
    for step in steps:
        if isinstance(step, HostConditional):
            out.append(replace(step, branches=[_guarded(ctx, b, guard)
                                               for b in step.branches]))
            continue
        if isinstance(step, CopyBytes):
            if not step.nbytes:
                continue
            step = copy_chain(ctx, [step])
        assert isinstance(step, Launch)
        kernel = ctx.program.add_guarded(step.kernel, len(step.buffers), guard.pred,
                                         step.instruction.split("+"))
        extra = (np.int32(guard.want),) + (() if guard.pred else (np.int32(guard.count),))
        out.append(replace(step, kernel=kernel, buffers=(*step.buffers, guard.selector),
                           scalars=(*step.scalars, *extra)))
    return out
