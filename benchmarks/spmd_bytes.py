"""Per-device bytes of every sharded program against XLA's ``memory_analysis()``.

For the shared examples (``../shared/spmd`` or ``$HLO_SPMD``) and the generated ones
(``tests/spmd/data``): our buffer assignment of the partitioned module (``NAME.opt.hlo``,
through the passes ``runtime.compile`` runs) beside XLA's figures from ``NAME.json``, per
component (argument, output, temp, alias) and in total (argument + output + temp - alias).
Usage: PYTHONPATH=. python benchmarks/spmd_bytes.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import runtime  # noqa: E402
from runtime.buffers.assignment import MemoryStats  # noqa: E402
from runtime.pipeline import run  # noqa: E402
from tests.spmd.spmd_data import GENERATED, SHARED, names  # noqa: E402

COMPONENTS = ("argument", "output", "temp", "alias")


def xla_figures(root: Path, name: str) -> MemoryStats:
    """XLA's per-device figures as a MemoryStats (peak unknown: 0)."""
    figures = json.loads((root / f"{name}.json").read_text())["xla_per_device_bytes"]
    return MemoryStats(*(figures[f"{c}_size_in_bytes"] for c in ("argument", "output", "alias",
                                                                 "temp")), peak=0)


def ours(root: Path, name: str) -> MemoryStats:
    return run(runtime.parse((root / f"{name}.opt.hlo").read_text())).memory_stats


def programs() -> list[tuple[Path, str]]:
    return [(root, name) for root in (SHARED, GENERATED) for name in names(root)]


def main() -> None:
    print("| program | " + " | ".join(f"{c} ours/XLA" for c in COMPONENTS)
          + " | total ours/XLA | ratio |")
    print("|---" * (len(COMPONENTS) + 3) + "|")
    worst = 0.0
    for root, name in programs():
        mine, xla = ours(root, name), xla_figures(root, name)
        ratio = mine.total / xla.total
        worst = max(worst, ratio)
        cells = [f"{getattr(mine, c)}/{getattr(xla, c)}" for c in COMPONENTS]
        print(f"| {name} | " + " | ".join(cells) + f" | {mine.total}/{xla.total} | {ratio:.3f} |")
    print(f"\nworst ratio: {worst:.3f}")


if __name__ == "__main__":
    main()
