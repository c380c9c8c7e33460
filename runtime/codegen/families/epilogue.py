"""Output fusions' elementwise epilogues computed on a register tile's vectors.

A fused dot or convolution (bias add, GELU, a residual add, a gradient's product) used to
spill its tile and evaluate the epilogue one element at a time, scalar ``tanh`` and ``exp``
included: GPT-2's MLP up-projection with its tanh-GELU took 7.3 ms where the dot alone takes
4.2. Where the epilogue has a vector form, each tile row's vectors go through it as they are
and are stored whole: the contraction's value is the tile's vector; an operand with the
output's dimensions is a vector load at the same position (a gather when its columns are
strided); a broadcast row (a bias) is a vector load along the columns, a broadcast per-row
value one element; scalars and scalar constants are splat. Element types that compute in the
same vectors mix (f32 and bf16, with converts between them: a bf16 dot computed on f32
operands, ``passes/dot_upcast``, whose result is rounded to bf16 before a bf16 GELU); each
bf16 result is rounded as the scalar path rounds it. Anything else (another dimension
mapping, an opcode without a vector template, types that compute differently) keeps the
element-by-element path.
"""

from __future__ import annotations

from ...hlo.dtypes import ElementType
from ...hlo.ir import HloInstruction
from ...hlo.shape import ArrayShape
from .. import cltypes, templates as E
from ..elemental import BufferLeaf, ElementalEmitter, Index, arithmetic, element_strides
from ..kernel import argument_value
from ..vector_loop import VECTOR_COMPUTE


def vectorizes(root: HloInstruction, op: HloInstruction, em: ElementalEmitter,
               column_dim: int, bits: int) -> bool:
    """Whether the epilogue from ``op`` up to ``root`` has a vector form (see the module)."""
    out = op.shape
    compute = VECTOR_COMPUTE.get(out.element_type.name)
    if compute is None:
        return False
    seen: set[int] = set()

    def check(inst: HloInstruction) -> bool:
        if id(inst) in seen:
            return True
        seen.add(id(inst))
        shape = inst.shape
        if not isinstance(shape, ArrayShape) \
                or VECTOR_COMPUTE.get(shape.element_type.name) != compute:
            return False
        if inst is op:
            return True
        leaf = em.leaves.get((id(inst), ()))
        if leaf is not None:
            return isinstance(leaf, BufferLeaf) and (shape.rank == 0 or shape.dims == out.dims)
        if inst.opcode == "constant":
            return (shape.element_count == 1 and inst.literal is not None
                    and not inst.literal.elided)
        if inst.opcode == "broadcast":
            source = inst.operands[0]
            if source.shape.rank == 0:
                return check(source)
            return (isinstance(em.leaves.get((id(source), ())), BufferLeaf)
                    and VECTOR_COMPUTE.get(source.shape.element_type.name) == compute)
        return (shape.dims == out.dims
                and (inst.opcode == "convert"
                     or E.vector_lanes(inst.opcode, compute, bits) is not None)
                and all(check(o) for o in inst.operands))
    return check(root)


class VectorEpilogue:
    """Emits the epilogue of one tile vector: ``vector(value, index)`` for the contraction's
    ``lanes`` values ``value`` at output index ``index`` and the ``lanes - 1`` columns after
    it."""

    def __init__(self, em: ElementalEmitter, root: HloInstruction, op: HloInstruction,
                 column_dim: int, lanes: int) -> None:
        self.em, self.kb, self.root, self.op = em, em.kb, root, op
        self.column_dim, self.lanes = column_dim, lanes
        self.et = op.shape.element_type
        self.compute = VECTOR_COMPUTE[self.et.name]
        self.scalar = cltypes.compute_type(self.et)
        self.vec = f"{self.scalar}{lanes}"

    def vector(self, value: str, index: tuple[str, ...]) -> str:
        """The epilogue's vector; ``value`` is the contraction's accumulator (its result is
        that rounded to a narrow element type)."""
        memo: dict[int, str] = {id(self.op): self._rounded(self.et, value)}
        return self._value(self.root, index, memo)

    def _rounded(self, et: ElementType, value: str) -> str:
        return f"xla_round_bf16x{self.lanes}({value})" if et.name == "bf16" else value

    def _value(self, inst: HloInstruction, index: tuple[str, ...], memo: dict) -> str:
        if id(inst) not in memo:
            memo[id(inst)] = self._compute(inst, index, memo)
        return memo[id(inst)]

    def _compute(self, inst: HloInstruction, index: tuple[str, ...], memo: dict) -> str:
        kb, vec = self.kb, self.vec
        leaf = self.em.leaves.get((id(inst), ()))
        if isinstance(leaf, BufferLeaf):
            return self._load(leaf, index, tuple(range(len(index))))
        et = inst.shape.element_type
        if inst.opcode == "constant":
            v = kb.scalar(self.scalar, argument_value(et, inst.literal.data),  # type: ignore[union-attr]
                          key=("const", id(inst)))
            return kb.let(vec, f"({vec})({v})", "ev")
        if inst.opcode == "broadcast":
            source = inst.operands[0]
            if source.shape.rank == 0:
                return self._value(source, index, memo)
            leaf = self.em.leaves[(id(source), ())]
            assert isinstance(leaf, BufferLeaf)
            return self._load(leaf, index, tuple(inst.dimensions))
        args = [self._value(o, index, memo) for o in inst.operands]
        if inst.opcode == "convert":    # between types of one compute type: exact or rounded
            return kb.let(vec, self._rounded(et, args[0]), "ev")
        value = arithmetic(inst.opcode, self.compute, self.compute, args, lanes=self.lanes)
        return kb.let(vec, self._rounded(et, value) if E.rounds(inst.opcode) else value, "ev")

    def _load(self, leaf: BufferLeaf, index: tuple[str, ...], mapping: tuple[int, ...]) -> str:
        """The leaf's elements at the output positions of the vector: its dimension k is the
        output's ``mapping[k]``; along the columns a vector load, a gather or one element."""
        kb, vec, lanes = self.kb, self.vec, self.lanes
        et = leaf.shape.element_type
        ptr = kb.buffer(et, leaf.ref, key=leaf.key)
        if leaf.shape.rank == 0:
            return kb.let(vec, f"({vec})({cltypes.load(et, ptr, '0')})", "ev")
        # a size-1 dimension broadcast along the output (JAX's degenerate broadcast) is 0
        at = tuple(index[d] if leaf.shape.dims[k] != 1 else "0" for k, d in enumerate(mapping))
        first = kb.let(kb.index_type, self.em.offset(leaf.shape, Index(at), leaf.key), "eo")
        along = next((k for k, d in enumerate(mapping)
                      if d == self.column_dim and leaf.shape.dims[k] != 1), None)
        if along is None:
            return kb.let(vec, f"({vec})({cltypes.load(et, ptr, first)})", "ev")
        stride = element_strides(leaf.shape)[along]
        if stride == 1 and cltypes.storage_type(et) == self.scalar:
            return kb.let(vec, f"vload{lanes}(0, {ptr} + {first})", "ev")
        if stride == 1 and et.name == "bf16":
            return kb.let(vec, f"xla_bf16x{lanes}_to_float(vload{lanes}(0, {ptr} + {first}))",
                          "ev")
        step = kb.param(stride, key=(leaf.key, "stride", along))
        elements = ", ".join(cltypes.load(et, ptr, f"{first} + {i} * {step}")
                             for i in range(lanes))
        return kb.let(vec, f"({vec})({elements})", "ev")
