"""A float or complex division by a constant as the multiplication XLA computes instead.

XLA's algebraic simplifier rewrites ``A / C``, where ``A`` is not a constant and ``C`` is a
constant or a broadcast of one, as ``A * (1 / C)``, the reciprocal worked out once in the
element type. The product can differ from the correctly rounded quotient in the last place,
and a function with steps makes that a different answer: JAX's ``floor(x / 0.1)`` of
``x = 1.3`` is 12 divided, 13 multiplied (XLA's), and ``x / 255`` seen bit for bit differs.
Every division of JAX's text by a constant (``jnp.mean``'s count, a bin width, a scale)
becomes the multiplication XLA runs, fused or not. XLA's optimised text carries none of
them (XLA already rewrote them). Integer division is left as it is, and so are bf16 and the
8-bit floats: XLA computes those in a wider type (``ElementType.arithmetic_type``), where the
divisor is no longer a constant of their own type, and its answer is the rounded quotient.
"""

from __future__ import annotations

import numpy as np

from ..hlo.ir import HloInstruction, HloModule
from ..hlo.literal import Literal
from ..hlo.opcode_enum import Opcode
from ..target import CPU, Target
from .part_builder import PartBuilder, expand_matching_in_place


def multiply_by_reciprocals_in_place(module: HloModule, target: Target = CPU) -> None:
    expand_matching_in_place(module, lambda i: _constant_divisor(i) is not None, _expand)


def _constant_divisor(inst: HloInstruction) -> HloInstruction | None:
    """The constant ``inst`` divides by (directly or broadcast), when XLA's rewrite applies."""
    if inst.opcode != Opcode.DIVIDE:
        return None
    et = inst.array_shape.element_type
    dividend, divisor = inst.operands
    if not (et.is_float or et.is_complex) or et.arithmetic_type is not None \
            or dividend.opcode == Opcode.CONSTANT:
        return None
    constant = divisor.operands[0] if divisor.opcode == Opcode.BROADCAST else divisor
    if constant.opcode != Opcode.CONSTANT or constant.literal is None \
            or constant.literal.data is None:
        return None
    return constant


def _expand(build: PartBuilder, inst: HloInstruction) -> HloInstruction | None:
    """``inst`` itself, now a multiply (its name, layout and control edges kept)."""
    constant = _constant_divisor(inst)
    if constant is None:
        return None
    literal = constant.literal
    assert literal is not None      # _constant_divisor checked it
    data = literal.numpy()
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        # in the element type, as XLA's InvertConstant: 1/0 is inf, 1/(tiny) may be inf; and
        # XLA folds it with f32 and f64 denormals flushed, so 1/(-2^-127) is -inf (fuzzer)
        if data.dtype in (np.float32, np.float64):
            data = np.where(np.abs(data) < np.finfo(data.dtype).tiny,
                            np.copysign(np.zeros_like(data), data), data)
        inverse = np.ones_like(data) / data
    divisor = build.add(Opcode.CONSTANT, constant.shape,
                        literal=Literal(constant.shape, inverse.astype(data.dtype)))
    old = inst.operands[1]
    if old.opcode == Opcode.BROADCAST:
        divisor = build.add(Opcode.BROADCAST, old.shape, [divisor],
                            dimensions=old.ints_attr("dimensions"))
    inst.opcode = Opcode.MULTIPLY
    inst.operands = [inst.operands[0], divisor]
    build.out.append(inst)
    return inst
