"""Recognising a reduction whose init value is the identity of its reducer.

HLO leaves the reduction order unspecified, but applying ``init`` more than once is only
harmless when it is the reducer's identity (0 for add, -inf for max...). Kernels that split a
reduction into independent partial accumulators (vector lanes, two-stage reductions) start
every partial at ``init``, so they ask this module first; anything unrecognised keeps the
sequential one-accumulator form.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..hlo.dtypes import STEP_ROUNDED_FLOATS, ElementType
from ..hlo.ir import HloComputation, HloInstruction
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES


def _extreme(et: ElementType, high: bool) -> object:
    if et.is_float:
        return np.inf if high else -np.inf
    if et.is_pred:
        return high
    info = np.iinfo(et.numpy)
    return info.max if high else info.min


def _all_ones(et: ElementType) -> object:
    return True if et.is_pred else (-1 if et.is_signed else np.iinfo(et.numpy).max)


# the opcode table's ``identity`` column -> the identity's value in an element type
_IDENTITY_VALUES: dict[str, Callable[[ElementType], object]] = {
    "zero": lambda et: False if et.is_pred else 0,
    "one": lambda et: True if et.is_pred else 1,
    "all-ones": _all_ones,
    "lowest": lambda et: _extreme(et, high=False),
    "highest": lambda et: _extreme(et, high=True),
}


def reducer_opcode(comp: HloComputation) -> Opcode | None:
    """The opcode of a reducer that is one binary op on its two parameters, else None."""
    root = comp.root
    params = comp.parameters
    if root is None or len(params) != 2 or len(root.operands) != 2 \
            or set(map(id, root.operands)) != set(map(id, params)):
        return None
    return root.opcode if OPCODES[root.opcode].identity is not None else None


def init_is_identity(reduce: HloInstruction) -> bool:
    """Whether ``reduce`` (one input, a constant init) starts from its reducer's identity."""
    if len(reduce.operands) != 2:
        return False
    init = reduce.operands[1]
    op = reducer_opcode(reduce.to_apply)
    identity = OPCODES[op].identity if op is not None else None
    if identity is None or init.opcode != Opcode.CONSTANT or init.literal is None \
            or init.literal.data is None:
        return False
    et = init.array_shape.element_type
    value = np.asarray(init.literal.data).reshape(())
    want = np.asarray(_IDENTITY_VALUES[identity](et)).astype(value.dtype)
    return bool(value == want)


def reorderable(reduce: HloInstruction) -> bool:
    """Whether kernels may regroup ``reduce``'s steps (partial accumulators, work-group trees,
    split rows): it starts from its reducer's identity, and the reducer is not a sum or
    product rounded to a narrow float (f16, bf16 or narrower) at every step, whose result
    depends on the order (``passes/tree_reductions`` gives those XLA's order, which the
    kernels then keep)."""
    if not init_is_identity(reduce):
        return False
    op = reducer_opcode(reduce.to_apply)
    return not (op in ("add", "multiply")
                and reduce.operands[1].array_shape.element_type.name in STEP_ROUNDED_FLOATS)


def argminmax_direction(reduce: HloInstruction) -> str | None:
    """"GT" or "LT" where ``reduce`` is JAX's argmax or argmin over one dimension (its reducer
    ``lax.argmax`` emits, float values, s32 indices from an iota along that dimension, a
    non-NaN initial value), else None.

    Why: such a reduction gives the same result in any order, where the reducer, applied in
    sequence, keeps the first NaN, else the greatest (least) value and the lowest index among
    equal ones; that is the element of greatest key (is NaN, value, -index), an associative
    and commutative choice, whenever each combined element comes after the accumulator (as
    the iota makes it). The one trace of order left is the sign of a zero result (ties keep
    the later value): kernels recompute that one (``families.reduction``)."""
    if len(reduce.operands) != 4 or len(reduce.dimensions) != 1:
        return None
    values, indices, init_value, init_index = reduce.operands
    if not (values.array_shape.element_type.is_float
            and indices.array_shape.element_type.name == "s32"):
        return None
    if init_value.opcode != Opcode.CONSTANT or init_value.literal is None \
            or init_value.literal.data is None or init_index.opcode != Opcode.CONSTANT \
            or np.isnan(np.asarray(init_value.literal.data, np.float64)).any():
        return None
    if not _iota_along(indices, reduce.dimensions[0]):
        return None
    return _argminmax_reducer(reduce.to_apply)


def _iota_along(inst: HloInstruction, dim: int) -> bool:
    """Whether ``inst`` is an iota counting along its dimension ``dim`` (maybe broadcast)."""
    if inst.opcode == Opcode.BROADCAST:
        source = inst.operands[0]
        mapped = list(inst.dimensions)
        return dim in mapped and _iota_along(source, mapped.index(dim))
    return inst.opcode == Opcode.IOTA and inst.attrs.get("iota_dimension") == dim


def _argminmax_reducer(comp: HloComputation) -> str | None:
    """The direction of a reducer ``(v, i, w, j) -> (P ? v : w, P or (v == w and i < j) ? i :
    j)`` with ``P = v > w or v != v`` ("GT"; ``<``: "LT"), in any operand order of its ``or``s
    and ``and``, else None."""
    params = comp.parameters
    root = comp.root
    if len(params) != 4 or root is None or root.opcode != Opcode.TUPLE or len(root.operands) != 2:
        return None
    v, i, w, j = params
    pick_value, pick_index = root.operands
    if not (pick_value.opcode == Opcode.SELECT and pick_value.operands[1:] == [v, w]
            and pick_index.opcode == Opcode.SELECT and pick_index.operands[1:] == [i, j]):
        return None
    picked = pick_value.operands[0]
    direction = _first_or_nan(picked, v, w)
    if direction is None:
        return None
    pair = _pair(pick_index.operands[0], Opcode.OR)
    if pair is None or picked not in pair:
        return None
    tie = pair[1] if pair[0] is picked else pair[0]
    tie_parts = _pair(tie, Opcode.AND)
    if tie_parts is None:
        return None
    equal = any(_compare(p, "EQ", v, w) or _compare(p, "EQ", w, v) for p in tie_parts)
    earlier = any(_compare(p, "LT", i, j) for p in tie_parts)
    return direction if equal and earlier else None


def _pair(inst: HloInstruction, opcode: Opcode) -> tuple[HloInstruction, HloInstruction] | None:
    if inst.opcode != opcode or len(inst.operands) != 2:
        return None
    return inst.operands[0], inst.operands[1]


def _compare(inst: HloInstruction, direction: str, a: HloInstruction,
             b: HloInstruction) -> bool:
    """Whether ``inst`` is ``compare(a, b)`` in ``direction`` with IEEE (partial) order."""
    return inst.opcode == Opcode.COMPARE and str(inst.attrs.get("direction")) == direction \
        and inst.operands == [a, b] and inst.comparison_type in (None, "FLOAT", "SIGNED")


def _first_or_nan(inst: HloInstruction, v: HloInstruction, w: HloInstruction) -> str | None:
    """"GT"/"LT" where ``inst`` is ``v > w or v != v`` (``<``), in either order, else None."""
    pair = _pair(inst, Opcode.OR)
    if pair is None:
        return None
    for ordered, nan in (pair, pair[::-1]):
        if _compare(nan, "NE", v, v):
            for direction in ("GT", "LT"):
                if _compare(ordered, direction, v, w):
                    return direction
    return None
