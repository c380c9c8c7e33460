"""The layout fuzzer's long mode: ``python benchmarks/fuzz_layouts.py --seeds 1000:2000``.

Each seed is one module of ``--cases`` random cases (``tests/fuzz/layout_programs.py``) run
on XLA's CPU backend and on ours, fused and unfused; a failing case's module text is written
to ``--out`` (one file per case) to shrink into a regression test. Prints a line per seed
and a total; exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz.differential import check  # noqa: E402
from tests.fuzz.layout_programs import random_cases  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="100:110", help="START:STOP (a range of seeds)")
    parser.add_argument("--cases", type=int, default=10, help="random cases per module")
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"))
    options = parser.parse_args()
    start, stop = (int(s) for s in options.seeds.split(":"))
    total = failed = 0
    began = time.perf_counter()
    for seed in range(start, stop):
        failures = check(random_cases(seed, options.cases))
        total += options.cases
        failed += len({id(f.case) for f in failures})
        for n, failure in enumerate(failures):
            options.out.mkdir(parents=True, exist_ok=True)
            path = options.out / f"seed{seed}_{n}_{failure.how}.hlo"
            path.write_text(f"// {failure.how}: {failure.detail}\n{failure.case.module_text()}")
            print(f"seed {seed}: {failure.how}: {failure.detail[:200]} -> {path}")
        print(f"seed {seed}: {total} cases, {failed} failed, "
              f"{time.perf_counter() - began:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
