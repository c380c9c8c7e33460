"""Micro-benchmarks of the dot, convolution and vector loop kernels.

Dots are timed against numpy's BLAS on the same machine in the same run and printed as
GFLOP/s; the bench programs of the corpus are printed beside XLA's CPU run time from the
index. Every figure is the median (and the best) of ``--repeats`` timed runs after warm-up,
with device-resident arguments, so they include the executor's per-run work; nothing is
asserted (timings on shared machines are noisy).

    python benchmarks/kernels.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import runtime  # noqa: E402
from corpus_data import programs  # noqa: E402
from runtime.opencl.device import get_device  # noqa: E402

NN = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
DOTS = [
    # (label, lhs shape, rhs shape, dimension numbers, numpy equivalent, contraction length, type)
    ("f32 256^3", (256, 256), (256, 256), NN, lambda a, b: a @ b, 256, "f32"),
    ("f32 512^3", (512, 512), (512, 512), NN, lambda a, b: a @ b, 512, "f32"),
    ("f32 1024^3", (1024, 1024), (1024, 1024), NN, lambda a, b: a @ b, 1024, "f32"),
    ("f32 1000x999x1001", (1000, 999), (999, 1001), NN, lambda a, b: a @ b, 999, "f32"),
    ("f32 512^3 A@B^T", (512, 512), (512, 512),
     "lhs_contracting_dims={1}, rhs_contracting_dims={1}", lambda a, b: a @ b.T, 512, "f32"),
    ("f32 batch 16x256x64x256", (16, 256, 64), (16, 64, 256),
     "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
     lambda a, b: a @ b, 64, "f32"),
    ("f64 512^3", (512, 512), (512, 512), NN, lambda a, b: a @ b, 512, "f64"),
]
SETTLE_SECONDS = 0.5
BENCH_PROGRAMS = ("bench_matmul_512", "bench_conv_64x64x32", "bench_ew_chain_4m")


@dataclass(frozen=True)
class Timing:
    """Median and best of the timed runs: on a shared machine the median says what a run
    costs and the best what the code can do."""

    median: float
    best: float

    def ms(self) -> str:
        return f"{self.median * 1e3:8.3f} ({self.best * 1e3:7.3f})"


def timing(fn: Callable[[], object], repeats: int) -> Timing:
    # PoCL's and OpenBLAS's worker threads spin for a while after a burst of work; on two
    # cores they would slow whichever runs next, so let them settle first
    time.sleep(SETTLE_SECONDS)
    fn()
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return Timing(statistics.median(times), min(times))


def runner(exe, args) -> Callable[[], None]:
    device_args = [runtime.device_put(a) for a in args]

    def run() -> None:
        out = exe.run(*device_args)
        (out[0] if isinstance(out, tuple) else out).block_until_ready()
    return run


def dot_text(lhs, rhs, dims, et, out_shape) -> str:
    def shape(s):
        return f"{et}[{','.join(map(str, s))}]"
    return (f"HloModule bench_dot\nENTRY e {{\n  a = {shape(lhs)} parameter(0)\n"
            f"  b = {shape(rhs)} parameter(1)\n"
            f"  ROOT d = {shape(out_shape)} dot(a, b), {dims}\n}}\n")


def bench_dots(repeats: int) -> None:
    print("dot (register-tiled family) vs numpy BLAS, same run; ms median (best), GFLOP/s of the median")
    print(f"  {'case':26s} {'ours ms':>18s} {'GFLOP/s':>8s} {'numpy ms':>18s} {'GFLOP/s':>8s} "
          f"{'% numpy':>8s}")
    rng = np.random.default_rng(0)
    for label, lhs, rhs, dims, ref, k, et in DOTS:
        dtype = np.float32 if et == "f32" else np.float64
        a = rng.standard_normal(lhs).astype(dtype)
        b = rng.standard_normal(rhs).astype(dtype)
        want = ref(a, b)
        exe = runtime.compile(dot_text(lhs, rhs, dims, et, want.shape))
        flops = 2.0 * want.size * k
        ours = timing(runner(exe, [a, b]), repeats)
        theirs = timing(lambda: ref(a, b), repeats)
        print(f"  {label:26s} {ours.ms()} {flops / ours.median / 1e9:8.1f} {theirs.ms()} "
              f"{flops / theirs.median / 1e9:8.1f} {100 * theirs.median / ours.median:8.0f}")


def bench_programs(repeats: int) -> None:
    print("corpus bench programs vs XLA's CPU run time (index.json, median); ms median (best)")
    print(f"  {'program':26s} {'file':8s} {'ours ms':>18s} {'XLA ms':>8s} {'ours/XLA':>9s}")
    for program in programs():
        if program.name not in BENCH_PROGRAMS:
            continue
        xla = program.entry["xla"]["run_median_s"]
        args = program.inputs()
        for kind in ("hlo", "opt_hlo"):
            exe = runtime.compile(program.text(kind))
            ours = timing(runner(exe, args), repeats)
            print(f"  {program.name:26s} {kind:8s} {ours.ms()} {xla * 1e3:8.3f} "
                  f"{ours.median / xla:9.2f}")


def bench_vector_loop(repeats: int) -> None:
    print("vector loop kernel vs numpy, same run (16M f32 add); ms median (best)")
    n = 1 << 24
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    text = (f"HloModule bench_add\nENTRY e {{\n  x = f32[{n}] parameter(0)\n"
            f"  y = f32[{n}] parameter(1)\n  ROOT s = f32[{n}] add(x, y)\n}}\n")
    exe = runtime.compile(text)
    ours = timing(runner(exe, [x, x]), repeats)
    theirs = timing(lambda: np.add(x, x), repeats)
    gigabytes = 3 * 4 * n / 1e9
    print(f"  add: ours {ours.ms()} ({gigabytes / ours.median:.1f} GB/s), "
          f"numpy {theirs.ms()} ({gigabytes / theirs.median:.1f} GB/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    print(f"device: {get_device(None)}")
    bench_dots(args.repeats)
    bench_programs(args.repeats)
    bench_vector_loop(args.repeats)


if __name__ == "__main__":
    main()
