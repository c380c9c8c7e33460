"""select-and-scatter on CPUs: one work-item per plane, XLA's sequential algorithm in each.

The element form (``elemental._select_and_scatter``) gives each operand element a work-item
that visits every window containing it and runs that window's selection again: with a 3x3
window at stride 2, four windows of nine taps for each element. A max pool's gradient over
a ConvNeXt's [8, 33, 33, 64] activation took 36 ms of a 128 ms train step that way.

Here the dimensions the window does not move along (size 1, stride 1, no padding: batch and
features of a pooling) index planes; one work-item per plane fills its plane with ``init``,
then walks the plane's windows in row-major order, selects each window's element once and
combines the window's source value into it. A plane is one work-item's alone, so there are
no races, and each output element combines its windows' values in the element form's order
(windows in row-major order, from ``init``): the results are the same bits. GPUs keep the
element form, which has a work-item per element rather than per plane.
"""

from __future__ import annotations

import math

from ...hlo.ir import HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.shape import ArrayShape
from .. import cltypes
from ..context import LoweringContext
from ..elemental import SCALAR, ElementalEmitter, Index, close_loops, loops
from .loop import (all_shapes, begin_1d, fused_parts, kernel_builder, launch_1d,
                    operand_leaves)
from ..plan import Step
from ..registry import register
from ...target import TargetKind

# fewer planes than this leave cores idle: the element form's work-items are better spread
_MIN_PLANES = 16


@register(Opcode.SELECT_AND_SCATTER, target=TargetKind.CPU, fusion_root_too=True)
def lower_by_planes(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    root, params = fused_parts(inst)
    if root.opcode != Opcode.SELECT_AND_SCATTER or inst.shape.is_tuple:
        return None
    operand, source, init = root.operands
    window = root.window
    if any(w.lhs_dilation != 1 or w.rhs_dilation != 1 or w.reversal for w in window.dims):
        return None
    moving = [d for d, w in enumerate(window.dims)
              if (w.size, w.stride, w.pad_low, w.pad_high) != (1, 1, 0, 0)]
    out: ArrayShape = inst.shape
    planes = out.element_count // max(1, math.prod(out.dims[d] for d in moving))
    if planes < _MIN_PLANES or any(ctx.same_bytes(inst, op) for op in inst.operands):
        return None
    kb = kernel_builder(*all_shapes(inst))
    gid = begin_1d(kb, planes)
    ptr = kb.buffer(out.element_type, ctx.ref(inst), writable=True, key=("out", ()))
    em = ElementalEmitter(kb, operand_leaves(ctx, inst, params), ctx.program.embed)
    t = kb.index_type
    # planes in the output's physical order: neighbouring work-items touch neighbouring bytes
    fixed = [d for d in range(out.rank) if d not in moving]
    order = tuple(fixed.index(d) for d in out.minor_to_major if d in fixed)
    plane = dict(zip(fixed, em.delinearize(gid, tuple(out.dims[d] for d in fixed), order,
                                            "plane")))
    key = ("sas-planes", id(root))

    def nest(sizes: dict[int, int], name: str):
        """Nested loops over ``sizes`` (dimension -> extent) in dimension order: their
        variables by dimension, and the blocks ``close_loops`` ends."""
        names, blocks = loops(em, [(n, (key, name, d)) for d, n in sizes.items()])
        return dict(zip(sizes, names)), blocks

    def at(positions: dict[int, str]) -> Index:
        return Index(tuple(positions[d] if d in positions else plane[d]
                           for d in range(out.rank)))

    initial = str(em.value(init, SCALAR))
    cells, blocks = nest({d: out.dims[d] for d in moving}, "x")
    kb.line(cltypes.store(out.element_type, ptr, em.offset(out, at(cells), ("out", ())),
                          initial))
    close_loops(blocks)
    src: ArrayShape = source.shape
    wins, win_blocks = nest({d: src.dims[d] for d in moving}, "w")
    best = {d: kb.declare(t, "b", "0") for d in moving}
    best_value = kb.declare(cltypes.compute_type(operand.shape.element_type), "bv")
    have = kb.declare("int", "h", "0")
    taps, tap_blocks = nest({d: window.dims[d].size for d in moving}, "k")
    pos, valid = {}, []
    for d in moving:
        w = window.dims[d]
        p = kb.let(t, f"{wins[d]} * {kb.param(w.stride, key=(key, 's', d))} - "
                      f"{kb.param(w.pad_low, key=(key, 'lo', d))} + {taps[d]}", "p")
        valid.append(f"{p} >= 0 && {p} < {kb.param(out.dims[d], key=(key, 'n', d))}")
        pos[d] = p
    with em.block(f"if ({' && '.join(valid)})"):
        v = em.value(operand, at(pos))
        keep = em.call(root.select, [best_value, v])
        with em.block(f"if (!{have} || !({keep}))"):
            kb.line(f"{best_value} = {v};")
            for d in moving:
                kb.line(f"{best[d]} = {pos[d]};")
            kb.line(f"{have} = 1;")
    close_loops(tap_blocks)
    with em.block(f"if ({have})"):
        offset = kb.let(t, em.offset(out, at(best), ("out", ())), "o")
        current = kb.let(cltypes.compute_type(out.element_type),
                         cltypes.load(out.element_type, ptr, offset), "c")
        combined = em.call(root.scatter, [current, em.value(source, at(wins))])
        kb.line(cltypes.store(out.element_type, ptr, offset, str(combined)))
    close_loops(win_blocks)
    return [launch_1d(ctx, kb, inst, planes)]
