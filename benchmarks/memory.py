"""Buffer-assignment figures for every corpus module, beside XLA's.

For each NAME.hlo and NAME.opt.hlo: the temp arena against its liveness lower bound (how well
the heap packs), our total (argument + output + temp - alias) against XLA's (XLA's
``memory`` for NAME.hlo, ``memory_jit`` for NAME.opt.hlo; XLA's figures come after its fusion
passes, so the pre-optimisation ratio only becomes a target once fusion exists), and the
geometric mean of each ratio. Then the time to assign the largest module (median of several
runs). Usage: python benchmarks/memory.py [CORPUS_DIR]
"""

from __future__ import annotations

import gc
import json
import math
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import runtime  # noqa: E402
from runtime.buffers.assignment import assign_buffers  # noqa: E402


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def xla_total(memory: dict) -> int:
    return memory["argument"] + memory["output"] + memory["temp"] - memory["alias"]


def main(corpus: Path) -> None:
    index = json.loads((corpus / "index.json").read_text())
    packing: list[float] = []
    versus_xla: dict[str, list[float]] = {"hlo": [], "opt_hlo": []}
    largest: tuple[int, str, object] | None = None
    print(f"{'module':38} {'arena':>9} {'bound':>9} {'a/b':>6} {'total':>10} {'xla':>10} "
          f"{'ours/xla':>8}  xla temp  copies")
    for entry in index:
        for key, figures in (("hlo", "memory"), ("opt_hlo", "memory_jit")):
            name = entry["files"].get(key)
            if not name:
                continue
            module = runtime.parse((corpus / name).read_text())
            ba = assign_buffers(module)
            arena = ba.temp_arena
            size, bound = (arena.size, arena.lower_bound) if arena else (0, 0)
            ratio = size / bound if bound else None
            if ratio is not None:
                packing.append(ratio)
            xla = entry["xla"][figures]
            ours, theirs = ba.memory_stats.total, xla_total(xla)
            if ours and theirs:
                versus_xla[key].append(ours / theirs)
            steps = len(ba.schedule.flattened)
            if largest is None or steps > largest[0]:
                largest = (steps, name, module)
            shown = f"{ratio:6.3f}" if ratio is not None else "     -"
            print(f"{name:38} {size:9d} {bound:9d} {shown} {ours:10d} {theirs:10d} "
                  f"{ours / theirs if theirs else float('nan'):8.3f}  {xla['temp']:8d}  "
                  f"{len(ba.copies):6d}")
    print()
    print(f"geomean temp arena / liveness lower bound: {geomean(packing):.4f} "
          f"over {len(packing)} modules with temps (target: within 5%)")
    for key, label in (("hlo", "NAME.hlo (XLA figures after its fusion)"),
                       ("opt_hlo", "NAME.opt.hlo (XLA's own optimised module)")):
        print(f"geomean total ours / XLA, {label}: {geomean(versus_xla[key]):.4f} "
              f"over {len(versus_xla[key])} modules")
    assert largest is not None
    steps, name, module = largest
    gc.collect()
    times = []
    for _ in range(7):
        start = time.perf_counter()
        assign_buffers(module)
        times.append(time.perf_counter() - start)
    print(f"assigning the largest module ({name}, {steps} steps): "
          f"{statistics.median(times) * 1000:.1f} ms median of 7 (target: under 100 ms)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared" / "corpus")
