"""The passes ``runtime.compile`` runs before buffer assignment, in order.

Buffer assignment itself runs the passes it depends on (dead-code elimination, call-graph
flattening, copy insertion); this list holds the ones that change what is computed and how.
Each entry is (name, pass, whether it belongs to fusion): ``optimise(fusion=False)`` skips
the fusion passes, which gives one kernel per instruction (the reference behaviour tests
compare against). A pass takes the module and the device strategy ("cpu" | "gpu").
"""

from __future__ import annotations

from typing import Callable

from ..hlo.ir import HloModule
from .fusion import fuse
from .simplify import simplify
from .split_reductions import split_reductions

Pass = Callable[[HloModule, str], HloModule]

PASSES: list[tuple[str, Pass, bool]] = [
    ("simplify", simplify, True),
    ("fusion", fuse, True),
    ("split-reductions", split_reductions, True),
]


def optimise(module: HloModule, *, fusion: bool = True, strategy: str = "cpu") -> HloModule:
    for _name, run, is_fusion in PASSES:
        if is_fusion and not fusion:
            continue
        module = run(module, strategy)
    return module
