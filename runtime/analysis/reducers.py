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

from ..hlo.dtypes import ElementType
from ..hlo.ir import HloComputation, HloInstruction


def _extreme(et: ElementType, high: bool):
    if et.is_float:
        return np.inf if high else -np.inf
    if et.is_pred:
        return high
    info = np.iinfo(et.numpy)
    return info.max if high else info.min


def _all_ones(et: ElementType):
    return True if et.is_pred else (-1 if et.is_signed else np.iinfo(et.numpy).max)


# reducer opcode -> its identity for an element type
IDENTITIES: dict[str, Callable[[ElementType], object]] = {
    "add": lambda et: False if et.is_pred else 0,
    "or": lambda et: False if et.is_pred else 0,
    "xor": lambda et: False if et.is_pred else 0,
    "multiply": lambda et: True if et.is_pred else 1,
    "and": _all_ones,
    "maximum": lambda et: _extreme(et, high=False),
    "minimum": lambda et: _extreme(et, high=True),
}


def reducer_opcode(comp: HloComputation) -> str | None:
    """The opcode of a reducer that is one binary op on its two parameters, else None."""
    root = comp.root
    params = comp.parameters
    if root is None or len(params) != 2 or len(root.operands) != 2 \
            or set(map(id, root.operands)) != set(map(id, params)):
        return None
    return root.opcode if root.opcode in IDENTITIES else None


def init_is_identity(reduce: HloInstruction) -> bool:
    """Whether ``reduce`` (one input, a constant init) starts from its reducer's identity."""
    if len(reduce.operands) != 2:
        return False
    init = reduce.operands[1]
    op = reducer_opcode(reduce.to_apply)
    if op is None or init.opcode != "constant" or init.literal is None \
            or init.literal.data is None:
        return False
    et = init.shape.element_type  # type: ignore[union-attr]
    value = np.asarray(init.literal.data).reshape(())
    want = np.asarray(IDENTITIES[op](et)).astype(value.dtype)
    return bool(value == want)
