"""The passes ``runtime.compile`` runs before buffer assignment, in order.

Buffer assignment itself runs the passes it depends on (dead-code elimination, call-graph
flattening, copy insertion); this list holds the ones that change what is computed and how.
"""

from __future__ import annotations

from ..hlo.ir import HloModule

PASSES: list = []


def optimise(module: HloModule, *, fusion: bool = True) -> HloModule:
    for name, run in PASSES:
        if name == "fusion" and not fusion:
            continue
        module = run(module)
    return module
