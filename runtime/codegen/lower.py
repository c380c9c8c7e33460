"""Lowering a buffer-assigned module to a plan: one rule per opcode family, in a registry.

The entry computation's schedule is walked in order; each instruction's lowering rule returns
the plan steps that compute it into its assigned slices. Instructions that only forward values
(tuple, get-tuple-element, parameter, bitcast onto the same bytes) produce no steps; control
flow becomes host steps over the callee computations' own schedules; everything else is a
kernel launch from a family (the generic loop kernel, or a dedicated family registered for
its opcode).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import HloUnsupportedError
from ..hlo.ir import HloComputation, HloInstruction
from ..hlo.shape import ArrayShape
from .kernel import BufferRef
from .plan import CopyBytes, HostConditional, HostWhile, Step
from .program import Program, ProgramBuilder


@dataclass
class LoweringContext:
    assignment: object          # runtime.buffers.assignment.BufferAssignment
    strategy: str               # "cpu" | "gpu"
    program: ProgramBuilder

    def ref(self, inst: HloInstruction, index: tuple[int, ...] = ()) -> BufferRef:
        s = self.assignment.slice(inst, index)  # type: ignore[attr-defined]
        return BufferRef(s.allocation, s.offset)

    def same_bytes(self, a: HloInstruction, b: HloInstruction) -> bool:
        return self.ref(a) == self.ref(b)

    def sequence(self, comp: HloComputation) -> list[HloInstruction]:
        return self.assignment.schedule.sequences[comp.name]  # type: ignore[attr-defined]

    def lower_computation(self, comp: HloComputation) -> list[Step]:
        steps: list[Step] = []
        for inst in self.sequence(comp):
            rule = LOWERING.get(inst.opcode, _lower_loop)
            steps.extend(rule(self, inst))
        return steps


LoweringRule = Callable[[LoweringContext, HloInstruction], list[Step]]
LOWERING: dict[str, LoweringRule] = {}
FUSION_ROOTS: dict[str, LoweringRule] = {}   # fusions whose root needs a dedicated family

# Fusion strategies that look at a fusion's whole structure (not just its root) and either
# lower it (returning steps) or decline (returning None); tried in order before FUSION_ROOTS.
FusionStrategy = Callable[[LoweringContext, HloInstruction], "list[Step] | None"]
FUSION_STRATEGIES: list[FusionStrategy] = []


def register(*opcodes: str, fusion_root: bool = False):
    """Register a lowering rule (used by the kernel-family modules); with ``fusion_root`` the
    rule also lowers fusions whose fused computation has that root."""
    def deco(fn: LoweringRule) -> LoweringRule:
        for op in opcodes:
            LOWERING[op] = fn
            if fusion_root:
                FUSION_ROOTS[op] = fn
        return fn
    return deco


def _lower_loop(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    from .loop import lower_loop
    return lower_loop(ctx, inst)


@register("parameter", "constant", "get-tuple-element", "tuple", "after-all",
          "add-dependency", "opt-barrier", "domain")
def _forwarding(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    return []


@register("bitcast")
def _bitcast(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    if ctx.same_bytes(inst, inst.operands[0]):
        return []
    return _lower_loop(ctx, inst)


@register("copy")
def _copy(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    src = inst.operands[0]
    if inst.shape.is_tuple:
        return []       # a shallow copy defines only the tuple table, which holds no data here
    assert isinstance(inst.shape, ArrayShape) and isinstance(src.shape, ArrayShape)
    if inst.shape.minor_to_major == src.shape.minor_to_major or inst.shape.rank <= 1:
        if ctx.same_bytes(inst, src) or inst.shape.byte_size == 0:
            return []
        return [CopyBytes(ctx.ref(src), ctx.ref(inst), inst.shape.byte_size, inst.name)]
    return _lower_loop(ctx, inst)


@register("call")
def _call(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    return ctx.lower_computation(inst.attrs["to_apply"])  # type: ignore[arg-type]


@register("while")
def _while(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    cond: HloComputation = inst.attrs["condition"]  # type: ignore[assignment]
    body: HloComputation = inst.attrs["body"]  # type: ignore[assignment]
    return [HostWhile(condition=ctx.lower_computation(cond), predicate=ctx.ref(cond.root),
                      body=ctx.lower_computation(body), instruction=inst.name)]


@register("conditional")
def _conditional(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    if "branch_computations" in inst.attrs:
        branches = list(inst.attrs["branch_computations"])  # type: ignore[arg-type]
        is_pred = False
    else:
        branches = [inst.attrs["true_computation"], inst.attrs["false_computation"]]
        is_pred = True
    return [HostConditional(selector=ctx.ref(inst.operands[0]), selector_is_pred=is_pred,
                            branches=[ctx.lower_computation(b) for b in branches],
                            instruction=inst.name)]


def _unsupported(reason: str) -> LoweringRule:
    def rule(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
        raise HloUnsupportedError(f"{inst.opcode} {inst.name}: {reason}", instruction=inst.name,
                                  location=inst.location)
    return rule


for _op in ("infeed", "outfeed", "send", "send-done", "recv", "recv-done"):
    LOWERING[_op] = _unsupported("host I/O channels do not exist on this single-device runtime")
for _op in ("all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
            "collective-permute-start", "collective-permute-done", "async-start",
            "async-update", "async-done", "copy-start", "copy-done", "ragged-all-to-all",
            "collective-broadcast", "all-to-all", "collective-permute", "reduce-scatter",
            "all-gather", "all-reduce"):
    LOWERING[_op] = _unsupported("asynchronous and collective operations are not supported; "
                                 "print the module before XLA's SPMD/async passes")
_EXPANDED_BY_XLA = ("XLA rewrites it into simpler HLO before code generation; print the "
                    "module after XLA's optimisation passes (compiled.as_text()) to run it")
_NOT_IMPLEMENTED = {
    "fft": "FFTs are not implemented by the OpenCL backend (XLA's CPU backend calls a "
           "library for them)",
    "cholesky": "JAX lowers it to the lapack_?potrf_ffi custom call on CPU, which this "
                "runtime implements; use that form",
    "triangular-solve": "JAX lowers it to the lapack_?trsm_ffi custom call on CPU, which this "
                        "runtime implements; use that form",
    "batch-norm-training": _EXPANDED_BY_XLA, "batch-norm-inference": _EXPANDED_BY_XLA,
    "batch-norm-grad": _EXPANDED_BY_XLA, "stochastic-convert": _EXPANDED_BY_XLA,
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
for _op, _reason in _NOT_IMPLEMENTED.items():
    LOWERING.setdefault(_op, _unsupported(_reason))


def lower(assignment, strategy: str = "cpu", alignment: int = 128) -> Program:
    """Plan and OpenCL source for a buffer-assigned module."""
    from . import families  # noqa: F401  (registers the dedicated kernel families)
    builder = ProgramBuilder(alignment)
    ctx = LoweringContext(assignment, strategy, builder)
    entry = assignment.module.entry
    plan = ctx.lower_computation(entry)
    return builder.finish(plan)
