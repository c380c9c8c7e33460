"""The fusion pass's cost model: the bytes a fusion saves against the work it duplicates.

Fusing a producer into its consumer's kernel saves the producer's result one trip through
memory (written by one kernel, read back by the next) and a kernel launch. It is free when the
fused kernel evaluates each element of the producer once. It costs work when the kernel
evaluates an element several times: a broadcast reads one element for many outputs, and a row
kernel (``analysis.rows``) computes its reductions once per row, so rows that share a
reduction's output recompute it.

Work is counted in element operations. Most ops cost a constant per output element (data
movement 0, arithmetic 1, transcendental ``EXPENSIVE_OP``). *Operand-bound* ops cost what
they read per output element, which grows with their operand rather than their output: a
reduce its reduced elements, a dot its contracting size, a convolution its kernel window times
input features, a reduce-window its window, a sort its sort dimension... For those the rule is
absolute: an operand-bound value is never evaluated more than once per element of its own
output, whatever the bytes saved (a batch-norm gradient summed over N*H*W and broadcast back
would otherwise re-sum N*H*W values for each of its N*H*W*C outputs). For the others the
model compares ``duplicated work * OP_COST`` with ``bytes saved * BYTE_COST``.

Duplicating a cheap value into a kernel (its other users keep the original) must not make the
program move more bytes or hold more live: the copy reads, instead of the value, the *sources*
its cheap cone starts from (``recompute_sources``), and keeps each of them live until that
kernel runs. ``duplicate_reads_no_more`` allows the copy when the full-size sources the kernel
does not read already add up to no more bytes than the value it replaces (smaller sources come
in through broadcasts, like XLA's "effectively unary" operands). A GELU built from erf's
polynomial goes back to one matrix product however many of its intermediates the backward pass
reads; a residual stream (each layer adds its output to the running sum) goes back to every
earlier layer's output, and stays materialised.

``reduction_evaluations`` applies the same counting to a fused module, as the code generator
will run it: how many times each reduction computes each of its outputs (1 when nothing is
recomputed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from .rows import is_expensive, plan_rows, reused_members
from ..hlo.attributes import ConvDimensionNumbers, Window
from ..hlo.ir import HloComputation, HloInstruction
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ArrayShape, Shape

EXPENSIVE_OP = 16       # element operations per transcendental (exp, tanh, ...) evaluation
OP_COST = 1.0           # relative cost of one element operation ...
BYTE_COST = 1.0         # ... and of one byte moved to or from memory
LAUNCH_BYTES = 4096     # a kernel launch, in bytes moved (what merging two kernels saves)
SERIAL_WORK = 4096      # element operations one work-item may do alone (a row kernel with
                        # fewer rows than the target wants runs them serially)


def _work_reduce(inst: HloInstruction) -> float:
    n = len(inst.operands) // 2
    return n * _ratio(inst.operands[0].shape, inst.shape)


def _work_dot(inst: HloInstruction) -> float:
    lhs = inst.operands[0].array_shape
    return float(math.prod(lhs.dims[d] for d in inst.ints_attr("lhs_contracting_dims")))


def _work_convolution(inst: HloInstruction) -> float:
    kernel, out = inst.operands[1].shape, inst.array_shape
    labels = inst.optional_attr("dim_labels", ConvDimensionNumbers)
    features = out.dims[labels.output_feature] if labels is not None else 1
    return _count(kernel) / max(features, 1)


def _work_window(inst: HloInstruction) -> float:
    window = inst.optional_attr("window", Window)
    return float(math.prod(w.size for w in window.dims)) if window is not None else 1.0


def _work_sort(inst: HloInstruction) -> float:
    dims = _first_dims(inst.shape)
    d = inst.ints_attr("dimensions", (len(dims) - 1,))
    n = dims[d[0]] if dims else 1
    return len(inst.operands) * max(math.log2(max(n, 2)), 1.0)


def _work_scatter(inst: HloInstruction) -> float:
    n = (len(inst.operands) - 1) // 2
    return 1.0 + n * _ratio(inst.operands[-1].shape, inst.shape)


# Operand-bound ops: work per output element grows with what each element reads. Adding an op
# here is adding a row: the rule that it is never recomputed follows.
OPERAND_BOUND: dict[Opcode, Callable[[HloInstruction], float]] = {
    Opcode.REDUCE: _work_reduce,
    Opcode.DOT: _work_dot,
    Opcode.CONVOLUTION: _work_convolution,
    Opcode.REDUCE_WINDOW: _work_window,
    Opcode.SELECT_AND_SCATTER: _work_window,
    Opcode.SORT: _work_sort,
    Opcode.SCATTER: _work_scatter,
    Opcode.GATHER: lambda inst: 1.0,
    Opcode.MAP: lambda inst: float(len(inst.to_apply.instructions)),
}


def is_operand_bound(inst: HloInstruction) -> bool:
    return inst.opcode in OPERAND_BOUND


def work_per_element(inst: HloInstruction) -> float:
    """Element operations to compute one element of ``inst`` from its operands."""
    if inst.opcode in OPERAND_BOUND:
        return OPERAND_BOUND[inst.opcode](inst)
    if is_expensive(inst):
        return float(EXPENSIVE_OP)
    if OPCODES[inst.opcode].elementwise:
        return 1.0
    return 0.0


@dataclass(frozen=True)
class KernelCost:
    """A kernel's bytes read from and written to memory, and its element operations."""

    bytes: float
    operations: float


def kernel_cost(inst: HloInstruction) -> KernelCost:
    """What a kernel computing ``inst`` moves and computes: every element computed
    (``work_per_element``, at least one operation each), every byte read from memory and every
    result byte written. An in-place update (``dynamic-update-slice``, ``scatter``) computes
    its update's elements and leaves the rest of the buffer it writes into alone."""
    fused = inst.opcode == Opcode.FUSION
    members = inst.calls.instructions if fused else [inst]
    root = inst.calls.root_instruction if fused else inst
    untouched = {id(m.operands[updates[0]]) for m in members
                 if (updates := OPCODES[m.opcode].updates) is not None}
    reads = [m for m in members if m.opcode == Opcode.PARAMETER] if fused else inst.operands
    moved = float(sum(_bytes(r.shape) for r in reads if id(r) not in untouched))
    operations = 0.0
    for m in members:
        updates = OPCODES[m.opcode].updates
        if updates is not None:
            operations += _count(m.operands[updates[1]].shape)
        elif m.opcode != Opcode.PARAMETER:
            operations += _count(m.shape) * max(work_per_element(m), 1.0)
    updates = OPCODES[root.opcode].updates
    written = root if updates is None else root.operands[updates[1]]
    return KernelCost(moved + _bytes(written.shape), operations)


def kernel_work(inst: HloInstruction) -> float:
    """What a kernel computing ``inst`` costs, in the fusion model's units (``kernel_cost``
    weighed by ``BYTE_COST`` and ``OP_COST``): what tells a kernel of microseconds from a
    longer one (``codegen.launch_chaining``)."""
    cost = kernel_cost(inst)
    return cost.bytes * BYTE_COST + cost.operations * OP_COST


@dataclass(frozen=True)
class FusionCost:
    """What a fusion decision trades: bytes no longer moved against element operations
    computed again; ``recomputes_operand_bound`` names an operand-bound value evaluated more
    than once per element (never allowed)."""

    bytes_saved: float
    work_duplicated: float
    recomputes_operand_bound: HloInstruction | None = None
    work_serialised: float = 0.0    # done by too few work-items to keep the device busy

    @property
    def pays(self) -> bool:
        return (self.recomputes_operand_bound is None and self.work_serialised <= SERIAL_WORK
                and self.work_duplicated * OP_COST <= self.bytes_saved * BYTE_COST)


def may_evaluate_repeatedly(producer: HloInstruction) -> bool:
    """Whether ``producer`` may be fused where the kernel reads each of its elements many times
    (through a broadcast, a window, a gather's source or its indices): only when an evaluation
    is cheap."""
    return not is_operand_bound(producer) and work_per_element(producer) < EXPENSIVE_OP


def row_merge_cost(root: HloInstruction, members: Collection[HloInstruction],
                   rows: int, merged: HloInstruction, min_rows: int) -> FusionCost:
    """The cost of a row kernel over ``rows`` rows computing ``members`` (rooted at ``root``)
    after the producer group rooted at ``merged`` joined it: every value the row plan computes
    once per row (each reduction, each expensive value read many times) is computed ``rows``
    times, against the number of distinct elements it has. With fewer than ``min_rows`` rows
    the whole kernel's work (those values, and every other member once per output element) is
    serialised: allowed only when small (a scalar epilogue fused into a short reduction)."""
    member_set = set(members)
    reused = reused_members(root, member_set)
    duplicated = 0.0
    total = 0.0
    bad = None
    for m in member_set:
        if not (m.opcode == Opcode.REDUCE or (m in reused and is_expensive(m))):
            total += _count(root.shape) * max(work_per_element(m), 1.0)   # per output
            continue
        total += rows * work_per_element(m)
        extra = rows - _count(m.shape)
        if extra <= 0:
            continue
        if is_operand_bound(m) and bad is None:
            bad = m
        duplicated += extra * work_per_element(m)
    saved = 2 * _bytes(merged.shape) + LAUNCH_BYTES
    return FusionCost(saved, duplicated, bad, total if rows < min_rows else 0.0)


MAX_SOURCES = 32    # sources tracked per value; a cone reading more is never duplicated

Sources = dict[HloInstruction, frozenset[HloInstruction] | None]


def recompute_sources(order: Iterable[HloInstruction],
                      recomputable: Callable[[HloInstruction], bool]) -> Sources:
    """For each ``recomputable`` instruction of ``order`` (a post-order), the values a kernel
    reads to compute it afresh through recomputable instructions alone: the operands where its
    cone stops (None beyond ``MAX_SOURCES``). Constants and iotas read nothing."""
    sources: Sources = {}
    for inst in order:
        if not recomputable(inst):
            continue
        found: set[HloInstruction] | None = set()
        for op in inst.operands:
            below = sources.get(op) if recomputable(op) else frozenset((op,))
            if below is None or found is None:
                found = None
                break
            found |= below
            if len(found) > MAX_SOURCES:
                found = None
                break
        sources[inst] = frozenset(found) if found is not None else None
    return sources


def duplicate_reads_no_more(producer: HloInstruction,
                            sources: frozenset[HloInstruction] | None,
                            read: Collection[HloInstruction], materialized: bool = False) -> bool:
    """Whether a kernel that already reads (or computes) ``read`` may compute its own copy of
    ``producer`` from ``sources``: the full-size sources it would newly read, each kept live
    until it runs, come to no more bytes than ``producer``. Where ``producer`` is
    ``materialized`` anyway the copy saves no bytes, so it may keep nothing live that would
    otherwise die (parameters and constants live throughout): a ResNeXt block's pooled branch
    recomputing its ReLU from the grouped convolution's output kept that alive beside the
    ReLU (1.18x XLA's bytes)."""
    if sources is None:
        return False
    size = _count(producer.shape)
    new = [s for s in sources if s not in read and _count(s.shape) >= size]
    if materialized and any(s.opcode not in (Opcode.PARAMETER, Opcode.CONSTANT) for s in new):
        return False
    return sum(_bytes(s.shape) for s in new) <= _bytes(producer.shape)


def reduction_evaluations(computation: HloComputation) -> dict[HloInstruction, float]:
    """For each reduce of a fused computation, how many times the generated kernel computes
    each of its output elements: with a row plan, once per row (rows / the reduce's elements);
    without one, the root's loop evaluates it per root element (a reduce at the root once)."""
    root = computation.root_instruction
    members = computation.instructions
    reduces = [m for m in members if m.opcode == Opcode.REDUCE]
    if not reduces:
        return {}
    plan = plan_rows(root, members)
    out = _first_dims(root.shape)
    if plan is not None:
        rows = math.prod(out[d] for d in plan.row_dims)
        return {r: rows / max(_count(r.shape), 1) for r in reduces}
    total = math.prod(out)
    return {r: 1.0 if r is root else total / max(_count(r.shape), 1) for r in reduces}


def _first_dims(shape: Shape) -> tuple[int, ...]:
    if isinstance(shape, ArrayShape):
        return shape.dims
    first = next(iter(shape.leaves()), None)
    return first[1].dims if first is not None else ()


def _count(shape: Shape) -> int:
    return math.prod(_first_dims(shape))


def _ratio(operand: Shape, out: Shape) -> float:
    return _count(operand) / max(_count(out), 1)


def _bytes(shape: Shape) -> int:
    return sum(leaf.byte_size for _, leaf in shape.leaves())
