"""dot (and output fusions over a dot) as work-group-tiled kernels on the GPU target.

A GPU runs a work-group's work-items side by side and gives them fast shared local memory, so
the classic tiling pays there (it does not on PoCL's CPU devices, see ``tiles``): a
work-group computes a ``T`` x ``T`` block of the output (rows: the lhs free axes, columns:
the rhs free axes, one work-group per batch index on the third dimension). Per step of ``T``
along the contraction it stages a ``T`` x ``T`` block of each operand in ``__local`` memory,
every work-item loading ``B*B`` elements so that consecutive work-items read consecutive
addresses (along the operand's contiguous axis: the innermost contracting axis or the
innermost free axis, whichever is contiguous), then, between two barriers, each work-item
accumulates its ``B`` x ``B`` outputs (rows and columns ``T / B`` apart, so that the final
stores of neighbouring work-items are neighbours too) from local memory in registers.

The axes, dimension numbers and operand layouts are the CPU dot family's (``dot._axes``, and
its kernel helpers for index math); every operand layout works, the contiguous one only
decides which way loads are coalesced. Blocks past the edges load zeros (a contraction step
past the end adds ``0 * 0``), and stores are masked. f16/bf16 accumulate in float, integers
in their unsigned width (``tiles.Accumulation``); an elementwise epilogue is applied per
stored element (``tiles.OutputWriter``). ``T`` and ``B`` are the target's
(``Target.work_groups``, from the device's local memory and work-group limits).
"""

from __future__ import annotations

from ...target import Target, TargetKind
from ...hlo.opcode_enum import Opcode
from ..context import LoweringContext
from ..plan import Launch
from .dot import DotPlan, _axes, _DotKernel
from .tiles import Contraction, register_contraction, tiled_accumulation


def plan_workgroup_dot(c: Contraction, target: Target) -> DotPlan | None:
    """Every dot whose types accumulate exactly (``tiles.accumulation``); rows are the lhs
    free axes, columns the rhs free axes, the outer (per-work-group) axes the batch axes."""
    acc = tiled_accumulation(c, target)
    if acc is None:
        return None
    batch, lhs_free, rhs_free, contracting = _axes(c.op)
    return DotPlan("workgroup", acc, "lhs", lhs_free, rhs_free, batch, contracting, None,
                   1, 1, 1)


def _count(axes) -> int:
    n = 1
    for a in axes:
        n *= a.size
    return n


def emit_workgroup_dot(ctx: LoweringContext, c: Contraction, p: DotPlan) -> Launch:
    groups = ctx.target.work_groups
    assert groups is not None, "the work-group dot is registered for GPU targets only"
    tile, block = groups.tile, groups.block
    width = tile // block                # work-items per work-group dimension
    k = _DotKernel(ctx, c, p)
    kb, t, acc, em = k.kb, k.t, p.acc, k.em
    nrows_total, ncols_total, nk_total = _count(p.rows), _count(p.cols), _count(p.contracting)
    col_tiles, row_tiles = -(-ncols_total // tile), -(-nrows_total // tile)
    count = kb.param(col_tiles, key="count")
    # uniform over the launch (the work bound): no work-item can miss a barrier
    kb.line(f"if ({count} == 0) return;")
    tx = kb.let(t, f"({t})get_local_id(0)", "tx")
    ty = kb.let(t, f"({t})get_local_id(1)", "ty")
    lid = kb.let(t, f"{ty} * {width} + {tx}", "lid")
    col0 = kb.let(t, f"({t})get_group_id(0) * {tile}", "col0")
    row0 = kb.let(t, f"({t})get_group_id(1) * {tile}", "row0")
    zi = k.split(kb.let(t, f"({t})get_global_id(2)", "z"), p.outer, "z")
    nrows = kb.param(nrows_total, key="rows")
    ncols = kb.param(ncols_total, key="cols")
    nk = kb.param(nk_total, key="depth")
    staged = {}
    for side in ("lhs", "rhs"):
        name = kb.fresh("tile_" + side)
        kb.line(f"__local {acc.scalar} {name}[{tile}][{tile + 1}];")
        staged[side] = name
    bases = {side: kb.let(t, k.offset(zi, p.outer, side), "base") for side in ("lhs", "rhs")}
    sums = [[kb.declare(acc.scalar, "c", f"({acc.scalar})0") for _ in range(block)]
            for _ in range(block)]
    k0 = kb.fresh("k0")
    with em.block(f"for ({t} {k0} = 0; {k0} < {nk}; {k0} += {tile})"):
        for side, free, first, bound in (("lhs", p.rows, row0, nrows),
                                         ("rhs", p.cols, col0, ncols)):
            _stage(k, side, free, staged[side], bases[side], first, bound, k0, nk, lid,
                   tile, width * width, block * block)
        kb.line("barrier(CLK_LOCAL_MEM_FENCE);")
        kk = kb.fresh("kk")
        with em.block(f"for ({t} {kk} = 0; {kk} < {tile}; ++{kk})"):
            xs = [kb.let(acc.scalar, f"{staged['lhs']}[{kk}][{ty} + {i * width}]", "x")
                  for i in range(block)]
            ys = [kb.let(acc.scalar, f"{staged['rhs']}[{kk}][{tx} + {j * width}]", "y")
                  for j in range(block)]
            for i in range(block):
                for j in range(block):
                    kb.line(f"{sums[i][j]} = {acc.madd(xs[i], ys[j], sums[i][j])};")
        kb.line("barrier(CLK_LOCAL_MEM_FENCE);")
    for i in range(block):
        row = kb.let(t, f"{row0} + {ty} + {i * width}", "row")
        for j in range(block):
            col = kb.let(t, f"{col0} + {tx} + {j * width}", "col")
            with em.block(f"if ({row} < {nrows} && {col} < {ncols})"):
                ri = k.split(row, p.rows, "row")
                ci = k.split(col, p.cols, "col")
                k.writer.store(sums[i][j], k.out_index((zi, p.outer), (ri, p.rows),
                                                       (ci, p.cols)))
    name = ctx.program.add_kernel(kb, c.inst.name)
    return Launch(name, tuple(b.ref for b in kb.buffers), tuple(kb.scalar_arg_values()),
                  (col_tiles * width, row_tiles * width, _count(p.outer)), (width, width, 1),
                  c.inst.name)


def _contiguous_along_depth(k: _DotKernel, side: str, free) -> bool:
    """Whether ``side``'s innermost contracting axis is its contiguous one (then the staging
    loads walk the contraction fastest), rather than its innermost free axis."""
    contracting = k.plan.contracting
    if contracting and k.strides[side][contracting[-1].at(side)] == 1:
        return True
    return not (free and k.strides[side][free[-1].dim(side)] == 1)


def _stage(k: _DotKernel, side: str, free, local: str, base: str, first: str, bound: str,
           k0: str, nk: str, lid: str, tile: int, items: int, per_item: int) -> None:
    """Every work-item copies ``per_item`` elements of ``side``'s ``tile`` x ``tile`` block
    (free index from ``first``, depth from ``k0``) into ``local[depth][free]``; positions past
    either edge hold zero. Consecutive ``lid`` read consecutive addresses along the operand's
    contiguous axis."""
    kb, t, acc, em, p = k.kb, k.t, k.plan.acc, k.em, k.plan
    et, buf = k.operand(side)
    depth_fast = _contiguous_along_depth(k, side, free)
    for e in range(per_item):
        idx = kb.let(t, f"{lid} + {e * items}", "e")
        fast = kb.let(t, f"{idx} % {tile}", "f")
        slow = kb.let(t, f"{idx} / {tile}", "s")
        depth, pos = (fast, slow) if depth_fast else (slow, fast)
        g = kb.let(t, f"{first} + {pos}", "g")
        d = kb.let(t, f"{k0} + {depth}", "d")
        value = kb.declare(acc.scalar, "v", f"({acc.scalar})0")
        with em.block(f"if ({g} < {bound} && {d} < {nk})"):
            fi = k.split(g, free, "row" if side == "lhs" else "col")
            di = k.split(d, p.contracting, "depth")
            offset = " + ".join((base, k.offset(fi, free, side), k.offset(di, p.contracting, side)))
            kb.line(f"{value} = {acc.load_scalar(et, buf, offset)};")
        kb.line(f"{local}[{depth}][{pos}] = {value};")


register_contraction(Opcode.DOT, plan_workgroup_dot, emit_workgroup_dot,
                     target=TargetKind.GPU, priority=20)
