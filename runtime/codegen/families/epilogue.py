"""Output fusions' elementwise epilogues computed on a register tile's vectors.

A fused dot or convolution (bias add, GELU, a residual add, a gradient's product) used to
spill its tile and evaluate the epilogue one element at a time, scalar ``tanh`` and ``exp``
included: GPT-2's MLP up-projection with its tanh-GELU took 7.3 ms where the dot alone takes
4.2. Where the epilogue has a vector form, each tile row's vectors go through it as they are
and are stored whole: the contraction's value is the tile's vector; an operand with the
output's dimensions is a vector load at the same position (a gather when its columns are
strided); elementwise ops on rows broadcast along the output (a bias, or a bias computed
from two rows) are vectors along the columns. A value that does not vary along the columns
(a scalar, a per-row statistic, a scalar chain of any type such as a sampler's step size read
by a dynamic slice at a wrapped integer index) is computed by the elemental emitter, once in
the stored block (a per-row value once a row), and splat: a diffusion sampler's last dot
with such a step size took 36.7 us a step through the element path, 26 us with it
(64x256x128; the sampler 7.58 -> 7.27 ms).
Element types that compute in the same vectors mix (f32, bf16 and f16, with converts between
them: a bf16 dot computed on f32 operands, ``passes/contraction_upcast``, whose result is
rounded to bf16 before a bf16 GELU); each narrow result is rounded as the scalar path rounds
it. A ``select`` takes its predicate as a lane mask: a pred operand read along the columns (a
dropout mask) or one value for the vector, splat: an f16 MLP's dropout-masked GELU gradient
after its dot ran element by element in 37.9 ms, on vectors in 9.6 ms.
Anything else along the columns (another dimension mapping, an opcode without a vector
template, types that compute differently) keeps the element-by-element path.
"""

from __future__ import annotations

from ...hlo.dtypes import ElementType
from ...hlo.ir import HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.shape import ArrayShape
from .. import cltypes, templates as E
from ..elemental import BufferLeaf, ElementalEmitter, Index, arithmetic, element_strides
from .vector_loop import VECTOR_COMPUTE


Mapping = tuple[int, ...]


def vectorizes(root: HloInstruction, op: HloInstruction, em: ElementalEmitter,
               column_dim: int, bits: int) -> bool:
    """Whether the epilogue from ``op`` up to ``root`` has a vector form (see the module)."""
    out = op.array_shape
    compute = VECTOR_COMPUTE.get(out.element_type.name)
    if compute is None:
        return False
    seen: set[tuple[int, Mapping]] = set()

    def check(inst: HloInstruction, mapping: Mapping) -> bool:
        if (id(inst), mapping) in seen:
            return True
        seen.add((id(inst), mapping))
        shape = inst.shape
        if not isinstance(shape, ArrayShape) \
                or VECTOR_COMPUTE.get(shape.element_type.name) != compute:
            return False
        if not varies_along(shape, mapping, column_dim):
            return not reaches(inst, op)
        if inst is op:
            return mapping == tuple(range(out.rank))
        leaf = em.leaves.get((id(inst), ()))
        if leaf is not None:
            return isinstance(leaf, BufferLeaf)
        if inst.opcode == Opcode.BROADCAST:
            return check(inst.operands[0], tuple(mapping[d] for d in inst.dimensions))
        if inst.opcode == Opcode.SELECT:
            p, on_true, on_false = inst.operands
            return _mask_vectorizes(p, shape, operand_mapping(p, shape, mapping)) \
                and all((o.shape.rank == 0 or o.array_shape.dims == shape.dims)
                        and check(o, operand_mapping(o, shape, mapping))
                        for o in (on_true, on_false))
        return ((inst.opcode == Opcode.CONVERT
                 or E.vector_lanes(inst.opcode, compute, bits) is not None)
                and all((o.shape.rank == 0 or o.array_shape.dims == shape.dims)
                        and check(o, operand_mapping(o, shape, mapping)) for o in inst.operands))
    def _mask_vectorizes(p: HloInstruction, shape: ArrayShape, mapping: Mapping) -> bool:
        """A select's predicate as a lane mask: one value for the whole vector (the elemental
        emitter's, splat), or a pred operand read along the columns (a dropout mask)."""
        if not varies_along(p.array_shape, mapping, column_dim):
            return not reaches(p, op)
        return p.array_shape.dims == shape.dims \
            and isinstance(em.leaves.get((id(p), ())), BufferLeaf)

    return check(root, tuple(range(out.rank)))


def operand_mapping(operand: HloInstruction, shape: ArrayShape, mapping: Mapping) -> Mapping:
    """An elementwise operand's mapping: the op's own, or none for a scalar operand (clamp's
    bounds)."""
    return () if operand.shape.rank == 0 else mapping


def varies_along(shape: ArrayShape, mapping: Mapping, column_dim: int) -> bool:
    """Whether a value whose dimension ``k`` is the output's ``mapping[k]`` differs along the
    output's ``column_dim`` (else it is one value for all of a tile vector's lanes)."""
    return any(d == column_dim and shape.dims[k] != 1 for k, d in enumerate(mapping))


def reaches(inst: HloInstruction, target: HloInstruction) -> bool:
    """Whether ``target`` is ``inst`` or among its transitive operands."""
    stack, seen = [inst], set()
    while stack:
        x = stack.pop()
        if x is target:
            return True
        if id(x) not in seen:
            seen.add(id(x))
            stack.extend(x.operands)
    return False


class VectorEpilogue:
    """Emits the epilogue of one tile vector: ``vector(value, index)`` for the contraction's
    ``lanes`` values ``value`` at output index ``index`` and the ``lanes - 1`` columns after
    it. Each value is computed in the output's dimensions through a mapping (its dimension
    ``k`` is the output's ``mapping[k]``; a broadcast maps its operand's dimensions through
    its own). One that does not vary along the columns (a scalar chain such as a step size
    read by a dynamic slice, a per-row value, a broadcast constant) is computed once by the
    elemental emitter (memoised in the store block) and splat."""

    def __init__(self, em: ElementalEmitter, root: HloInstruction, op: HloInstruction,
                 column_dim: int, lanes: int) -> None:
        self.em, self.kb, self.root, self.op = em, em.kb, root, op
        self.column_dim, self.lanes = column_dim, lanes
        self.et = op.array_shape.element_type
        self.compute = VECTOR_COMPUTE[self.et.name]
        self.scalar = cltypes.compute_type(self.et)
        self.vec = f"{self.scalar}{lanes}"

    def vector(self, value: str, index: tuple[str, ...]) -> str:
        """The epilogue's vector; ``value`` is the contraction's accumulator (its result is
        that rounded to a narrow element type)."""
        identity = tuple(range(len(index)))
        memo: dict[tuple[int, Mapping], str] = {
            (id(self.op), identity): self._rounded(self.et, value)}
        return self._value(self.root, index, identity, memo)

    def _rounded(self, et: ElementType, value: str) -> str:
        return E.round_vector(et, self.lanes, value) if et.name in E.NARROW_FLOAT_VECTORS \
            else value

    def _value(self, inst: HloInstruction, index: tuple[str, ...], mapping: Mapping,
               memo: dict) -> str:
        key = (id(inst), mapping)
        if key not in memo:
            memo[key] = self._compute(inst, index, mapping, memo)
        return memo[key]

    def _compute(self, inst: HloInstruction, index: tuple[str, ...], mapping: Mapping,
                 memo: dict) -> str:
        kb, vec = self.kb, self.vec
        shape = inst.shape
        assert isinstance(shape, ArrayShape)
        if not varies_along(shape, mapping, self.column_dim):
            at = tuple("0" if shape.dims[k] == 1 else index[d] for k, d in enumerate(mapping))
            return kb.let(vec, f"({vec})({self.em.value(inst, Index(at))})", "ev")
        leaf = self.em.leaves.get((id(inst), ()))
        if isinstance(leaf, BufferLeaf):
            return self._load(leaf, index, mapping)
        if inst.opcode == Opcode.BROADCAST:
            return self._value(inst.operands[0], index,
                               tuple(mapping[d] for d in inst.dimensions), memo)
        if inst.opcode == Opcode.SELECT:
            p, on_true, on_false = inst.operands
            mask = self._mask(p, index, operand_mapping(p, shape, mapping))
            a, b = (self._value(o, index, operand_mapping(o, shape, mapping), memo)
                    for o in (on_true, on_false))
            return kb.let(vec, f"select({b}, {a}, {mask})", "ev")
        args = [self._value(o, index, operand_mapping(o, shape, mapping), memo)
                for o in inst.operands]
        et = shape.element_type
        if inst.opcode == Opcode.CONVERT:    # between types of one compute type: exact or rounded
            return kb.let(vec, self._rounded(et, args[0]), "ev")
        value = arithmetic(inst.opcode, self.compute, self.compute, args, lanes=self.lanes,
                           xla_type=et)
        return kb.let(vec, self._rounded(et, value) if E.rounds(inst.opcode, et) else value,
                      "ev")

    def _mask(self, p: HloInstruction, index: tuple[str, ...], mapping: Mapping) -> str:
        """A select's predicate as an ``int`` lane mask (-1 where true), as ``vectorizes``
        allows it."""
        kb, lanes = self.kb, self.lanes
        mask = f"int{lanes}"
        if not varies_along(p.array_shape, mapping, self.column_dim):
            at = tuple("0" if p.array_shape.dims[k] == 1 else index[d]
                       for k, d in enumerate(mapping))
            return kb.let(mask, f"({mask})(-(int)(({self.em.value(p, Index(at))}) != 0))", "em")
        leaf = self.em.buffer_leaf(p)
        ptr, first, along, stride = self._leaf_position(leaf, index, mapping)
        if stride == 1:
            loaded = f"convert_{mask}(vload{lanes}(0, {ptr} + {first}))"
        else:
            step = kb.param(stride, key=(leaf.key, "stride", along))
            loaded = f"({mask})({', '.join(f'{ptr}[{first} + {i} * {step}]' for i in range(lanes))})"
        return kb.let(mask, f"({loaded} != ({mask})0)", "em")

    def _leaf_position(self, leaf: BufferLeaf, index: tuple[str, ...], mapping: Mapping
                       ) -> tuple[str, str, int, int]:
        """The leaf's pointer, the offset of the vector's first element in it, and its
        dimension along the columns with that dimension's stride."""
        kb = self.kb
        ptr = kb.buffer(leaf.shape.element_type, leaf.ref, key=leaf.key)
        # a size-1 dimension broadcast along the output (JAX's degenerate broadcast) is 0
        at = tuple(index[d] if leaf.shape.dims[k] != 1 else "0" for k, d in enumerate(mapping))
        first = kb.let(kb.index_type, self.em.offset(leaf.shape, Index(at), leaf.key), "eo")
        along = next(k for k, d in enumerate(mapping)
                     if d == self.column_dim and leaf.shape.dims[k] != 1)
        return ptr, first, along, element_strides(leaf.shape)[along]

    def _load(self, leaf: BufferLeaf, index: tuple[str, ...], mapping: Mapping) -> str:
        """The leaf's elements at the output positions of the vector (it varies along the
        columns): a vector load, or a gather when its columns are strided."""
        kb, vec, lanes = self.kb, self.vec, self.lanes
        et = leaf.shape.element_type
        ptr, first, along, stride = self._leaf_position(leaf, index, mapping)
        if stride == 1 and cltypes.storage_type(et) == self.scalar:
            return kb.let(vec, f"vload{lanes}(0, {ptr} + {first})", "ev")
        if stride == 1 and et.name in E.NARROW_FLOAT_VECTORS:
            return kb.let(vec, E.widen_vector(et, lanes, f"vload{lanes}(0, {ptr} + {first})"),
                          "ev")
        step = kb.param(stride, key=(leaf.key, "stride", along))
        elements = ", ".join(cltypes.load(et, ptr, f"{first} + {i} * {step}")
                             for i in range(lanes))
        return kb.let(vec, f"({vec})({elements})", "ev")
