"""Lowerings that launch no kernel of their own: forwarding, byte copies, control flow as
host steps, and the opcodes this backend does not lower, each with its reason.

A bitcast onto other bytes and a layout-changing copy decline (None), so the loop kernel
(the registry's ``ANY`` rule) moves them.
"""

from __future__ import annotations

from typing import Callable

from ...analysis.trip_count import counter_values, selector_values
from ...errors import HloUnsupportedError
from ...hlo.ir import HloComputation, HloInstruction
from ...hlo.opcodes import OPCODES
from ...hlo.shape import ArrayShape
from ..context import LoweringContext
from ..device_loops import device_loop
from ..plan import CopyBytes, HostConditional, HostWhile, NestedLoop, Step
from ..plan_passes import lowered_steps
from ..registry import add, register


@register("parameter", "constant", "get-tuple-element", "tuple", "after-all",
          "add-dependency", "opt-barrier", "domain", packed=True)
def _forwarding(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    return []


@register("bitcast", packed=True)
def _bitcast(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    return [] if ctx.same_bytes(inst, inst.operands[0]) else None


@register("copy", packed=True)
def _copy(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    src = inst.operands[0]
    if inst.shape.is_tuple:
        return []       # a shallow copy defines only the tuple table, which holds no data here
    assert isinstance(inst.shape, ArrayShape) and isinstance(src.shape, ArrayShape)
    if inst.shape.minor_to_major == src.shape.minor_to_major or inst.shape.rank <= 1:
        if ctx.same_bytes(inst, src) or inst.shape.byte_size == 0:
            return []
        return [CopyBytes(ctx.ref(src), ctx.ref(inst), inst.shape.byte_size, inst.name)]
    return None


@register("call", packed=True)
def _call(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    return ctx.lower_computation(inst.to_apply)


@register("while", packed=True)
def _while(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    if ctx.deferring_loops:
        return [NestedLoop(inst)]
    looped = device_loop(ctx, inst)
    if looped is not None:
        return [looped]
    cond: HloComputation = inst.condition
    body: HloComputation = inst.body
    steps = lowered_steps(ctx, body)
    values = counter_values(inst)
    if values is not None:
        members = {i.name: i for i in body.instructions}
        for step in steps:
            if isinstance(step, HostConditional) and step.instruction in members:
                step.selected = selector_values(inst, members[step.instruction].operands[0],
                                                len(values))
    return [HostWhile(condition=ctx.lower_computation(cond), predicate=ctx.ref(cond.root_instruction),
                      body=steps, instruction=inst.name, counter_values=values)]


@register("conditional", packed=True)
def _conditional(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    if "branch_computations" in inst.attrs:
        branches = list(inst.branch_computations)
        is_pred = False
    else:
        branches = [inst.true_computation, inst.false_computation]
        is_pred = True
    return [HostConditional(selector=ctx.ref(inst.operands[0]), selector_is_pred=is_pred,
                            branches=[lowered_steps(ctx, b) for b in branches],
                            instruction=inst.name)]


def _unsupported(reason: str) -> Callable:
    def rule(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
        raise HloUnsupportedError(f"{inst.opcode} {inst.name}: {reason}", instruction=inst.name,
                                  location=inst.location)
    return rule


_HOST_IO = "host I/O channels do not exist on this single-device runtime"
_COLLECTIVE = ("asynchronous and collective operations are not supported; print the module "
               "before XLA's SPMD/async passes")
_ONE_DEVICE = ("a one-device collective is rewritten to copies or constants before code "
               "generation (passes/one_device_collectives), and this one was not")
_EXPANDED_BY_XLA = ("XLA rewrites it into simpler HLO before code generation; print the "
                    "module after XLA's optimisation passes (compiled.as_text()) to run it")
# opcode -> why this backend does not lower it (the exhaustiveness test reads this table)
UNSUPPORTED: dict[str, str] = {
    **dict.fromkeys(("infeed", "outfeed", "send", "send-done", "recv", "recv-done"), _HOST_IO),
    **dict.fromkeys(("async-start", "async-update", "async-done", "copy-start", "copy-done",
                     "ragged-all-to-all"), _COLLECTIVE),
    **{name: _ONE_DEVICE for name, spec in OPCODES.items() if spec.one_device is not None},
    "fft": "kernels never see FFTs: the complex lowering pass writes them as dots against DFT "
           "matrices (passes/fft_lowering), and this one was not rewritten",
    "cholesky": "JAX lowers it to the lapack_?potrf_ffi custom call on CPU, which this "
                "runtime implements; use that form",
    "triangular-solve": "JAX lowers it to the lapack_?trsm_ffi custom call on CPU, which this "
                        "runtime implements; use that form",
    "batch-norm-training": _EXPANDED_BY_XLA, "batch-norm-inference": _EXPANDED_BY_XLA,
    "batch-norm-grad": _EXPANDED_BY_XLA,
    "stochastic-convert": "kernels never see it: passes/stochastic_convert writes it as XLA's "
                          "decomposition, and this one was not rewritten",
    "rng": "its random stream is implementation-defined; use rng-bit-generator (or JAX's "
           "threefry, which is plain integer HLO)",
    "rng-get-and-update-state": "module-level rng state is not supported; use "
                                "rng-bit-generator with an explicit state",
    "dynamic-reshape": "dynamic shapes are not supported",
    "get-dimension-size": "dynamic shapes are not supported",
    "set-dimension-size": "dynamic shapes are not supported",
    "ragged-dot": "ragged and scaled dots are not implemented",
    "scaled-dot": "ragged and scaled dots are not implemented",
}
for _op, _reason in UNSUPPORTED.items():
    add(_op, _unsupported(_reason), packed=True)
