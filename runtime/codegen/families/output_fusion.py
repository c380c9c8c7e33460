"""Output fusions (kOutput: elementwise consumers of a dot or convolution) on a dedicated
contraction kernel.

When a dedicated family lowers the hero (``dot`` / ``convolution`` in ``LOWERING``), the
fusion runs as that kernel writing the hero's result straight into the fusion's output bytes,
then an epilogue kernel updating those bytes in place: each work-item reads its element of
the hero's result and writes the fused consumers' value over it (same index, so the update is
race-free). That keeps the fast contraction, and the fusion still saves the temp buffer the
unfused hero would need. Without a dedicated family the strategy declines and the loop kernel
computes the whole fusion elementally.

This strategy needs the hero's operands to be fusion parameters and its result to have the
same physical shape (element type, dimensions, layout) as the fusion's, so the output bytes
can hold it. A contraction family that fuses the epilogue into its own kernel registers a
strategy ahead of this one.
"""

from __future__ import annotations

import dataclasses

from ...analysis.in_place import same_physical_shape
from ...hlo.ir import HloInstruction
from .. import cltypes
from ..elemental import BufferLeaf, ElementalEmitter
from ..lower import FUSION_STRATEGIES, LOWERING, LoweringContext
from ..loop import begin_1d, kernel_builder, launch_1d, operand_leaves, output_index
from ..plan import Step

HEROES = ("dot", "convolution")


def _hero(inst: HloInstruction) -> HloInstruction | None:
    comp = inst.attrs["calls"]
    heroes = [m for m in comp.instructions if m.opcode in HEROES]  # type: ignore[attr-defined]
    if len(heroes) != 1 or heroes[0] is comp.root or inst.shape.is_tuple:  # type: ignore[attr-defined]
        return None
    hero = heroes[0]
    if hero.opcode not in LOWERING or not same_physical_shape(hero.shape, inst.shape) \
            or any(op.opcode != "parameter" for op in hero.operands):
        return None
    return hero


def lower_output_fusion(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    hero = _hero(inst)
    if hero is None:
        return None
    out = inst.shape
    if out.element_count == 0:  # type: ignore[union-attr]
        return []
    standalone = dataclasses.replace(
        hero, name=f"{inst.name}.{hero.opcode}", parent=None,
        operands=[inst.operands[p.parameter_number] for p in hero.operands])  # type: ignore[index]
    ctx.placed[id(standalone)] = ctx.ref(inst)
    steps = list(LOWERING[hero.opcode](ctx, standalone))
    kb = kernel_builder(out, *[o.shape for o in inst.operands if not o.shape.is_tuple])  # type: ignore[arg-type]
    gid = begin_1d(kb, out.element_count)  # type: ignore[union-attr]
    ptr = kb.buffer(out.element_type, ctx.ref(inst), writable=True, key=("out", ()))  # type: ignore[union-attr]
    leaves = operand_leaves(ctx, inst, inst.attrs["calls"].parameters)  # type: ignore[attr-defined]
    leaves[(id(hero), ())] = BufferLeaf(out, ctx.ref(inst), ("out", ()))  # type: ignore[arg-type]
    em = ElementalEmitter(kb, leaves, ctx.program.embed)
    index = output_index(em, out, gid)  # type: ignore[arg-type]
    value = em.value(inst.attrs["calls"].root, index)  # type: ignore[attr-defined]
    kb.line(cltypes.store(out.element_type, ptr, em.offset(out, index, ("out", ())),  # type: ignore[union-attr]
                          str(value)).rstrip(";") + ";")
    steps.append(launch_1d(ctx, kb, inst, out.element_count))  # type: ignore[union-attr]
    return steps


FUSION_STRATEGIES.append(lower_output_fusion)
