"""Contraction shapes (dots and convolutions), ours against XLA's CPU backend in the same run.

Each case is a one-instruction HLO module with the operand layouts and dimension numbers a
whole model hands the dot or convolution family after our pipeline (transposes folded into
the dot, so contracting dimensions are not always innermost). Without ``--model`` the cases
are the list below; ``--model NAME|FILE`` (a name from ``$HLO_MODELS``, default
``../shared/models``, or an HLO file) takes every distinct dot and convolution of that
module after our passes, fused ones included, with how often each occurs. Ours and XLA's
runs are interleaved, one of each per round, and the best of ``--repeats`` rounds is printed
as GFLOP/s with the ratio; the machine may be shared, so take the ratios, not the absolute
figures, and say which CPU and OpenCL device they came from.

    python benchmarks/dot_shapes.py [--repeats 7] [--only SUBSTRING] [--numpy] [--model NAME|FILE ...]

``--numpy`` adds numpy's BLAS (``np.einsum`` on f32 dots) as a third column: an AVX2 reference
where XLA's is none. XLA's dots (YNNPACK, and Eigen) choose their vector ISA at run time and
ignore ``--xla_cpu_max_isa``, so on an AVX-512 CPU XLA's column is AVX-512 code in any case;
numpy's OpenBLAS is AVX2 code under ``OPENBLAS_CORETYPE=Haswell``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import runtime  # noqa: E402
import xla_cpu  # noqa: E402
from runtime.opencl.device import get_device  # noqa: E402
from runtime.hlo.printer import attribute_text  # noqa: E402

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


CONTRACTIONS = ("dot", "convolution")


def module_text(lhs, rhs, dims, out) -> str:
    def shape(s):
        return f"f32[{','.join(map(str, s))}]"
    return (f"HloModule dot_shape\nENTRY e {{\n  a = {shape(lhs)} parameter(0)\n"
            f"  b = {shape(rhs)} parameter(1)\n  ROOT d = {shape(out)} dot(a, b), {dims}\n}}\n")


def model_cases(spec: str) -> list[tuple[str, str, list, float, int]]:
    """Every distinct dot and convolution of a module after our passes, as one-instruction
    modules: (label, text, operand shapes, flops, occurrences)."""
    path = Path(spec)
    if not path.is_file():
        models = Path(os.environ.get("HLO_MODELS", REPO.parent / "shared" / "models"))
        path = models / f"{spec}.hlo"
    module = runtime.analyze(path.read_text()).module
    found: Counter = Counter()
    shapes: dict[str, tuple] = {}
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode not in CONTRACTIONS:
                continue
            attrs = "".join(f", {key}={attribute_text(key, value)}"
                            for key, value in inst.attrs.items() if key != "metadata")
            operands = [op.shape for op in inst.operands]
            text = ("HloModule contraction\nENTRY e {\n"
                    + "".join(f"  p{i} = {s.to_text()} parameter({i})\n"
                              for i, s in enumerate(operands))
                    + f"  ROOT c = {inst.shape.to_text()} {inst.opcode}("
                    + ", ".join(f"p{i}" for i in range(len(operands))) + f"){attrs}\n}}\n")
            found[text] += 1
            shapes[text] = (inst, operands)
    cases = []
    for text, count in found.most_common():
        inst, operands = shapes[text]
        flops = contraction_flops(inst)
        label = (f"{inst.opcode[:4]} {'x'.join(map(str, operands[0].dims))}*"
                 f"{'x'.join(map(str, operands[1].dims))} {_layout_label(inst)}")
        cases.append((label, text, operands, flops, count))
    return cases


def _layout_label(inst) -> str:
    """What tells two contractions of the same operand shapes apart: a convolution's
    dimension labels and window, a dot's contracting dimensions."""
    if inst.opcode == "dot":
        return (f"c{''.join(map(str, inst.attr('lhs_contracting_dims') or ()))}"
                f"{''.join(map(str, inst.attr('rhs_contracting_dims') or ()))}")
    window = inst.attr("window")
    window = window.to_text() if window is not None else ""
    return f"{inst.attr('dim_labels').to_text().split('_', 1)[1]} {window}"


def contraction_flops(inst) -> float:
    """2 x outputs x multiply-adds per output (a dot's contraction length; a convolution's
    window size times input features per group)."""
    outputs = math.prod(inst.shape.dims)
    lhs, rhs = (op.shape for op in inst.operands)
    if inst.opcode == "dot":
        contracting = inst.attr("lhs_contracting_dims") or ()
        return 2.0 * outputs * math.prod(lhs.dims[d] for d in contracting)
    dn = inst.attr("dim_labels")
    per_output = rhs.dims[dn.kernel_input_feature] * math.prod(rhs.dims[d]
                                                               for d in dn.kernel_spatial)
    return 2.0 * outputs * per_output


def random_operand(shape, rng):
    dtype = shape.element_type.numpy
    if shape.element_type.is_float:
        return rng.standard_normal(shape.dims).astype(dtype)
    return rng.integers(-3, 4, size=shape.dims).astype(dtype)


def numpy_runner(text: str, args):
    """A timed ``np.einsum`` of an f32 dot (BLAS through ``optimize``), or None."""
    inst = runtime.parse(text).entry.root
    if inst.opcode != "dot" or any(a.dtype != np.float32 for a in args):
        return None
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lhs = [next(letters) for _ in args[0].shape]
    rhs = [next(letters) for _ in args[1].shape]
    for side in ("batch", "contracting"):
        for l, r in zip(inst.attr(f"lhs_{side}_dims") or (), inst.attr(f"rhs_{side}_dims") or ()):
            rhs[r] = lhs[l]
    batch = [lhs[d] for d in inst.attr("lhs_batch_dims") or ()]
    out = batch + [c for c in lhs if c not in rhs] + [c for c in rhs if c not in lhs]
    spec = f"{''.join(lhs)},{''.join(rhs)}->{''.join(out)}"

    def run() -> float:
        start = time.perf_counter()
        np.einsum(spec, *args, optimize=True)
        return time.perf_counter() - start
    return run


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
    parser.add_argument("--numpy", action="store_true",
                        help="numpy's BLAS too (f32 dots): OPENBLAS_CORETYPE=Haswell for AVX2")
    parser.add_argument("--model", action="append", default=[],
                        help="a model name or HLO file: its dots and convolutions")
    args = parser.parse_args()
    print(f"device: {get_device(None)}; best of {args.repeats} interleaved rounds, GFLOP/s")
    print(f"  {'case':64s} {'count':>5s} {'ours':>8s} {'XLA':>8s} {'ours/XLA':>9s}"
          + (f" {'numpy':>8s} {'ours/np':>8s}" if args.numpy else ""))
    rng = np.random.default_rng(0)
    cases = [(label, module_text(lhs, rhs, dims, out), [lhs, rhs],
              2.0 * math.prod(out) * k, 1) for label, lhs, rhs, dims, out, k in CASES]
    if args.model:
        cases = [case for spec in args.model for case in model_cases(spec)]
    for label, text, operands, flops, count in cases:
        if args.only not in label:
            continue
        inputs = [random_operand(s, rng) if not isinstance(s, tuple)
                  else rng.standard_normal(s).astype(np.float32) for s in operands]
        ours = ours_runner(text, inputs)
        runners = [ours]
        runners.append(xla_cpu.compile_hlo(text).runner(inputs) if not args.no_xla else None)
        runners.append(numpy_runner(text, inputs) if args.numpy else None)
        best = [math.inf] * len(runners)
        for run in runners:
            if run is not None:
                run()
        for _ in range(args.repeats):
            for i, run in enumerate(runners):
                if run is not None:
                    best[i] = min(best[i], run())
        ours, xla_rate, np_rate = (flops / t / 1e9 if t < math.inf else math.nan for t in best)
        line = f"  {label:64s} {count:5d} {ours:8.1f} {xla_rate:8.1f} {ours / xla_rate:9.2f}"
        if args.numpy:
            line += f" {np_rate:8.1f} {ours / np_rate:8.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
