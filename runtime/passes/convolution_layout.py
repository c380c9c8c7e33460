"""Convolution kernels copied into the layout the CPU's convolution kernels read fast (XLA's
layout assignment constrains convolution operands the same way).

The CPU convolution family vectorises over the kernel's output features: a work-item loads a
vector of them per tap and input feature, which is one ``vload`` when the output-feature
dimension is the kernel's minor one and a gather of strided elements otherwise. The input
gradient of a convolution reads the forward kernel with its feature roles swapped (JAX's
``b01f_01oi->b01f`` on a ``[kh, kw, in, out]`` kernel), so its output features are strided:
ResNet-18's measured at 0.28-0.45x of XLA's GFLOP/s. Copying such a kernel into a layout
whose minor dimension is the output feature (a transpose of a few hundred KiB to a few MiB,
once per use) makes every load a ``vload``; the copy is a separate kernel (fusion never
recomputes a convolution's operand) and a temp buffer the arena reuses.

The narrow form (fewer output features than a vector: an RGB output layer) vectorises over
the kernel's input features instead, so an ungrouped kernel with few output features is
copied input-feature-minor (a UNet's [3,3,32,3] output kernel: 0.41x of XLA's GFLOP/s with
strided loads, 0.92x copied). Only convolutions the CPU family takes need it
(``Target.relayouts_convolution_kernels``); GPUs lower convolutions elementally.
"""

from __future__ import annotations

from ..hlo.ir import HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape, Layout
from ..target import CPU, Target
from .names import FreshNames


def relayout_convolution_kernels_in_place(module: HloModule, target: Target = CPU) -> None:
    if not target.relayouts_convolution_kernels:
        return
    names = FreshNames(module)
    for comp in module.computations:
        for conv in list(comp.instructions):
            if conv.opcode != Opcode.CONVOLUTION or conv.control_predecessors:
                continue
            kernel = conv.operands[1]
            wanted = _wanted_layout(conv, target)
            if wanted is None:
                continue
            copy = HloInstruction(names.fresh(f"{kernel.name}.relayout"), Opcode.COPY,
                                  kernel.array_shape.with_layout(wanted),
                                  [kernel], parent=comp)
            comp.instructions.insert(comp.instructions.index(conv), copy)
            conv.operands[1] = copy


def _wanted_layout(conv: HloInstruction, target: Target) -> Layout | None:
    """The kernel's layout with the dimension the family vectorises over moved to the minor
    end (the output features; the input features for the narrow form, ungrouped with fewer
    output features than a vector), or None when it is there already or the family would
    not vectorise the kernel."""
    kernel = conv.operands[1].shape
    if not isinstance(kernel, ArrayShape) or kernel.rank < 2:
        return None
    dn = conv.dim_labels
    groups = conv.int_attr("feature_group_count", 1) * conv.int_attr("batch_group_count", 1)
    if kernel.dims[dn.kernel_output_feature] // groups >= target.tiles.min_lanes:
        minor = dn.kernel_output_feature
    elif groups == 1:
        minor = dn.kernel_input_feature
    else:
        return None
    order = kernel.minor_to_major
    if order[0] == minor:
        return None
    tail = kernel.layout.tail if kernel.layout is not None else ""
    return Layout((minor,) + tuple(d for d in order if d != minor), tail)


__all__ = ["relayout_convolution_kernels_in_place"]
