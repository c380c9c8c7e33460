"""The loop kernel: one work-item per output element, computed by the elemental emitter.

Work-items enumerate the output in its *physical* order, so the store is at the work-item id
and writes are contiguous; operands are read through their own layouts. This one family
lowers every elementwise op, every data-movement op, and any fusion whose root is one of
them, and it is the correct (if not always fastest) fallback for reductions, windows and
contractions, which become loops inside the work-item.

A ``dynamic-update-slice`` whose result lives in its operand's bytes (XLA's in-place update)
gets a kernel over the *update* window only: it must not rewrite the rest, and reading the
operand while writing it would race. A multi-output loop fusion with such windows among its
outputs (``analysis.loop_outputs``) runs over its index space: element i of each plain output
and of each window's update, every value computed before any store.
"""

from __future__ import annotations

from ...analysis.in_place import kernel_outputs
from ...analysis.loop_outputs import LoopOutput, window_dimensions
from ...hlo.ir import HloInstruction
from ...hlo.shape import ArrayShape, Shape, leaf_shape, subshape
from ...hlo.opcode_enum import Opcode
from .. import cltypes
from ..elemental import BufferLeaf, ElementalEmitter, Index, dynamic_starts, layout_key
from ..kernel import BufferRef, KernelBuilder, needs_long_index
from ..context import LoweringContext
from ..registry import ANY, FUSION, LOOP, fusion_root, register
from ..plan import Launch, Step

def all_shapes(inst: HloInstruction) -> list[ArrayShape]:
    """Every array of ``inst``'s result and operands (what decides the index type)."""
    shapes = [s for _, s in inst.shape.leaves()]
    for op in inst.operands:
        shapes.extend(s for _, s in op.shape.leaves())
    return shapes


def kernel_builder(*shapes: Shape) -> KernelBuilder:
    return KernelBuilder(index_type="long" if needs_long_index(*shapes) else "int")


def operand_leaves(ctx: LoweringContext, inst: HloInstruction,
                   params: list[HloInstruction] | None = None) -> dict:
    """Bind each operand (or the fused computation's parameter standing for it) to its slice."""
    leaves: dict = {}
    for k, op in enumerate(inst.operands):
        target = params[k] if params is not None else op
        for index, shape in op.shape.leaves():
            if shape.is_array and shape.byte_size:
                leaves[(id(target), index)] = BufferLeaf(
                    target.array_shape if not index else shape, ctx.ref(op, index), ("in", k, index))
    return leaves


def fused_parts(inst: HloInstruction):
    """(root, parameters) of what the kernel computes: the fused computation for a fusion,
    else the instruction itself over its operands."""
    if inst.opcode == Opcode.FUSION:
        comp = inst.calls
        return comp.root, comp.parameters
    return inst, None


def launch_1d(ctx: LoweringContext, kb: KernelBuilder, inst: HloInstruction, count: int,
              long_items: bool = False) -> Launch:
    """A launch of ``count`` work-items. ``long_items``: each loops over a whole row (a sort, a
    top-k, a scan) and, on CPUs, is a work-group of its own: PoCL runs a work-group on one
    thread, and a top-k's 64 chunks in one group of 64 ran on one core while the other idled
    (147 us a launch against 40 us)."""
    local = 1 if long_items and ctx.target.min_row_groups else ctx.target.loop_local_size
    name = ctx.program.add_kernel(kb, inst.name)
    size = max(1, -(-count // local)) * local
    return Launch(name, tuple(b.ref for b in kb.buffers), tuple(kb.scalar_arg_values()),
                  (size,), (local,), inst.name)


def begin_1d(kb: KernelBuilder, count: int) -> str:
    """The work-item id and the early exit every family starts with (scalar 0 = the bound)."""
    bound = kb.param(count, key="count")
    t = kb.index_type
    kb.line(f"{t} gid = ({t})get_global_id(0);")
    kb.line(f"if (gid >= {bound}) return;")
    return "gid"


def output_index(em: ElementalEmitter, shape: ArrayShape, gid: str) -> Index:
    exprs = em.delinearize(gid, shape.dims, shape.minor_to_major, "out")
    return Index(exprs, (layout_key(shape), gid))


@register(ANY, packed=True)
def lower_loop(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    """The loop kernel, in the first specialised shape registered under ``LOOP`` for the target
    (several elements per work-item in vector types, blocked transposition) that takes it, else
    one element per work-item."""
    root, params = fused_parts(inst)
    steps = ctx.first_taker(LOOP, inst, root, params)
    if steps is not None:
        return steps
    outputs = [(idx, s) for idx, s in inst.shape.leaves()]
    if root.opcode == Opcode.DYNAMIC_UPDATE_SLICE and updates_in_place(ctx, inst, root, params):
        return _update_in_place(ctx, inst, root, params)
    found = windows_in_place(ctx, inst)
    if found is not None:
        return [_space_launch(ctx, inst, params, *found)]
    groups: dict[tuple, list] = {}
    for idx, s in outputs:
        if s.element_count:
            groups.setdefault(s.dims, []).append((idx, s))
    return [_loop_launch(ctx, inst, root, params, group) for group in groups.values()]


def updates_in_place(ctx: LoweringContext, inst: HloInstruction, root: HloInstruction,
                      params) -> bool:
    """Whether the result shares bytes with the buffer the dynamic-update-slice updates."""
    if inst.shape.is_tuple:
        return False
    base = root.operands[0]
    if params is None:
        source = base
    elif base.opcode == Opcode.PARAMETER:
        source = inst.operands[base.param_number]
    else:
        return False
    return ctx.same_bytes(inst, source)


def windows_in_place(ctx: LoweringContext, inst: HloInstruction
                     ) -> tuple[ArrayShape, list[LoopOutput]] | None:
    """``inst``'s index space and outputs when it is a loop fusion with window outputs
    (``analysis.loop_outputs``) each of which the buffer assignment placed in the bytes of
    the operand it updates (else the kernel computes each output over its own shape)."""
    found = kernel_outputs(inst)
    if found is None:
        return None
    for out in found[1]:
        if out.window is not None:
            base = out.window.operands[0]
            if ctx.ref(inst, out.index) != ctx.ref(inst.operands[base.param_number]):
                return None
    return found


def window_index(index: Index, space: ArrayShape, window: HloInstruction) -> Index:
    """The index in ``window``'s update of element ``index`` of the kernel's space."""
    update: ArrayShape = window.operands[1].array_shape
    to_space = window_dimensions(space, update)
    assert to_space is not None
    return Index(tuple(index.exprs[to_space[d]] if d in to_space else "0"
                       for d in range(update.rank)))


def window_target(em: ElementalEmitter, window: HloInstruction, rel: Index) -> Index:
    """Where element ``rel`` of ``window``'s update goes in the operand it updates."""
    starts = dynamic_starts(em, window, 2, window.operands[1].array_shape.dims)
    return Index(tuple(em.kb.let(em.kb.index_type, f"{s} + {r}", "i")
                       for s, r in zip(starts, rel.exprs)))


def _space_launch(ctx: LoweringContext, inst: HloInstruction, params, space: ArrayShape,
                  outputs: list[LoopOutput]) -> Launch:
    """One work-item per element of the space: plain outputs stored at it, windows at their
    place in the operand they update."""
    kb = kernel_builder(*all_shapes(inst))
    gid = begin_1d(kb, space.element_count)
    em = ElementalEmitter(kb, operand_leaves(ctx, inst, params), ctx.program.embed)
    index = output_index(em, space, gid)
    places = [index if o.window is None else window_index(index, space, o.window)
              for o in outputs]
    values = [em.value(o.value, at) for o, at in zip(outputs, places)]
    targets = [at if o.window is None else window_target(em, o.window, at)
               for o, at in zip(outputs, places)]
    for o, value, target in zip(outputs, values, targets):
        shape = leaf_shape(inst.shape, o.index)
        ptr = kb.buffer(shape.element_type, ctx.ref(inst, o.index), writable=True,
                        key=("out", o.index))
        offset = em.offset(shape, target, ("out", o.index))
        kb.line(_statement(cltypes.store(shape.element_type, ptr, offset, str(value))))
    return launch_1d(ctx, kb, inst, space.element_count)


def _loop_launch(ctx: LoweringContext, inst: HloInstruction, root: HloInstruction, params,
                 group: list[tuple[tuple[int, ...], ArrayShape]]) -> Launch:
    kb = kernel_builder(*all_shapes(inst))
    first = group[0][1]
    count = first.element_count
    gid = begin_1d(kb, count)
    out_ptrs = [kb.buffer(s.element_type, ctx.ref(inst, idx), writable=True, key=("out", idx))
                for idx, s in group]
    em = ElementalEmitter(kb, operand_leaves(ctx, inst, params), ctx.program.embed)
    index = output_index(em, first, gid)
    # every value before any store: an output may be written over an operand it reads
    # (analysis.in_place.may_hand_off), and another output may still read that operand
    values = [em.value(root, index, idx) if idx else em.value(root, index) for idx, _ in group]
    for (idx, s), ptr, value in zip(group, out_ptrs, values):
        offset = em.offset(s, index, ("out", idx))
        kb.line(_statement(cltypes.store(s.element_type, ptr, offset, str(value))))
    return launch_1d(ctx, kb, inst, count)


def _update_in_place(ctx: LoweringContext, inst: HloInstruction, root: HloInstruction,
                     params) -> list[Step]:
    out = inst.shape
    assert isinstance(out, ArrayShape)
    update = root.operands[1]
    upd_shape: ArrayShape = update.array_shape
    count = upd_shape.element_count
    if count == 0:
        return []
    kb = kernel_builder(*all_shapes(inst))
    gid = begin_1d(kb, count)
    out_ptr = kb.buffer(out.element_type, ctx.ref(inst), writable=True, key=("out", ()))
    # the target may be read only where this work-item writes (buffer assignment shares it
    # only when its sole other reader is a dynamic-slice of the very window written)
    em = ElementalEmitter(kb, operand_leaves(ctx, inst, params), ctx.program.embed)
    starts = dynamic_starts(em, root, 2, upd_shape.dims)
    rel = em.delinearize(gid, upd_shape.dims, tuple(range(upd_shape.rank - 1, -1, -1)), "upd")
    value = em.value(update, Index(rel))
    target = tuple(kb.let(kb.index_type, f"{s} + {r}", "i") for s, r in zip(starts, rel))
    offset = em.offset(out, Index(target), ("out", ()))
    kb.line(_statement(cltypes.store(out.element_type, out_ptr, offset, str(value))))
    return [launch_1d(ctx, kb, inst, count)]


def _statement(text: str) -> str:
    return text if text.rstrip().endswith(";") else text + ";"


@register(FUSION, packed=True)
def lower_by_root(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    """A fusion no structural rule (registered under ``FUSION`` at a higher priority) took
    lowers like its root: through a family registered for fusions with that root, else the
    loop kernel."""
    root = inst.calls.root_instruction
    steps = ctx.first_taker(fusion_root(root.opcode), inst)
    return steps if steps is not None else lower_loop(ctx, inst)

__all__ = ["lower_loop", "updates_in_place", "windows_in_place", "window_index", "window_target", "launch_1d", "begin_1d", "kernel_builder", "operand_leaves",
           "all_shapes",
           "fused_parts", "output_index", "BufferRef", "Shape"]
