"""dot (and output fusions over a dot) as register-tiled kernels on the CPU target.

The dot's dimensions become *axes*: batch (in both operands and the output), free (in one
operand and the output), contracting (in both operands). Size-1 axes are dropped. Three kernel
forms cover every layout in which some axis is contiguous where it must be:

* outer-product form: one operand (the *vector operand*) has a free axis that is contiguous
  in memory; each work-item holds an ``R`` x ``V*L`` register tile (``tiles.Tile``) of the
  output, and per contraction step loads ``V`` vectors of that operand and broadcasts one
  element of the other operand per row. Rows run over the other operand's free axes,
  columns over the contiguous axis, and the work-item's third id over batch axes and the
  vector operand's remaining free axes. Over a few rows (``tiles.stream_rows``) the tile is
  wider and the contraction runs in steps, each sweeping the tile's vectors in turn
  (``_streams``).
* inner-product form: both operands are contiguous along one contracting axis (``A @ B^T``,
  attention's ``Q K^T``, matrix-vector); each work-item accumulates a block of output
  elements (``tiles.inner_rows`` x ``tiles.inner_cols``: 4x4 with AVX-512's 32 registers,
  4x2 on AVX2) in vectors along that axis, sums each vector's lanes in a fixed order, and
  finishes the remainder of the axis with scalars. ``A @ B^T`` with a ``B`` too large for
  the caches and an ``A`` that fits the second-level one (a language model's logits) takes
  it in work-groups holding every row, 4x6 blocks: ``B`` is read once, with no panel copy.
* packed form: ``A @ B^T`` with one contracting axis, contiguous in both operands, and enough
  rows of ``A`` (and any dot the outer form takes with one contracting axis and more rows
  than one of its work-groups covers: on targets with ``tiles.pack_contiguous``, elsewhere
  when one packed work-group's tiles cover every row): each
  work-group copies the column operand's part for its column block into a local-memory panel laid out ``[k][column]`` and runs outer-form tiles on it
  (the inner form's per-element lane sums cost as much as the products when the contraction
  is short, and its small blocks reload both operands every step; on AVX2 the outer form's
  column panel no longer stays in the first-level cache). A dot of fewer products than
  ``tiles.pack_min_products`` never packs: without local memory its kernel can be a stage
  of a chain or of a device loop (a scan step's small dot).

On x86 CPUs under PoCL (``TileShape.pair_madd``) the outer and packed forms of integer dots
of 8- or 16-bit operands into 32 bits take two contraction steps at a time: both steps'
elements as 16-bit halves of 32-bit lanes, multiplied and pair-summed by ``vpmaddwd``
(``DotPlan.pairs``).

Batch, free and contracting axes beyond these are index math; the only copy is the packed
form's panel in local memory, so buffer assignment sees exactly the module's buffers. Anything else (a GPU
device, mixed float/integer operands, an operand wider than the result, pred) declines to
the elemental loop kernel, which is correct for every dot.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, replace

from ...hlo.dtypes import ElementType
from ...hlo.ir import HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.shape import ArrayShape
from .. import cltypes
from ..elemental import ElementalEmitter, element_strides, row_major
from ..kernel import KernelBuilder
from .loop import kernel_builder, operand_leaves
from ..context import LoweringContext
from ..plan import Launch
from ...target import Target, TargetKind, TileShape
from .tiles import (Accumulation, Contraction, OutputWriter, Tile, begin_tiles,
                    lanes_for, launch_3d, linear_sum, operand_buffer, pointer,
                    register_contraction, rows_for, tiled_accumulation, vectors_for)
_SCALAR_BYTES = {"float": 4, "uint": 4, "double": 8, "ulong": 8}


@dataclass(frozen=True)
class DotAxis:
    """One index of the dot: its extent and the dimension it is in each operand and the
    output (None where it does not occur)."""

    size: int
    lhs: int | None
    rhs: int | None
    out: int | None

    def dim(self, side: str) -> int | None:
        value: int | None = getattr(self, side)
        return value

    def at(self, side: str) -> int:
        """``dim`` of a side the axis is known to index (a contracting axis, either operand;
        a free axis, its own); None there is a bug in the plan."""
        d = self.dim(side)
        if d is None:
            raise TypeError(f"the axis of size {self.size} does not index {side}")
        return d


@dataclass(frozen=True)
class DotPlan:
    """Which form computes the dot and how its axes map onto the kernel's loops."""

    form: str                       # "outer" | "inner" | "packed"
    acc: Accumulation
    row_side: str                   # operand whose elements are broadcast per row ("lhs"/"rhs")
    rows: tuple[DotAxis, ...]
    cols: tuple[DotAxis, ...]
    outer: tuple[DotAxis, ...]
    contracting: tuple[DotAxis, ...]
    vector_k: DotAxis | None        # inner form: the contiguous contracting axis
    lanes: int
    vectors: int                    # outer form: vectors per tile row; inner: output columns
    tile_rows: int
    group: int | None = None        # row blocks a work-group (None: the target's row_group)
    # outer form: the contraction in steps of this many, each sweeping every vector of the
    # tile before the next (None: each step loads all the tile's vectors)
    stream_k: int | None = None
    # outer and packed forms of integer dots: two contraction steps at a time, as 16-bit
    # pairs multiplied and summed by ``xla_pair_madd<lanes>`` (``TileShape.pair_madd``); the
    # packed form's panel then holds the pairs (``_fill_pair_panel``)
    pairs: bool = False

    @property
    def col_side(self) -> str:
        return "rhs" if self.row_side == "lhs" else "lhs"


def _axes(dot: HloInstruction):
    lhs: ArrayShape = dot.operands[0].array_shape
    rhs: ArrayShape = dot.operands[1].array_shape
    lb, rb = dot.ints_attr("lhs_batch_dims"), dot.ints_attr("rhs_batch_dims")
    lc, rc = dot.ints_attr("lhs_contracting_dims"), dot.ints_attr("rhs_contracting_dims")
    lf = [d for d in range(lhs.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.rank) if d not in rb and d not in rc]
    batch = [DotAxis(lhs.dims[x], x, y, k) for k, (x, y) in enumerate(zip(lb, rb))]
    lhs_free = [DotAxis(lhs.dims[x], x, None, len(lb) + k) for k, x in enumerate(lf)]
    rhs_free = [DotAxis(rhs.dims[y], None, y, len(lb) + len(lf) + k) for k, y in enumerate(rf)]
    contracting = [DotAxis(lhs.dims[x], x, y, None) for x, y in zip(lc, rc)]

    def kept(axes):
        return tuple(ax for ax in axes if ax.size != 1)
    strides = {"lhs": element_strides(lhs), "rhs": element_strides(rhs)}
    return kept(batch), kept(lhs_free), kept(rhs_free), _joined(kept(contracting), strides)


def _joined(axes: tuple[DotAxis, ...], strides: dict) -> tuple[DotAxis, ...]:
    """Contracting axes with neighbours laid out as one axis in both operands joined: a
    weight gradient over a sequence of batches (``[T, B, D]`` contracted over ``T`` and
    ``B``) is then a dot with one contracting axis, which the packed and inner forms take.
    Index ``i`` of the joined axis is at ``i`` times the inner axis's stride."""
    out: list[DotAxis] = []
    for ax in axes:
        prev = out[-1] if out else None
        if prev is not None and all(
                strides[side][prev.at(side)] == strides[side][ax.at(side)] * ax.size
                for side in ("lhs", "rhs")):
            out[-1] = DotAxis(prev.size * ax.size, ax.lhs, ax.rhs, None)
        else:
            out.append(ax)
    return tuple(out)


def plan_dot(c: Contraction, target: Target) -> DotPlan | None:
    acc = tiled_accumulation(c, target)
    tiles = target.tiles
    if acc is None:
        return None
    lhs, rhs = (o.array_shape for o in c.operands)
    strides = {"lhs": element_strides(lhs), "rhs": element_strides(rhs)}
    batch, lhs_free, rhs_free, contracting = _axes(c.op)
    free = {"lhs": lhs_free, "rhs": rhs_free}

    def unit(axis: DotAxis, side: str) -> bool:
        d = axis.dim(side)
        return d is not None and strides[side][d] == 1

    best = _column_axis(c, acc, tiles, free, unit)
    tiny = _extent((*batch, *lhs_free, *rhs_free, *contracting)) < tiles.pack_min_products
    if best is not None:
        side, v = best
        other = "lhs" if side == "rhs" else "rhs"
        outer = batch + tuple(a for a in free[side] if a is not v)
        cached = _cached(c, side, free[side], contracting, tiles)
        packs = not tiny and not _outer_group_covers(free[other], tiles) and (
            tiles.pack_contiguous or not cached) and not (
            cached and _one_panel(free[other], tiles))
        packed = (_packed_plan(acc, tiles, other, free[other], v, outer, contracting)
                  if packs else None)
        if packed is not None:
            return replace(packed, pairs=_pairs(c, acc, tiles, contracting, packed.lanes))
        lanes = lanes_for(acc, v.size, tiles)
        assert lanes is not None
        rows = free[other]
        count = _extent(rows)
        tile_rows = rows_for(count, tiles)
        vectors = min(tiles.stream_vectors, tiles.stream_accumulators // tile_rows)
        pairs = _pairs(c, acc, tiles, contracting, lanes)
        if not pairs and _streams(count, v, contracting, lanes * vectors, tiles):
            return DotPlan("outer", acc, other, rows, (v,), outer, contracting, None, lanes,
                           vectors, tile_rows, stream_k=tiles.stream_k)
        return DotPlan("outer", acc, other, rows, (v,), outer, contracting, None,
                       lanes, vectors_for(v.size, lanes, tiles),
                       rows_for(count, tiles), pairs=pairs)
    for k in contracting:
        if unit(k, "lhs") and unit(k, "rhs"):
            bits = rhs.element_type.bits
            column_bytes = _extent(rhs_free) * k.size * bits // 8
            row_bits = lhs.element_type.bits
            all_rows = _all_rows_plan(acc, tiles, lhs_free, rhs_free, batch, contracting, k,
                                      row_bits, column_bytes)
            if all_rows is not None:
                return all_rows
            if len(rhs_free) == 1 and not tiny \
                    and _packs_over_inner(lhs_free, k, column_bytes, tiles):
                packed = _packed_plan(acc, tiles, "lhs", lhs_free, rhs_free[0], batch,
                                      contracting, min_contraction=1)
                if packed is not None:
                    return packed
            rest = tuple(a for a in contracting if a is not k)
            return DotPlan("inner", acc, "lhs", lhs_free, rhs_free, batch, rest, k,
                           lanes_for(acc, k.size, tiles) or acc.lanes, tiles.inner_cols,
                           min(tiles.inner_rows, rows_for(_extent(lhs_free), tiles)))
    return None


# operand types whose values 16-bit lanes hold exactly, for ``xla_pair_madd``
_PAIR_OPERANDS = frozenset({"s8", "u8", "s16"})


def _pairs(c: Contraction, acc: Accumulation, tiles: TileShape, contracting,
           lanes: int) -> bool:
    """Whether an integer dot into 32 bits takes contraction steps in pairs (x86's
    ``vpmaddwd``): its operands are 8-bit or s16 (u16 does not fit a signed 16-bit lane), one
    contracting axis, a vector width the helpers cover. Each lane's two products are summed
    in 32 bits and added to its accumulator, which wraps as before: the same bits as one
    step at a time. An int8-quantised MLP's 256x2048x512 s8 dot: see ``TileShape.pair_madd``."""
    return (tiles.pair_madd and acc.scalar == "uint" and lanes in _PAIR_LANES
            and c.op.array_shape.element_type.name in ("s32", "u32") and len(contracting) == 1
            and all(o.array_shape.element_type.name in _PAIR_OPERANDS for o in c.operands))


def _streams(rows: int, col: DotAxis, contracting, width: int, tiles: TileShape) -> bool:
    """Whether the outer form takes the streamed order: few rows (a decoding step's tokens),
    one contracting axis of several steps, columns for a whole streamed tile. The plain order
    reads each contraction step's row of the column operand a tile's width at a time, one
    page of memory after another when the rows are long (a step of 4 tokens through a
    256 x 1024 f32 weight: 128 bytes of each 4 KiB row), which the prefetchers do not follow;
    the streamed order reads a tile's ``width`` columns of ``stream_k`` rows in turn, and
    keeps each output's sum in contraction order (the same bits)."""
    return (0 < rows <= tiles.stream_rows and len(contracting) == 1
            and contracting[0].size >= 2 * tiles.stream_k and col.size >= width)


def _column_axis(c: Contraction, acc: Accumulation, tiles: TileShape, free: dict,
                 unit) -> tuple[str, DotAxis] | None:
    """(side, axis) of the free axis the outer and packed forms load as vectors: one
    contiguous in its operand, the output's contiguous one where it takes the widest tile
    (tile rows are then stored as vectors and the epilogue reads its operands as vectors),
    else the longest. A weight gradient over a 16000-word embedding, ``[256, 16000]^T @ [256,
    256]``, took its lanes along the 16000 words, each lane storing to another output row.
    Kernel time, best of 11, GFLOP/s along the output's rows / the longest axis, AVX-512
    (AVX2): that gradient 206 / 123 (171 / 135), 3072x512x768 210 / 171 (168 / 167),
    4096x64x32 105 / 82, 2048x256x96 217 / 174 (179 / 163); on AVX2 64 or 128 columns tile
    two vectors wide, not three, and lose (8192x64x64 93 / 126, 4096x128x128 115 / 157)."""
    out = c.inst.shape if isinstance(c.inst.shape, ArrayShape) \
        and c.inst.shape.rank == c.op.shape.rank else c.op.array_shape
    stored = element_strides(out)
    best = best_stored = None
    for side in ("rhs", "lhs"):
        for axis in free[side]:
            lanes = lanes_for(acc, axis.size, tiles) if unit(axis, side) else None
            if lanes is None:
                continue
            if best is None or axis.size > best[1].size:
                best = (side, axis)
            if stored[axis.out] == 1 and axis.size >= tiles.vectors * lanes \
                    and vectors_for(axis.size, lanes, tiles) == tiles.vectors:
                best_stored = (side, axis)
    return best_stored or best


def _packed_plan(acc: Accumulation, tiles: TileShape, row_side: str, rows, col: DotAxis, outer,
                 contracting, min_contraction: int | None = None) -> DotPlan | None:
    """The packed form: one contracting axis, long enough that a panel is worth copying
    (``min_contraction``, by default ``tiles.pack_min_contraction``: against the outer form
    reading contiguous columns in place), one column axis ``col`` (of the other operand than
    ``row_side``) and enough rows (``tiles.pack_min_rows``) to reuse each packed panel. Kernel
    time, best of 21, GFLOP/s packed / outer form, AVX2 setting: 256x32x1024 (an LSTM's weight
    gradient over a batch of 32) 61 / 72, 128x16x1024 43 / 64, 512x32x512 50 / 66, at K=64
    even (900 / 908 over eight shapes), at K=128 158 / 134. Against the inner form (``A @
    B^T``) a short contraction packs too: see ``_packs_over_inner``."""
    if min_contraction is None:
        min_contraction = tiles.pack_min_contraction
    if len(contracting) != 1 or _extent(rows) < tiles.pack_min_rows \
            or contracting[0].size < min_contraction:
        return None
    lanes = lanes_for(acc, col.size, tiles)
    if lanes is None:
        return None
    vectors = vectors_for(col.size, lanes, tiles)
    return DotPlan("packed", acc, row_side, rows, (col,), outer, contracting, contracting[0],
                   lanes, vectors, rows_for(_extent(rows), tiles))


# the most work-items a work-group of the all-rows inner form holds
_ALL_ROWS_MAX_GROUP = 256


def _all_rows_plan(acc: Accumulation, tiles: TileShape, rows, cols, outer, contracting,
                   k: DotAxis, row_bits: int, column_bytes: int) -> DotPlan | None:
    """The inner form for ``A @ B^T`` with a ``B`` read from memory (larger than
    ``tiles.pack_nt_reread_bytes``) and an ``A`` that stays in the second-level cache (at
    most ``tiles.all_rows_bytes``), in work-groups holding every row block (at most
    ``_ALL_ROWS_MAX_GROUP``): each group reads its columns of ``B`` once, straight from
    memory into the first-level cache, and every tile of rows uses them there, while ``A``
    comes from the second-level cache. The packed form copied each panel of ``B`` first (a
    third of its time on GPT-2's logits), and the inner form over a few row blocks a group
    read all of ``B`` from memory once per group of rows. Kernel time, best of 3-15, Intel
    Xeon (AVX-512), packed / this: GPT-2's logits 128x768x50257 41.9 / 36.9 ms (XLA 37.9),
    128x768x8192 6.72 / 5.52, 256x768x3072 4.61 / 3.94, 128x3072x768 2.62 / 2.30,
    32x768x3072 0.90 / 0.59 (its 9.4 MB ``B`` cycled through 20 copies: 1.10 / 0.84),
    16x768x3072 0.63 / 0.34; tiles of 4x6 outputs against 4x4 5.93, 2x8 6.30, 4x2 8.12 ms
    (128x768x8192). Where ``B`` stays in cache, re-reading it costs less than re-reading
    ``A``: 512x768x512 (1.5 MB each) 1.30 / 1.52 ms."""
    row_bytes = _extent(rows) * _extent(contracting) * row_bits // 8
    if column_bytes <= tiles.pack_nt_reread_bytes or row_bytes > tiles.all_rows_bytes:
        return None
    tile_rows = min(tiles.all_rows_inner_rows, _extent(rows))
    group = -(-_extent(rows) // tile_rows)
    if group > _ALL_ROWS_MAX_GROUP:
        return None
    rest = tuple(a for a in contracting if a is not k)
    return DotPlan("inner", acc, "lhs", rows, cols, outer, rest, k,
                   lanes_for(acc, k.size, tiles) or acc.lanes, tiles.all_rows_inner_cols,
                   tile_rows, group)


def _packs_over_inner(rows, k: DotAxis, column_bytes: int, tiles: TileShape) -> bool:
    """Whether ``A @ B^T`` has rows enough for the packed form to beat the inner one:
    ``tiles.pack_nt_min_rows``; ``tiles.pack_min_rows`` where ``B`` is larger than
    ``tiles.pack_nt_reread_bytes`` (the inner form reads it again from memory for every
    tile of rows, the packed form once; where ``A`` stays in cache, ``_all_rows_plan``
    reads it once without a copy and comes first); ``tiles.pack_long_min_rows`` over a long
    contraction ``k``, against which the inner form's lane sums cost little. Kernel time,
    best of 15-21, GFLOP/s packed / inner, AVX-512 (AVX2): an LSTM's gradient contraction of
    1024 with 32 rows, N=256 97 / 128 (75 / 82), with 16 rows 43 / 76 (44 / 57), 64x1024x256
    67 / 67 (88 / 88); a GRU's 16x576x192 48 / 82 (62 / 78), 32x768x256 128 / 170 (137 /
    159), 48x192x576 149 / 135 (151 / 130); with a 9.4 MB ``B``, 32x768x3072 118 / 105 (131 /
    118), 40x768x3072 136 / 110 (134 / 84). Over a contraction shorter than
    ``tiles.pack_min_contraction`` the inner form does a few vector steps and then as many
    lane sums as outputs, so ``tiles.pack_min_rows`` rows pack: wall time of a run, best of
    30, inner / packed / XLA, AMD EPYC (Zen 5, AVX-512): a Swin window attention's ``Q K^T``
    (96 batches of 49x49 over 32) 342 / 151 / 245 us, over 16 584 / 213 / 184, over 8 293 /
    97 / 87; 256 batches of 16x16 over 32 204 / 128 / 136; 32 of 128x128 over 32 705 / 208 /
    285; 8 of 256x256 over 48 670 / 215 / 290."""
    extent = _extent(rows)
    if k.size < tiles.pack_min_contraction:
        return extent >= tiles.pack_min_rows
    if k.size >= tiles.pack_long_contraction:
        return extent >= tiles.pack_long_min_rows
    if column_bytes > tiles.pack_nt_reread_bytes:
        return extent >= tiles.pack_min_rows
    return extent >= tiles.pack_nt_min_rows


def _one_panel(rows, tiles: TileShape) -> bool:
    """Whether one packed work-group's row blocks cover every row, so that each panel of
    columns is copied once: packing then reads the column operand once, and the tiles read it
    from the first-level cache. GPT-2's MLP (128 rows) 0.86-0.93x XLA's GFLOP/s with the outer
    form, 0.89-1.02x packed; the whole model 200 -> 187 ms."""
    extent = _extent(rows)
    return extent <= tiles.pack_row_group * rows_for(extent, tiles)


def _cached(c: Contraction, side: str, cols, contracting, tiles: TileShape) -> bool:
    """Whether the column operand (``side``: its free axes ``cols`` by the ``contracting``
    ones, one batch of it) is at most ``tiles.pack_cached_bytes``, so that the outer form's
    work-groups read it from the second-level cache: where one packed work-group would cover
    every row a packed copy is then only cost, and where more rows read it the outer form
    keeps it there. A larger one read in place comes from memory a row of the contraction at
    a time, each a page apart. Kernel time, best of 15-200, packed / outer, Intel Xeon
    (AVX-512, 2 MiB second-level cache): 64x256x256 33 / 22 us, 64x512x256 98 / 82, a
    diffusion sampler's 64x256x128 25 / 20, GPT-2's attention 12x128x128x64 0.20 / 0.17 ms,
    256x1024x256 (1 MiB) 0.38 / 0.35 ms, ViT's 1040x768x192 1.06 / 0.78 ms; 256x2048x256
    (2 MiB) 0.85 / 1.53 ms, 256x768x3072 3.8 / 7.7 ms, 1024x1024x1024 6.7 / 12.7 ms, a MoE
    layer's embedding gradient 256x16000x256 7.2 / 16.7 ms; 96x512x512 (1 MiB, 96 rows) 154 /
    176 us. AVX2 setting (which packs row-major columns anyway): 64x256x256 49 / 45 us,
    96x512x512 262 / 254, 128x768x768 (2.3 MiB) 724 / 864."""
    bits = c.operands[0 if side == "lhs" else 1].array_shape.element_type.bits
    return _extent(cols) * _extent(contracting) * bits // 8 <= tiles.pack_cached_bytes


def _outer_group_covers(rows, tiles: TileShape) -> bool:
    """Whether one of the outer form's work-groups covers every row: it reads the column
    operand once too, and a packed copy is only cost, even where packing pays for more rows
    (``tiles.pack_contiguous``). Kernel time, best of 15-21, GFLOP/s packed / not: an LSTM
    step's 32x256x1024 dot 129 / 157-174 (AVX-512); on the AVX2 setting (16 rows a
    work-group) a GRU step's 16x192x576 80 / 99-102 (two runs), 16x768x3072 73 / 80,
    16x1024x256 104 / 128, while 24x256x1024 (six row blocks to a panel) is 134 / 107."""
    extent = _extent(rows)
    return extent <= tiles.row_group * rows_for(extent, tiles)


def _extent(axes) -> int:
    return math.prod(a.size for a in axes)


class _DotKernel:
    """Shared state of one dot kernel: builder, emitter, operand buffers and strides."""

    def __init__(self, ctx: LoweringContext, c: Contraction, plan: DotPlan) -> None:
        self.ctx, self.c, self.plan = ctx, c, plan
        shapes = [o.shape for o in c.operands] + [c.inst.shape]
        self.kb: KernelBuilder = kernel_builder(*shapes)
        self.t = self.kb.index_type
        self.strides = {side: element_strides(o.array_shape)
                        for side, o in zip(("lhs", "rhs"), c.operands)}
        self.em = ElementalEmitter(self.kb, operand_leaves(self.ctx, c.inst, c.params),
                                   ctx.program.embed)
        self.writer = OutputWriter(ctx, self.kb, self.em, c, plan.acc)

    def operand(self, side: str) -> tuple[ElementType, str]:
        return operand_buffer(self.ctx, self.kb, self.c, 0 if side == "lhs" else 1)

    def offset(self, indices, axes, side: str) -> str:
        """The element offset of ``indices`` along ``axes`` in the ``side`` operand. A unit
        stride (a dimension contiguous in the layout) is left out of the text rather than
        passed as an argument: the contraction loop's addresses then step by a constant, and
        the eight row pointers of a tile share one index register instead of each being
        advanced by a run-time stride (GPT-2's logits dot without its panel copy 33.5 ->
        31.6 ms)."""
        terms = []
        for i, a in zip(indices, axes):
            d = a.dim(side)
            if d is not None:
                stride = self.strides[side][d]
                terms.append((i, None if stride == 1
                              else self.kb.param(stride, key=(side, "stride", d))))
        return linear_sum(terms)

    def split(self, linear: str, axes, key: str) -> tuple[str, ...]:
        """A row-major linear index over ``axes`` as one index per axis."""
        if not axes:
            return ()
        return self.em.delinearize(linear, tuple(a.size for a in axes), row_major(len(axes)),
                                   key)

    def out_index(self, *groups) -> tuple[str, ...]:
        exprs = ["0"] * self.c.op.shape.rank
        for indices, axes in groups:
            for i, a in zip(indices, axes):
                exprs[a.out] = i
        return tuple(exprs)

    def contraction_loops(self, stack: contextlib.ExitStack, axes) -> list[str]:
        names = []
        for a in axes:
            k = self.kb.fresh("k")
            n = self.kb.param(a.size, key=("k", a.lhs))
            stack.enter_context(self.em.block(f"for ({self.t} {k} = 0; {k} < {n}; ++{k})"))
            names.append(k)
        return names

    def store_tile(self, tile: str, rows: int, width: int, first_row: str, nrows: str,
                   first_lane: str, col_index, zi) -> None:
        """The general store path; ``col_index(lane)`` gives the column axes' indices and a
        guard."""
        p = self.plan

        def element(ri, lane: str):
            ci, guard = col_index(lane)
            return self.out_index((zi, p.outer), (ri, p.rows), (ci, p.cols)), guard
        self.writer.store_tile(tile, rows, width, first_row, nrows, first_lane,
                               lambda row: self.split(row, p.rows, "row"), element)

    def tile_origin(self, cb: str, rb: str, zi, width: int, rows: int, ncols: str, nrows: str,
                    x_et, x_buf: str):
        """Where an outer-product tile starts: its first column (the last tile of a row moves
        back to stay inside, ``skip`` lanes of it belonging to the tile before), per tile row
        the row axes' indices (clamped to the last row) and a pointer into the row operand,
        and the column operand's offset for the outer index ``zi``."""
        p, kb, t = self.plan, self.kb, self.t
        col0 = kb.let(t, f"min({cb} * {width}, {ncols} - {width})", "col")
        skip = kb.let(t, f"{cb} * {width} - {col0}", "skip")
        x_z = self.offset(zi, p.outer, p.row_side)
        row_indices, x_rows = [], []
        for r in range(rows):
            clamped = kb.let(t, f"min({rb} * {rows} + {r}, {nrows} - 1)", "r")
            ri = self.split(clamped, p.rows, "row")
            row_indices.append(ri)
            x_rows.append(pointer(kb, x_et, x_buf,
                                  f"{x_z} + {self.offset(ri, p.rows, p.row_side)}", "x"))
        return col0, skip, row_indices, x_rows, self.offset(zi, p.outer, p.col_side)

    def launch(self, col_blocks: int, row_blocks: int) -> Launch:
        return launch_3d(self.ctx, self.kb, self.c.inst, col_blocks, row_blocks,
                         _extent(self.plan.outer), self.plan.group,
                         spread=self.plan.group is None and self.plan.form != "packed")


def _outer_kernel(ctx: LoweringContext, c: Contraction, p: DotPlan) -> Launch:
    k = _DotKernel(ctx, c, p)
    kb, t = k.kb, k.t
    tile = Tile(kb, p.acc, p.tile_rows, p.vectors, p.lanes)
    width, rows = tile.width, tile.rows
    v = p.cols[0]
    nrows_total = _extent(p.rows)
    col_blocks, row_blocks = -(-v.size // width), -(-nrows_total // rows)
    cb, rb, zb = begin_tiles(k.kb, col_blocks, row_blocks)
    x_et, x_buf = k.operand(p.row_side)
    y_et, y_buf = k.operand(p.col_side)
    zi = k.split(zb, p.outer, "z")
    ncols = kb.param(v.size, key="cols")
    nrows = kb.param(nrows_total, key="rows")
    col0, skip, row_indices, x_rows, y_z = k.tile_origin(cb, rb, zi, width, rows, ncols, nrows,
                                                         x_et, x_buf)
    y_base = pointer(kb, y_et, y_buf, f"{y_z} + {col0}", "y")
    tile.declare()
    if p.pairs:
        _pair_steps(k, tile, x_rows, x_et, y_base, y_et)
    elif p.stream_k is None:
        with contextlib.ExitStack() as loops:
            ks = k.contraction_loops(loops, p.contracting)
            _outer_step(k, tile, ks, range(p.vectors), x_rows, x_et, y_base, y_et)
    else:
        _streamed_steps(k, tile, x_rows, x_et, y_base, y_et)
    _store_columns(k, tile, zi, row_indices, col0, skip, rb, nrows)
    return k.launch(col_blocks, row_blocks)


def _outer_step(k: _DotKernel, tile: Tile, ks: list[str], vectors, x_rows, x_et, y_base: str,
                y_et) -> None:
    """One contraction step of the outer form over the tile's ``vectors``: load them from the
    column operand, broadcast each row's element of the row operand, accumulate."""
    p, kb, t = k.plan, k.kb, k.t
    vec = p.acc.vector(p.lanes)
    kx = kb.let(t, k.offset(ks, p.contracting, p.row_side), "kx")
    ky = kb.let(t, k.offset(ks, p.contracting, p.col_side), "ky")
    ys = {j: kb.let(vec, p.acc.load_vector(y_et, y_base, f"{ky} + {j * p.lanes}", p.lanes, None),
                    "yv") for j in vectors}
    for r in range(tile.rows):
        x = kb.let(vec, f"({vec})({p.acc.load_scalar(x_et, x_rows[r], kx)})", "xv")
        for j in vectors:
            tile.update(r, j, x, ys[j])


def _pair_steps(k: _DotKernel, tile: Tile, x_rows, x_et, y_base: str, y_et) -> None:
    """The outer form two contraction steps at a time (``DotPlan.pairs``); an odd last step
    pairs with zeros."""
    p, kb, t, em = k.plan, k.kb, k.t, k.em
    [axis] = p.contracting
    n = kb.param(axis.size, key=("k", axis.lhs))
    even = kb.let(t, f"{n} & ~({t})1", "ke")
    k0 = kb.fresh("k")
    with em.block(f"for ({t} {k0} = 0; {k0} < {even}; {k0} += 2)"):
        _pair_step(k, tile, k0, f"({k0} + 1)", x_rows, x_et, y_base, y_et)
    with em.block(f"if ({even} < {n})"):
        _pair_step(k, tile, even, None, x_rows, x_et, y_base, y_et)


def _pair_step(k: _DotKernel, tile: Tile, first: str, second: str | None, x_rows, x_et,
               y_base: str, y_et) -> None:
    """Steps ``first`` and ``second`` (None: a zero step) of every tile vector: the column
    operand's two rows interleaved as 16-bit pairs in 32-bit lanes, each row's two elements
    as one broadcast pair."""
    p, kb, t = k.plan, k.kb, k.t
    lanes, uvec, [axis] = p.lanes, f"uint{p.lanes}", p.contracting
    steps = [s for s in (first, second) if s is not None]
    ky = [kb.let(t, k.offset((s,), p.contracting, p.col_side), "ky") for s in steps]
    kx = [kb.let(t, k.offset((s,), p.contracting, p.row_side), "kx") for s in steps]
    ys = []
    for j in range(p.vectors):
        halves = [f"as_{uvec}(convert_int{lanes}(vload{lanes}(0, {y_base} + {o} + {j * lanes})))"
                  for o in ky]
        ys.append(kb.let(uvec, _pair_of(halves, f"({uvec})"), "yp"))
    adjacent = second is not None and k.strides[p.row_side][axis.at(p.row_side)] == 1
    for r in range(tile.rows):
        if adjacent:    # both elements in one load, widened to 16 bits each
            pair = f"as_uint(convert_short2(vload2(0, {x_rows[r]} + {kx[0]})))"
        else:
            pair = _pair_of([f"(uint)({cltypes.load(x_et, x_rows[r], o)})" for o in kx], "")
        x = kb.let(uvec, f"({uvec})({pair})", "xp")
        for j, y in enumerate(ys):
            c = tile.names[r][j]
            kb.line(f"{c} += {_PAIR_LANES[lanes]}({x}, {y});")


def _pair_of(halves: list[str], cast: str) -> str:
    """Two 16-bit values in one 32-bit lane, the first in the low half; one: a zero high."""
    low = f"({halves[0]} & {cast}0xFFFFu)"
    return low if len(halves) == 1 else f"({low} | ({halves[1]} << {cast}16u))"


# vector lanes -> the helper multiplying and pair-summing 16-bit pairs in 32-bit lanes
_PAIR_LANES = {8: "xla_pair_madd8", 16: "xla_pair_madd16"}


def _streamed_steps(k: _DotKernel, tile: Tile, x_rows, x_et, y_base: str, y_et) -> None:
    """The streamed order (``_streams``): steps of ``stream_k``, in each every vector's
    steps in turn; a last partial step of the contraction after them. Each accumulator
    still takes the contraction in order."""
    p, kb, t, em = k.plan, k.kb, k.t, k.em
    [axis] = p.contracting
    n = kb.param(axis.size, key=("k", axis.lhs))
    step = p.stream_k
    k0 = kb.fresh("k")
    whole = kb.let(t, f"{n} - {n} % {step}", "kw")
    with em.block(f"for ({t} {k0} = 0; {k0} < {whole}; {k0} += {step})"):
        for j in range(p.vectors):
            ki = kb.fresh("k")
            with em.block(f"for ({t} {ki} = {k0}; {ki} < {k0} + {step}; ++{ki})"):
                _outer_step(k, tile, [ki], [j], x_rows, x_et, y_base, y_et)
    ki = kb.fresh("k")
    with em.block(f"for ({t} {ki} = {whole}; {ki} < {n}; ++{ki})"):
        _outer_step(k, tile, [ki], range(p.vectors), x_rows, x_et, y_base, y_et)


def _store_columns(k: _DotKernel, tile: Tile, zi, row_indices, col0: str, skip: str, rb: str,
                   nrows: str) -> None:
    """Store a tile whose columns run over one output axis from ``col0`` (lanes below ``skip``
    belong to another tile): whole rows as vectors where possible, else element by element."""
    p, kb, rows = k.plan, k.kb, tile.rows
    column = p.cols[0].out
    assert column is not None
    if k.writer.can_store_rows(column, tile.lanes):
        k.writer.store_rows(tile, [k.out_index((zi, p.outer), (ri, p.rows), ((col0,), p.cols))
                                   for ri in row_indices],
                            f"{skip} == 0 && {rb} * {rows} + {rows} <= {nrows}", column)
    spilled = tile.spill()
    k.store_tile(spilled, rows, tile.width, f"{rb} * {rows}", nrows, skip,
                 lambda lane: ((kb.let(k.t, f"{col0} + {lane}", "col"),), "1"), zi)


def _packed_kernel(ctx: LoweringContext, c: Contraction, p: DotPlan) -> Launch:
    """The outer-product form on a packed panel: a work-group first copies the part of the
    column operand its tiles need, ``width`` columns by a chunk of the contraction, into a
    local panel laid out ``[k][column]`` (widened to the accumulation type), so that each
    work-item then loads the panel's columns as vectors while broadcasting elements of the
    row operand, as the outer form does from memory. The panel stays in the first-level
    cache while every row block of the work-group uses it."""
    k = _DotKernel(ctx, c, p)
    kb, t, acc = k.kb, k.t, p.acc
    tile = Tile(kb, acc, p.tile_rows, p.vectors, p.lanes)
    width, rows = tile.width, tile.rows
    n, kaxis = p.cols[0], p.vector_k
    assert kaxis is not None
    nrows_total = _extent(p.rows)
    col_blocks, row_blocks = -(-n.size // width), -(-nrows_total // rows)
    shape = ctx.target.tiles
    group = min(_row_group(k, shape), row_blocks)
    chunk = min(kaxis.size, shape.pack_panel_bytes // (width * _SCALAR_BYTES[acc.scalar]))
    entries = chunk
    if p.pairs:     # whole pairs a chunk, each pair one panel element
        chunk = max(2, chunk - chunk % 2)
        entries = chunk // 2
    panel = kb.fresh("panel")
    kb.line(f"__local {acc.scalar} {panel}[{entries * width}];")
    cb, rb, zb = "cb", "rb", "zb"
    for dim, name in enumerate((cb, rb, zb)):
        kb.line(f"{t} {name} = ({t})get_global_id({dim});")
    lid = kb.let(t, "get_local_id(1)", "lid")
    x_et, x_buf = k.operand(p.row_side)
    y_et, y_buf = k.operand(p.col_side)
    zi = k.split(zb, p.outer, "z")
    ncols = kb.param(n.size, key="cols")
    nrows = kb.param(nrows_total, key="rows")
    nrb = kb.param(row_blocks, key="row_blocks")
    kn = kb.param(kaxis.size, key=("k", kaxis.lhs))
    col0, skip, row_indices, x_rows, y_z = k.tile_origin(cb, rb, zi, width, rows, ncols, nrows,
                                                         x_et, x_buf)
    tile.declare()
    vec = acc.vector(p.lanes)
    k0, i = kb.fresh("k0"), kb.fresh("k")
    # every work-item runs the chunk loop (its barriers), only live ones compute
    with k.em.block(f"for ({t} {k0} = 0; {k0} < {kn}; {k0} += {chunk})"):
        n_k = kb.let(t, f"min(({t}){chunk}, {kn} - {k0})", "kc")
        kb.line("barrier(CLK_LOCAL_MEM_FENCE);")
        if p.pairs:
            _fill_pair_panel(k, panel, width, group, lid, y_et, y_buf, y_z, col0, k0, n_k)
        else:
            _fill_panel(k, panel, width, group, lid, y_et, y_buf, y_z, col0, k0, n_k)
        kb.line("barrier(CLK_LOCAL_MEM_FENCE);")
        with k.em.block(f"if ({rb} < {nrb})"):
            if p.pairs:
                _panel_pair_steps(k, tile, panel, width, x_rows, x_et, k0, n_k, kn)
            else:
                with k.em.block(f"for ({t} {i} = 0; {i} < {n_k}; ++{i})"):
                    kx = kb.let(t, k.offset((f"({k0} + {i})",), (kaxis,), p.row_side), "kx")
                    ys = [kb.let(vec, f"vload{p.lanes}(0, {panel} + {i} * {width} + "
                                      f"{v * p.lanes})", "yv") for v in range(p.vectors)]
                    for r in range(rows):
                        x = kb.let(vec, f"({vec})({acc.load_scalar(x_et, x_rows[r], kx)})",
                                   "xv")
                        for v in range(p.vectors):
                            tile.update(r, v, x, ys[v])
    with k.em.block(f"if ({rb} < {nrb})"):
        _store_columns(k, tile, zi, row_indices, col0, skip, rb, nrows)
    return launch_3d(ctx, kb, c.inst, col_blocks, row_blocks, _extent(p.outer), group)


def _fill_pair_panel(k: _DotKernel, panel: str, width: int, group: int, lid: str, y_et,
                     y_buf: str, y_z: str, col0: str, k0: str, n_k: str) -> None:
    """``_fill_panel`` for ``DotPlan.pairs`` from contiguous columns: panel row ``i`` holds
    the chunk's steps ``2i`` and ``2i + 1`` as 16-bit pairs (a zero high half past the
    chunk's end)."""
    p, kb, t = k.plan, k.kb, k.t
    n, kaxis, lanes = p.cols[0], p.vector_k, p.lanes
    assert kaxis is not None and k.strides[p.col_side][n.at(p.col_side)] == 1
    uvec, i = f"uint{lanes}", kb.fresh("k")
    rows = kb.let(t, f"({n_k} + 1) / 2", "np")
    share = kb.let(t, f"({rows} + {group - 1}) / {group}", "share")
    with k.em.block(f"for ({t} {i} = {lid} * {share}; {i} < min(({lid} + 1) * {share}, "
                    f"{rows}); ++{i})"):
        ys = [pointer(kb, y_et, y_buf, f"{y_z} + "
                      f"{k.offset((f'({k0} + 2 * {i} + {h})',), (kaxis,), p.col_side)} + {col0}",
                      "y") for h in (0, 1)]
        has_high = kb.let(t, f"2 * {i} + 1 < {n_k}", "hi")
        for v in range(width // lanes):
            halves = [f"as_{uvec}(convert_int{lanes}(vload{lanes}(0, {y} + {v * lanes})))"
                      for y in ys]
            high = f"({has_high} ? {halves[1]} : ({uvec})(0))"
            kb.line(f"vstore{lanes}({_pair_of([halves[0], high], f'({uvec})')}, 0, "
                    f"{panel} + {i} * {width} + {v * lanes});")


def _panel_pair_steps(k: _DotKernel, tile: Tile, panel: str, width: int, x_rows, x_et,
                      k0: str, n_k: str, kn: str) -> None:
    """The packed form's steps over a panel of pairs: each row's two elements as one pair (the
    second read at the last step where the chunk ends on an odd step: the panel's zero high
    half cancels it)."""
    p, kb, t = k.plan, k.kb, k.t
    kaxis, lanes, uvec = p.vector_k, p.lanes, f"uint{p.lanes}"
    assert kaxis is not None
    adjacent = kaxis.size % 2 == 0 and k.strides[p.row_side][kaxis.at(p.row_side)] == 1
    i = kb.fresh("k")
    with k.em.block(f"for ({t} {i} = 0; {i} < ({n_k} + 1) / 2; ++{i})"):
        first = f"({k0} + 2 * {i})"
        kx = kb.let(t, k.offset((first,), (kaxis,), p.row_side), "kx")
        if not adjacent:
            second = kb.let(t, f"min({first} + 1, {kn} - 1)", "k")
            kx2 = kb.let(t, k.offset((second,), (kaxis,), p.row_side), "kx")
        ys = [kb.let(uvec, f"vload{lanes}(0, {panel} + {i} * {width} + {v * lanes})", "yv")
              for v in range(p.vectors)]
        for r in range(tile.rows):
            if adjacent:
                pair = f"as_uint(convert_short2(vload2(0, {x_rows[r]} + {kx})))"
            else:
                pair = _pair_of([f"(uint)({cltypes.load(x_et, x_rows[r], o)})"
                                 for o in (kx, kx2)], "")
            x = kb.let(uvec, f"({uvec})({pair})", "xp")
            for v, y in enumerate(ys):
                kb.line(f"{tile.names[r][v]} += {_PAIR_LANES[lanes]}({x}, {y});")


def _row_group(k: _DotKernel, tiles: TileShape) -> int:
    """Work-items (row blocks) of a packed dot's work-group: ``tiles.pack_row_group``, or
    ``pack_strided_row_group`` where the row operand is strided along the contraction."""
    p = k.plan
    assert p.vector_k is not None
    if k.strides[p.row_side][p.vector_k.at(p.row_side)] == 1:
        return tiles.pack_row_group
    return tiles.pack_strided_row_group or tiles.pack_row_group


def _fill_panel(k: _DotKernel, panel: str, width: int, group: int, lid: str, y_et, y_buf: str,
                y_z: str, col0: str, k0: str, n_k: str) -> None:
    """The work-group's ``group`` work-items copy the chunk ``[k0, k0 + n_k)`` of the column
    operand's ``width`` columns from ``col0`` into the panel, each reading along the
    operand's contiguous axis: whole rows of the chunk (vectors) when the columns are
    contiguous, whole columns when the contraction is. A CPU runs a work-group's items one
    after another, so each copies a consecutive share: the reads stream."""
    p, kb, t, acc = k.plan, k.kb, k.t, k.plan.acc
    n, kaxis = p.cols[0], p.vector_k
    assert kaxis is not None
    j, i = kb.fresh("j"), kb.fresh("k")
    columns_contiguous = k.strides[p.col_side][n.at(p.col_side)] == 1
    if columns_contiguous:
        share = kb.let(t, f"({n_k} + {group - 1}) / {group}", "share")
        with k.em.block(f"for ({t} {i} = {lid} * {share}; {i} < min(({lid} + 1) * {share}, "
                        f"{n_k}); ++{i})"):
            koff = k.offset((f"({k0} + {i})",), (kaxis,), p.col_side)
            y = pointer(kb, y_et, y_buf, f"{y_z} + {koff} + {col0}", "y")
            for v in range(width // p.lanes):
                loaded = acc.load_vector(y_et, y, str(v * p.lanes), p.lanes, None)
                kb.line(f"vstore{p.lanes}({loaded}, 0, {panel} + {i} * {width} + "
                        f"{v * p.lanes});")
        return
    start = "0"
    if k.strides[p.col_side][kaxis.at(p.col_side)] == 1:
        start = _fill_panel_blocks(k, panel, width, group, lid, y_et, y_buf, y_z, col0, k0, n_k)
    with k.em.block(f"for ({t} {j} = {lid}; {j} < {width}; {j} += {group})"):
        col = kb.let(t, f"{col0} + {j}", "col")
        y = pointer(kb, y_et, y_buf, f"{y_z} + {k.offset((col,), p.cols, p.col_side)}", "y")
        with k.em.block(f"for ({t} {i} = {start}; {i} < {n_k}; ++{i})"):
            koff = k.offset((f"({k0} + {i})",), (kaxis,), p.col_side)
            kb.line(f"{panel}[{i} * {width} + {j}] = {acc.load_scalar(y_et, y, koff)};")


def _fill_panel_blocks(k: _DotKernel, panel: str, width: int, group: int, lid: str, y_et,
                       y_buf: str, y_z: str, col0: str, k0: str, n_k: str) -> str:
    """The panel's whole blocks of ``lanes`` columns by ``_PANEL_STEPS`` steps from columns
    contiguous along the contraction: a short vector load down each column, the block
    transposed in registers (vector components, as the blocked transpose does) and stored
    as ``_PANEL_STEPS`` vector rows of the panel. A work-item copies consecutive blocks,
    down the chunk first, so the reads stream along each column. Element by element, dealt
    round-robin, this copy took a third of GPT-2's logits dot (128x768x50257: 147, then 175
    GFLOP/s); square ``lanes`` x ``lanes`` blocks ran as fast and cost ViT's compile 2 s
    more. Returns where along the chunk the remainder starts."""
    p, kb, t, acc = k.plan, k.kb, k.t, k.plan.acc
    lanes, kaxis, depth = p.lanes, p.vector_k, _PANEL_STEPS
    per_row = width // lanes
    full = kb.let(t, f"{n_k} / {depth} * {depth}", "kf")
    steps = kb.let(t, f"{n_k} / {depth}", "ks")
    share = kb.let(t, f"({steps} * {per_row} + {group - 1}) / {group}", "share")
    b = kb.fresh("b")
    with k.em.block(f"for ({t} {b} = {lid} * {share}; {b} < min(({lid} + 1) * {share}, "
                    f"{steps} * {per_row}); ++{b})"):
        i0 = kb.let(t, f"{b} % {steps} * {depth}", "i")
        j0 = kb.let(t, f"{b} / {steps} * {lanes}", "j")
        koff = k.offset((f"({k0} + {i0})",), (kaxis,), p.col_side)
        columns = []
        for c in range(lanes):
            col = kb.let(t, f"{col0} + {j0} + {c}", "col")
            y = pointer(kb, y_et, y_buf, f"{y_z} + {k.offset((col,), p.cols, p.col_side)}", "y")
            columns.append(kb.let(acc.vector(depth), acc.load_vector(y_et, y, koff, depth, None),
                                  "cv"))
        vec = acc.vector(lanes)
        for r in range(depth):
            row = ", ".join(cltypes.component(c, r) for c in columns)
            kb.line(f"vstore{lanes}(({vec})({row}), 0, {panel} + ({i0} + {r}) * {width} + {j0});")
    return full


# contraction steps per block of the packed panel's transposing copy
_PANEL_STEPS = 4


def _inner_kernel(ctx: LoweringContext, c: Contraction, p: DotPlan) -> Launch:
    k = _DotKernel(ctx, c, p)
    kb, t, acc = k.kb, k.t, p.acc
    rows, cols, lanes = p.tile_rows, p.vectors, p.lanes
    nrows_total, ncols_total = _extent(p.rows), _extent(p.cols)
    col_blocks, row_blocks = -(-ncols_total // cols), -(-nrows_total // rows)
    cb, rb, zb = begin_tiles(k.kb, col_blocks, row_blocks)
    x_et, x_buf = k.operand("lhs")
    y_et, y_buf = k.operand("rhs")
    zi = k.split(zb, p.outer, "z")
    nrows = kb.param(nrows_total, key="rows")
    ncols = kb.param(ncols_total, key="cols")
    x_z, y_z = k.offset(zi, p.outer, "lhs"), k.offset(zi, p.outer, "rhs")
    x_rows, y_cols = [], []
    for r in range(rows):
        ri = k.split(kb.let(t, f"min({rb} * {rows} + {r}, {nrows} - 1)", "r"), p.rows, "row")
        x_rows.append(pointer(kb, x_et, x_buf, f"{x_z} + {k.offset(ri, p.rows, 'lhs')}", "x"))
    for j in range(cols):
        cj = k.split(kb.let(t, f"min({cb} * {cols} + {j}, {ncols} - 1)", "c"), p.cols, "col")
        y_cols.append(pointer(kb, y_et, y_buf, f"{y_z} + {k.offset(cj, p.cols, 'rhs')}", "y"))
    tile = Tile(kb, acc, rows, cols, lanes)
    tile.declare()
    sums = tile.declare_scalar_sums()
    vec = acc.vector(lanes)
    assert p.vector_k is not None
    kv = kb.param(p.vector_k.size, key=("k", p.vector_k.lhs))
    with contextlib.ExitStack() as loops:
        ks = k.contraction_loops(loops, p.contracting)
        kx = kb.let(t, k.offset(ks, p.contracting, "lhs"), "kx")
        ky = kb.let(t, k.offset(ks, p.contracting, "rhs"), "ky")
        i = kb.declare(t, "i", "0")
        with k.em.block(f"for (; {i} + {lanes} <= {kv}; {i} += {lanes})"):
            xs = [kb.let(vec, acc.load_vector(x_et, x, f"{kx} + {i}", lanes, None), "xv")
                  for x in x_rows]
            ys = [kb.let(vec, acc.load_vector(y_et, y, f"{ky} + {i}", lanes, None), "yv")
                  for y in y_cols]
            for r in range(rows):
                for j in range(cols):
                    tile.update(r, j, xs[r], ys[j])
        with k.em.block(f"for (; {i} < {kv}; ++{i})"):
            xs = [kb.let(acc.scalar, acc.load_scalar(x_et, x, f"{kx} + {i}"), "xs") for x in x_rows]
            ys = [kb.let(acc.scalar, acc.load_scalar(y_et, y, f"{ky} + {i}"), "ys") for y in y_cols]
            for r in range(rows):
                for j in range(cols):
                    kb.line(f"{sums[r][j]} = {acc.madd(xs[r], ys[j], sums[r][j])};")
    spilled = tile.lane_sums(sums)

    def col_index(lane: str):
        col = kb.let(t, f"{cb} * {cols} + {lane}", "col")
        return k.split(col, p.cols, "col"), f"{col} < {ncols}"
    k.store_tile(spilled, rows, cols, f"{rb} * {rows}", nrows, "0", col_index, zi)
    return k.launch(col_blocks, row_blocks)


_FORMS = {"outer": _outer_kernel, "inner": _inner_kernel, "packed": _packed_kernel}


def emit_dot(ctx: LoweringContext, c: Contraction, plan: DotPlan) -> Launch:
    return _FORMS[plan.form](ctx, c, plan)


register_contraction(Opcode.DOT, plan_dot, emit_dot,
                     target=TargetKind.CPU, priority=20)
