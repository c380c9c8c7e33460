"""Vector loop kernels: each work-item computes ``L`` consecutive output elements (in the
output's physical order) in OpenCL vector types (``float16``, ``double8``).

Why: PoCL vectorises a one-element-per-work-item kernel across work-items, but the bounds
check and the scalar forms of its builtins keep that far from the hardware. Measured on the
fused bench_ew_chain_4m kernel (tanh, exp, sqrt over 4M floats): 10.2 ms with one element
per work-item, 2.5 ms with a ``float16`` per work-item; a plain copy 1.7 ms against 0.6 ms.

It applies when the kernel is f32 or f64 arithmetic that has a vector form
(``templates.vector_lanes``, as wide as the target's ``vector_bits``), or bf16 or f16 and
f32 mixed (with converts between them): a narrow float widens exactly into f32 vectors, and
each narrow result is rounded to nearest even as the scalar kernel rounds it (a bf16 UNet's
group norm and SiLU went from 1.85 to 1.0 ms; an f16 GELU over 256x2048 from 17 to 2.7 ms).
An integer output converted from such a computation (a quantised activation) converts each
vector as it is stored (``stored_value``). Its leaves are of three kinds: operands with the output's own
dimensions and layout (``L`` consecutive elements are ``L`` consecutive elements of the
operand), scalars (rank-0 operands, scalar constants, broadcasts of them), and operands read
through a dimension mapping (a broadcast of a bias row or a per-row statistic, an operand in
another layout, a copy of one, a reshape adding or dropping size-1 dimensions): while a
block stays within one row of the output's minor dimension, such an operand is a vector load
(or a strided gather) when it has that dimension, and one element otherwise. Everything else
is the scalar loop kernel's.

A multi-output fusion whose outputs share one shape and layout (``same_shape_outputs``)
computes every output's block before storing any.

Blocks that run past the end or across a row are the slow path: each lane finds its own
element (clamped to the last one, so every read is at or after the block's first element:
an operand the output overwrites in place is read before this work-item writes it, and no
other work-item writes there), and only elements that exist are stored.
"""

from __future__ import annotations

from ...analysis.in_place import kernel_outputs
from ...hlo.dtypes import ElementType
from ...hlo.ir import HloInstruction
from ...hlo.shape import ArrayShape, ShapeIndex
from ...hlo.opcode_enum import Opcode
from .. import cltypes, templates as E
from ..elemental import ElementalEmitter, arithmetic, element_strides, factor
from ..kernel import argument_value
from ..context import LoweringContext
from .loop import begin_1d, kernel_builder, launch_1d
from ..registry import LOOP, register
from ...target import TargetKind
from ..plan import Step


@register(LOOP, target=TargetKind.CPU, priority=10)
def vector_loop(ctx: LoweringContext, inst: HloInstruction, root: HloInstruction,
                params: list[HloInstruction] | None) -> list[Step] | None:
    """One vector loop launch computing ``inst`` (``root`` over ``params``), or None when the
    kernel is not of that form."""
    outputs = same_shape_outputs(inst, root)
    if outputs is None:
        return None
    out = outputs[0][2]
    computed = [stored_value(value, shape) for value, _, shape in outputs]
    compute = VECTOR_COMPUTE.get(computed[0].array_shape.element_type.name)
    if compute is None or any(VECTOR_COMPUTE.get(value.array_shape.element_type.name) != compute
                              for value in computed):
        return None
    lanes = E.vector_lanes(Opcode.ADD, compute, ctx.target.vector_bits)
    if lanes is None:
        return None
    operands = {id(p): inst.operands[p.param_number] for p in params} if params \
        else {id(op): op for op in inst.operands}
    mapped: dict = {}
    seen: set = set()
    if not all(_vectorizes(value, out, compute, operands, mapped, seen, ctx.target.vector_bits)
               for value in computed):
        return None
    emitter = _VectorEmitter(ctx, inst, out, compute, lanes, operands, mapped)
    values = [emitter.value(value) for value in computed]    # every load before a store
    for value, (_, index, shape) in zip(values, outputs):
        emitter.store(value, index, shape)
    return [launch_1d(ctx, emitter.kb, inst, -(-out.element_count // lanes))]


def same_shape_outputs(inst: HloInstruction, root: HloInstruction
                       ) -> list[tuple[HloInstruction, tuple[int, ...], ArrayShape]] | None:
    """(value, output index, shape) of each output of a loop kernel: its root, or each
    element of a fused tuple root (a multi-output fusion) when all have one shape and layout;
    None otherwise, when there is nothing to compute, or when some outputs are windows
    (``analysis.loop_outputs``: a kernel over their whole arrays would rewrite them)."""
    if kernel_outputs(inst) is not None:
        return None
    found: list[tuple[HloInstruction, ShapeIndex, ArrayShape]]
    if isinstance(inst.shape, ArrayShape):
        found = [(root, (), inst.shape)]
    elif inst.opcode == Opcode.FUSION and root.opcode == Opcode.TUPLE and root.operands:
        found = [(value, (k,), value.shape) for k, value in enumerate(root.operands)
                 if isinstance(value.shape, ArrayShape)]
        if len(found) != len(root.operands):
            return None
    else:
        return None
    first = found[0][2]
    if any(s.dims != first.dims or s.minor_to_major != first.minor_to_major
           for _, _, s in found) or first.element_count == 0:
        return None
    return found


def stored_value(value: HloInstruction, shape: ArrayShape) -> HloInstruction:
    """The value a vector kernel computes for an output of ``shape`` whose value is
    ``value``: an integer output converted from a float (a quantised activation: scaled,
    rounded, clamped, converted to s8) computes the float and converts each vector as it is
    stored (``templates.convert_vector``); any other output computes ``value``."""
    source = value.operands[0] if value.opcode == Opcode.CONVERT else None
    if shape.element_type.name in E.VECTOR_INTEGERS and source is not None \
            and isinstance(source.shape, ArrayShape) and source.shape.element_type.is_float:
        return source
    return value


def _vectorizes(inst: HloInstruction, out: ArrayShape, compute: str, operands: dict,
                mapped: dict, seen: set, bits: int) -> bool:
    """Whether the computation under ``inst`` has a vector form computing in ``compute``.
    Operands read other than at the output's own physical position go into ``mapped``: the
    instruction reading them, to (the outer operand, the output dimension of each of its
    dimensions)."""
    if id(inst) in seen:
        return True
    seen.add(id(inst))
    shape = inst.shape
    if not isinstance(shape, ArrayShape) or VECTOR_COMPUTE.get(shape.element_type.name) != compute:
        return False
    if id(inst) in operands:
        leaf = operands[id(inst)].shape
        if leaf.rank != 0 and leaf.minor_to_major != out.minor_to_major:
            mapped[id(inst)] = (operands[id(inst)], tuple(range(leaf.rank)))
        return leaf.rank == 0 or leaf.dims == out.dims
    if inst.opcode == Opcode.CONSTANT:
        return shape.element_count == 1 and inst.literal is not None and not inst.literal.elided
    source = inst.operands[0] if inst.operands else inst
    if inst.opcode in _MAPPINGS and id(source) in operands and source.shape.rank != 0 \
            and out.rank != 0 and shape.dims == out.dims:
        mapping = _MAPPINGS[inst.opcode](inst)
        if mapping is not None:
            mapped[id(inst)] = (operands[id(source)], mapping)
            return True
    if inst.opcode == Opcode.BROADCAST:
        return source.shape.rank == 0 and _vectorizes(source, out, compute, operands, mapped,
                                                      seen, bits)
    return ((inst.opcode == Opcode.CONVERT
             or E.vector_lanes(inst.opcode, compute, bits) is not None)
            and all(_vectorizes(op, out, compute, operands, mapped, seen, bits)
                    for op in inst.operands))


def _kept_order(inst: HloInstruction) -> tuple[int, ...] | None:
    """A copy, or a reshape that only adds or drops size-1 dimensions, keeps the other
    dimensions in order (size-1 operand dimensions map anywhere: their index is 0)."""
    source, dims = inst.operands[0].array_shape.dims, inst.array_shape.dims
    kept_source = [k for k, n in enumerate(source) if n != 1]
    kept = [d for d, n in enumerate(dims) if n != 1]
    if [source[k] for k in kept_source] != [dims[d] for d in kept]:
        return None
    mapping = [0] * len(source)
    for k, d in zip(kept_source, kept):
        mapping[k] = d
    return tuple(mapping)


# the element types a vector loop (and a contraction's vector epilogue) computes, by the element
# type each computes in: bf16 and f16 values are widened to f32 exactly on load and rounded
# back after each operation that is not exact (``templates.NARROW_FLOAT_VECTORS``)
VECTOR_COMPUTE = {"f32": "f32", "bf16": "f32", "f16": "f32", "f64": "f64"}


# how instructions over an operand map the operand's dimensions onto the output's
_MAPPINGS = {
    Opcode.BROADCAST: lambda inst: tuple(inst.dimensions),
    Opcode.COPY: _kept_order,
    Opcode.RESHAPE: _kept_order,
}


class _VectorEmitter:
    """Emits the vector expression of a computation checked by ``_vectorizes``."""

    def __init__(self, ctx: LoweringContext, inst: HloInstruction, out: ArrayShape,
                 compute: str, lanes: int, operands: dict, mapped: dict) -> None:
        self.ctx, self.inst, self.out, self.lanes = ctx, inst, out, lanes
        self.operands, self.mapped = operands, mapped
        self.kb = kb = kernel_builder(out, *(o.shape for o in inst.operands))
        if out.element_count + lanes >= 2 ** 31:
            kb.index_type = "long"      # the last block's end must not overflow
        self.em = ElementalEmitter(kb, {}, None)
        self.compute = compute
        self.scalar = cltypes.cl_type(compute).compute
        self.vec = f"{self.scalar}{lanes}"
        self.values: dict[int, str] = {}
        t = kb.index_type
        gid = begin_1d(kb, -(-out.element_count // lanes))
        self.total = kb.param(out.element_count, key="elements")
        self.base = kb.let(t, f"{gid} * {lanes}", "base")
        self.full = kb.let("int", f"{self.base} + {lanes} <= {self.total}", "full")
        self.fast = self.full
        self.start: tuple[str, ...] = ()
        if mapped:
            # the block's first element as an output index, and whether it stays in its row
            self.start = self._index(self.base, "out")
            minor = out.minor_to_major[0]
            row = kb.param(out.dims[minor], key=("out", "dim", minor))
            self.fast = kb.let("int", f"{self.full} && {self.start[minor]} + {lanes} <= {row}",
                               "fast")

    def _index(self, linear: str, key: str) -> tuple[str, ...]:
        return self.em.delinearize(linear, self.out.dims, self.out.minor_to_major, key)

    def value(self, inst: HloInstruction) -> str:
        if id(inst) not in self.values:
            self.values[id(inst)] = self._compute(inst)
        return self.values[id(inst)]

    def _compute(self, inst: HloInstruction) -> str:
        kb, vec = self.kb, self.vec
        if id(inst) in self.mapped:
            return self._load_mapped(inst, *self.mapped[id(inst)])
        if id(inst) in self.operands:
            return self._load(self.operands[id(inst)])
        et = inst.array_shape.element_type
        if inst.opcode == Opcode.CONSTANT:
            assert inst.literal is not None   # every constant has one
            v = kb.scalar(self.scalar, argument_value(et, inst.literal.data),
                          key=("const", id(inst)))
            return kb.let(vec, f"({vec})({v})")
        if inst.opcode == Opcode.BROADCAST:
            return self.value(inst.operands[0])
        args = [self.value(op) for op in inst.operands]
        if inst.opcode == Opcode.CONVERT:
            value = args[0]
        else:
            compute = VECTOR_COMPUTE[et.name]
            value = arithmetic(inst.opcode, compute, compute, args, lanes=self.lanes,
                               xla_type=et)
            if not E.rounds(inst.opcode, et):
                return kb.let(vec, value)
        return kb.let(vec, self._rounded(et, value))

    def _rounded(self, et: ElementType, value: str) -> str:
        return E.round_vector(et, self.lanes, value) if et.name in E.NARROW_FLOAT_VECTORS \
            else value

    def _widened(self, et: ElementType, value: str) -> str:
        """A vector load of ``et`` storage as the compute vector."""
        return E.widen_vector(et, self.lanes, value) if et.name in E.NARROW_FLOAT_VECTORS \
            else value

    def _pointer(self, operand: HloInstruction) -> str:
        return self.kb.buffer(operand.array_shape.element_type, self.ctx.ref(operand),
                              key=("in", id(operand)))

    def _load(self, operand: HloInstruction) -> str:
        ptr = self._pointer(operand)
        et = operand.array_shape.element_type
        if operand.shape.rank == 0:
            return self.kb.let(self.vec, f"({self.vec})({cltypes.load(et, ptr, '0')})")
        return self._vector_or_lanes(
            self._widened(et, f"vload{self.lanes}(0, {ptr} + {self.base})"),
            lambda lane: cltypes.load(et, ptr, lane))

    def _load_mapped(self, inst: HloInstruction, operand: HloInstruction,
                     mapping: tuple[int, ...]) -> str:
        """An operand whose dimension k is output dimension ``mapping[k]``: along the output's
        minor dimension it is contiguous (a vector load), strided (a gather) or absent (one
        element)."""
        kb, lanes = self.kb, self.lanes
        ptr = self._pointer(operand)
        source: ArrayShape = operand.array_shape
        et = source.element_type
        strides = element_strides(source)
        key = ("mapped", id(inst))

        def offset(index: tuple[str, ...]) -> str:
            terms = [f"{factor(index[d])} * {kb.param(strides[k], key=(key, k))}"
                     for k, d in enumerate(mapping) if source.dims[k] != 1]
            return " + ".join(terms) or "0"

        minor = self.out.minor_to_major[0]
        along = next((k for k, d in enumerate(mapping) if d == minor and source.dims[k] != 1),
                     None)
        first = kb.let(kb.index_type, offset(self.start), "b")
        if along is None:
            fast = f"({self.vec})({cltypes.load(et, ptr, first)})"
        elif strides[along] == 1:
            fast = self._widened(et, f"vload{lanes}(0, {ptr} + {first})")
        else:
            step = kb.param(strides[along], key=(key, along))
            fast = f"({self.vec})({', '.join(cltypes.load(et, ptr, f'{first} + {i} * {step}') for i in range(lanes))})"
        return self._vector_or_lanes(
            fast, lambda lane: cltypes.load(et, ptr, offset(self._index(lane, 'out'))))

    def _vector_or_lanes(self, fast: str, element) -> str:
        """``fast`` on the fast path; else each lane's ``element(linear index)`` (clamped to
        the last element)."""
        kb, t = self.kb, self.kb.index_type
        v = kb.declare(self.vec, "v")
        with self.em.block(f"if ({self.fast})"):
            kb.line(f"{v} = {fast};")
        with self.em.block("else"):
            tmp, i = kb.fresh("lanes"), kb.fresh("i")
            kb.line(f"{self.scalar} {tmp}[{self.lanes}];")
            with self.em.block(f"for ({t} {i} = 0; {i} < {self.lanes}; ++{i})"):
                lane = kb.let(t, f"min({self.base} + {i}, {self.total} - 1)", "p")
                kb.line(f"{tmp}[{i}] = {element(lane)};")
            kb.line(f"{v} = vload{self.lanes}(0, {tmp});")
        return v

    def store(self, value: str, index: tuple[int, ...], shape: ArrayShape) -> None:
        """Store the block's ``value`` into output ``index`` (of ``shape``)."""
        kb, t, et = self.kb, self.kb.index_type, shape.element_type
        ptr = kb.buffer(et, self.ctx.ref(self.inst, index), writable=True, key=("out", index))
        if et.name in E.NARROW_FLOAT_VECTORS:
            stored = E.narrow_vector(et, self.lanes, value)
        elif et.name in E.VECTOR_INTEGERS:
            stored = E.convert_vector(self.compute, et, value, self.lanes)
        else:
            stored = value
        with kb.block(f"if ({self.full})"):
            kb.line(f"vstore{self.lanes}({stored}, 0, {ptr} + {self.base});")
        with kb.block("else"):
            tmp, i = kb.fresh("lanes"), kb.fresh("i")
            kb.line(f"{self.scalar} {tmp}[{self.lanes}];")
            kb.line(f"vstore{self.lanes}({value}, 0, {tmp});")
            with kb.block(f"for ({t} {i} = 0; {self.base} + {i} < {self.total}; ++{i})"):
                element = E.convert(self.compute, et, f"{tmp}[{i}]") \
                    if et.name in E.VECTOR_INTEGERS else f"{tmp}[{i}]"
                kb.line(cltypes.store(et, ptr, f"{self.base} + {i}", element))

