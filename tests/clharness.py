"""Build and run small OpenCL kernels over numpy arrays on the default device (for tests).

``run(source, kernel, arrays, n)`` copies every array to its own buffer, launches
``kernel(arrays..., (ulong)n)`` over ``n`` work-items with a fixed local size (one PoCL compile
per kernel, whatever ``n`` is), and returns copies of all arrays read back. Kernels written with
``elementwise_kernel`` guard ``i < n`` themselves. ``run_cases`` evaluates many expressions
over the same operands in one kernel (a switch on a per-row selector).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from runtime.codegen.cltypes import (FP64_PRAGMA, compute_type, helpers_used, load, prelude_for,
                                     storage_type, store)
from runtime.codegen.templates import FP_CONTRACT_OFF
from runtime.opencl.device import Device, build_program, get_device, opencl

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


def switch_kernel(name: str, operand_types: Sequence[str], out_type: str,
                  cases: Sequence[str]) -> str:
    """A kernel whose work-item i evaluates ``cases[sel[i]]`` on operands x0, x1, ...

    Parameters: one array per operand (storage types), ``int* sel``, the output array. Many
    ops share one kernel this way, so a test pays PoCL's per-kernel compile once.
    """
    params = [(storage_type(et), f"in{k}") for k, et in enumerate(operand_types)]
    params += [("int", "sel"), (storage_type(out_type), "out")]
    loads = "".join(f"  {compute_type(et)} x{k} = {load(et, f'in{k}', 'i')};\n"
                    for k, et in enumerate(operand_types))
    branches = "".join(f"    case {k}: {store(out_type, 'out', 'i', expr)} break;\n"
                       for k, expr in enumerate(cases))
    return elementwise_kernel(name, params, f"{loads}  switch (sel[i]) {{\n{branches}  }}")


def run_cases(operand_types: Sequence[str], out_type: str, cases: dict[str, str],
              operands: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate every case expression (in x0, x1, ...) on all operand rows, one launch.

    Operands and results are storage arrays (f16/bf16 as uint16 bits).
    """
    names = list(cases)
    source = program_source([switch_kernel("cases", operand_types, out_type,
                                           [cases[n] for n in names])])
    rows = len(operands[0])
    tiled = [np.tile(np.asarray(a), len(names)) for a in operands]
    selector = np.repeat(np.arange(len(names), dtype=np.int32), rows)
    out_dtype = np.dtype(_STORAGE_NUMPY[storage_type(out_type)])
    results = run(source, "cases", [*tiled, selector, np.zeros(len(selector), out_dtype)],
                  len(selector))
    return {n: results[-1][k * rows:(k + 1) * rows] for k, n in enumerate(names)}


_STORAGE_NUMPY = {"uchar": np.uint8, "char": np.int8, "ushort": np.uint16, "short": np.int16,
                  "uint": np.uint32, "int": np.int32, "ulong": np.uint64, "long": np.int64,
                  "float": np.float32, "double": np.float64}
