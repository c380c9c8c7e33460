"""A few of XLA's algebraic simplifications: the ones that matter before fusion.

JAX writes ``broadcast_in_dim`` as a reshape that adds a size-1 dimension, an identity
broadcast and another reshape, around every per-row value of a normalisation. Left alone,
each reshape costs integer divisions per element of a fused kernel and hides from the row
analysis that the value only depends on the row. These rewrites, applied operands first so
chains collapse in one walk, remove them:

* an identity reshape, broadcast, transpose, convert or copy (result shape == operand
  shape, layout included) is its operand: XLA's optimised text carries the copies its own
  copy insertion placed (a loop counter copied at the top of every iteration, each a launch
  here), and copy insertion adds back the ones this runtime's buffers need;
* convert(convert(y)) back to y's own type is y when the middle type holds every value of
  y's exactly (XLA's algebraic simplifier, ``dtypes.preserves_values``): XLA keeps a NaN's
  payload through f8e5m2 -> f16 -> f8e5m2, where converting would make it the canonical NaN;
* reshape(reshape(y)) is reshape(y); broadcast(broadcast(y)) is one broadcast;
* broadcast(reshape(y)), where the reshape only inserts or removes size-1 dimensions, is a
  broadcast of y; a broadcast that only adds size-1 dimensions is a reshape;
* a reduce over size-1 dimensions only, from its reducer's identity, is a reshape (XLA's
  algebraic simplifier): JAX sums a broadcast's size-1 dimension away in bias gradients,
  and the reduce would keep the sum that feeds it from being fused as a reduction;
* tuple(get-tuple-element(t, 0), ..., get-tuple-element(t, n-1)) is t (XLA's tuple
  simplifier): JAX rebuilds a loop's result this way, and the rebuilt tuple would get a
  pointer table of its own instead of sharing the loop state's.

Instructions with control dependencies are left alone. Rules live in ``RULES`` (opcode ->
rewrite); a rewrite returns the instruction that replaces its argument (the argument itself
when it was changed in place), or None when nothing applies.
"""

from __future__ import annotations

from typing import Callable

from ..hlo.clone import clone_module
from ..analysis.reducers import init_is_identity
from ..hlo.opcode_enum import Opcode
from ..target import CPU, Target
from ..hlo.ir import HloInstruction, HloModule
from ..hlo.dtypes import preserves_values
from ..hlo.shape import ArrayShape
from .dce import remove_dead_code


_MAX_REWRITES = 8     # rewrites of one instruction in a row (each one shrinks the chain)


def simplify(module: HloModule, target: Target = CPU) -> HloModule:
    new, _ = clone_module(module)
    simplify_in_place(new, target)
    return new


def simplify_in_place(module: HloModule, target: Target = CPU) -> None:
    for comp in module.computations:
        replacement: dict[HloInstruction, HloInstruction] = {}
        ordered = {p for inst in comp.instructions for p in inst.control_predecessors}
        for inst in comp.post_order():
            inst.operands = [replacement.get(op, op) for op in inst.operands]
            if inst.control_predecessors or inst in ordered:
                continue
            current = inst
            for _ in range(_MAX_REWRITES):
                rule = RULES.get(current.opcode)
                rewritten = rule(current) if rule is not None else None
                if rewritten is None:
                    break
                current = rewritten
            if current is not inst:
                replacement[inst] = current
        if comp.root in replacement:
            comp.root = replacement[comp.root]
    remove_dead_code(module)


def _same_shape(a: HloInstruction, b: HloInstruction) -> bool:
    """Same element type, dimensions and layout (so the bytes are the same too)."""
    return isinstance(a.shape, ArrayShape) and a.shape == b.shape


def _identity(inst: HloInstruction) -> HloInstruction | None:
    op = inst.operands[0]
    if not _same_shape(inst, op):
        return None
    if inst.opcode == Opcode.TRANSPOSE and tuple(inst.dimensions) != \
            tuple(range(inst.shape.rank)):
        return None
    if inst.opcode == Opcode.BROADCAST and inst.ints_attr("dimensions") != \
            tuple(range(inst.shape.rank)):
        return None
    return op


def _convert(inst: HloInstruction) -> HloInstruction | None:
    op = inst.operands[0]
    if op.opcode == Opcode.CONVERT and not op.control_predecessors:
        source = op.operands[0]
        if _same_shape(inst, source) and preserves_values(
                source.array_shape.element_type, op.array_shape.element_type):
            return source
    return _identity(inst)


def _reshape(inst: HloInstruction) -> HloInstruction | None:
    op = inst.operands[0]
    if op.opcode == Opcode.RESHAPE:
        inst.operands = [op.operands[0]]
        return _identity(inst) or inst
    return _identity(inst)


def _broadcast(inst: HloInstruction) -> HloInstruction | None:
    op = inst.operands[0]
    dims = inst.ints_attr("dimensions")
    if op.opcode == Opcode.BROADCAST:
        inner = op.ints_attr("dimensions")
        inst.operands = [op.operands[0]]
        inst.attrs["dimensions"] = tuple(dims[d] for d in inner)
        return inst
    if op.opcode == Opcode.RESHAPE:
        through = _through_size_one_reshape(op, dims, inst.array_shape.dims)
        if through is not None:
            inst.operands = [op.operands[0]]
            inst.attrs["dimensions"] = through
            return inst
    if inst.array_shape.element_count == op.array_shape.element_count and op.shape.rank:
        # only size-1 dimensions are added: it is a reshape, which composes with reshapes
        inst.opcode = Opcode.RESHAPE
        del inst.attrs["dimensions"]
        return inst
    return _identity(inst)


def _through_size_one_reshape(reshape: HloInstruction, dims: tuple[int, ...],
                              out_dims: tuple[int, ...]) -> tuple[int, ...] | None:
    """Broadcast dimensions for the reshape's operand, when the reshape only inserts or
    removes size-1 dimensions (None otherwise, or when no increasing assignment exists)."""
    src = reshape.operands[0].array_shape.dims
    mid = reshape.array_shape.dims
    if [n for n in src if n != 1] != [n for n in mid if n != 1]:
        return None
    big_targets = iter(dims[d] for d, n in enumerate(mid) if n != 1)
    wanted = [next(big_targets) if n != 1 else None for n in src]
    result: list[int] = []
    for k, target in enumerate(wanted):
        low = result[-1] + 1 if result else 0
        if target is None:
            high = next((t for t in wanted[k + 1:] if t is not None), len(out_dims))
            target = low if low < high else None
        if target is None or target < low:
            return None
        result.append(target)
    return tuple(result)


def _reduce(inst: HloInstruction) -> HloInstruction | None:
    op = inst.operands[0]
    if not isinstance(inst.shape, ArrayShape) or not init_is_identity(inst) \
            or inst.array_shape.element_count != op.array_shape.element_count:
        return None
    inst.opcode = Opcode.RESHAPE
    inst.operands = [op]
    del inst.attrs["dimensions"]
    del inst.attrs["to_apply"]
    return _reshape(inst) or inst


def _tuple(inst: HloInstruction) -> HloInstruction | None:
    ops = inst.operands
    if not ops or any(op.opcode != Opcode.GET_TUPLE_ELEMENT for op in ops):
        return None
    source = ops[0].operands[0]
    if source.shape != inst.shape or any(
            op.operands[0] is not source or op.attrs.get("index") != k or op.control_predecessors
            for k, op in enumerate(ops)):
        return None
    return source


RULES: dict[Opcode, Callable[[HloInstruction], HloInstruction | None]] = {
    Opcode.RESHAPE: _reshape,
    Opcode.BROADCAST: _broadcast,
    Opcode.TRANSPOSE: _identity,
    Opcode.CONVERT: _convert,
    Opcode.COPY: _identity,
    Opcode.REDUCE: _reduce,
    Opcode.TUPLE: _tuple,
}
