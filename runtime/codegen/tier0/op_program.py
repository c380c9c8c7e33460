"""Op programs: what a tier-0 generic kernel interprets to compute one elementwise step.

``compile_outputs`` walks the instruction (a loop fusion's computation, or one elementwise or
data-movement instruction) from its outputs to its operands, as the elemental emitter does,
and emits one instruction per value at each distinct position it is read at: loads, scalar
constants, iotas and the arithmetic of ``cases``. A position is where an instruction's
element lies as a function of the work-item's multi-index (``Position``): the data-movement
opcodes (broadcast, transpose, slice, reverse, reshape, bitcast, copies) only transform
positions, each by its rule in ``POSITION_RULES``, so they cost nothing at run time. Anything
else (a reduction, a gather, a pad, a dynamic slice...) raises ``NotTier0``: the step keeps
its specialised kernel.

Words are 64-bit: a header (instruction count, the space's rank and dimensions in physical
order), the instructions (``kernels.INSTRUCTION_WORDS`` each), then the index maps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ...buffers.slices import BufferRef
from ...hlo.dtypes import ElementType
from ...hlo.ir import HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.shape import ArrayShape
from .. import cltypes
from ..elemental import ARITHMETIC_OPCODES, common_factors, element_strides
from ..kernel import argument_value
from .cases import TYPES, all_cases, case_numbers
from .kernels import (HEADER_WORDS, INSTRUCTION_WORDS, MAX_BUFFERS, MAX_RANK, MAX_REGISTERS)

_TYPE_NAMES = frozenset(t.name for t in TYPES)


class NotTier0(Exception):
    """What a generic kernel cannot compute; the step keeps its specialised kernel."""


@dataclass(frozen=True)
class Position:
    """An instruction's logical index as ``rows @ m + consts``, ``m`` the multi-index of
    ``base`` that the last stage's linear value splits into (the work-item's own multi-index
    in the first stage); ``stages`` are the finished stages before it, each (base,
    coefficients, constant)."""

    stages: tuple[tuple[tuple[int, ...], tuple[int, ...], int], ...]
    base: tuple[int, ...]
    rows: tuple[tuple[int, ...], ...]
    consts: tuple[int, ...]

    def linear(self, strides: tuple[int, ...], offset: int = 0) -> tuple[tuple[int, ...], int]:
        """(coefficients over ``m``, constant) of ``offset + sum(strides[d] * index[d])``."""
        coeffs = [0] * len(self.base)
        const = offset
        for s, row, c in zip(strides, self.rows, self.consts):
            for j, a in enumerate(row):
                coeffs[j] += s * a
            const += s * c
        return tuple(coeffs), const

    def regrouped(self, strides: tuple[int, ...], base: tuple[int, ...],
                  rows: tuple[tuple[int, ...], ...]) -> "Position":
        """A new stage: the linear value ``strides`` give, split by ``base``."""
        coeffs, const = self.linear(strides)
        return Position(self.stages + ((self.base, coeffs, const),), base, rows,
                        (0,) * len(rows))

    def picked(self, rows: list[tuple[int, ...]], consts: list[int]) -> "Position":
        return replace(self, rows=tuple(rows), consts=tuple(consts))


def _row_major_strides(dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(np.prod(dims[d + 1:], dtype=np.int64)) for d in range(len(dims)))


def identity_rows(rank: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(i == j) for j in range(rank)) for i in range(rank))


def start(shape: ArrayShape) -> Position:
    """The position of element ``gid`` in physical order of ``shape``."""
    order = tuple(reversed(shape.minor_to_major))          # major to minor
    base = tuple(shape.dims[d] for d in order)
    rows = [tuple(int(order[j] == d) for j in range(shape.rank)) for d in range(shape.rank)]
    return Position((), base, tuple(rows), (0,) * shape.rank)


class OpProgram:
    """The words of one program being compiled, and the buffers its loads and stores name."""

    def __init__(self, space: ArrayShape, index_et: ElementType,
                 leaf: Callable[[HloInstruction], tuple[ArrayShape, BufferRef] | None],
                 embed: Callable[[HloInstruction], BufferRef]) -> None:
        if space.rank > MAX_RANK:
            raise NotTier0(f"rank {space.rank}")
        self.space = space
        self.index_et = index_et
        self.leaf = leaf
        self.embed = embed
        self.instructions: list[list[int]] = []
        self.maps: list[int] = []
        self.map_at: dict[tuple, int] = {}
        self.buffers: list[BufferRef] = []
        self.memo: dict[tuple, int] = {}
        self.cases: set[tuple] = set()
        self.registers = 0

    # --- emitting ---------------------------------------------------------------------------
    def emit(self, key: tuple, sources: tuple[int, ...] = (), aux: int = 0,
             result: bool = True) -> int:
        number = case_numbers().get(key)
        if number is None:
            raise NotTier0(f"no generic case {key}")
        self.cases.add(key)
        dst = self.registers if result else 0
        if result:
            self.registers += 1
            if self.registers > MAX_REGISTERS:
                raise NotTier0("too many values")
        srcs = list(sources) + [0] * (3 - len(sources))
        self.instructions.append([number, dst, *srcs, aux])
        return dst

    def slot(self, ref: BufferRef) -> int:
        if ref not in self.buffers:
            if len(self.buffers) == MAX_BUFFERS:
                raise NotTier0("too many buffers")
            self.buffers.append(ref)
        return self.buffers.index(ref)

    def index_map(self, pos: Position, strides: tuple[int, ...], offset: int = 0) -> int:
        """The word offset (from the program's start) of the map to ``offset + strides . index``
        (the maps follow the instructions, so offsets are fixed up in ``words``)."""
        coeffs, const = pos.linear(strides, offset)
        stages = pos.stages + ((pos.base, coeffs, const),)
        if any(len(base) > MAX_RANK for base, _, _ in stages):
            raise NotTier0("rank")
        if stages not in self.map_at:
            self.map_at[stages] = len(self.maps)
            if stages == ((pos.base, _row_major_strides(pos.base), 0),):
                self.maps.append(0)        # the element's own position: no arithmetic
                return self.map_at[stages]
            self.maps.append(len(stages))
            for k, (base, c, k_const) in enumerate(stages):
                if k:
                    self.maps += [len(base), *base]
                self.maps += [*c, k_const]
        return self.map_at[stages]

    # --- values -----------------------------------------------------------------------------
    def value(self, inst: HloInstruction, pos: Position) -> int:
        """The register holding ``inst``'s element at ``pos``."""
        key = (id(inst), pos)
        if key not in self.memo:
            self.memo[key] = self._value(inst, pos)
        return self.memo[key]

    def _value(self, inst: HloInstruction, pos: Position) -> int:
        shape = inst.shape
        if not isinstance(shape, ArrayShape) or shape.element_type.name not in _TYPE_NAMES:
            raise NotTier0(f"{inst.name}: {shape}")
        leaf = self.leaf(inst)
        if leaf is not None:
            return self.load(leaf[0], leaf[1], pos)
        rule = POSITION_RULES.get(inst.opcode)
        if rule is not None:
            moved = rule(inst, pos)
            if moved is not None:
                return self.value(inst.operands[0], moved)
        compute = VALUE_RULES.get(inst.opcode)
        if compute is None and inst.opcode in ARITHMETIC_OPCODES:
            compute = _arithmetic
        if compute is None:
            raise NotTier0(f"{inst.opcode} {inst.name}")
        return compute(self, inst, pos)

    def load(self, shape: ArrayShape, ref: BufferRef, pos: Position) -> int:
        at = self.index_map(pos, element_strides(shape))
        return self.emit(("load", shape.element_type.name), (self.slot(ref),), aux=at)

    def operand(self, inst: HloInstruction, k: int, pos: Position) -> int:
        """Operand ``k`` at the same index; a scalar operand (clamp's bounds, select's
        predicate) at the empty one."""
        op = inst.operands[k]
        if op.shape.rank == 0 and inst.shape.rank != 0:
            return self.value(op, pos.picked([], []))
        return self.value(op, pos)

    def store(self, shape: ArrayShape, ref: BufferRef, register: int) -> None:
        at = self.index_map(start(self.space), element_strides(shape))
        self.emit(("store", shape.element_type.name), (self.slot(ref), register), aux=at,
                  result=False)

    def words(self) -> np.ndarray:
        header = [len(self.instructions), self.space.rank,
                  *(self.space.dims[d] for d in reversed(self.space.minor_to_major))]
        header += [0] * (HEADER_WORDS - len(header))
        maps_at = HEADER_WORDS + INSTRUCTION_WORDS * len(self.instructions)
        body: list[int] = []
        for number, dst, a, b, c, aux in self.instructions:
            key = all_cases()[number].key
            uses_map = key[0] in ("load", "store", "iota")
            body += [number, dst, a, b, c, aux + maps_at if uses_map else aux]
        return np.array(header + body + self.maps, dtype=np.int64)


# --- positions through data movement ---------------------------------------------------------

def _same(inst: HloInstruction, pos: Position) -> Position:
    return pos


def _broadcast(inst: HloInstruction, pos: Position) -> Position:
    op: ArrayShape = inst.operands[0].array_shape
    out = inst.array_shape
    zero = (0,) * len(pos.base)
    rows, consts = [], []
    for i, d in enumerate(inst.ints_attr("dimensions")):
        kept = not (op.dims[i] == 1 and out.dims[d] != 1)
        rows.append(pos.rows[d] if kept else zero)
        consts.append(pos.consts[d] if kept else 0)
    return pos.picked(rows, consts)


def _transpose(inst: HloInstruction, pos: Position) -> Position:
    perm = inst.dimensions
    rows: list[tuple[int, ...]] = [()] * len(perm)
    consts = [0] * len(perm)
    for i, p in enumerate(perm):
        rows[p], consts[p] = pos.rows[i], pos.consts[i]
    return pos.picked(rows, consts)


def _slice(inst: HloInstruction, pos: Position) -> Position:
    rows, consts = [], []
    for d, s in enumerate(inst.slice.dims):
        rows.append(tuple(s.stride * a for a in pos.rows[d]))
        consts.append(s.start + s.stride * pos.consts[d])
    return pos.picked(rows, consts)


def _reverse(inst: HloInstruction, pos: Position) -> Position:
    flipped = set(inst.dimensions)
    dims = inst.array_shape.dims
    rows, consts = [], []
    for d in range(len(dims)):
        if d in flipped:
            rows.append(tuple(-a for a in pos.rows[d]))
            consts.append(dims[d] - 1 - pos.consts[d])
        else:
            rows.append(pos.rows[d])
            consts.append(pos.consts[d])
    return pos.picked(rows, consts)


def _reshape(inst: HloInstruction, pos: Position) -> Position:
    out, src = inst.array_shape, inst.operands[0].array_shape
    if out.dims == src.dims:
        return pos
    groups = common_factors(src.dims, out.dims)
    if all(len(s) == 1 and len(o) == 1 for s, o in groups):
        zero = (0,) * len(pos.base)
        rows, consts = [zero] * src.rank, [0] * src.rank
        for (s,), (o,) in groups:
            rows[s], consts[s] = pos.rows[o], pos.consts[o]
        return pos.picked(rows, consts)
    return pos.regrouped(_row_major_strides(out.dims), src.dims, identity_rows(src.rank))


def _regrouped(inst: HloInstruction, pos: Position) -> Position:
    """A bitcast's operand position: the result's physical offset, split in the operand's
    physical order (the bytes stay where they are)."""
    out, src = inst.array_shape, inst.operands[0].array_shape
    if out.element_type.bits != src.element_type.bits:
        raise NotTier0(f"bitcast {inst.name} changes the element width")
    moved = start(src)
    return pos.regrouped(element_strides(out), moved.base, moved.rows)


def _bitcast(inst: HloInstruction, pos: Position) -> Position | None:
    """None where the element type changes too (``_bitcast_value`` reinterprets it)."""
    if inst.array_shape.element_type is not inst.operands[0].array_shape.element_type:
        return None
    return _regrouped(inst, pos)


POSITION_RULES: dict[Opcode, Callable[[HloInstruction, Position], Position | None]] = {
    Opcode.COPY: _same, Opcode.OPT_BARRIER: _same, Opcode.DOMAIN: _same,
    Opcode.BROADCAST: _broadcast, Opcode.TRANSPOSE: _transpose, Opcode.SLICE: _slice,
    Opcode.REVERSE: _reverse, Opcode.RESHAPE: _reshape, Opcode.BITCAST: _bitcast,
}


# --- values ----------------------------------------------------------------------------------

def _name(inst: HloInstruction, k: int | None = None) -> str:
    return (inst if k is None else inst.operands[k]).array_shape.element_type.name


def _arithmetic(p: OpProgram, inst: HloInstruction, pos: Position) -> int:
    args = tuple(p.operand(inst, k, pos) for k in range(len(inst.operands)))
    return p.emit(("arith", str(inst.opcode), _name(inst, 0), _name(inst)), args)


def _compare(p: OpProgram, inst: HloInstruction, pos: Position) -> int:
    kind = inst.comparison_type
    args = tuple(p.value(o, pos) for o in inst.operands)
    return p.emit(("compare", str(inst.direction), str(kind) if kind else None,
                   _name(inst, 0)), args)


def _select(p: OpProgram, inst: HloInstruction, pos: Position) -> int:
    args = tuple(p.operand(inst, k, pos) for k in range(3))
    return p.emit(("select", _name(inst)), args)


def _convert(p: OpProgram, inst: HloInstruction, pos: Position) -> int:
    return p.emit(("convert", _name(inst, 0), _name(inst)), (p.value(inst.operands[0], pos),))


def _bitcast_convert(p: OpProgram, inst: HloInstruction, pos: Position) -> int:
    if inst.operands[0].array_shape.element_type.bits != inst.array_shape.element_type.bits:
        raise NotTier0(f"bitcast-convert {inst.name} changes the element width")
    x = p.value(inst.operands[0], pos)
    return p.emit(("bitcast-convert", _name(inst, 0), _name(inst)), (x,))


def _bitcast_value(p: OpProgram, inst: HloInstruction, pos: Position) -> int:
    x = p.value(inst.operands[0], _regrouped(inst, pos))
    return p.emit(("bitcast-convert", _name(inst, 0), _name(inst)), (x,))


def _constant(p: OpProgram, inst: HloInstruction, pos: Position) -> int:
    lit = inst.literal
    shape = inst.array_shape
    if lit is None or lit.elided:
        raise NotTier0(f"constant {inst.name} has no known value")
    if shape.element_count != 1:
        return p.load(shape, p.embed(inst), pos)
    value = argument_value(shape.element_type, lit.data)
    ctype = cltypes.compute_type(shape.element_type)
    bits = np.asarray(value).reshape(1).view(np.int64 if value.nbytes == 8 else
                                             {4: np.int32, 2: np.int16, 1: np.int8}[value.nbytes])
    if ctype in ("float", "double"):
        word = int(bits[0])
    else:
        word = int(np.asarray(value).astype(np.int64))
    return p.emit(("const", ctype), aux=word)


def _iota(p: OpProgram, inst: HloInstruction, pos: Position) -> int:
    d = int(inst.iota_dimension)
    strides = tuple(int(k == d) for k in range(inst.shape.rank))
    at = p.index_map(pos, strides)
    return p.emit(("iota", _name(inst), p.index_et.name), aux=at)


VALUE_RULES: dict[Opcode, Callable[[OpProgram, HloInstruction, Position], int]] = {
    Opcode.COMPARE: _compare, Opcode.SELECT: _select, Opcode.CONVERT: _convert,
    Opcode.BITCAST_CONVERT: _bitcast_convert, Opcode.BITCAST: _bitcast_value,
    Opcode.CONSTANT: _constant, Opcode.IOTA: _iota,
}
