"""The models' contraction shapes, ours against XLA's CPU backend in the same run.

Each case is a one-dot HLO module with the operand layouts and dimension numbers a whole model
hands the dot family after our pipeline (transposes folded into the dot, so contracting
dimensions are not always innermost). Ours and XLA's runs are interleaved, one of each per
round, and the best of ``--repeats`` rounds is printed as GFLOP/s with the ratio; the machine
may be shared, so take the ratios, not the absolute figures, and say which CPU and OpenCL
device they came from.

    python benchmarks/dot_shapes.py [--repeats 7] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import runtime  # noqa: E402
import xla_cpu  # noqa: E402
from runtime.execution.device import get_device  # noqa: E402

NN = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
NT = "lhs_contracting_dims={1}, rhs_contracting_dims={1}"
TN = "lhs_contracting_dims={0}, rhs_contracting_dims={0}"
# (label, lhs dims, rhs dims, dimension numbers, output dims, contraction length)
CASES = [
    ("gpt2 logits 128x768x50257 A@B^T", (128, 768), (50257, 768), NT, (128, 50257), 768),
    ("gpt2 mlp up 128x768x3072", (128, 768), (768, 3072), NN, (128, 3072), 768),
    ("gpt2 mlp down 128x3072x768", (128, 3072), (3072, 768), NN, (128, 768), 3072),
    ("gpt2 qkv 128x768x2304", (128, 768), (768, 2304), NN, (128, 2304), 768),
    ("gpt2 proj 128x768x768", (128, 768), (768, 768), NN, (128, 768), 768),
    ("gpt2 attn QK^T 12x128x64x128", (1, 128, 12, 64), (1, 128, 12, 64),
     "lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
     "rhs_contracting_dims={3}", (1, 12, 128, 128), 64),
    ("gpt2 attn PV 12x128x128x64", (1, 12, 128, 128), (1, 128, 12, 64),
     "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, "
     "rhs_contracting_dims={1}", (1, 12, 128, 64), 128),
    ("vit mlp 1040x192x768 A@B^T", (1040, 192), (768, 192), NT, (1040, 768), 192),
    ("vit mlp 1040x768x192 A@B^T", (1040, 768), (192, 768), NT, (1040, 192), 768),
    ("vit mlp 1040x192x768", (1040, 192), (192, 768), NN, (1040, 768), 192),
    ("vit wgrad 768x1040x192 A^T@B", (1040, 768), (1040, 192), TN, (768, 192), 1040),
    ("vit wgrad 192x1040x576 A^T@B", (1040, 192), (1040, 576), TN, (192, 576), 1040),
]


def module_text(lhs, rhs, dims, out) -> str:
    def shape(s):
        return f"f32[{','.join(map(str, s))}]"
    return (f"HloModule dot_shape\nENTRY e {{\n  a = {shape(lhs)} parameter(0)\n"
            f"  b = {shape(rhs)} parameter(1)\n  ROOT d = {shape(out)} dot(a, b), {dims}\n}}\n")


def ours_runner(text: str, args):
    exe = runtime.compile(text)
    device_args = [runtime.device_put(a) for a in args]

    def run() -> float:
        start = time.perf_counter()
        exe.run(*device_args).block_until_ready()
        return time.perf_counter() - start
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", default="")
    parser.add_argument("--no-xla", action="store_true")
    args = parser.parse_args()
    print(f"device: {get_device(None)}; best of {args.repeats} interleaved rounds, GFLOP/s")
    print(f"  {'case':36s} {'ours':>8s} {'XLA':>8s} {'ours/XLA':>9s}")
    rng = np.random.default_rng(0)
    for label, lhs, rhs, dims, out, k in CASES:
        if args.only not in label:
            continue
        text = module_text(lhs, rhs, dims, out)
        a = rng.standard_normal(lhs).astype(np.float32)
        b = rng.standard_normal(rhs).astype(np.float32)
        ours = ours_runner(text, [a, b])
        runners = [ours]
        if not args.no_xla:
            xla = xla_cpu.compile_hlo(text).runner([a, b])
            runners.append(xla)
        best = [math.inf] * len(runners)
        for run in runners:
            run()
        for _ in range(args.repeats):
            for i, run in enumerate(runners):
                best[i] = min(best[i], run())
        flops = 2.0 * math.prod(out) * k
        rates = [flops / t / 1e9 for t in best]
        xla_rate = rates[1] if len(rates) > 1 else math.nan
        print(f"  {label:36s} {rates[0]:8.1f} {xla_rate:8.1f} {rates[0] / xla_rate:9.2f}",
              flush=True)


if __name__ == "__main__":
    main()
