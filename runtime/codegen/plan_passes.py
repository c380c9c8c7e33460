"""The steps after lowering, as one list: what happens to a plan between the kernel families'
launches and the program that runs (the codegen counterpart of ``pipeline.py``).

Two scopes. ``EACH_COMPUTATION`` passes rewrite one computation's steps as it is lowered (the
entry, every while body and every conditional branch; a while condition keeps its steps as
lowered), because they need the computation's instructions to tell which launches touch
which buffers. ``WHOLE_PLAN`` passes run once on the entry's finished plan and recurse into
loops and branches themselves. Order matters: copies are batched after launches chain (a
chain takes the small copies among its launches; runs of copies alone are batched), and
predication comes last because it guards whole loops and branches as the earlier passes
left them.

Device loops are not a pass here: whether a ``while`` runs as one looping launch
(``device_loops``) is the while rule's first choice, made before its body's kernels are
built, since a body lowered for the host would add kernels to the program for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable

from ..hlo.ir import HloComputation
from .context import LoweringContext
from .copy_batching import batch_copies
from .launch_chaining import chain_launches
from .launch_merging import merge_launches
from .plan import Step
from .predication import predicate


class PlanScope(Enum):
    EACH_COMPUTATION = "each computation"
    WHOLE_PLAN = "whole plan"


@dataclass(frozen=True)
class PlanPass:
    name: str
    scope: PlanScope
    run: Callable[[LoweringContext, HloComputation, list[Step]], list[Step]]


PLAN_PASSES: tuple[PlanPass, ...] = (
    # independent consecutive launches of one kernel text become one launch
    PlanPass("merge-launches", PlanScope.EACH_COMPUTATION, merge_launches),
    # consecutive small launches become one work-group's launch (CPUs)
    PlanPass("chain-launches", PlanScope.EACH_COMPUTATION, chain_launches),
    # runs of small byte copies become one launch
    PlanPass("batch-copies", PlanScope.WHOLE_PLAN,
             lambda ctx, comp, steps: batch_copies(ctx, steps)),
    # data-dependent branches and loops decided on the device where reading back costs more
    PlanPass("predicate", PlanScope.WHOLE_PLAN, lambda ctx, comp, steps: predicate(ctx, steps)),
)


def without(name: str) -> tuple[PlanPass, ...]:
    """``PLAN_PASSES`` less the pass called ``name`` (tests compare plans with and without)."""
    if name not in {p.name for p in PLAN_PASSES}:
        raise ValueError(f"no plan pass {name!r}")
    return tuple(p for p in PLAN_PASSES if p.name != name)


def lowered_steps(ctx: LoweringContext, comp: HloComputation) -> list[Step]:
    """``comp`` lowered, then rewritten by every ``EACH_COMPUTATION`` pass in order."""
    steps = ctx.lower_computation(comp)
    for plan_pass in PLAN_PASSES:
        if plan_pass.scope is PlanScope.EACH_COMPUTATION:
            steps = plan_pass.run(ctx, comp, steps)
    return steps


def finished_plan(ctx: LoweringContext, entry: HloComputation) -> list[Step]:
    """The entry's plan: its lowered steps, then every ``WHOLE_PLAN`` pass in order."""
    steps = lowered_steps(ctx, entry)
    for plan_pass in PLAN_PASSES:
        if plan_pass.scope is PlanScope.WHOLE_PLAN:
            steps = plan_pass.run(ctx, entry, steps)
    return steps
