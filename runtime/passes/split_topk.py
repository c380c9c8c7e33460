"""Two-stage top-k: few long rows become chunks whose candidates a second top-k picks from.

The top-k kernel gives each row one work-item (``families.sort``): a beam search's top 8 of
4 rows of 32,768 scores ran on 4 work-items, 184 us a step, while the other cores idled.
Rewritten as a top-k of each of ``C`` chunks of the row (``R x C`` work-items), then a top-k
of the row's ``C x k`` candidates, the work spreads over every core and the second stage is
small. Both stages are ordinary HLO (reshapes, two ``topk``s, the candidates' row indices
made global with an iota, and a gather of the chosen ones), so the candidates are temps that
buffer assignment places.

The result is the same: ``topk`` ranks by its comparison (total order for floats) with ties
going to the lower index, so each chunk's candidates are in that order, chunks come in index
order, and the best ``k`` of the union of the chunks' best ``k`` are the row's best ``k``,
ties included. Only rows whose length divides into chunks of at least ``MIN_CHUNK`` and
``8 k`` elements split (no padding value exists that loses to every float under total order
while keeping the indices apart), and only when there are fewer rows than ``TARGET_ITEMS``.
"""

from __future__ import annotations

import numpy as np

from ..hlo.dtypes import S32
from ..hlo.clone import clone_module
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.literal import Literal
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape, TupleShape, default_layout
from ..target import CPU, Target
from .names import FreshNames

TARGET_ITEMS = 64       # work-items (rows x chunks) the first stage aims for
MIN_CHUNK = 1024        # elements of a chunk at least


def split_topk(module: HloModule, target: Target = CPU) -> HloModule:
    new, _ = clone_module(module)
    split_topk_in_place(new, target)
    return new


def split_topk_in_place(module: HloModule, target: Target = CPU) -> None:
    names = FreshNames(module)
    for comp in module.computations:
        for inst in list(comp.instructions):
            chunks = _chunks(inst)
            if chunks is not None:
                _split(comp, inst, chunks, names)


def _chunks(inst: HloInstruction) -> int | None:
    """Chunks per row for a ``topk`` worth splitting, else None."""
    if inst.opcode != Opcode.TOPK or inst.control_predecessors:
        return None
    src = inst.operands[0].shape
    if not isinstance(src, ArrayShape) or src.rank == 0 \
            or src.minor_to_major != tuple(range(src.rank - 1, -1, -1)):
        return None
    n, k = src.dims[-1], int(inst.k)
    rows = src.element_count // n if n else 0
    if rows == 0 or rows >= TARGET_ITEMS or k == 0:
        return None
    shortest = max(MIN_CHUNK, 8 * k)
    for chunks in range(min(TARGET_ITEMS // rows, n // shortest), 1, -1):
        if n % chunks == 0:
            return chunks
    return None


def _split(comp: HloComputation, topk: HloInstruction, chunks: int, names: FreshNames) -> None:
    x = topk.operands[0]
    src: ArrayShape = x.array_shape
    n, k = src.dims[-1], int(topk.k)
    rows = src.element_count // n
    length = n // chunks
    at = comp.instructions.index(topk)
    values_et = src.element_type

    def add(name: str, opcode: Opcode, shape, operands, literal: Literal | None = None,
            **attrs) -> HloInstruction:
        nonlocal at
        inst = HloInstruction(names.fresh(f"{topk.name}.{name}"), opcode, shape, list(operands),
                              dict(attrs), literal=literal, location=topk.location, parent=comp)
        comp.instructions.insert(at, inst)
        at += 1
        return inst

    def array(et, *dims: int) -> ArrayShape:
        return ArrayShape(et, dims, layout=default_layout(len(dims)))

    def stage(name: str, operand: HloInstruction, dims: tuple[int, ...]
              ) -> tuple[HloInstruction, HloInstruction]:
        shape = TupleShape((array(values_et, *dims), array(S32, *dims)))
        both = add(name, Opcode.TOPK, shape, [operand], k=k,
                   largest=topk.attrs.get("largest", True))
        return (add(f"{name}.values", Opcode.GET_TUPLE_ELEMENT, shape.elements[0], [both],
                    index=0),
                add(f"{name}.indices", Opcode.GET_TUPLE_ELEMENT, shape.elements[1], [both],
                    index=1))

    pieces = add("chunks", Opcode.RESHAPE, array(values_et, rows, chunks, length), [x])
    values, local = stage("chunk_topk", pieces, (rows, chunks, k))
    chunk = add("chunk", Opcode.IOTA, array(S32, rows, chunks, k), [], iota_dimension=1)
    size = add("length", Opcode.CONSTANT, array(S32), [], _s32(length))
    sizes = add("lengths", Opcode.BROADCAST, array(S32, rows, chunks, k), [size], dimensions=())
    start = add("start", Opcode.MULTIPLY, array(S32, rows, chunks, k), [chunk, sizes])
    found = add("found", Opcode.ADD, array(S32, rows, chunks, k), [local, start])
    candidates = add("candidates", Opcode.RESHAPE, array(values_et, rows, chunks * k), [values])
    best, picked = stage("merged_topk", candidates, (rows, k))
    row = add("row", Opcode.IOTA, array(S32, rows, k), [], iota_dimension=0)
    width = add("width", Opcode.CONSTANT, array(S32), [], _s32(chunks * k))
    widths = add("widths", Opcode.BROADCAST, array(S32, rows, k), [width], dimensions=())
    row_start = add("row_start", Opcode.MULTIPLY, array(S32, rows, k), [row, widths])
    flat_pick = add("flat_pick", Opcode.ADD, array(S32, rows, k), [row_start, picked])
    where = add("where", Opcode.RESHAPE, array(S32, rows, k, 1), [flat_pick])
    flat_found = add("flat_found", Opcode.RESHAPE, array(S32, rows * chunks * k), [found])
    index = add("index", Opcode.GATHER, array(S32, rows, k), [flat_found, where],
                offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,),
                index_vector_dim=2, slice_sizes=(1,))
    out: TupleShape = topk.tuple_shape
    result_values = add("values", Opcode.RESHAPE, out.elements[0], [best])
    result_index = add("index_out", Opcode.RESHAPE, out.elements[1], [index])
    topk.opcode = Opcode.TUPLE
    topk.operands = [result_values, result_index]
    topk.attrs = {}


def _s32(value: int) -> Literal:
    return Literal(ArrayShape(S32, (), layout=default_layout(0)), np.array(value, np.int32))


__all__ = ["split_topk", "split_topk_in_place", "TARGET_ITEMS", "MIN_CHUNK"]
