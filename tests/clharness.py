"""Build and run small OpenCL kernels over numpy arrays on the default device (for tests).

``run(source, kernel, arrays, n)`` copies every array to its own buffer, launches
``kernel(arrays..., (ulong)n)`` over ``n`` work-items with a fixed local size (one PoCL compile
per kernel, whatever ``n`` is), and returns copies of all arrays read back. Kernels written with
``elementwise_kernel`` guard ``i < n`` themselves.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from runtime.codegen.cltypes import FP64_PRAGMA, helpers_used, prelude_for
from runtime.codegen.elementwise import FP_CONTRACT_OFF
from runtime.device import Device, build_program, get_device, opencl

LOCAL_SIZE = 64


def elementwise_kernel(name: str, params: Sequence[tuple[str, str]], body: str) -> str:
    """``__kernel void name(__global T* p, ..., ulong n)`` running ``body`` for each i < n.

    ``params`` are (C storage type, parameter name) pairs.
    """
    args = ", ".join(f"__global {c_type}* {pname}" for c_type, pname in params)
    return (f"__kernel void {name}({args}, ulong n) {{\n"
            f"  size_t i = get_global_id(0);\n"
            f"  if (i >= n) return;\n"
            f"{body}\n"
            f"}}\n")


def program_source(kernels: Sequence[str], fp64: bool = True) -> str:
    """Pragmas, the prelude helpers the kernels call, then the kernels."""
    code = "\n".join(kernels)
    header = [FP_CONTRACT_OFF] + ([FP64_PRAGMA] if fp64 else [])
    return "\n".join(header) + "\n\n" + prelude_for(helpers_used(code)) + code


def run(source: str, kernel: str, arrays: Sequence[np.ndarray], n: int,
        device: Device | None = None) -> list[np.ndarray]:
    cl = opencl()
    device = device or get_device()
    program = build_program(device, source)
    flags = cl.mem_flags
    buffers = [cl.Buffer(device.context, flags.READ_WRITE | flags.COPY_HOST_PTR,
                         hostbuf=np.ascontiguousarray(a)) for a in arrays]
    global_size = max(-(-n // LOCAL_SIZE), 1) * LOCAL_SIZE
    getattr(program, kernel)(device.queue, (global_size,), (LOCAL_SIZE,), *buffers, np.uint64(n))
    results = [np.empty_like(a) for a in arrays]
    for host, buffer in zip(results, buffers):
        cl.enqueue_copy(device.queue, host, buffer)
    device.queue.finish()
    return results
