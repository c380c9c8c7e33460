"""Build + first launch of a 20-kernel program, cold and warm PoCL cache, in fresh processes.

Each measurement runs in a new Python process (``--child``) against one cache directory:
the first finds it empty (cold), the second finds what the first left (warm). Prints the
figures; nothing is asserted (timings on shared machines are noisy).

    python benchmarks/clbuild.py [--kernels 20] [--elements 1048576]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_OPS = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "atan2",
        "remainder")
_UNARY = ("exponential", "log", "tanh", "sqrt", "sine", "cosine", "logistic", "erf", "abs",
          "negate", "floor", "ceil")


def _program(kernels: int) -> str:
    sys.path.insert(0, str(REPO))
    from runtime.codegen import cltypes as ct
    from runtime.codegen import templates as ew

    bodies = []
    for k in range(kernels):
        if k % 2 == 0:
            op = _OPS[k // 2 % len(_OPS)]
            expr = ew.binary(op, "f32", ew.unary(_UNARY[k % len(_UNARY)], "f32", "f32", "a[i]"),
                             "b[i]")
        else:
            expr = ew.unary(_UNARY[k % len(_UNARY)], "bf16", "bf16",
                            ct.load("bf16", "h", "i"))
            expr = ew.convert("bf16", "f32", expr)
        bodies.append(f"__kernel void k{k}(__global const float* a, __global const float* b,\n"
                      f"                   __global const ushort* h, __global float* out,\n"
                      f"                   ulong n) {{\n"
                      f"  size_t i = get_global_id(0);\n"
                      f"  if (i >= n) return;\n"
                      f"  out[i] = {expr};\n"
                      f"}}\n")
    code = "\n".join(bodies)
    return ew.FP_CONTRACT_OFF + "\n" + ct.prelude_for(ct.helpers_used(code)) + code


def child(kernels: int, elements: int) -> dict:
    sys.path.insert(0, str(REPO))
    import numpy as np

    from runtime.opencl import device

    source = _program(kernels)
    start = time.perf_counter()
    dev = device.get_device()
    selected = time.perf_counter()
    program = device.build_program(dev, source)
    built = time.perf_counter()
    cl = device.opencl()
    rng = np.random.default_rng(0)
    host = [rng.random(elements, np.float32), rng.random(elements, np.float32),
            rng.integers(0, 2 ** 16, elements, dtype=np.uint16)]
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    buffers = [cl.Buffer(dev.context, flags, hostbuf=a) for a in host]
    out = device.allocate_buffer(dev, elements * 4)
    handles = [cl.Kernel(program, f"k{k}") for k in range(kernels)]

    def launch_all() -> float:
        begin = time.perf_counter()
        for kernel in handles:
            kernel(dev.queue, (elements,), (64,), *buffers, out, np.uint64(elements))
        dev.queue.finish()
        return time.perf_counter() - begin

    first = launch_all()
    second = launch_all()
    return {"device": str(dev), "select_device_s": selected - start, "build_s": built - selected,
            "first_launch_s": first, "second_launch_s": second}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=20)
    parser.add_argument("--elements", type=int, default=1 << 20)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.kernels, args.elements)))
        return
    with tempfile.TemporaryDirectory() as cache_root:
        env = {**os.environ, "HLO_MAGIC_CACHE": cache_root}
        env.pop("POCL_CACHE_DIR", None)
        command = [sys.executable, __file__, "--child", "--kernels", str(args.kernels),
                   "--elements", str(args.elements)]
        runs = {}
        for label in ("cold", "warm"):
            begin = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            runs[label] = {**json.loads(done.stdout), "process_s": time.perf_counter() - begin}
    print(f"device: {runs['cold']['device']}; {args.kernels} kernels, "
          f"{args.elements} elements, local size 64")
    print(f"{'':6}{'select':>10}{'build':>10}{'1st launch':>12}{'2nd launch':>12}"
          f"{'process':>10}")
    for label, r in runs.items():
        print(f"{label:6}{r['select_device_s']:10.3f}{r['build_s']:10.3f}"
              f"{r['first_launch_s']:12.3f}{r['second_launch_s']:12.3f}{r['process_s']:10.3f}")
    cold, warm = runs["cold"], runs["warm"]
    print(f"warm/cold, build + first launch: "
          f"{(warm['build_s'] + warm['first_launch_s']) / (cold['build_s'] + cold['first_launch_s']):.3f}")


if __name__ == "__main__":
    main()
