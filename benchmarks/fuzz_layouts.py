"""The layout fuzzer's long mode: ``python benchmarks/fuzz_layouts.py --seeds 1000:2000``.

Each seed is one module of ``--cases`` random cases (``tests/fuzz/layout_programs.py``) run
on XLA's CPU backend and on ours, fused and unfused; a failing case's module text is written
to ``--out`` (one file per case) to shrink into a regression test. A disagreement with XLA's
optimised output that the second opinion settles (``tests/fuzz/differential.py``: XLA's
simplifier changed the program, or the program amplifies rounding) is counted and saved beside
them with its reason in the name, and does not fail the run. Prints a line per seed and a
total; exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz.differential import examine  # noqa: E402
from tests.fuzz.layout_programs import random_cases  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="100:110", help="START:STOP (a range of seeds)")
    parser.add_argument("--cases", type=int, default=10, help="random cases per module")
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"))
    options = parser.parse_args()
    start, stop = (int(s) for s in options.seeds.split(":"))
    total = failed = settled = 0
    began = time.perf_counter()
    for seed in range(start, stop):
        findings = examine(random_cases(seed, options.cases))
        total += options.cases
        failed += len({id(f.case) for f in findings if not f.settled})
        settled += len({id(f.case) for f in findings if f.settled})
        for n, finding in enumerate(findings):
            options.out.mkdir(parents=True, exist_ok=True)
            kind = f"settled-{finding.settled}" if finding.settled else finding.how
            path = options.out / f"seed{seed}_{n}_{kind}.hlo"
            path.write_text(f"// {finding.how} {finding.settled}: {finding.detail}\n"
                            f"{finding.case.module_text()}")
            print(f"seed {seed}: {kind}: {finding.detail[:200]} -> {path}")
        print(f"seed {seed}: {total} cases, {failed} failed, {settled} settled by the second "
              f"opinion, {time.perf_counter() - began:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
