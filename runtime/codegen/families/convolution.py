"""convolution (and output fusions over one) as a direct, register-tiled kernel on the CPU
target.

A convolution is a contraction over (window taps x input features) whose row operand is read
through the window: each work-item holds an ``R`` x ``V*L`` tile (``tiles.Tile``) of output
positions x output features, vectorised over the output features of one group (the kernel's
output-feature dimension, loaded with ``vload`` when it is contiguous and gathered with its
stride otherwise). For each tap the work-item works out, per output position, where the tap
lands in the input (stride, padding, lhs and rhs dilation, reversal) and whether that is
padding; then the input-feature loop broadcasts one input element per row (zero in padding:
a row outside the input reads a region of zeros in the embedded constants) against the
kernel's vector. Where the window's last dimension never reaches the padding and runs
contiguous with the input features in both operands, its taps join the feature loop.
Feature groups and batch groups are the work-item's third id: they shift the input's
feature (or batch) offset, the kernel's output-feature offset and the output feature. No
im2col buffer: the arena holds exactly the module's buffers. A tap that falls in padding or
lhs-dilation holes for every row of the tile skips its input-feature loop (a transposed
convolution's holes are three quarters of its taps). Kernels whose output
features are strided are copied output-feature-minor before fusion
(``passes.convolution_layout``), so the vector loads are ``vload``s.

Fewer output features than a vector (an image model's RGB output) take the narrow form: a
work-item holds ``R`` output positions x every output feature, each a vector along the input
features, summed across lanes at the end (``passes.convolution_layout`` makes such a kernel's
input features minor).

One output feature per group (a depthwise convolution, and its kernel's gradient, whose
groups are batch groups) takes the group-lane form: the lanes run across groups, each lane
reading its own group's input (its feature, or its batch) and kernel vector, so an input
element is a vector load rather than a broadcast. A ConvNeXt block's 7x7 depthwise
convolution over [8, 32, 32, 64] took 12 ms element by element and its kernel gradient 12 ms.

GPU devices, grouped convolutions with 2 or 3 output features per group, both group counts
above one, and type mixes ``tiles.accumulation`` refuses decline to the elemental loop kernel.
"""

from __future__ import annotations

import contextlib
from typing import Callable
from dataclasses import dataclass

from ...hlo.attributes import ConvDimensionNumbers, Window, WindowDim
from ...hlo.ir import HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.shape import ArrayShape
from ..elemental import ElementalEmitter, element_strides, row_major
from .loop import kernel_builder, operand_leaves
from ..context import LoweringContext
from ..plan import Launch
from ...target import Target, TargetKind
from .tiles import (Accumulation, Contraction, OutputWriter, Tile, begin_tiles, lanes_for,
                    launch_3d, operand_buffer, pointer, register_contraction, rows_for,
                    tiled_accumulation, vectors_for)


# the largest region of zeros a convolution reads in place of padding (``_conv_kernel``)
_MAX_ZERO_BYTES = 64 * 1024


@dataclass(frozen=True)
class ConvPlan:
    acc: Accumulation
    lanes: int
    vectors: int
    tile_rows: int
    groups: int                 # feature_group_count x batch_group_count (one of them is 1)
    batch_groups: bool          # the groups split the input batch, not the input features
    columns: int                # output features per group (``group_lanes``: the groups)
    narrow: bool = False        # vectorised over input features (fewer columns than a vector)
    group_lanes: bool = False   # one output feature per group, vectorised across the groups


def _window(conv: HloInstruction) -> Window:
    window = conv.attrs.get("window")
    dn: ConvDimensionNumbers = conv.dim_labels
    if isinstance(window, Window) and window.dims:
        return window
    return Window(tuple(WindowDim(conv.operands[1].array_shape.dims[d]) for d in dn.kernel_spatial))


def plan_convolution(c: Contraction, target: Target) -> ConvPlan | None:
    acc = tiled_accumulation(c, target)
    tiles = target.tiles
    if acc is None:
        return None
    lhs, rhs = (o.array_shape for o in c.operands)
    g = c.op.int_attr("feature_group_count", 1)
    bg = c.op.int_attr("batch_group_count", 1)
    if g > 1 and bg > 1:
        return None
    dn: ConvDimensionNumbers = c.op.dim_labels
    columns = rhs.dims[dn.kernel_output_feature] // (g * bg)
    out: ArrayShape = c.op.array_shape
    rows = out.element_count // out.dims[dn.output_feature]
    if columns == 1 and g * bg > 1:
        lanes = lanes_for(acc, g * bg, tiles)
        return None if lanes is None else ConvPlan(
            acc, lanes, vectors_for(g * bg, lanes, tiles), rows_for(rows, tiles), g * bg,
            bg > 1, g * bg, group_lanes=True)
    lanes = lanes_for(acc, columns, tiles)
    if lanes is None:
        return _narrow_plan(c, acc, columns, g * bg, target)
    return ConvPlan(acc, lanes, vectors_for(columns, lanes, tiles),
                    rows_for(rows, tiles),
                    g * bg, bg > 1, columns)


def _narrow_plan(c: Contraction, acc: Accumulation, columns: int, groups: int,
                 target: Target) -> ConvPlan | None:
    """The narrow form, for fewer output features than a vector (an image model's RGB
    output, a segmentation head): ungrouped, input features contiguous and at least one
    vector of them."""
    lhs, rhs = (o.array_shape for o in c.operands)
    dn: ConvDimensionNumbers = c.op.dim_labels
    contiguous = element_strides(lhs)[dn.input_feature] == 1
    if (groups != 1 or acc.lanes < 2 or not contiguous
            or rhs.dims[dn.kernel_input_feature] < acc.lanes):
        return None
    out: ArrayShape = c.op.array_shape
    rows = out.element_count // out.dims[dn.output_feature]
    return ConvPlan(acc, acc.lanes, columns, min(rows_for(rows, target.tiles),
                                                 target.tiles.inner_rows),
                    1, False, columns, narrow=True)


def _emit(ctx: LoweringContext, c: Contraction, p: ConvPlan) -> Launch:
    kernel = _narrow_kernel if p.narrow else _group_lanes_kernel if p.group_lanes \
        else _conv_kernel
    return kernel(ctx, c, p)


@dataclass(frozen=True)
class _ColumnTiles:
    """What ``_ConvKernel.column_tiles`` sets up for a work-item of a column form."""

    tile: Tile
    col_blocks: int
    row_blocks: int
    rb: str
    zb: str
    ncols: str
    nrows: str
    col0: str
    skip: str
    x: tuple            # (element type, buffer argument) of the input
    w: tuple            # ... of the kernel


class _ConvKernel:
    """What both kernel forms share: the kernel builder and emitter, the output rows (batch x
    output spatial positions) a work-item holds and where each starts in the input, the loops
    over the window's taps with each row's validity and input offset there, and the output
    index of a row and feature."""

    def __init__(self, ctx: LoweringContext, c: Contraction, p: ConvPlan) -> None:
        self.c, self.p = c, p
        self.dn: ConvDimensionNumbers = c.op.dim_labels
        self.window = _window(c.op)
        self.lhs: ArrayShape = c.operands[0].array_shape
        self.rhs: ArrayShape = c.operands[1].array_shape
        self.out: ArrayShape = c.op.array_shape
        self.kb = kb = kernel_builder(self.lhs, self.rhs, c.inst.shape)
        self.t = kb.index_type
        self.em = ElementalEmitter(kb, operand_leaves(ctx, c.inst, c.params), ctx.program.embed)
        self.writer = OutputWriter(ctx, kb, self.em, c, p.acc)
        self.sx, self.sw = element_strides(self.lhs), element_strides(self.rhs)
        dn, out = self.dn, self.out
        self.row_dims = (out.dims[dn.output_batch],) + tuple(out.dims[d] for d in dn.output_spatial)
        # rows grouped by phase along each lhs-dilated dimension the dilation divides
        self.phases = tuple(w.lhs_dilation if w.lhs_dilation > 1 and n % w.lhs_dilation == 0
                            else 1 for w, n in zip(self.window.dims, self.row_dims[1:]))
        self.nrows_total = out.element_count // out.dims[dn.output_feature]

    def param(self, value: int, *key) -> str:
        return self.kb.param(value, key=key)

    def split(self, row: str) -> tuple[str, ...]:
        """The output index (batch, spatial...) of tile row ``row``. With lhs dilation, rows
        run phase by phase: the positions of one residue modulo the dilation in every
        dilated dimension come together, so the rows of a tile meet the dilation's holes at
        the same taps, which are then skipped for the whole tile (a transposed convolution
        of stride 2 does a quarter of the tap steps) and the rest need no per-row select."""
        phases = self.phases
        if not any(n != 1 for n in phases):
            return self.em.delinearize(row, self.row_dims, row_major(len(self.row_dims)), "row")
        spatial = self.row_dims[1:]
        dims = (self.row_dims[0],) + phases + tuple(n // ld for n, ld in zip(spatial, phases))
        parts = self.em.delinearize(row, dims, row_major(len(dims)), "phase_row")
        count = len(spatial)
        return (parts[0],) + tuple(
            self.kb.let(self.t, f"{q} * {self.param(ld, 'phase', d)} + {p}", "i")
            for d, (p, q, ld) in enumerate(zip(parts[1:1 + count], parts[1 + count:], phases)))

    def rows(self, rb: str, rows: int, nrows: str, x_base: str
             ) -> tuple[list[tuple[str, ...]], list[str]]:
        """Each tile row's output index (batch, spatial) and its input offset (``x_base`` plus
        its batch's), the last row repeated past the end."""
        positions, x_rows = [], []
        for r in range(rows):
            ri = self.split(self.kb.let(self.t, f"min({rb} * {rows} + {r}, {nrows} - 1)", "r"))
            positions.append(ri)
            batch = f"{ri[0]} * {self.param(self.sx[self.dn.input_batch], 'xb')}"
            x_rows.append(self.kb.let(self.t, f"{x_base} + {batch}" if x_base else batch, "xr"))
        return positions, x_rows

    def joins_features(self) -> bool:
        """Whether the window's last dimension and the input features are one run in both
        operands, and every window lies inside the input along that dimension (no padding,
        dilation or reversal): its taps then join the input-feature loop, whose steps read
        consecutive elements (ViT's 4x4 stride-4 patch embedding over 3 channels loops 16
        taps of 3 features as 4 of 12)."""
        if not self.window.dims:
            return False
        w, dn = self.window.dims[-1], self.dn
        k_in = self.rhs.dims[dn.kernel_input_feature]
        return (w.pad_low == w.pad_high == 0 and w.lhs_dilation == w.rhs_dilation == 1
                and not w.reversal and self.sx[dn.input_feature] == 1
                and self.sx[dn.input_spatial[-1]] == k_in
                and self.sw[dn.kernel_spatial[-1]] == k_in * self.sw[dn.kernel_input_feature])

    def taps(self, loops: contextlib.ExitStack, positions, x_rows, joined: bool = False
             ) -> tuple[list[str], list[str], str]:
        """Enter the loops over the window's taps (and skip a tap that lands in padding or
        lhs-dilation holes for every row, where it adds nothing); each row's validity and
        input offset at the taps, and the taps' offset in the kernel. ``joined``: the last
        dimension's taps are left to the input-feature loop (``joins_features``), its tap
        here 0."""
        kb, window, dn = self.kb, self.window, self.dn
        taps = []
        for s, w in enumerate(window.dims):
            if joined and s == len(window.dims) - 1:
                taps.append("0")
                continue
            tap = kb.fresh("t")
            loops.enter_context(self.em.block(
                f"for ({self.t} {tap} = 0; {tap} < {self.param(w.size, 'size', s)}; ++{tap})"))
            taps.append(tap)
        valid, x_at = _tap_rows(kb, window, dn, self.lhs, self.sx, positions, x_rows, taps,
                                self.param)
        param = self.param
        w_tap = " + ".join(f"{_reversed(w, tap, s, param)} * {param(self.sw[d], 'ws', s)}"
                           for s, (w, tap, d) in enumerate(zip(window.dims, taps,
                                                                dn.kernel_spatial)))
        loops.enter_context(self.em.block(f"if ({' || '.join(valid)})"))
        return valid, x_at, w_tap or "0"

    def column_tiles(self, ctx: LoweringContext) -> "_ColumnTiles":
        """The register tile of the column forms, the work-item's column and row blocks, the
        operands' buffers, and the tile's first column (the last block overlapping the one
        before it, ``skip`` columns not its own)."""
        kb, t, p, param = self.kb, self.t, self.p, self.param
        tile = Tile(kb, p.acc, p.tile_rows, p.vectors, p.lanes)
        col_blocks = -(-p.columns // tile.width)
        row_blocks = -(-self.nrows_total // tile.rows)
        cb, rb, zb = begin_tiles(kb, col_blocks, row_blocks)
        x, w = operand_buffer(ctx, kb, self.c, 0), operand_buffer(ctx, kb, self.c, 1)
        ncols, nrows = param(p.columns, "cols"), param(self.nrows_total, "rows")
        col0 = kb.let(t, f"min({cb} * {tile.width}, {ncols} - {tile.width})", "col")
        skip = kb.let(t, f"{cb} * {tile.width} - {col0}", "skip")
        return _ColumnTiles(tile, col_blocks, row_blocks, rb, zb, ncols, nrows, col0, skip, x, w)

    def store(self, ctx: LoweringContext, ct: "_ColumnTiles", positions,
              out_index: Callable[[tuple[str, ...], str], tuple[str, ...]],
              groups: int) -> Launch:
        """Store the tile (rows as vectors where they may be, else element by element) and
        the launch over the column and row blocks and ``groups``."""
        kb, t, tile, dn = self.kb, self.t, ct.tile, self.dn
        rows, width = tile.rows, tile.width
        if self.writer.can_store_rows(dn.output_feature, tile.lanes):
            self.writer.store_rows(
                tile, [out_index(ri, ct.col0) for ri in positions],
                f"{ct.skip} == 0 && {ct.rb} * {rows} + {rows} <= {ct.nrows}", dn.output_feature)
        self.writer.store_tile(
            tile.spill(), rows, width, f"{ct.rb} * {rows}", ct.nrows, ct.skip, self.split,
            lambda ri, lane: (out_index(ri, kb.let(t, f"{ct.col0} + {lane}", "col")), "1"))
        return launch_3d(ctx, kb, self.c.inst, ct.col_blocks, ct.row_blocks, groups)

    def out_index(self, ri: tuple[str, ...], feature: str) -> tuple[str, ...]:
        exprs = ["0"] * self.out.rank
        exprs[self.dn.output_batch] = ri[0]
        for d, i in zip(self.dn.output_spatial, ri[1:]):
            exprs[d] = i
        exprs[self.dn.output_feature] = feature
        return tuple(exprs)


def _conv_kernel(ctx: LoweringContext, c: Contraction, p: ConvPlan) -> Launch:
    k = _ConvKernel(ctx, c, p)
    kb, t, acc, dn, param = k.kb, k.t, p.acc, k.dn, k.param
    sx, sw = k.sx, k.sw
    ct = k.column_tiles(ctx)
    tile, rows, rb, zb, col0 = ct.tile, ct.tile.rows, ct.rb, ct.zb, ct.col0
    (x_et, x_buf), (w_et, w_buf) = ct.x, ct.w
    if p.batch_groups:
        x_group = param(k.out.dims[dn.output_batch] * sx[dn.input_batch], "x_group")
    else:
        x_group = param(k.rhs.dims[dn.kernel_input_feature] * sx[dn.input_feature], "x_group")
    w_out = sw[dn.kernel_output_feature]
    unit = w_out == 1
    w_col = None if unit else param(w_out, "w_out")
    w_base = kb.let(t, f"{zb} * {param(p.columns * w_out, 'w_group')} + {col0}"
                    + ("" if unit else f" * {w_col}"), "wb")
    positions, x_rows = k.rows(rb, rows, ct.nrows, f"{zb} * {x_group}")
    tile.declare()
    vec = acc.vector(p.lanes)
    joined = k.joins_features()
    features_in = k.rhs.dims[dn.kernel_input_feature] \
        * (k.window.dims[-1].size if joined else 1)
    with contextlib.ExitStack() as loops:
        valid, x_at, w_taps = k.taps(loops, positions, x_rows, joined)
        w_tap = kb.let(t, f"{w_base} + {w_taps}", "wt")
        k_in = param(features_in, "k_in")

        def features(guarded: bool) -> None:
            """The loop over input features at these taps; ``guarded``: rows in padding or
            holes read zeros (the common case of a tile wholly inside the input skips this):
            from a region of zeros in the embedded blob where it is small enough (each row's
            pointer chosen once a tap), else by a select per row and step (which took a
            ResNet layer's 8x4x4x256 3x3 convolution, most of whose tiles straddle the
            padding, 0.66x of XLA's GFLOP/s where no selects read 0.78x)."""
            ci = kb.fresh("ci")
            x_stride = sx[dn.input_feature]
            zero_bytes = ((features_in - 1) * x_stride + 1) * x_et.bits // 8
            zeroed = guarded and zero_bytes <= _MAX_ZERO_BYTES
            if zeroed:
                zeros = kb.buffer(x_et, ctx.program.zeros(zero_bytes), key="zeros")
                bases = [pointer(kb, x_et, f"({valid[r]} ? {x_buf} + {x_at[r]} : {zeros})",
                                 "0", "xp") for r in range(rows)]
            with k.em.block(f"for ({t} {ci} = 0; {ci} < {k_in}; ++{ci})"):
                w_ci = kb.let(t, f"{w_tap} + {ci} * {param(sw[dn.kernel_input_feature], 'wi')}",
                              "wc")
                ys = [kb.let(vec, acc.load_vector(
                    w_et, w_buf, f"{w_ci} + {j * p.lanes}" + ("" if unit else f" * {w_col}"),
                    p.lanes, w_col), "yv") for j in range(p.vectors)]
                x_ci = kb.let(t, f"{ci} * {param(x_stride, 'xf')}", "xc")
                for r in range(rows):
                    if zeroed:
                        loaded = acc.load_scalar(x_et, bases[r], x_ci)
                    else:
                        loaded = acc.load_scalar(x_et, x_buf, f"{x_at[r]} + {x_ci}")
                        if guarded:
                            loaded = (f"{valid[r]} ? {kb.let(acc.scalar, loaded, 'xl')} : "
                                      f"({acc.scalar})0")
                    x = kb.let(vec, f"({vec})({loaded})", "xv")
                    for j in range(p.vectors):
                        tile.update(r, j, x, ys[j])
        with k.em.block(f"if ({' && '.join(valid)})"):
            features(guarded=False)
        with k.em.block("else"):
            features(guarded=True)

    def out_index(ri: tuple[str, ...], col: str) -> tuple[str, ...]:
        return k.out_index(ri, kb.let(t, f"{zb} * {ct.ncols} + {col}", "f"))

    return k.store(ctx, ct, positions, out_index, p.groups)


def _narrow_kernel(ctx: LoweringContext, c: Contraction, p: ConvPlan) -> Launch:
    """``R`` output positions x every output feature per work-item, each accumulated in a
    vector along the input features (loaded with ``vload`` from the input, and from the
    kernel when ``passes.convolution_layout`` made its input features minor), summed across
    lanes at the end; input features beyond the last full vector are scalar."""
    k = _ConvKernel(ctx, c, p)
    kb, t, acc, lanes, dn, param = k.kb, k.t, p.acc, p.lanes, k.dn, k.param
    rows, cols = p.tile_rows, p.columns
    row_blocks = -(-k.nrows_total // rows)
    _, rb, _ = begin_tiles(kb, 1, row_blocks)
    x_et, x_buf = operand_buffer(ctx, kb, c, 0)
    w_et, w_buf = operand_buffer(ctx, kb, c, 1)
    nrows = param(k.nrows_total, "rows")
    positions, x_rows = k.rows(rb, rows, nrows, "")
    tile = Tile(kb, acc, rows, cols, lanes)
    tile.declare()
    sums = tile.declare_scalar_sums()
    vec = acc.vector(lanes)
    w_in = k.sw[dn.kernel_input_feature]
    w_stride = None if w_in == 1 else param(w_in, "wi")
    with contextlib.ExitStack() as loops:
        valid, x_at, w_tap = k.taps(loops, positions, x_rows)
        w_cols = [kb.let(t, f"{w_tap} + {j} * {param(k.sw[dn.kernel_output_feature], 'wo')}",
                         "wc") for j in range(cols)]

        def w_at(j: int, i: str) -> str:
            return f"{w_cols[j]} + {i}" + ("" if w_stride is None else f" * {w_stride}")

        k_in = param(k.rhs.dims[dn.kernel_input_feature], "k_in")
        i = kb.declare(t, "i", "0")
        with k.em.block(f"for (; {i} + {lanes} <= {k_in}; {i} += {lanes})"):
            ws = [kb.let(vec, acc.load_vector(w_et, w_buf, w_at(j, i), lanes, w_stride), "wv")
                  for j in range(cols)]
            for r in range(rows):
                loaded = kb.let(vec, acc.load_vector(x_et, x_buf, f"{x_at[r]} + {i}", lanes,
                                                     None), "xl")
                x = kb.let(vec, f"{valid[r]} ? {loaded} : ({vec})(0)", "xv")
                for j in range(cols):
                    tile.update(r, j, x, ws[j])
        with k.em.block(f"for (; {i} < {k_in}; ++{i})"):
            ws = [kb.let(acc.scalar, acc.load_scalar(w_et, w_buf, w_at(j, i)), "ws")
                  for j in range(cols)]
            for r in range(rows):
                loaded = kb.let(acc.scalar, acc.load_scalar(x_et, x_buf, f"{x_at[r]} + {i}"), "xl")
                x = kb.let(acc.scalar, f"{valid[r]} ? {loaded} : ({acc.scalar})0", "xs")
                for j in range(cols):
                    kb.line(f"{sums[r][j]} = {acc.madd(x, ws[j], sums[r][j])};")
    k.writer.store_tile(tile.lane_sums(sums), rows, cols, f"{rb} * {rows}", nrows, "0", k.split,
                        lambda ri, lane: (k.out_index(ri, lane), "1"))
    return launch_3d(ctx, kb, c.inst, 1, row_blocks, 1)


def _group_lanes_kernel(ctx: LoweringContext, c: Contraction, p: ConvPlan) -> Launch:
    """``R`` output positions x ``V*L`` groups per work-item, one output feature per group:
    at each tap and input feature of a group, lane ``g`` multiplies group ``g``'s input
    element (its feature, or with batch groups its batch; a vector load where consecutive
    groups are adjacent in memory, else a gather) by group ``g``'s kernel element."""
    k = _ConvKernel(ctx, c, p)
    kb, t, acc, dn, param, lanes = k.kb, k.t, p.acc, k.dn, k.param, p.lanes
    sx, sw = k.sx, k.sw
    ct = k.column_tiles(ctx)
    tile, rows, rb, col0 = ct.tile, ct.tile.rows, ct.rb, ct.col0
    (x_et, x_buf), (w_et, w_buf) = ct.x, ct.w
    k_in = k.rhs.dims[dn.kernel_input_feature]
    # elements from one group's input to the next's: its features, or its batch
    x_lane = (k.out.dims[dn.output_batch] * sx[dn.input_batch] if p.batch_groups
              else k_in * sx[dn.input_feature])
    w_lane = sw[dn.kernel_output_feature]
    x_step, w_step = (None if n == 1 else param(n, name)
                      for n, name in ((x_lane, "x_lane"), (w_lane, "w_lane")))
    x_base = kb.let(t, f"{col0} * {param(x_lane, 'x_lane')}", "xg")
    positions, x_rows = k.rows(rb, rows, ct.nrows, x_base)
    tile.declare()
    vec = acc.vector(lanes)
    with contextlib.ExitStack() as loops:
        valid, x_at, w_taps = k.taps(loops, positions, x_rows)
        w_tap = kb.let(t, f"{w_taps} + {col0} * {param(w_lane, 'w_lane')}", "wt")
        ci = kb.fresh("ci")
        loops.enter_context(k.em.block(
            f"for ({t} {ci} = 0; {ci} < {param(k_in, 'k_in')}; ++{ci})"))
        w_ci = kb.let(t, f"{w_tap} + {ci} * {param(sw[dn.kernel_input_feature], 'wi')}", "wc")
        x_ci = kb.let(t, f"{ci} * {param(sx[dn.input_feature], 'xf')}", "xc")
        ys = [kb.let(vec, acc.load_vector(w_et, w_buf, f"{w_ci} + {j * lanes * w_lane}",
                                          lanes, w_step), "yv") for j in range(p.vectors)]
        for r in range(rows):
            for j in range(p.vectors):
                loaded = kb.let(vec, acc.load_vector(
                    x_et, x_buf, f"{x_at[r]} + {x_ci} + {j * lanes * x_lane}", lanes, x_step),
                    "xl")
                x = kb.let(vec, f"{valid[r]} ? {loaded} : ({vec})(0)", "xv")
                tile.update(r, j, x, ys[j])
    return k.store(ctx, ct, positions, k.out_index, 1)


def _reversed(w: WindowDim, tap: str, s: int, param) -> str:
    return f"({param(w.size - 1, 'last', s)} - {tap})" if w.reversal else tap


def _tap_rows(kb, window: Window, dn: ConvDimensionNumbers, lhs: ArrayShape, sx, positions,
              x_rows, taps, param) -> tuple[list[str], list[str]]:
    """Per tile row at the current taps: whether the input position is real (not padding,
    not a hole of lhs dilation) and its offset in the input (0 where it is not real, so the
    load stays in bounds and its value is discarded)."""
    t = kb.index_type
    valid, offsets = [], []
    for ri, x_row in zip(positions, x_rows):
        conds, terms = [], [x_row]
        for s, (w, tap, d) in enumerate(zip(window.dims, taps, dn.input_spatial)):
            pos = kb.let(t, f"{ri[1 + s]} * {param(w.stride, 'stride', s)} + {tap} * "
                            f"{param(w.rhs_dilation, 'rd', s)} - {param(w.pad_low, 'lo', s)}", "p")
            n = param(lhs.dims[d], "n", s)
            if w.lhs_dilation != 1:
                ld = param(w.lhs_dilation, "ld", s)
                conds.append(f"{pos} >= 0 && {pos} % {ld} == 0 && {pos} / {ld} < {n}")
                pos = f"({pos} / {ld})"
            else:
                conds.append(f"{pos} >= 0 && {pos} < {n}")
            terms.append(f"{pos} * {param(sx[d], 'xs', s)}")
        ok = kb.let("int", " && ".join(conds) or "1", "ok")
        valid.append(ok)
        offsets.append(kb.let(t, f"{ok} ? {' + '.join(terms)} : 0", "xa"))
    return valid, offsets


register_contraction(Opcode.CONVOLUTION, plan_convolution, _emit,
                     target=TargetKind.CPU, priority=30)
