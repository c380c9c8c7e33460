"""Per-run overhead of a warm executable on device-resident arguments (target: < 150 us).

The seed's ``increment`` (f32[] + 1, its input aliased to its output) is run with its
argument already on the device, in a loop that donates each result back as the next input
(the in-place pattern donation exists for), and again without donation (copy-protection
then copies the 4-byte input each run). Both are timed without waiting for the device; the
kernel itself is a few instructions, so the figures are the runtime's own overhead.
Usage: python benchmarks/overhead.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_US = 150.0


def measure(text: str, runs: int = 2000) -> dict[str, float]:
    import runtime
    exe = runtime.compile(text)
    x = runtime.device_put(np.float32(0.0))
    for _ in range(100):
        x = exe.run(x, donate=(0,))
    donated = []
    for _ in range(runs):
        start = time.perf_counter()
        x = exe.run(x, donate=(0,))
        donated.append(time.perf_counter() - start)
    x.block_until_ready()
    kept = []
    for _ in range(runs):
        start = time.perf_counter()
        y = exe.run(x)
        kept.append(time.perf_counter() - start)
    y.block_until_ready()
    synced = []
    for _ in range(min(runs, 500)):
        start = time.perf_counter()
        x = exe.run(x, donate=(0,))
        x.block_until_ready()
        synced.append(time.perf_counter() - start)
    return {"donated_us": statistics.median(donated) * 1e6,
            "not_donated_us": statistics.median(kept) * 1e6,
            "donated_and_waited_us": statistics.median(synced) * 1e6,
            "target_us": TARGET_US}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    args = parser.parse_args()
    figures = measure((Path(args.corpus) / "increment.hlo").read_text(), args.runs)
    print(f"increment, device-resident argument, median of {args.runs}:")
    print(f"  donated (in place):       {figures['donated_us']:7.1f} us")
    print(f"  not donated (copy first): {figures['not_donated_us']:7.1f} us")
    print(f"  donated, waiting for it:  {figures['donated_and_waited_us']:7.1f} us")
    print(f"  target: under {TARGET_US:.0f} us of overhead")


if __name__ == "__main__":
    main()
