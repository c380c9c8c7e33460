"""The passes ``runtime.compile`` runs before buffer assignment, in order.

Buffer assignment itself runs the passes it depends on (dead-code elimination, call-graph
flattening, copy insertion); this list holds the ones that change what is computed and how.
Each entry is (name, pass, whether it belongs to fusion): ``optimise(fusion=False)`` skips
the fusion passes, which gives one kernel per instruction (the reference behaviour tests
compare against). A pass changes, in place, a module ``optimise`` cloned once, given the
device strategy ("cpu" | "gpu").
"""

from __future__ import annotations

from typing import Callable

from ..hlo.clone import clone_module
from ..hlo.ir import HloModule
from .fusion import fuse_in_place
from .inline_calls import inline_calls_in_place
from .simplify import simplify_in_place
from .split_reductions import split_reductions_in_place
from .transpose_folding import fold_transposes_in_place

Pass = Callable[[HloModule, str], None]

PASSES: list[tuple[str, Pass, bool]] = [
    ("inline-calls", inline_calls_in_place, True),
    ("simplify", simplify_in_place, True),
    ("transpose-folding", fold_transposes_in_place, True),
    ("fusion", fuse_in_place, True),
    ("split-reductions", split_reductions_in_place, True),
]


def optimise(module: HloModule, *, fusion: bool = True, strategy: str = "cpu") -> HloModule:
    """The module after the passes; the caller's module is never changed (passes run on a copy)."""
    passes = [run for _name, run, is_fusion in PASSES if fusion or not is_fusion]
    if not passes:
        return module
    new, _ = clone_module(module)
    for run in passes:
        run(new, strategy)
    return new
