"""numpy doing the same work, for programs that are one dot or one reduction (BLAS and numpy's
pairwise sums are the reference points for contractions and reductions).

``baseline(module)`` recognises an entry whose root is a ``dot`` (no batch dimensions) or a
``reduce`` with an add/max/min/multiply reducer of its parameters, and returns a function of
the program's inputs plus the work in FLOPs (2·M·N·K for a dot); None for anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from runtime.analysis.reducers import reducer_opcode
from runtime.hlo.ir import HloModule

_REDUCERS = {"add": np.sum, "maximum": np.max, "minimum": np.min, "multiply": np.prod}


@dataclass
class Baseline:
    kind: str                    # "dot" | "reduce"
    run: Callable[[list[np.ndarray]], np.ndarray]
    flops: int


def baseline(module: HloModule) -> Baseline | None:
    root = module.entry.root
    if root is None or any(op.opcode != "parameter" for op in root.operands[:1]):
        return None
    if root.opcode == "dot" and all(op.opcode == "parameter" for op in root.operands) \
            and not root.attrs.get("lhs_batch_dims"):
        lhs, rhs = (op.parameter_number for op in root.operands)
        lc = tuple(root.attrs["lhs_contracting_dims"])  # type: ignore[arg-type]
        rc = tuple(root.attrs["rhs_contracting_dims"])  # type: ignore[arg-type]
        k = int(np.prod([root.operands[0].shape.dims[d] for d in lc]))
        flops = 2 * root.shape.element_count * k  # type: ignore[union-attr]
        return Baseline("dot", lambda a: np.tensordot(a[lhs], a[rhs], axes=(lc, rc)), flops)
    if root.opcode == "reduce" and len(root.operands) == 2:
        fn = _REDUCERS.get(reducer_opcode(root.attrs["to_apply"]) or "")  # type: ignore[arg-type]
        if fn is None:
            return None
        x = root.operands[0].parameter_number
        axes = tuple(root.attrs["dimensions"])  # type: ignore[arg-type]
        return Baseline("reduce", lambda a: fn(a[x], axis=axes),
                        root.operands[0].shape.element_count)  # type: ignore[union-attr]
    return None
