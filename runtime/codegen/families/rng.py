"""rng-bit-generator: one work-item per output word; work-item 0 also writes the new state.

The generator (``codegen.rng``) makes every output element an independent expression of the
state and the element's row-major position, bit-exact with XLA's CPU backend, so this is a
loop kernel with a different leaf.
"""

from __future__ import annotations

from ...errors import HloUnsupportedError
from ...hlo.ir import HloInstruction
from ...hlo.shape import ArrayShape, leaf_shape
from ...hlo.opcode_enum import Opcode
from .. import cltypes
from ..elemental import ElementalEmitter
from ..context import LoweringContext
from ..registry import register
from .loop import begin_1d, kernel_builder, launch_1d, output_index
from ..plan import Step
from ..rng_algorithms import rng_bit_generator


@register(Opcode.RNG_BIT_GENERATOR)
def lower_rng_bit_generator(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    state_in = inst.operands[0]
    state_shape: ArrayShape = state_in.array_shape
    new_state = leaf_shape(inst.shape, (0,))
    bits = leaf_shape(inst.shape, (1,))
    words = state_shape.element_count
    if not state_shape.element_type.is_integer:
        raise HloUnsupportedError(f"rng-bit-generator {inst.name} takes an integer state "
                                  f"(u64 words), got {state_shape.element_type}",
                                  instruction=inst.name, location=inst.location)
    gen = rng_bit_generator(str(inst.algorithm), words, bits.element_type, bits.dims)
    count = max(bits.element_count, 1)
    kb = kernel_builder(bits, state_shape)
    gid = begin_1d(kb, count)
    src = kb.buffer(state_shape.element_type, ctx.ref(state_in), key="state")
    st_out = kb.buffer(new_state.element_type, ctx.ref(inst, (0,)), writable=True, key="new_state")
    out = kb.buffer(bits.element_type, ctx.ref(inst, (1,)), writable=True, key="bits")
    state = [kb.let("ulong", f"(ulong){cltypes.load(state_shape.element_type, src, str(w))}", "st")
             for w in range(words)]
    em = ElementalEmitter(kb, {}, ctx.program.embed)
    if bits.element_count:
        index = output_index(em, bits, gid)
        row_major = em.linearize(index.exprs, bits.dims, tuple(range(bits.rank - 1, -1, -1)), "rm")
        value = kb.let(cltypes.compute_type(bits.element_type), gen.element(state, row_major), "b")
        kb.line(cltypes.store(bits.element_type, out, em.offset(bits, index, "bits"), value) + ";")
    advanced = gen.new_state(state)
    with em.block(f"if ({gid} == 0)"):
        # every work-item read the old state first: the kernel's reads precede this write
        # only within work-item 0, so the state must not share bytes with its input
        for w, expr in enumerate(advanced):
            kb.line(cltypes.store(new_state.element_type, st_out, str(w),
                                  f"({cltypes.compute_type(new_state.element_type)})({expr})") + ";")
    return [launch_1d(ctx, kb, inst, count)]
