"""``dynamic-reshape`` for the dynamic-padding pass, as XLA's dynamic padder computes it.

The operand's elements inside its sizes come first, in their logical row-major order, then
its padding in storage order (XLA sorts a validity mask, stably); the result takes that
sequence in the same order: its positions inside its sizes in their logical row-major order,
its padding after. Well-formed programs (as many elements inside the result's sizes as
inside the operand's) get the logical reshape, also where XLA's CPU backend reads padding
(sizes that cross the dimension groups it reshapes apart: ``s32[2,<=3,<=4]`` with sizes 2, 3
as ``s32[<=6,<=4]`` with sizes 3, 4); one wanting more gets the operand's padding next, as
XLA's one-dimensional results do. Like XLA's mask, the order ignores the size of
dimension 0, whose padding is last in storage anyway. Sizes are clamped to ``[0, bound]``
for the layout and kept as given for ``get-dimension-size``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import HloUnsupportedError
from ..hlo.dtypes import ELEMENT_TYPES, ElementType
from ..hlo.ir import HloComputation, HloInstruction
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape
from .part_builder import PRED, PartBuilder, array, dims_of, type_of

S32 = ELEMENT_TYPES["s32"]

# a value's dynamic dimensions: dimension -> the s32[] instruction holding its size
Sizes = dict[int, HloInstruction]


def reshape_sizes(build: PartBuilder, inst: HloInstruction,
                  operand_sizes: Sizes) -> list[HloInstruction]:
    """The result sizes XLA infers for a ``reshape`` of a dynamic value, as
    ``dynamic-reshape`` operands: the one dynamic result dimension gets the product of the
    sizes of the operand dimensions it merges (their bounds where static). Other reshapes of
    dynamic values (splitting a dynamic dimension, where XLA's CPU backend keeps the bound or
    fails) are refused at their line."""
    (x,) = inst.operands
    shape = inst.shape
    assert isinstance(shape, ArrayShape)      # the opcode table: an array result
    ins, outs = dims_of(x), shape.dims
    dynamic = [d for d, flag in enumerate(shape.dynamic) if flag]
    merged = _merged(ins, outs, dynamic[0], set(operand_sizes)) if len(dynamic) == 1 else None
    if merged is None:
        raise HloUnsupportedError(
            f"{inst.opcode} {inst.name} reshapes {x.shape} (dynamic in dimensions "
            f"{sorted(operand_sizes)}) to {shape}; a reshape of a dynamic value must merge all "
            "its dynamic dimensions into the result's one dynamic dimension (dynamic-reshape "
            "takes any sizes)", instruction=inst.name, location=inst.location)
    size = build.constant(np.array(1, np.int32), S32)
    for d in merged:
        bound = build.constant(np.array(ins[d], np.int32), S32)
        size = build.binary(Opcode.MULTIPLY, size, operand_sizes.get(d, bound))
    return [size if d == dynamic[0] else build.constant(np.array(n, np.int32), S32)
            for d, n in enumerate(outs)]


def _merged(ins: tuple[int, ...], outs: tuple[int, ...], out: int,
            dynamic: set[int]) -> range | None:
    """The operand dimensions making up result dimension ``out`` alone (the dimensions before
    and after it holding as many elements as the operand's before and after them), if they
    include every dynamic one."""
    for start in range(len(ins) + 1):
        for stop in range(start, len(ins) + 1):
            group = range(start, stop)
            if dynamic <= set(group) and np.prod(ins[:start]) == np.prod(outs[:out]) \
                    and np.prod(ins[start:stop]) == outs[out] \
                    and np.prod(ins[stop:]) == np.prod(outs[out + 1:]):
                return group
    return None


def dynamic_reshape(build: PartBuilder, inst: HloInstruction, sizes: list[HloInstruction],
                    operand_sizes: Sizes, assign: Callable[[ElementType], HloComputation]
                    ) -> tuple[HloInstruction, Sizes]:
    """The static value computing ``inst`` (a ``dynamic-reshape`` or a ``reshape``, its
    result's sizes ``sizes``) and its result's sizes; ``assign(et)`` is a scatter combiner
    keeping the update."""
    x = inst.operands[0]
    shape = inst.shape
    assert isinstance(shape, ArrayShape)      # the opcode table: an array result
    n = int(np.prod(dims_of(x)))
    if n != int(np.prod(shape.dims)) or len(sizes) != len(shape.dims):
        raise HloUnsupportedError(
            f"{inst.opcode} {inst.name} reshapes {x.shape} to {shape} with {len(sizes)} "
            "sizes; a dynamic-reshape keeps the bounds' element count and gives one size per "
            "result dimension", instruction=inst.name, location=inst.location)
    out_dims = shape.dims
    result_sizes = {d: s for d, s in enumerate(sizes) if shape.dynamic[d]}
    ordered_out = {d: s for d, s in result_sizes.items() if d}
    value = inside_first(build, x, operand_sizes, assign)
    if n and ordered_out:
        value = build.add(Opcode.GATHER, array(type_of(x), out_dims),
                          [value, _ranks(build, out_dims, ordered_out, out_dims + (1,))],
                          offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,),
                          index_vector_dim=len(out_dims), slice_sizes=(1,))
    value = build.reshape(value, out_dims)
    if value is x:      # a value of its own: x keeps its sizes
        value = build.add(Opcode.COPY, array(type_of(x), out_dims), [x])
    return value, result_sizes


def inside_first(build: PartBuilder, x: HloInstruction, sizes: Sizes,
                 assign: Callable[[ElementType], HloComputation]) -> HloInstruction:
    """``x`` flattened in the order above: its elements inside ``sizes`` first, in their
    logical row-major order (the compact array of its runtime shape), then its padding."""
    n = int(np.prod(dims_of(x)))
    value = build.reshape(x, (n,))
    ordered_in = {d: s for d, s in sizes.items() if d}
    if n and ordered_in:
        ranks = _ranks(build, dims_of(x), ordered_in, (n, 1))
        value = build.add(Opcode.SCATTER, value.shape,
                          [build.full(0, type_of(x), (n,)), ranks, value],
                          update_window_dims=(), inserted_window_dims=(0,),
                          scatter_dims_to_operand_dims=(0,), index_vector_dim=1,
                          unique_indices=True, to_apply=assign(type_of(x)))
    return value


def _ranks(build: PartBuilder, dims: tuple[int, ...], sizes: Sizes,
           shape: tuple[int, ...]) -> HloInstruction:
    """Each position's place in the order above (s32, reshaped to ``shape``): a position
    inside the sizes at its row-major index over them, the ``p``-th padding position at
    ``p`` past them all. The inside positions before position ``i`` number ``sum over d of
    [i's dims before d are inside] * min(i_d, L_d) * (product of L_e after d)``, which is
    also an inside position's row-major index; its storage index less that counts the
    padding before it."""
    def scalar(v: int) -> HloInstruction:
        return build.constant(np.array(v, np.int32), S32)

    def spread(v: HloInstruction) -> HloInstruction:
        return build.broadcast(v, dims, ())

    lengths = [build.binary(Opcode.MINIMUM, build.binary(Opcode.MAXIMUM, sizes[d], scalar(0)),
                            scalar(n)) if d in sizes else scalar(n) for d, n in enumerate(dims)]
    strides = [scalar(1)]
    for length in reversed(lengths[1:]):
        strides.insert(0, build.binary(Opcode.MULTIPLY, length, strides[0]))
    inside_total = build.binary(Opcode.MULTIPLY, lengths[0], strides[0])
    zeros = build.full(0, S32, dims)
    before, inside = zeros, build.full(True, PRED, dims)
    for d in range(len(dims)):
        index = build.add(Opcode.IOTA, array(S32, dims), iota_dimension=d)
        step = build.binary(Opcode.MULTIPLY,
                            build.binary(Opcode.MINIMUM, index, spread(lengths[d])),
                            spread(strides[d]))
        before = build.binary(Opcode.ADD, before, build.select(inside, step, zeros))
        inside = build.binary(Opcode.AND, inside,
                              build.compare(index, spread(lengths[d]), "LT"))
    storage = build.reshape(build.add(Opcode.IOTA, array(S32, (int(np.prod(dims)),)),
                                      iota_dimension=0), dims)
    padding = build.binary(Opcode.ADD, spread(inside_total),
                           build.binary(Opcode.SUBTRACT, storage, before))
    return build.reshape(build.select(inside, before, padding), shape)
