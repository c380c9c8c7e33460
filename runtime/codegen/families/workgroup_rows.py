"""Row reductions (a reduce, or a fusion of reductions such as softmax or layer norm) as one
work-group per output row on the GPU target.

The common row kernel (``reduction``) gives each work-item a whole row, which on a GPU leaves
most lanes idle when rows are few and reads memory with a stride of one row between
neighbouring work-items. Here the ``G`` work-items of a group share one row: for each
reduction of the row plan, work-item ``l`` accumulates the elements ``l, l + G, ...`` of the
contiguous reduced dimension (consecutive work-items read consecutive addresses; other
reduced dimensions are loops around it), or, where that run is shorter than ``MIN_GROUP`` or
the contiguous dimension is kept, of all the row's reduced elements in memory order (a group
norm over channels-last data, batch statistics over channels: one work-item a row had taken
1 and 7 ms a launch on an H200), then the group combines the ``G`` partials in
``__local`` memory as a tree (halving, a barrier per level), and every work-item reads the
result. The row's outputs are then written by the group: the innermost column loop strided
over the work-items like the loads, or, without columns, by work-item 0.

The tree changes the order of the reduction, so it is used only where the reducer may be
reordered and started from its identity (``reorderable``: one input, a constant init that is
the reducer's identity, not an 8-bit float sum) or is JAX's argmax or argmin (``argminmax_direction``: each
work-item's elements come in index order, and the tree keeps the element of greatest key, as
the sequence does; it carries each work-item's last zero along, for the sign of a zero
result); anything else declines to the common row kernel. A categorical sample's argmax
over 8 rows of 8192 had taken 1.7 ms a step on an H200, one work-item a row. ``G`` is the
largest power of two up to ``Target.work_groups.reduce_group`` (from the device's limits)
that every reduction's strided elements fill, at least ``MIN_GROUP``.
"""

from __future__ import annotations

from ...analysis.reducers import argminmax_direction, reorderable
from ...analysis.rows import RowPlan, plan_rows
from ...hlo.ir import HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.shape import ArrayShape
from .. import cltypes
from ..context import LoweringContext
from ..elemental import ElementalEmitter, Index
from ..kernel import KernelBuilder, needs_long_index
from .loop import fused_parts, operand_leaves
from ..plan import Launch, Step
from ..registry import FUSION, register
from ...target import TargetKind
from .reduction import (_accumulators, _bind, _close, _combine, _count, _first_leaf,
                        _greater_key, _input_index, _loops, _output_pointers, _parts, _shapes,
                        _store)

# rows whose contiguous reduced run is shorter keep one work-item each (the common row
# kernel): a group narrower than a GPU's SIMD width (32 on most) would idle most of it
MIN_GROUP = 32


def lower_group_rows(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    """A work-group-per-row kernel for ``inst``, or None (the common row kernel then)."""
    groups = ctx.target.work_groups
    if groups is None:
        return None
    root, params = fused_parts(inst)
    members = inst.calls.instructions if params is not None else [inst]
    plan = plan_rows(root, members)
    group = None if plan is None else _group_size(plan, groups.reduce_group)
    if plan is None or group is None:
        return None
    out = _first_leaf(inst)
    if out.element_count == 0:
        return []
    kb = KernelBuilder(index_type="long" if needs_long_index(*_shapes(inst, members)) else "int")
    rows = _group_kernel(ctx, kb, inst, root, params, plan, group)
    name = ctx.program.add_kernel(kb, inst.name)
    return [Launch(name, tuple(b.ref for b in kb.buffers), tuple(kb.scalar_arg_values()),
                   (rows * group,), (group,), inst.name)]


def _group_size(plan: RowPlan, largest: int) -> int | None:
    """Work-items per row: the largest power of two up to ``largest`` that every reduction's
    strided elements (``_strided_length``) fill, if that is at least ``MIN_GROUP`` (or
    ``largest``); None where some reduction cannot be reordered."""
    reduces = [v for v in plan.hoisted if v.opcode == Opcode.REDUCE]
    if not reduces or not all(reorderable(r) or _argminmax_f32(r) for r in reduces):
        return None
    length = min(_strided_length(r)[0] for r in reduces)
    group = largest
    while group > length:
        group //= 2
    return group if group >= min(MIN_GROUP, largest) and group > 0 else None


def _argminmax_f32(red: HloInstruction) -> bool:
    return bool(argminmax_direction(red)) and red.operands[0].array_shape.element_type.name == "f32"


def _strided_length(red: HloInstruction) -> tuple[int, bool]:
    """(the elements a group's work-items stride over, whether that is the contiguous reduced
    run, with loops over the other reduced dimensions around it). A run shorter than
    ``MIN_GROUP``, or none (the contiguous dimension kept: batch statistics over channels), is
    replaced by all the reduced elements in memory order: a group norm over channels-last data
    (runs of 4 to 8 channels), a batch norm's sums over 64 channels."""
    run = _contiguous_length(red)
    if run >= MIN_GROUP:
        return run, True
    src: ArrayShape = red.operands[0].array_shape
    total = 1
    for d in red.dimensions:
        total *= src.dims[d]
    return total, False


def _contiguous_length(red: HloInstruction) -> int:
    """The length of ``red``'s input along its contiguous dimension if that is reduced, else 0."""
    src: ArrayShape = red.operands[0].array_shape
    if not src.rank or src.minor_to_major[0] not in red.dimensions:
        return 0
    return src.dims[src.minor_to_major[0]]


@register(Opcode.REDUCE, target=TargetKind.GPU, fusion_root_too=True)
def lower_reduce_by_group(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    return lower_group_rows(ctx, inst)


@register(FUSION, target=TargetKind.GPU, priority=10)
def _group_row_fusion(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    """Structural fusion rule: a fusion whose row plan reduces rows (softmax, layer norm)."""
    return lower_group_rows(ctx, inst)


def _group_kernel(ctx: LoweringContext, kb: KernelBuilder, inst: HloInstruction,
                  root: HloInstruction, params, plan: RowPlan, group: int) -> int:
    out = _first_leaf(inst)
    rows = _count(out, plan.row_dims)
    t = kb.index_type
    bound = kb.param(rows, key="count")
    kb.line(f"if ({bound} == 0) return;")      # uniform: no work-item misses a barrier
    lid = kb.let(t, f"({t})get_local_id(0)", "lid")
    gid = kb.let(t, f"({t})get_group_id(0)", "row")
    reduces = [v for v in plan.hoisted if v.opcode == Opcode.REDUCE]
    scratch = {}
    for red in reduces:
        types = [cltypes.compute_type(s.element_type) for _, s in red.shape.leaves()]
        if _argminmax_f32(red):
            types.append("int")                 # each work-item's last zero's index
        scratch[id(red)] = [kb.fresh("partials") for _ in types]
        for ctype, name in zip(types, scratch[id(red)]):
            kb.line(f"__local {ctype} {name}[{group}];")
    outputs = _output_pointers(ctx, kb, inst)
    em = ElementalEmitter(kb, operand_leaves(ctx, inst, params), ctx.program.embed)
    row = em.delinearize(gid, out.dims, tuple(reversed(plan.row_dims)), "row")
    for value in plan.hoisted:
        index = Index(tuple(row[k] if k is not None else "0" for k in plan.index_of[value]))
        if value.opcode == Opcode.REDUCE and _argminmax_f32(value):
            _bind(em, value, _tree_argminmax(em, value, index, lid, group, scratch[id(value)]))
        elif value.opcode == Opcode.REDUCE:
            _bind(em, value, [_tree_reduce(em, value, index, lid, group, scratch[id(value)][0])])
        else:
            _bind(em, value, [em.element(value, index)])
    columns: dict[int, str] = {}
    blocks = []
    for pos, d in enumerate(plan.column_dims):
        var = kb.fresh("c")
        n = kb.param(out.dims[d], key=("column", d))
        if pos < len(plan.column_dims) - 1:
            blocks.append(em.block(f"for ({t} {var} = 0; {var} < {n}; ++{var})"))
            blocks[-1].__enter__()
        else:
            # the innermost strided over the group, by a loop whose bounds are the group's
            # (``for (c = lid; c < n; c += G)`` wrote past the output on PoCL's CPU device,
            # where the tests run these kernels, when n was under G: a group norm's [2,1,1,8,1])
            base = kb.fresh("base")
            blocks.append(em.block(f"for ({t} {base} = 0; {base} < {n}; {base} += {group})"))
            blocks[-1].__enter__()
            kb.line(f"{t} {var} = {base} + {lid};")
            blocks.append(em.block(f"if ({var} < {n})"))
            blocks[-1].__enter__()
        columns[d] = var
    if not plan.column_dims:
        blocks.append(em.block(f"if ({lid} == 0)"))
        blocks[-1].__enter__()
    _store(em, inst, root, outputs, Index(tuple(columns.get(d, row[d]) for d in range(out.rank))))
    _close(blocks)
    return rows


def _tree_reduce(em: ElementalEmitter, red: HloInstruction, index: Index, lid: str, group: int,
                 partials: str) -> str:
    """``red`` at ``index``, computed by the whole work-group: strided partials, then a tree in
    local memory; every work-item gets the result."""
    kb, t = em.kb, em.kb.index_type
    inputs, inits, comp = _parts(red)
    ctype = cltypes.compute_type(red.array_shape.element_type)
    src: ArrayShape = inputs[0].array_shape
    order = [d for d in reversed(src.minor_to_major) if d in red.dimensions]
    acc = _accumulators(em, inits)
    length, contiguous = _strided_length(red)
    if contiguous:
        variables, blocks = _loops(em, red, order[:-1])
        lane_dim = order[-1]
        j = kb.fresh("j")
        n = kb.param(src.dims[lane_dim], key=(("reduce", id(red)), "n", lane_dim))
        with em.block(f"for ({t} {j} = {lid}; {j} < {n}; {j} += {group})"):
            at = {**variables, lane_dim: j}
            _combine(em, comp, acc, [em.value(x, _input_index(red, index, at)) for x in inputs])
        _close(blocks)
    else:
        r = kb.fresh("r")
        total = kb.param(length, key=(("reduce", id(red)), "total"))
        with em.block(f"for ({t} {r} = {lid}; {r} < {total}; {r} += {group})"):
            position = em.delinearize(r, tuple(src.dims[d] for d in order),
                                      tuple(range(len(order) - 1, -1, -1)),
                                      (("reduce", id(red)), "flat"))
            at = dict(zip(order, position))
            _combine(em, comp, acc, [em.value(x, _input_index(red, index, at)) for x in inputs])
    kb.line(f"{partials}[{lid}] = {acc[0]};")
    kb.line("barrier(CLK_LOCAL_MEM_FENCE);")
    half = kb.fresh("half")
    with em.block(f"for ({t} {half} = {group // 2}; {half} > 0; {half} >>= 1)"):
        with em.block(f"if ({lid} < {half})"):
            mine = kb.let(ctype, f"{partials}[{lid}]", "p")
            other = kb.let(ctype, f"{partials}[{lid} + {half}]", "p")
            _combine(em, comp, [mine], [other])
            kb.line(f"{partials}[{lid}] = {mine};")
        kb.line("barrier(CLK_LOCAL_MEM_FENCE);")
    return kb.let(ctype, f"{partials}[0]", "reduced")


def _tree_argminmax(em: ElementalEmitter, red: HloInstruction, index: Index, lid: str,
                    group: int, partials: list[str]) -> list[str]:
    """JAX's argmax or argmin of ``red`` at ``index`` by the whole work-group: each work-item
    applies the reducer to its strided elements in order (tracking its last zero), then the
    tree keeps the element of greatest key (is NaN, value, -index); a zero result takes the
    value of the row's last zero, as the sequence's ties do."""
    kb, t = em.kb, em.kb.index_type
    inputs, inits, comp = _parts(red)
    src: ArrayShape = inputs[0].array_shape
    lane_dim = [d for d in reversed(src.minor_to_major) if d in red.dimensions][-1]
    better = ">" if argminmax_direction(red) == "GT" else "<"
    acc = _accumulators(em, inits)
    last_zero = kb.declare("int", "zero", "-1")
    j = kb.fresh("j")
    n = kb.param(src.dims[lane_dim], key=(("reduce", id(red)), "n", lane_dim))
    with em.block(f"for ({t} {j} = {lid}; {j} < {n}; {j} += {group})"):
        xs = [em.value(x, _input_index(red, index, {lane_dim: j})) for x in inputs]
        with em.block(f"if ({xs[0]} == 0.0f)"):
            kb.line(f"{last_zero} = {xs[1]};")
        _combine(em, comp, acc, xs)
    values, positions, zeros = partials
    kb.line(f"{values}[{lid}] = {acc[0]};")
    kb.line(f"{positions}[{lid}] = {acc[1]};")
    kb.line(f"{zeros}[{lid}] = {last_zero};")
    kb.line("barrier(CLK_LOCAL_MEM_FENCE);")
    half = kb.fresh("half")
    with em.block(f"for ({t} {half} = {group // 2}; {half} > 0; {half} >>= 1)"):
        with em.block(f"if ({lid} < {half})"):
            a = kb.let("float", f"{values}[{lid}]", "a")
            b = kb.let("float", f"{values}[{lid} + {half}]", "b")
            ai = kb.let("int", f"{positions}[{lid}]", "ai")
            bi = kb.let("int", f"{positions}[{lid} + {half}]", "bi")
            take = kb.let("int", _greater_key(better, a, ai, b, bi), "take")
            kb.line(f"if ({take}) {{ {values}[{lid}] = {b}; {positions}[{lid}] = {bi}; }}")
            kb.line(f"{zeros}[{lid}] = max({zeros}[{lid}], {zeros}[{lid} + {half}]);")
        kb.line("barrier(CLK_LOCAL_MEM_FENCE);")
    value = kb.declare("float", "reduced", f"{values}[0]")
    position = kb.let("int", f"{positions}[0]", "reduced")
    zero = kb.let("int", f"{zeros}[0]", "zero")
    with em.block(f"if ({value} == 0.0f && {zero} >= 0)"):
        kb.line(f"{value} = {em.value(inputs[0], _input_index(red, index, {lane_dim: zero}))};")
    return [value, position]
