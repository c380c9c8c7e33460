"""The elemental emitter: C code computing one element of an instruction at a multi-index.

This is XLA's elemental IR emitter in OpenCL C. ``value(inst, index)`` returns a C expression
(usually a variable) holding ``inst``'s element at ``index``, emitting the statements it needs
into the kernel. Operands are computed recursively at the indices each rule derives (a
broadcast drops dimensions, a transpose permutes them, a slice offsets them...), so a whole
fused computation becomes straight-line code per output element, and reductions, windows and
contractions become loops inside it. Leaves are either buffers (loaded with their physical
layout's strides) or values already computed (a reducer's parameters).

Rules live in ``RULES`` keyed by opcode; elementwise arithmetic comes from the template tables
in ``templates.py``. Every size, stride and offset enters the text via ``KernelBuilder.param``.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from contextlib import AbstractContextManager
from typing import Callable, Iterator, Sequence, Union

import numpy as np

from ..errors import HloUnsupportedError
from ..hlo.attributes import Window, WindowDim
from ..hlo.dtypes import BYTE_FLOATS, SMALL_FLOATS, F32, PRED, S32, S64, ElementType
from ..hlo.ir import HloComputation, HloInstruction
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ArrayShape, Shape, leaf_shape
from . import cltypes, templates as E
from .kernel import BufferRef, KernelBuilder, argument_value

Value = Union[str, tuple]


@dataclass(frozen=True)
class Index:
    """A logical multi-index (C expressions, one per dimension), plus optionally the physical
    linear offset of that index in a buffer of a given (dims, minor_to_major), which lets a load
    from a buffer of exactly that layout skip the stride arithmetic."""

    exprs: tuple[str, ...]
    linear: tuple[tuple, str] | None = None


SCALAR = Index(())


@dataclass(frozen=True)
class BufferLeaf:
    shape: ArrayShape
    ref: BufferRef
    key: object


@dataclass(frozen=True)
class ValueLeaf:
    value: Value


Leaf = Union[BufferLeaf, ValueLeaf]


_ATOM = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|[0-9]+")


def factor(expr: str) -> str:
    """``expr`` safe as a factor of a product: index expressions arrive compound (a tile's
    ``col + 8``), and ``col + 8 * stride`` is not ``(col + 8) * stride``."""
    return expr if _ATOM.fullmatch(expr) else f"({expr})"


def layout_key(shape: ArrayShape) -> tuple:
    return (shape.dims, shape.minor_to_major)


class ElementalEmitter:
    def __init__(self, kb: KernelBuilder, leaves: dict[tuple[int, tuple[int, ...]], Leaf],
                 embed: Callable[[HloInstruction], BufferRef] | None = None) -> None:
        self.kb = kb
        self.leaves = leaves
        self.embed = embed
        self.scopes: list[dict] = [{}]
        self.index_et = S64 if kb.index_type == "long" else S32

    # --- scopes -----------------------------------------------------------------------------
    def _lookup(self, key: object) -> Value | None:
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        return None

    @contextlib.contextmanager
    def block(self, header: str, subtracting: bool = False) -> Iterator[None]:
        """A C block whose temporaries (and memoised values) do not outlive it
        (``subtracting``: see ``KernelBuilder.block``)."""
        with self.kb.block(header, subtracting):
            self.scopes.append({})
            try:
                yield
            finally:
                self.scopes.pop()

    # --- values -----------------------------------------------------------------------------
    def value(self, inst: HloInstruction, index: Index, shape_index: tuple[int, ...] = ()) -> Value:
        leaf = self.leaves.get((id(inst), shape_index))
        if leaf is not None:
            return self._leaf_value(inst, leaf, index)
        if shape_index:
            if not inst.shape.is_tuple:
                raise HloUnsupportedError(f"cannot index the array {inst.name} at {shape_index}")
            if inst.opcode == Opcode.TUPLE:  # its elements may differ in shape: one at ``index``
                return self.value(inst.operands[shape_index[0]], index, shape_index[1:])
            whole = self.value(inst, index)
            for i in shape_index:
                whole = whole[i]
            return whole
        key = (id(inst), index.exprs)
        hit = self._lookup(key)
        if hit is not None:
            return hit
        rule = RULES.get(inst.opcode)
        if rule is None:
            raise HloUnsupportedError(
                f"{inst.opcode} {inst.name} cannot be computed element by element inside a "
                f"fused kernel", instruction=inst.name, location=inst.location)
        result = rule(self, inst, index)
        self.scopes[-1][key] = result
        return result

    def embedded(self, constant: HloInstruction) -> BufferRef:
        """The buffer of an array constant the program embeds (not every kernel can)."""
        if self.embed is None:
            raise HloUnsupportedError(f"array constant {constant.name} cannot be embedded here")
        return self.embed(constant)

    def buffer_leaf(self, inst: HloInstruction) -> BufferLeaf:
        """The buffer ``inst`` is read from, where vector code loads it: from a buffer, never
        from a value a caller bound (a bug in the plan if so)."""
        leaf = self.leaves[(id(inst), ())]
        if not isinstance(leaf, BufferLeaf):
            raise TypeError(f"{inst.name} is bound to a value, not a buffer to load")
        return leaf

    def element(self, inst: HloInstruction, index: Index) -> str:
        """``value`` of an array-shaped ``inst``: one C expression. The rules of opcodes that
        read arrays call it; a tuple here is a bug in a rule."""
        v = self.value(inst, index)
        if not isinstance(v, str):
            raise TypeError(f"{inst.name} gives a tuple where an array element is read")
        return v

    def _leaf_value(self, inst: HloInstruction, leaf: Leaf, index: Index) -> Value:
        if isinstance(leaf, ValueLeaf):
            return leaf.value
        return self.load(leaf, index)

    def load(self, leaf: BufferLeaf, index: Index) -> str:
        """The element of a buffer at ``index`` (memoised within the current scope)."""
        key = ("load", leaf.key, index.exprs)
        hit = self._lookup(key)
        if isinstance(hit, str):
            return hit
        et = leaf.shape.element_type
        ptr = self.kb.buffer(et, leaf.ref, key=leaf.key)
        offset = self.offset(leaf.shape, index, leaf.key)
        v = self.kb.let(cltypes.compute_type(et), cltypes.load(et, ptr, offset))
        self.scopes[-1][key] = v
        return v

    def offset(self, shape: ArrayShape, index: Index, key: object) -> str:
        """The physical element offset of ``index`` in a buffer of ``shape``'s layout."""
        if shape.rank == 0:
            return "0"
        if index.linear is not None and index.linear[0] == layout_key(shape):
            return index.linear[1]
        terms: list[str] = []
        stride = 1
        for d in shape.minor_to_major:
            if stride == 1 and not terms:
                terms.append(index.exprs[d])
            else:
                terms.append(f"{factor(index.exprs[d])} * "
                             f"{self.kb.param(stride, key=(key, 'stride', d))}")
            stride *= shape.dims[d]
        return " + ".join(terms)

    def computed(self, et: ElementType, expr: str) -> str:
        """An op's result in a variable (templates already round f16/bf16 results)."""
        return self.kb.let(cltypes.compute_type(et), expr)

    # --- index helpers ----------------------------------------------------------------------
    def dim(self, n: int, key: object) -> str:
        return self.kb.param(n, key=key)

    def linearize(self, exprs: tuple[str, ...], dims: tuple[int, ...], order: tuple[int, ...],
                  key: object) -> str:
        """Linear offset of ``exprs`` when dimensions are laid out minor-to-major ``order``."""
        if not exprs:
            return "0"
        major_first = list(reversed(order))
        acc = exprs[major_first[0]]
        for d in major_first[1:]:
            acc = f"({acc}) * {self.dim(dims[d], (key, 'dim', d))} + {exprs[d]}"
        return self.kb.let(self.kb.index_type, acc, "l")

    def delinearize(self, linear: str, dims: tuple[int, ...], order: tuple[int, ...],
                    key: object) -> tuple[str, ...]:
        out = ["0"] * len(dims)
        if not dims:
            return ()
        rest = linear
        t = self.kb.index_type
        for pos, d in enumerate(order):
            if pos == len(order) - 1:
                out[d] = self.kb.let(t, rest, "i")
            else:
                n = self.dim(dims[d], (key, "dim", d))
                quotient = self.kb.let(t, self.quotient(rest, dims[d], (key, "dim", d)), "q")
                out[d] = self.kb.let(t, f"{rest} - {quotient} * {n}", "i")
                rest = quotient
        return tuple(out)

    def quotient(self, numerator: str, divisor: int, key: object) -> str:
        """``numerator / divisor`` for a non-negative index. Kernels take sizes as arguments
        (one build serves every shape), and a division by a variable does not vectorise
        across work-items: with 32-bit indices it is a multiply and a shift by the divisor's
        ``division_magic``, passed beside it."""
        if self.kb.index_type != "int":
            return f"{factor(numerator)} / {self.dim(divisor, key)}"
        multiplier, shift = division_magic(divisor)
        m = self.kb.scalar("ulong", multiplier, key=(key, "magic"))
        n = self.kb.param(shift, key=(key, "shift"))
        return f"(int)(((ulong)(uint)({numerator}) * {m}) >> {n})"

    def scalar_index_value(self, inst: HloInstruction, index: Index = SCALAR) -> tuple[str, str]:
        """An integer operand (a runtime start index) at ``index``, and the C type it is in:
        one that holds every value of its element type and every valid start, so that the
        clamp or bounds check comes before any narrowing to the index type (an s64 start of
        -1e12 truncated to 32 bits is a small positive start; a u32 start above 2^31 is
        negative as an int)."""
        v = self.value(inst, index)
        et = inst.array_shape.element_type
        if not et.is_signed and et.bits == 64:
            wide = "ulong"
        elif et.bits < 32 or (et.is_signed and et.bits == 32):
            wide = self.kb.index_type
        else:
            wide = "long"
        return (str(v) if cltypes.compute_type(et) == wide else f"(({wide}){v})"), wide

    def clamp_index(self, inst: HloInstruction, index: Index, hi: str) -> str:
        """Start index operand ``inst`` at ``index`` clamped to [0, ``hi``] (XLA's rule for
        dynamic-slice, dynamic-update-slice and gather), then narrowed to the index type."""
        v, wide = self.scalar_index_value(inst, index)
        t = self.kb.index_type
        clamped = f"min(max({v}, ({wide})0), ({wide})({hi}))"
        return self.kb.let(t, clamped if wide == t else f"({t})({clamped})", "c")

    def checked_index(self, inst: HloInstruction, index: Index, hi: str) -> tuple[str, str]:
        """Start index operand ``inst`` at ``index``: the condition that it lies in [0,
        ``hi``] (scatter skips a window that does not fit), tested before narrowing, and the
        start narrowed to the index type (meaningful only where the condition holds)."""
        v, wide = self.scalar_index_value(inst, index)
        t = self.kb.index_type
        value = self.kb.let(wide, v, "s")
        start = value if wide == t else self.kb.let(t, f"({t}){value}", "s")
        return f"{value} >= 0 && {value} <= ({wide})({hi})", start

    # --- computations -----------------------------------------------------------------------
    def call(self, comp: HloComputation, args: Sequence[Value]) -> Value:
        """Inline a scalar computation (reducer, comparator, mapped function) on ``args``."""
        leaves: dict = dict(self.leaves)
        for p, a in zip(comp.parameters, args):
            leaves[(id(p), ())] = ValueLeaf(a)
        sub = ElementalEmitter(self.kb, leaves, self.embed)
        sub.scopes = [{}]
        return sub.value(comp.root_instruction, SCALAR)


# --- rules ----------------------------------------------------------------------------------

def _shape(inst: HloInstruction) -> ArrayShape:
    return inst.array_shape


def _operand_index_same(em: ElementalEmitter, inst: HloInstruction, op: HloInstruction,
                        index: Index) -> Index:
    """Elementwise operands are read at the same index; a scalar operand (select's predicate,
    clamp's bounds) at the empty index."""
    if op.shape.rank == 0 and inst.shape.rank != 0:
        return SCALAR
    return index


def arithmetic(opcode: Opcode, et_in: ElementType | str, et_out: ElementType | str, args: list[str],
               lanes: int = 1, xla_type: ElementType | str | None = None) -> str:
    """The template expression (``elementwise``'s tables) of an arithmetic elementwise opcode
    over ``args``: the one dispatch from such an opcode to its template, shared by the vector
    loops (with ``lanes``, and the ``xla_type`` whose NaN results to give where ``et_in`` is
    its compute type, ``templates.unary``)."""
    if opcode == Opcode.CLAMP:
        lo, x, hi = args
        return E.clamp(et_out, lo, x, hi, lanes=lanes, xla_type=xla_type)
    if OPCODES[opcode].max_operands == 1:
        return E.unary(opcode, et_in, et_out, args[0], lanes=lanes, xla_type=xla_type)
    a, b = args
    return E.binary(opcode, et_in, a, b, lanes=lanes, xla_type=xla_type)


def _arithmetic(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    args = [em.element(o, _operand_index_same(em, inst, o, index) if inst.opcode == Opcode.CLAMP
                     else index) for o in inst.operands]
    return em.computed(inst.array_shape.element_type,
                       arithmetic(inst.opcode, inst.operands[0].array_shape.element_type,
                                  inst.array_shape.element_type, args))


def _compare(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    a, b = (em.element(o, index) for o in inst.operands)
    return em.computed(PRED, E.compare(str(inst.direction), inst.comparison_type,
                                       inst.operands[0].array_shape.element_type, a, b))


def _select(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    p = em.value(inst.operands[0], _operand_index_same(em, inst, inst.operands[0], index))
    a = em.value(inst.operands[1], index)
    b = em.value(inst.operands[2], index)
    return em.kb.let(cltypes.compute_type(inst.array_shape.element_type), f"({p}) ? {a} : {b}")


def _convert(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    op = inst.operands[0]
    x = em.element(op, index)
    return em.computed(inst.array_shape.element_type,
                       E.convert(op.array_shape.element_type, inst.array_shape.element_type, x))


def _reduce_precision(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    x = em.element(inst.operands[0], index)
    return em.computed(inst.array_shape.element_type, E.reduce_precision(
        inst.array_shape.element_type, x, int(inst.exponent_bits),
        int(inst.mantissa_bits)))


def _bitcast_convert(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    op = inst.operands[0]
    src, dst = op.array_shape.element_type, inst.array_shape.element_type
    ctype = cltypes.compute_type(dst)
    if src.bits == dst.bits:
        return em.kb.let(ctype, E.bitcast_convert(src, dst, em.element(op, index)))
    if src.bits > dst.bits:
        # the result gains a trailing dimension: element j is the j-th narrow piece
        x = em.element(op, Index(index.exprs[:-1]))
        return em.kb.let(ctype, E.bitcast_convert_split(src, dst, x, index.exprs[-1]))
    parts = [em.element(op, Index(index.exprs + (str(j),))) for j in range(dst.bits // src.bits)]
    return em.kb.let(ctype, E.bitcast_convert_join(src, dst, parts))


def _identity(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    return em.value(inst.operands[0], index)


def _constant(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    lit = inst.literal
    shape = _shape(inst)
    if lit is None or lit.elided:
        raise HloUnsupportedError(f"constant {inst.name} has no known value (printed as {{...}})",
                                  instruction=inst.name)
    et = shape.element_type
    if shape.element_count == 1:
        v = np.asarray(lit.data).reshape(())
        return em.kb.scalar(cltypes.compute_type(et), argument_value(et, v),
                            key=("const", id(inst)))
    return em.load(BufferLeaf(shape, em.embedded(inst), ("embedded", id(inst))), index)


def _iota(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    d = int(inst.iota_dimension)
    et = inst.array_shape.element_type
    return em.computed(et, E.convert(em.index_et, et, index.exprs[d]))


def _broadcast(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    op = inst.operands[0]
    dims = inst.ints_attr("dimensions")
    exprs = tuple("0" if op.array_shape.dims[i] == 1 and inst.array_shape.dims[d] != 1 else index.exprs[d]
                  for i, d in enumerate(dims))
    return em.value(op, Index(exprs))


def row_major(rank: int) -> tuple[int, ...]:
    """The minor-to-major order of a row-major layout."""
    return tuple(range(rank - 1, -1, -1))


def element_strides(shape: ArrayShape) -> tuple[int, ...]:
    """Each logical dimension's distance in elements in the physical layout."""
    strides = [0] * shape.rank
    step = 1
    for d in shape.minor_to_major:
        strides[d] = step
        step *= shape.dims[d]
    return tuple(strides)


def _reshape(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    op = inst.operands[0]
    out = _shape(inst)
    src = _shape(op)
    if out.dims == src.dims:
        return em.value(op, index)
    key = ("reshape", id(inst))
    rm_out = (out.dims, row_major(out.rank))
    known = index.linear[1] if index.linear is not None and index.linear[0] == rm_out else None
    groups = common_factors(src.dims, out.dims)
    if all(len(s) == 1 and len(o) == 1 for s, o in groups):
        # only size-1 dimensions come or go: the other indices are the operand's, unchanged
        # (a window's update is the very value its kernel computes for its other outputs)
        exprs = ["0"] * src.rank
        for (s,), (o,) in groups:
            exprs[s] = index.exprs[o]
        linear = ((src.dims, row_major(src.rank)), known) if known is not None else None
        return em.value(op, Index(tuple(exprs), linear))
    if known is None or _divisions(groups) < sum(n != 1 for n in src.dims) - 1:
        exprs = ["0"] * src.rank
        for g, (src_dims, out_dims) in enumerate(groups):
            part = em.linearize(tuple(index.exprs[d] for d in out_dims),
                                tuple(out.dims[d] for d in out_dims),
                                row_major(len(out_dims)), (key, "out", g))
            for d, e in zip(src_dims, em.delinearize(part, tuple(src.dims[d] for d in src_dims),
                                                     row_major(len(src_dims)), (key, "in", g))):
                exprs[d] = e
        linear = (((src.dims, row_major(src.rank)), known) if known is not None else None)
        return em.value(op, Index(tuple(exprs), linear))
    return em.value(op, Index(em.delinearize(known, src.dims, row_major(src.rank), (key, "in")),
                              ((src.dims, row_major(src.rank)), known)))


def division_magic(divisor: int) -> tuple[int, int]:
    """``(m, s)`` with ``(x * m) >> s == x // divisor`` for every ``0 <= x < 2^31``, in 64-bit
    arithmetic (Granlund and Montgomery's round-up method): for ``l = ceil(log2 d)`` and
    ``m = ceil(2^(31+l) / d)``, ``m*d - 2^(31+l) < d <= 2^l``, which keeps the error below
    one step of the quotient; ``m <= 2^32``, so ``x * m < 2^63``."""
    d = max(divisor, 1)
    bits = (d - 1).bit_length()
    return -(-(1 << (31 + bits)) // d), 31 + bits


def common_factors(src: tuple[int, ...], out: tuple[int, ...]
                   ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The smallest groups of a reshape's operand and result dimensions (size-1 ones left out)
    whose sizes have equal products: an index maps group by group, so ``[2,32,2,32,64]`` to
    ``[2,64,32,64]`` divides one index by 2 instead of splitting the whole linear offset."""
    a = [d for d, n in enumerate(src) if n != 1]
    b = [d for d, n in enumerate(out) if n != 1]
    groups = []
    i = j = 0
    while i < len(a) and j < len(b):
        gi, gj = [a[i]], [b[j]]
        pa, pb = src[a[i]], out[b[j]]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                gi.append(a[i])
                pa *= src[a[i]]
                i += 1
            else:
                gj.append(b[j])
                pb *= out[b[j]]
                j += 1
        groups.append((tuple(gi), tuple(gj)))
    return groups


def _divisions(groups) -> int:
    return sum(len(src_dims) - 1 for src_dims, _ in groups)


def _bitcast(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    op = inst.operands[0]
    out, src = _shape(inst), _shape(op)
    if out.element_type.bits != src.element_type.bits:
        raise HloUnsupportedError(f"bitcast {inst.name} changes the element width "
                                  f"({src.element_type} to {out.element_type})", instruction=inst.name)
    key = ("bitcast", id(inst))
    if index.linear is not None and index.linear[0] == layout_key(out):
        linear = index.linear[1]
    else:
        linear = em.linearize(index.exprs, out.dims, out.minor_to_major, (key, "out"))
    exprs = em.delinearize(linear, src.dims, src.minor_to_major, (key, "in"))
    v = em.element(op, Index(exprs, (layout_key(src), linear)))
    if out.element_type is src.element_type:
        return v
    return em.kb.let(cltypes.compute_type(out.element_type),
                     E.bitcast_convert(src.element_type, out.element_type, v))


def _transpose(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    perm = inst.dimensions
    exprs = ["0"] * len(perm)
    for i, p in enumerate(perm):
        exprs[p] = index.exprs[i]
    return em.value(inst.operands[0], Index(tuple(exprs)))


def _slice(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    key = ("slice", id(inst))
    exprs = []
    for d, s in enumerate(inst.slice.dims):
        e = index.exprs[d]
        if s.stride != 1:
            e = f"{factor(e)} * {em.kb.param(s.stride, key=(key, 'stride', d))}"
        if s.start != 0:
            e = f"{em.kb.param(s.start, key=(key, 'start', d))} + {e}"
        exprs.append(e if e == index.exprs[d] else em.kb.let(em.kb.index_type, e, "i"))
    return em.value(inst.operands[0], Index(tuple(exprs)))


def dynamic_starts(em: ElementalEmitter, inst: HloInstruction, first: int,
                    sizes: tuple[int, ...]) -> list[str]:
    """XLA clamps each start so the whole window lies inside the operand."""
    op = _shape(inst.operands[0])
    key = ("dyn", id(inst))
    idx_ops = inst.operands[first:]
    starts = []
    for d in range(op.rank):
        hi = em.kb.param(op.dims[d] - sizes[d], key=(key, "hi", d))
        if len(idx_ops) == 1 and op.rank != 1:
            starts.append(em.clamp_index(idx_ops[0], Index((str(d),)), hi))
        else:
            starts.append(em.clamp_index(idx_ops[d], SCALAR, hi))
    return starts


def _dynamic_slice(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    sizes = tuple(inst.dynamic_slice_sizes)
    starts = dynamic_starts(em, inst, 1, sizes)
    exprs = tuple(em.kb.let(em.kb.index_type, f"{s} + {i}", "i") for s, i in zip(starts, index.exprs))
    return em.value(inst.operands[0], Index(exprs))


def update_window(em: ElementalEmitter, inst: HloInstruction, index: Index
                  ) -> tuple[str, Callable[[], Index]]:
    """For ``index`` of a dynamic-update-slice: the condition that it lies in the update's
    window, and (to call inside that condition) its index in the update."""
    upd = _shape(inst.operands[1])
    starts = dynamic_starts(em, inst, 2, upd.dims)
    key = ("dus", id(inst))
    inside = " && ".join(
        f"{i} >= {s} && {i} < {s} + {em.kb.param(n, key=(key, 'size', d))}"
        for d, (i, s, n) in enumerate(zip(index.exprs, starts, upd.dims))) or "1"
    return inside, lambda: Index(tuple(em.kb.let(em.kb.index_type, f"{i} - {s}", "i")
                                       for i, s in zip(index.exprs, starts)))


def _dynamic_update_slice(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    inside, relative = update_window(em, inst, index)
    ctype = cltypes.compute_type(inst.array_shape.element_type)
    result = em.kb.declare(ctype, "r")
    with em.block(f"if ({inside})"):
        em.kb.line(f"{result} = {em.value(inst.operands[1], relative())};")
    with em.block("else"):
        em.kb.line(f"{result} = {em.value(inst.operands[0], index)};")
    return result


def pad_source(em: ElementalEmitter, inst: HloInstruction, index: Index) -> tuple[str, Index]:
    """For ``index`` of a pad: the condition that it reads the operand (not the padding
    value), and the operand's index it reads."""
    op = _shape(inst.operands[0])
    key = ("pad", id(inst))
    conds, exprs = [], []
    for d, p in enumerate(inst.padding.dims):
        q = factor(index.exprs[d])
        if p.low != 0:
            q = em.kb.let(em.kb.index_type, f"{q} - ({em.kb.param(p.low, key=(key, 'lo', d))})", "i")
        n = em.kb.param(op.dims[d], key=(key, "n", d))
        if p.interior:
            step = em.kb.param(p.interior + 1, key=(key, "step", d))
            conds.append(f"{q} >= 0 && {q} % {step} == 0 && {q} / {step} < {n}")
            q = f"{q} / {step}"
        else:
            conds.append(f"{q} >= 0 && {q} < {n}")
        exprs.append(q)
    return " && ".join(conds) or "1", Index(tuple(exprs))


def _pad(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    inside, source = pad_source(em, inst, index)
    ctype = cltypes.compute_type(inst.array_shape.element_type)
    result = em.kb.declare(ctype, "r")
    with em.block(f"if ({inside})"):
        em.kb.line(f"{result} = {em.value(inst.operands[0], source)};")
    with em.block("else"):
        em.kb.line(f"{result} = {em.value(inst.operands[1], SCALAR)};")
    return result


def _concatenate(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    d = inst.dimensions[0]
    key = ("concat", id(inst))
    ctype = cltypes.compute_type(inst.array_shape.element_type)
    result = em.kb.declare(ctype, "r")
    offset = 0
    n = len(inst.operands)
    for k, op in enumerate(inst.operands):
        size = op.array_shape.dims[d]
        start = em.kb.param(offset, key=(key, "start", k))
        end = em.kb.param(offset + size, key=(key, "end", k))
        header = ("if" if k == 0 else "else if") + f" ({index.exprs[d]} < {end})" \
            if k < n - 1 else "else"
        if n == 1:
            header = "if (1)"
        with em.block(header):
            exprs = list(index.exprs)
            exprs[d] = em.kb.let(em.kb.index_type, f"{index.exprs[d]} - {start}", "i")
            em.kb.line(f"{result} = {em.value(op, Index(tuple(exprs)))};")
        offset += size
    return result


def _reverse(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    key = ("rev", id(inst))
    exprs = list(index.exprs)
    for d in inst.dimensions:
        last = em.kb.param(inst.array_shape.dims[d] - 1, key=(key, d))
        exprs[d] = em.kb.let(em.kb.index_type, f"{last} - {factor(index.exprs[d])}", "i")
    return em.value(inst.operands[0], Index(tuple(exprs)))


def _tuple(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    return tuple(em.value(op, index) for op in inst.operands)


def _get_tuple_element(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    return em.value(inst.operands[0], index, (int(inst.index),))


def _map(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    args = [em.value(op, index) for op in inst.operands]
    return em.call(inst.to_apply, args)


def accumulators(em: ElementalEmitter, inits: list[HloInstruction]) -> list[str]:
    accs = []
    for init in inits:
        v = em.value(init, SCALAR)
        accs.append(em.kb.declare(cltypes.compute_type(init.array_shape.element_type), "acc", str(v)))
    return accs


def combine(em: ElementalEmitter, comp: HloComputation, accs: list[str], xs: list[Value]) -> None:
    new = em.call(comp, [*accs, *xs])
    new_vals = list(new) if isinstance(new, tuple) else [new]
    if len(new_vals) != len(accs):
        raise HloUnsupportedError(f"reducer {comp.name} returns {len(new_vals)} values for "
                                  f"{len(accs)} accumulators")
    tmps = [em.kb.let(_ctype_of(comp, i), str(v), "t") for i, v in enumerate(new_vals)]
    for acc, t in zip(accs, tmps):
        em.kb.line(f"{acc} = {t};")


def _ctype_of(comp: HloComputation, i: int) -> str:
    return cltypes.compute_type(leaf_shape(comp.root_instruction.shape,
                                           (i,) if comp.root_instruction.shape.is_tuple else ()
                                           ).element_type)


def accumulation_subtracts(comp: HloComputation, values: list[HloInstruction]) -> bool:
    """Whether accumulating ``values`` with the reducer ``comp`` may compile to ``acc - x``:
    the reducer subtracts, or it adds a value that is a negation (``negate``, or a product
    with a constant, which compilers turn into one when the constant is -1). Some compilers
    vectorise such loops wrong (``Target.subtracting_loop_pragma``)."""
    root = comp.root
    assert root is not None
    combined = root.operands if root.opcode == Opcode.TUPLE else [root]
    if any(c.opcode == Opcode.SUBTRACT for c in combined):
        return True
    return any(c.opcode == Opcode.ADD for c in combined) and any(_negation(v) for v in values)


def _negation(value: HloInstruction) -> bool:
    while OPCODES[value.opcode].passes_value:
        value = value.operands[0]
    if value.opcode == Opcode.NEGATE:
        return True
    if value.opcode == Opcode.MULTIPLY:
        return any(_is_constant(o) for o in value.operands)
    if value.opcode == Opcode.SELECT:
        return any(_negation(o) for o in value.operands[1:])
    return False


def _is_constant(value: HloInstruction) -> bool:
    while OPCODES[value.opcode].passes_value:
        value = value.operands[0]
    return value.opcode == Opcode.CONSTANT


def loops(em: ElementalEmitter, sizes: Sequence[tuple[int, object]],
          subtracting: bool = False) -> tuple[list[str], list[AbstractContextManager[None]]]:
    """Nested ``for`` loops over the given (size, key) pairs; yields the loop variables."""
    names: list[str] = []
    blocks: list[AbstractContextManager[None]] = []
    for size, key in sizes:
        var = em.kb.fresh("j")
        n = em.kb.param(size, key=key)
        blk = em.block(f"for ({em.kb.index_type} {var} = 0; {var} < {n}; ++{var})", subtracting)
        blk.__enter__()
        blocks.append(blk)
        names.append(var)
    return names, blocks


def close_loops(blocks: list[AbstractContextManager[None]]) -> None:
    for blk in reversed(blocks):
        blk.__exit__(None, None, None)


def _reduce(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    n = len(inst.operands) // 2
    inputs, inits = inst.operands[:n], inst.operands[n:]
    dims = tuple(inst.dimensions)
    src = _shape(inputs[0])
    key = ("reduce", id(inst))
    accs = accumulators(em, inits)
    loop_vars, blocks = loops(em, [(src.dims[d], (key, d)) for d in dims],
                               accumulation_subtracts(inst.to_apply, inputs))
    exprs, kept = [], iter(index.exprs)
    by_dim = dict(zip(dims, loop_vars))
    for d in range(src.rank):
        exprs.append(by_dim[d] if d in by_dim else next(kept))
    xs = [em.value(x, Index(tuple(exprs))) for x in inputs]
    combine(em, inst.to_apply, accs, xs)
    close_loops(blocks)
    return accs[0] if n == 1 else tuple(accs)


def _window_positions(em: ElementalEmitter, inst: HloInstruction, window, out_index: Index,
                      in_dims: tuple[int, ...], key: object, subtracting: bool = False):
    """Open loops over a window's taps; return the input index inside them, the condition
    that it is not padding, the open blocks, and the tap loop variables."""
    loop_vars, blocks = loops(em, [(w.size, (key, "w", d)) for d, w in enumerate(window.dims)],
                               subtracting)
    exprs, conds = [], []
    for d, w in enumerate(window.dims):
        j = loop_vars[d]
        pos = out_index.exprs[d]
        if w.stride != 1:
            pos = f"{factor(pos)} * {em.kb.param(w.stride, key=(key, 'stride', d))}"
        tap = j if w.rhs_dilation == 1 else f"{j} * {em.kb.param(w.rhs_dilation, key=(key, 'rd', d))}"
        p = em.kb.let(em.kb.index_type,
                      f"{pos} + {tap} - ({em.kb.param(w.pad_low, key=(key, 'lo', d))})", "p")
        n = em.kb.param(in_dims[d], key=(key, "n", d))
        if w.lhs_dilation != 1:
            ld = em.kb.param(w.lhs_dilation, key=(key, "ld", d))
            conds.append(f"{p} >= 0 && {p} % {ld} == 0 && {p} / {ld} < {n}")
            exprs.append(f"{p} / {ld}")
        else:
            conds.append(f"{p} >= 0 && {p} < {n}")
            exprs.append(p)
    return tuple(exprs), " && ".join(conds) or "1", blocks, loop_vars


def _reduce_window(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    n = len(inst.operands) // 2
    inputs, inits = inst.operands[:n], inst.operands[n:]
    window = inst.window
    key = ("rw", id(inst))
    accs = accumulators(em, inits)
    exprs, valid, blocks, _ = _window_positions(em, inst, window, index, inputs[0].array_shape.dims, key,
                                                accumulation_subtracts(inst.to_apply, inputs))
    # padding and dilation holes are skipped, not combined as the initial value: XLA's CPU
    # backend reads that value once per window, which shows where it is not the identity
    with em.block(f"if ({valid})"):
        xs = [em.value(x, Index(exprs)) for x in inputs]
        combine(em, inst.to_apply, accs, xs)
    close_loops(blocks)
    return accs[0] if n == 1 else tuple(accs)


def accumulation_type(et: ElementType) -> ElementType:
    """What a dot or convolution producing ``et`` accumulates in: XLA's CPU backend upcasts
    f16, bf16 and 8-bit and narrower float contractions to f32 and rounds the result once."""
    return F32 if et.name in ("f16", "bf16") + BYTE_FLOATS + SMALL_FLOATS else et


def _dot(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    lhs, rhs = inst.operands
    lc, rc = inst.ints_attr("lhs_contracting_dims"), inst.ints_attr("rhs_contracting_dims")
    lb, rb = inst.ints_attr("lhs_batch_dims"), inst.ints_attr("rhs_batch_dims")
    key = ("dot", id(inst))
    et = inst.array_shape.element_type
    acc_et = accumulation_type(et)
    acc = em.kb.declare(cltypes.compute_type(acc_et), "acc", cltypes.literal(acc_et, 0))
    loop_vars, blocks = loops(em, [(lhs.array_shape.dims[d], (key, d)) for d in lc])
    out = iter(index.exprs)
    batch = [next(out) for _ in lb]
    lhs_free = [d for d in range(lhs.shape.rank) if d not in lc and d not in lb]
    rhs_free = [d for d in range(rhs.shape.rank) if d not in rc and d not in rb]
    l_exprs, r_exprs = ["0"] * lhs.shape.rank, ["0"] * rhs.shape.rank
    for k, (a, b) in enumerate(zip(lb, rb)):
        l_exprs[a] = r_exprs[b] = batch[k]
    for d in lhs_free:
        l_exprs[d] = next(out)
    for d in rhs_free:
        r_exprs[d] = next(out)
    for k, (a, b) in enumerate(zip(lc, rc)):
        l_exprs[a] = r_exprs[b] = loop_vars[k]
    x = E.convert(lhs.array_shape.element_type, et, em.element(lhs, Index(tuple(l_exprs))))
    y = E.convert(rhs.array_shape.element_type, et, em.element(rhs, Index(tuple(r_exprs))))
    em.kb.line(f"{acc} = {E.binary(Opcode.ADD, acc_et, acc, E.binary(Opcode.MULTIPLY, acc_et, x, y))};")
    close_loops(blocks)
    return em.computed(et, cltypes.round_to_storage(et, acc))


def _convolution(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    lhs, rhs = inst.operands
    dn = inst.dim_labels
    window = inst.optional_attr("window", Window)
    g = inst.int_attr("feature_group_count", 1)
    bg = inst.int_attr("batch_group_count", 1)
    key = ("conv", id(inst))
    et = inst.array_shape.element_type
    kb = em.kb
    t = kb.index_type
    out = _shape(inst)
    k_in = rhs.array_shape.dims[dn.kernel_input_feature]
    k_out = rhs.array_shape.dims[dn.kernel_output_feature]
    b = index.exprs[dn.output_batch]
    o = index.exprs[dn.output_feature]
    acc_et = accumulation_type(et)
    acc = kb.declare(cltypes.compute_type(acc_et), "acc", cltypes.literal(acc_et, 0))
    # feature groups: output feature o belongs to group o / (k_out / g)
    if g > 1:
        group = kb.let(t, f"{factor(o)} / {kb.param(k_out // g, key=(key, 'og'))}", "g")
        in_base = kb.let(t, f"{group} * {kb.param(k_in, key=(key, 'kin'))}", "c")
    else:
        in_base = "0"
    if bg > 1:
        bgroup = kb.let(t, f"{factor(o)} / {kb.param(k_out // bg, key=(key, 'obg'))}", "g")
        batch = kb.let(t, f"{bgroup} * {kb.param(out.dims[dn.output_batch], key=(key, 'ob'))} + {b}", "b")
    else:
        batch = b
    spatial_out = Index(tuple(index.exprs[d] for d in dn.output_spatial))
    in_dims = tuple(lhs.array_shape.dims[d] for d in dn.input_spatial)
    if window is None or not window.dims:
        window = Window(tuple(WindowDim(rhs.array_shape.dims[d]) for d in dn.kernel_spatial))
    c_vars, c_blocks = loops(em, [(k_in, (key, "cin"))])
    exprs, valid, blocks, taps = _window_positions(em, inst, window, spatial_out, in_dims, key)
    with em.block(f"if ({valid})"):
        l_exprs = ["0"] * lhs.shape.rank
        l_exprs[dn.input_batch] = batch
        l_exprs[dn.input_feature] = kb.let(t, f"{in_base} + {c_vars[0]}", "c") if g > 1 else c_vars[0]
        for k, d in enumerate(dn.input_spatial):
            l_exprs[d] = exprs[k]
        r_exprs = ["0"] * rhs.shape.rank
        r_exprs[dn.kernel_input_feature] = c_vars[0]
        r_exprs[dn.kernel_output_feature] = o
        for k, d in enumerate(dn.kernel_spatial):
            tap = taps[k]
            if window.dims[k].reversal:
                tap = f"({kb.param(window.dims[k].size - 1, key=(key, 'rev', k))} - {tap})"
            r_exprs[d] = tap
        x = E.convert(lhs.array_shape.element_type, et, em.element(lhs, Index(tuple(l_exprs))))
        y = E.convert(rhs.array_shape.element_type, et, em.element(rhs, Index(tuple(r_exprs))))
        kb.line(f"{acc} = {E.binary(Opcode.ADD, acc_et, acc, E.binary(Opcode.MULTIPLY, acc_et, x, y))};")
    close_loops(blocks)
    close_loops(c_blocks)
    return em.computed(et, cltypes.round_to_storage(et, acc))


def _gather(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    operand, indices = inst.operands
    offset_dims = inst.offset_dims
    collapsed = inst.collapsed_slice_dims
    start_map = inst.start_index_map
    sizes = inst.slice_sizes
    op_batch = inst.ints_attr("operand_batching_dims")
    idx_batch = inst.ints_attr("start_indices_batching_dims")
    ivd = inst.index_vector_dim
    key = ("gather", id(inst))
    op_shape = _shape(operand)
    idx_rank = indices.shape.rank
    batch_positions = [p for p in range(inst.shape.rank) if p not in offset_dims]
    batch_exprs = [index.exprs[p] for p in batch_positions]
    # batch coordinates address start_indices' dimensions other than index_vector_dim
    idx_dims_wo_ivd = [d for d in range(idx_rank + (1 if ivd == idx_rank else 0)) if d != ivd]
    g_of_dim = dict(zip(idx_dims_wo_ivd, batch_exprs))

    def start_vector_elem(k: int) -> Index:
        return Index(tuple(str(k) if d == ivd else g_of_dim[d] for d in range(idx_rank)))

    clamped = ["0"] * op_shape.rank
    for k, d in enumerate(start_map):
        hi = em.kb.param(op_shape.dims[d] - sizes[d], key=(key, "hi", d))
        clamped[d] = em.clamp_index(indices, start_vector_elem(k), hi)
    for od, idd in zip(op_batch, idx_batch):
        clamped[od] = g_of_dim[idd]
    offset_exprs = iter(index.exprs[p] for p in offset_dims)
    exprs = []
    for d in range(op_shape.rank):
        if d in collapsed or d in op_batch:
            exprs.append(clamped[d])
        else:
            off = next(offset_exprs)
            exprs.append(off if clamped[d] == "0" else em.kb.let(em.kb.index_type, f"{clamped[d]} + {off}", "i"))
    return em.value(operand, Index(tuple(exprs)))


def _select_and_scatter(em: ElementalEmitter, inst: HloInstruction, index: Index) -> Value:
    """Gather form (deterministic): for the operand position ``index``, visit every window that
    contains it, find the position ``select`` picks in that window, and if it is ``index``
    combine that window's source value into the result."""
    operand, source, init = inst.operands
    window = inst.window
    select, scatter = inst.select, inst.scatter
    kb = em.kb
    t = kb.index_type
    key = ("sas", id(inst))
    et = inst.array_shape.element_type
    acc = kb.declare(cltypes.compute_type(et), "acc", str(em.value(init, SCALAR)))
    src_dims = source.array_shape.dims
    op_dims = operand.array_shape.dims
    # windows w with w*stride - lo <= x < w*stride - lo + size, i.e. w in [w_lo, w_hi]
    w_lo, counts = [], []
    for d, w in enumerate(window.dims):
        stride = kb.param(w.stride, key=(key, "s", d))
        lo = kb.param(w.pad_low, key=(key, "lo", d))
        size = kb.param(w.size, key=(key, "z", d))
        first = kb.let(t, f"({index.exprs[d]} + {lo} - {size} + {stride}) / {stride}", "w")
        first = kb.let(t, f"max({first}, ({t})0)", "w")
        w_lo.append(first)
        counts.append(((w.size + w.stride - 1) // w.stride, (key, "cnt", d)))
    outer_vars, outer_blocks = loops(em, counts)
    wins, conds = [], []
    for d, w in enumerate(window.dims):
        wv = kb.let(t, f"{w_lo[d]} + {outer_vars[d]}", "w")
        stride = kb.param(w.stride, key=(key, "s", d))
        lo = kb.param(w.pad_low, key=(key, "lo", d))
        size = kb.param(w.size, key=(key, "z", d))
        nsrc = kb.param(src_dims[d], key=(key, "ns", d))
        conds.append(f"{wv} < {nsrc} && {wv} * {stride} - {lo} <= {index.exprs[d]} && "
                     f"{index.exprs[d]} < {wv} * {stride} - {lo} + {size}")
        wins.append(wv)
    with em.block(f"if ({' && '.join(conds) or '1'})"):
        best = [kb.declare(t, "b", "-1") for _ in window.dims]
        best_val = kb.declare(cltypes.compute_type(operand.array_shape.element_type), "bv")
        have = kb.declare("int", "h", "0")
        inner_vars, inner_blocks = loops(em, [(w.size, (key, "z", d)) for d, w in enumerate(window.dims)])
        pos, valid = [], []
        for d, w in enumerate(window.dims):
            stride = kb.param(w.stride, key=(key, "s", d))
            lo = kb.param(w.pad_low, key=(key, "lo", d))
            p = kb.let(t, f"{wins[d]} * {stride} - {lo} + {inner_vars[d]}", "p")
            valid.append(f"{p} >= 0 && {p} < {kb.param(op_dims[d], key=(key, 'n', d))}")
            pos.append(p)
        with em.block(f"if ({' && '.join(valid) or '1'})"):
            v = em.value(operand, Index(tuple(pos)))
            keep = em.call(select, [best_val, v])
            with em.block(f"if (!{have} || !({keep}))"):
                kb.line(f"{best_val} = {v};")
                for b, p in zip(best, pos):
                    kb.line(f"{b} = {p};")
                kb.line(f"{have} = 1;")
        close_loops(inner_blocks)
        hit = " && ".join(f"{b} == {i}" for b, i in zip(best, index.exprs)) or "1"
        with em.block(f"if ({have} && {hit})"):
            s = em.value(source, Index(tuple(wins)))
            new = em.call(scatter, [acc, s])
            kb.line(f"{acc} = {new};")
    close_loops(outer_blocks)
    return acc


RULES: dict[Opcode, Callable[[ElementalEmitter, HloInstruction, Index], Value]] = {
    Opcode.CONVERT: _convert, Opcode.REDUCE_PRECISION: _reduce_precision,
    Opcode.BITCAST_CONVERT: _bitcast_convert,
    Opcode.COMPARE: _compare, Opcode.SELECT: _select,
    Opcode.COPY: _identity, Opcode.OPT_BARRIER: _identity, Opcode.DOMAIN: _identity,
    Opcode.CONSTANT: _constant, Opcode.IOTA: _iota, Opcode.BROADCAST: _broadcast,
    Opcode.RESHAPE: _reshape,
    Opcode.BITCAST: _bitcast, Opcode.TRANSPOSE: _transpose, Opcode.SLICE: _slice,
    Opcode.DYNAMIC_SLICE: _dynamic_slice, Opcode.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice,
    Opcode.PAD: _pad, Opcode.CONCATENATE: _concatenate, Opcode.REVERSE: _reverse,
    Opcode.TUPLE: _tuple,
    Opcode.GET_TUPLE_ELEMENT: _get_tuple_element, Opcode.MAP: _map, Opcode.REDUCE: _reduce,
    Opcode.REDUCE_WINDOW: _reduce_window, Opcode.DOT: _dot, Opcode.CONVOLUTION: _convolution,
    Opcode.GATHER: _gather, Opcode.SELECT_AND_SCATTER: _select_and_scatter,
}
for _name, _spec in OPCODES.items():
    if _spec.elementwise and _name not in RULES:
        RULES[_name] = _arithmetic       # unary, binary and clamp: ``arithmetic``
# the opcodes whose element is ``arithmetic`` of their operands' elements at the same index
ARITHMETIC_OPCODES = frozenset(op for op, rule in RULES.items() if rule is _arithmetic)


def is_elemental(inst: HloInstruction) -> bool:
    return inst.opcode in RULES


__all__ = ["ElementalEmitter", "Index", "BufferLeaf", "ValueLeaf", "RULES", "SCALAR",
           "ARITHMETIC_OPCODES", "arithmetic",
           "pad_source", "update_window", "accumulators", "combine", "loops", "close_loops",
           "layout_key", "is_elemental", "row_major", "element_strides", "Shape"]
