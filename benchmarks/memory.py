"""Buffer-assignment figures for every corpus module, beside XLA's.

For each NAME.hlo and NAME.opt.hlo, through the same passes ``runtime.compile`` runs (fusion
included): the temp arena against its liveness lower bound (how well the heap packs), our
total (argument + output + temp - alias) against XLA's (XLA's ``memory`` for NAME.hlo,
``memory_jit`` for NAME.opt.hlo), and the geometric mean of each ratio. Then the time to
assign the largest module (median of several runs). ``benchmarks/run.py`` reuses
``corpus_memory``. Usage: python benchmarks/memory.py [CORPUS_DIR]
"""

from __future__ import annotations

import gc
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import runtime  # noqa: E402
from runtime.pipeline import buffer_assignment  # noqa: E402
from runtime.pipeline import optimise  # noqa: E402


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def xla_total(memory: dict) -> int:
    return memory["argument"] + memory["output"] + memory["temp"] - memory["alias"]


@dataclass
class ModuleMemory:
    file: str
    kind: str            # "hlo" | "opt_hlo"
    arena: int
    bound: int
    ours: int
    xla: int
    xla_temp: int
    copies: int
    steps: int

    @property
    def packing(self) -> float | None:
        return self.arena / self.bound if self.bound else None

    @property
    def versus_xla(self) -> float | None:
        return self.ours / self.xla if self.ours and self.xla else None


def corpus_memory(corpus: Path) -> list[ModuleMemory]:
    rows = []
    for entry in json.loads((corpus / "index.json").read_text()):
        for key, figures in (("hlo", "memory"), ("opt_hlo", "memory_jit")):
            name = entry["files"].get(key)
            if not name:
                continue
            module = optimise(runtime.parse((corpus / name).read_text()))
            ba = buffer_assignment(module)
            arena = ba.temp_arena
            xla = entry["xla"][figures]
            rows.append(ModuleMemory(name, key, arena.size if arena else 0,
                                     arena.lower_bound if arena else 0, ba.memory_stats.total,
                                     xla_total(xla), xla["temp"], len(ba.copies),
                                     len(ba.schedule.flattened)))
    return rows


def summary(rows: list[ModuleMemory]) -> dict:
    packing = [r.packing for r in rows if r.packing is not None]
    out = {"packing_geomean": geomean(packing), "packing_max": max(packing, default=1.0),
           "modules_with_temps": len(packing)}
    for kind in ("hlo", "opt_hlo"):
        ratios = [r.versus_xla for r in rows if r.kind == kind and r.versus_xla is not None]
        out[f"total_vs_xla_{kind}"] = geomean(ratios)
    return out


def main(corpus: Path) -> None:
    rows = corpus_memory(corpus)
    print(f"{'module':38} {'arena':>9} {'bound':>9} {'a/b':>6} {'total':>10} {'xla':>10} "
          f"{'ours/xla':>8}  xla temp  copies")
    for r in rows:
        shown = f"{r.packing:6.3f}" if r.packing is not None else "     -"
        ratio = f"{r.versus_xla:8.3f}" if r.versus_xla is not None else "       -"
        print(f"{r.file:38} {r.arena:9d} {r.bound:9d} {shown} {r.ours:10d} {r.xla:10d} "
              f"{ratio}  {r.xla_temp:8d}  {r.copies:6d}")
    s = summary(rows)
    print()
    print(f"geomean temp arena / liveness lower bound: {s['packing_geomean']:.4f} "
          f"(worst {s['packing_max']:.4f}) over {s['modules_with_temps']} modules with temps "
          f"(target: within 5%)")
    print(f"geomean total ours / XLA, NAME.hlo (XLA figures after its fusion): "
          f"{s['total_vs_xla_hlo']:.4f} (target: at most 1)")
    print(f"geomean total ours / XLA, NAME.opt.hlo (XLA's own optimised module): "
          f"{s['total_vs_xla_opt_hlo']:.4f}")
    largest = max(rows, key=lambda r: r.steps)
    module = optimise(runtime.parse((corpus / largest.file).read_text()))
    gc.collect()
    times = []
    for _ in range(7):
        start = time.perf_counter()
        buffer_assignment(module)
        times.append(time.perf_counter() - start)
    print(f"assigning the largest module ({largest.file}, {largest.steps} steps): "
          f"{statistics.median(times) * 1000:.1f} ms median of 7 (target: under 100 ms)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared" / "corpus")
