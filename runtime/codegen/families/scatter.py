"""scatter (standalone, or the root of a fusion): copy the inputs into the outputs unless they
already share bytes, then apply the updates.

XLA's semantics fix the combination order only up to "unspecified" for duplicate indices; we
apply updates in row-major order of the update operand, so results are deterministic and, for
non-commutative combiners (``.at[].set``), the last update wins as on XLA's CPU backend, which
also runs scatter as one sequential loop. With ``unique_indices=true`` (a promise by the
producer) every update element gets its own work-item.

Where the target asks for more work-items (``Target.scatter_work_items``: GPUs), the output
elements are shared out instead, and each work-item walks every update in that same order,
applying only those to elements it owns; so every element still sees its updates in the
sequential order, with the same bits. Window dimensions the indices never move (an embedding
row, a segment sum's features) are split among work-items outright (an element's coordinate
there is its window position); the other dimensions are dealt out by the element's index
modulo the number of owners, so that sorted indices (segment ids) spread over all of them.

Every load and store is of one element (``cltypes``), so packed 2- and 4-bit arrays are
scattered as they are stored: a store changes only its own code's bits, atomically, so
work-items writing neighbouring codes of one byte never lose each other's.
"""

from __future__ import annotations

import contextlib
from typing import Sequence

from ...hlo.ir import HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.shape import ArrayShape
from .. import cltypes
from ..elemental import BufferLeaf, ElementalEmitter, Index
from ..context import LoweringContext
from ..registry import register
from .loop import begin_1d, fused_parts, kernel_builder, launch_1d, operand_leaves, output_index
from ..plan import Step


def _source_of(inst: HloInstruction, node: HloInstruction, params) -> HloInstruction | None:
    """The outer instruction whose bytes ``node`` reads directly (None: it is computed)."""
    if params is None:
        return node
    if node.opcode == Opcode.PARAMETER:
        return inst.operands[node.param_number]
    return None


def lower_scatter(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    root, params = fused_parts(inst)
    n = len(root.operands) // 2
    steps: list[Step] = []
    outputs = [(idx, s) for idx, s in inst.shape.leaves()]
    for i, (idx, shape) in enumerate(outputs):
        source = _source_of(inst, root.operands[i], params)
        if source is not None and ctx.ref(source) == ctx.ref(inst, idx):
            continue
        if shape.element_count:
            steps.append(_copy_launch(ctx, inst, root.operands[i], params, idx, shape))
    update_shape: ArrayShape = root.operands[2 * n].shape
    if update_shape.element_count:
        steps.append(_update_launch(ctx, inst, root, params, outputs))
    return steps


def _copy_launch(ctx, inst, node, params, idx, shape: ArrayShape):
    kb = kernel_builder(*[s for _, s in inst.shape.leaves()], *[o.shape for o in inst.operands
                                                                  if not o.shape.is_tuple])
    gid = begin_1d(kb, shape.element_count)
    ptr = kb.buffer(shape.element_type, ctx.ref(inst, idx), writable=True, key=("out", idx))
    em = ElementalEmitter(kb, operand_leaves(ctx, inst, params), ctx.program.embed)
    index = output_index(em, shape, gid)
    value = em.value(node, index)
    kb.line(cltypes.store(shape.element_type, ptr, em.offset(shape, index, ("out", idx)),
                          str(value)) + ";")
    return launch_1d(ctx, kb, inst, shape.element_count)


def _update_launch(ctx, inst: HloInstruction, root: HloInstruction, params, outputs):
    n = len(root.operands) // 2
    indices = root.operands[n]
    updates = root.operands[n + 1:]
    uwd = root.update_window_dims
    iwd = root.inserted_window_dims
    sd2od = root.scatter_dims_to_operand_dims
    in_batch = root.ints_attr("input_batching_dims")
    idx_batch = root.ints_attr("scatter_indices_batching_dims")
    ivd = root.index_vector_dim
    unique = root.bool_attr("unique_indices", False)
    upd: ArrayShape = updates[0].array_shape
    out0: ArrayShape = outputs[0][1]
    idx_shape: ArrayShape = indices.array_shape
    scatter_dims = [d for d in range(upd.rank) if d not in uwd]
    window_sizes = [upd.dims[d] for d in uwd]
    operand_window_dims = [d for d in range(out0.rank) if d not in iwd and d not in in_batch]
    n_scatter = 1
    for d in scatter_dims:
        n_scatter *= upd.dims[d]
    n_window = 1
    for s in window_sizes:
        n_window *= s

    # window dimensions whose start is always 0 (neither indexed nor batch): shared out
    split_k = [k for k, od in enumerate(operand_window_dims) if od not in sd2od]
    n_split = 1
    for k in split_k:
        n_split *= window_sizes[k]
    split_dims = {operand_window_dims[k] for k in split_k}
    owned_dims = [d for d in range(out0.rank) if d not in split_dims]
    n_keys = 1
    for d in owned_dims:
        n_keys *= out0.dims[d]
    shared = not unique and ctx.target.scatter_work_items > 1
    owners = max(1, min(n_keys, -(-ctx.target.scatter_work_items // n_split))) if shared else 1

    kb = kernel_builder(out0, upd, idx_shape)
    t = kb.index_type
    work = n_scatter * n_window if unique else (n_split * owners if shared else 1)
    gid = begin_1d(kb, work)
    out_ptrs = [kb.buffer(s.element_type, ctx.ref(inst, idx), writable=True, key=("out", idx))
                for idx, s in outputs]
    leaves = operand_leaves(ctx, inst, params)
    current_leaves = [BufferLeaf(s, ctx.ref(inst, idx), ("out", idx)) for idx, s in outputs]
    em = ElementalEmitter(kb, leaves, ctx.program.embed)
    key = ("scatter", id(root))
    nw = kb.param(n_window, key=(key, "nw"))
    with contextlib.ExitStack() as stack:
        if shared:
            n_split_p = kb.param(n_split, key=(key, "nsplit"))
            split_idx = em.delinearize(kb.let(t, f"{gid} % {n_split_p}", "ws"),
                                       tuple(window_sizes[k] for k in split_k),
                                       _row_major(len(split_k)), (key, "ws"))
            owner = kb.let(t, f"{gid} / {n_split_p}", "own")
        if unique:
            g_lin = kb.let(t, f"{gid} / {nw}", "g")
            w_lin = kb.let(t, f"{gid} % {nw}", "w")
        else:
            g_lin = kb.fresh("g")
            ns = kb.param(n_scatter, key=(key, "ns"))
            stack.enter_context(em.block(f"for ({t} {g_lin} = 0; {g_lin} < {ns}; ++{g_lin})"))
        g_idx = em.delinearize(g_lin, tuple(upd.dims[d] for d in scatter_dims),
                               _row_major(len(scatter_dims)), (key, "g"))
        # the update's scatter dimensions are, in order, scatter_indices' dimensions other
        # than index_vector_dim
        idx_dims = [d for d in range(idx_shape.rank + (1 if ivd == idx_shape.rank else 0))
                    if d != ivd]
        g_of_idx_dim = dict(zip(idx_dims, g_idx))
        extent = [1] * out0.rank
        for k, od in enumerate(operand_window_dims):
            extent[od] = window_sizes[k]
        # XLA skips an update whose whole window does not fit (tested in the index's own
        # type, before it is narrowed); it never clamps. Batch starts are in range.
        starts = ["0"] * out0.rank
        conds = []
        for k, od in enumerate(sd2od):
            ex = tuple(str(k) if d == ivd else g_of_idx_dim[d] for d in range(idx_shape.rank))
            hi = kb.param(out0.dims[od] - extent[od], key=(key, "hi", od))
            cond, starts[od] = em.checked_index(indices, Index(ex), hi)
            conds.append(cond)
        for od, idd in zip(in_batch, idx_batch):
            starts[od] = g_of_idx_dim[idd]
        stack.enter_context(em.block(f"if ({' && '.join(conds) or '1'})"))
        if shared:
            w_idx = _shared_window_index(kb, em, stack, key, window_sizes, split_k, split_idx)
        else:
            if not unique:
                w_lin = kb.fresh("w")
                stack.enter_context(em.block(f"for ({t} {w_lin} = 0; {w_lin} < {nw}; ++{w_lin})"))
            w_idx = em.delinearize(w_lin, tuple(window_sizes), _row_major(len(uwd)), (key, "w"))
        u_exprs = ["0"] * upd.rank
        for d, g in zip(scatter_dims, g_idx):
            u_exprs[d] = g
        for k, d in enumerate(uwd):
            u_exprs[d] = w_idx[k]
        o_exprs = list(starts)
        for k, od in enumerate(operand_window_dims):
            o_exprs[od] = kb.let(t, f"{starts[od]} + {w_idx[k]}", "o")
        o_index = Index(tuple(o_exprs))
        if owners > 1:
            element_key = "0"
            for d in owned_dims:
                element_key = f"({element_key}) * {kb.param(out0.dims[d], key=(key, 'dim', d))}" \
                              f" + {o_exprs[d]}"
            owners_p = kb.param(owners, key=(key, "owners"))
            stack.enter_context(em.block(f"if (({element_key}) % {owners_p} == {owner})"))
        current = [em.load(leaf, o_index) for leaf in current_leaves]
        news = [em.value(u, Index(tuple(u_exprs))) for u in updates]
        combined = em.call(root.to_apply, [*current, *news])
        values = list(combined) if isinstance(combined, tuple) else [combined]
        results = [kb.let(cltypes.compute_type(s.element_type), str(v), "r")
                   for (_, s), v in zip(outputs, values)]
        for (idx, s), ptr, v in zip(outputs, out_ptrs, results):
            kb.line(cltypes.store(s.element_type, ptr, em.offset(s, o_index, ("out", idx)), v) + ";")
    return launch_1d(ctx, kb, inst, work)


def _shared_window_index(kb, em: ElementalEmitter, stack: contextlib.ExitStack, key,
                         window_sizes: list[int], split_k: list[int],
                         split_idx: Sequence[str]) -> tuple[str, ...]:
    """The window index of a shared scatter: this work-item's coordinates along the split
    window dimensions, a loop over the others (row-major, as the sequential loop)."""
    looped_k = [k for k in range(len(window_sizes)) if k not in split_k]
    n_looped = 1
    for k in looped_k:
        n_looped *= window_sizes[k]
    w_idx = [""] * len(window_sizes)
    for k, value in zip(split_k, split_idx):
        w_idx[k] = value
    if looped_k:
        t = kb.index_type
        w_lin = kb.fresh("w")
        bound = kb.param(n_looped, key=(key, "nloop"))
        stack.enter_context(em.block(f"for ({t} {w_lin} = 0; {w_lin} < {bound}; ++{w_lin})"))
        looped = em.delinearize(w_lin, tuple(window_sizes[k] for k in looped_k),
                                _row_major(len(looped_k)), (key, "wl"))
        for k, value in zip(looped_k, looped):
            w_idx[k] = value
    return tuple(w_idx)


def _row_major(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


register(Opcode.SCATTER, fusion_root_too=True, packed=True)(lower_scatter)
