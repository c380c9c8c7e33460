"""The opcode a person most likely meant when they wrote one HLO does not have.

People write opcodes from memory, from numpy, or in another framework's spelling: ``mul``,
``sub``, ``exp``, ``ADD``, ``dynamic_slice``, ``matmul``. Pure edit distance answers these
badly (``mul`` is one edit from ``mulhi``, ``ad`` from ``pad``), so a hint is looked up in
order: the same word in lower case with ``_`` for ``-``; a table of common names from other
spellings; then the closest opcode by edit distance, preferring one the word begins.
Adding a spelling adds a row to ``COMMON_NAMES``.
"""

from __future__ import annotations

from typing import Iterable

COMMON_NAMES: dict[str, str] = {
    "mul": "multiply", "mult": "multiply", "prod": "multiply", "times": "multiply",
    "sub": "subtract", "minus": "subtract", "plus": "add", "sum": "add",
    "div": "divide", "truediv": "divide", "true_divide": "divide",
    "neg": "negate", "exp": "exponential", "expm1": "exponential-minus-one",
    "log1p": "log-plus-one", "ln": "log", "sin": "sine", "cos": "cosine",
    "max": "maximum", "min": "minimum", "pow": "power", "mod": "remainder",
    "rem": "remainder", "fmod": "remainder", "sigmoid": "logistic", "clip": "clamp",
    "matmul": "dot", "dot_general": "dot", "dot-general": "dot", "einsum": "dot",
    "conv": "convolution", "conv2d": "convolution", "conv_general_dilated": "convolution",
    "concat": "concatenate", "cat": "concatenate", "where": "select", "cast": "convert",
    "astype": "convert", "const": "constant", "param": "parameter", "arg": "parameter",
    "gte": "get-tuple-element", "cond": "conditional", "if": "conditional", "loop": "while",
    "broadcast_in_dim": "broadcast", "permute": "transpose", "flip": "reverse",
    "shl": "shift-left", "shr": "shift-right-logical", "sar": "shift-right-arithmetic",
    "eq": "compare", "ne": "compare", "lt": "compare", "le": "compare", "gt": "compare",
    "ge": "compare", "clz": "count-leading-zeros", "popcount": "popcnt",
    "isfinite": "is-finite", "round": "round-nearest-afz", "argsort": "sort",
    "top_k": "topk", "reduce_sum": "reduce", "reduce_max": "reduce",
}


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions, each costing one."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def suggest_opcode(word: str, opcodes: Iterable[str]) -> str | None:
    """The opcode ``word`` most likely meant, or None when nothing is close."""
    known = set(opcodes)
    normal = word.lower().replace("_", "-")
    if normal in known:
        return normal
    for spelling in (word.lower(), normal):
        if COMMON_NAMES.get(spelling) in known:
            return COMMON_NAMES[spelling]
    limit = max(1, len(normal) // 3)
    ranked = sorted((edit_distance(normal, op), not op.startswith(normal),
                     abs(len(op) - len(normal)), op) for op in known)
    distance, _, _, best = ranked[0]
    return best if distance <= limit else None
