"""Op programs: what a tier-0 generic kernel interprets to compute one step.

``OpProgram.value`` walks the instruction (a fusion's computation, or one instruction) from
its outputs to its operands, as the elemental emitter does, and emits one instruction per
value at each distinct position it is read at: loads, scalar constants, iotas and the
arithmetic of ``cases``. A position is where an instruction's element lies as a function of
the work-item's multi-index (``Position``): the data-movement opcodes (broadcast, transpose,
slice, reverse, reshape, bitcast, copies) only transform positions, each by its rule in
``POSITION_RULES``, so they cost nothing at run time.

A reduce or a dot is a loop over a reduced space (``Reduction``): its initial values go to
the *init* section, its input values and reducer (a reduce's computation called on
registers; a dot's multiply and add in ``elemental.accumulation_type``, its operands
converted as the elemental dot converts them) to the *body*, which the kernel runs once per
reduced element with the reduced dimensions appended to the multi-index, and whatever reads
its result to the *tail*. A reduce walks its input's reduced dimensions in memory order
(major to minor), one element after another from its initial value: the order the row and
column kernels keep wherever the order shows (integers and maxima do not show it; narrow
float sums and inits that are not the identity are kept in order by tier 1 too, after
``passes.tree_reductions``); a wide float sum tier 1 splits into partial sums, so there the
two tiers round differently. A dot walks its contracting dimensions in order. Every
reduction of a step shares the one loop, so they must reduce spaces of the same dimensions,
and each is computed once per output element (none read at many output positions, as a
broadcast of a row's sum would be). Anything else (a gather, a pad, a dynamic slice...)
raises ``NotTier0``: the step keeps its specialised kernel.

Words are 64-bit: a header (``kernels``: the space's rank and dimensions in physical order,
elements per work-item, the reduced space and the sections' lengths), the instructions
(``kernels.INSTRUCTION_WORDS`` each; init, body, tail), then the index maps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ...buffers.slices import BufferRef
from ...hlo.dtypes import ElementType
from ...hlo.ir import HloComputation
from ...hlo.ir import HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.shape import ArrayShape
from .. import cltypes
from ..elemental import (ARITHMETIC_OPCODES, accumulation_type, common_factors,
                         element_strides)
from ..kernel import argument_value
from .cases import TYPES, all_cases, case_numbers
from .kernels import (BODY, ELEMENTS, HEADER_WORDS, INIT, INSTRUCTION_WORDS, MAX_BUFFERS,
                      MAX_RANK, MAX_REGISTERS, PER, REDUCED_COUNT, REDUCED_DIMS, REDUCED_RANK,
                      TAIL)

INIT_SECTION, BODY_SECTION, TAIL_SECTION = 0, 1, 2
# body runs (output elements times reduced elements) above which a reduction or dot keeps
# its specialised kernel: the interpreter takes 40-130 ns a run (an 8M-element sum 1.1 s,
# a 128x256x512 dot 2.2 s against tier 1's 5.8 ms, two AMD EPYC cores at load 11-14), so
# a step of more costs about what building its kernel does, and GPT-2's 128x768x50257
# logits would take minutes
MAX_BODY_RUNS = 1 << 22

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


def in_reduced_space(pos: Position, reduced: tuple[int, ...],
                     rows: list[tuple[int, ...] | int], consts: list[int]) -> Position:
    """A position in the body: ``pos``'s multi-index with the reduced space's appended, each
    row either one of ``pos``'s (a tuple, widened by zeros) or reduced dimension ``j`` (an
    int)."""
    zeros = (0,) * len(reduced)
    unit = identity_rows(len(reduced))
    return Position((), pos.base + reduced,
                    tuple(r + zeros if isinstance(r, tuple) else (0,) * len(pos.base) + unit[r]
                          for r in rows), tuple(consts))


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
        self.sections: tuple[list[list[int]], ...] = ([], [], [])
        self.section = TAIL_SECTION
        self.maps: list[int] = []
        self.map_at: dict[tuple, int] = {}
        self.buffers: list[BufferRef] = []
        self.memo: dict[tuple, int] = {}
        self.cases: set[tuple] = set()
        self.registers = 0
        self.reduced: tuple[int, ...] | None = None       # the reduced space's dimensions
        self.reductions: dict[tuple, list[int]] = {}       # accumulators by (reduce, position)
        self.bound: dict[int, int] = {}                    # a called reducer's parameters

    # --- emitting ---------------------------------------------------------------------------
    def emit(self, key: tuple, sources: tuple[int, ...] = (), aux: int = 0,
             result: bool = True, dst: int | None = None) -> int:
        """An instruction in the current section; its result in a new register (``dst``: in
        that one; ``result`` False: none)."""
        number = case_numbers().get(key)
        if number is None:
            raise NotTier0(f"no generic case {key}")
        self.cases.add(key)
        if dst is None:
            dst = self.fresh() if result else 0
        srcs = list(sources) + [0] * (3 - len(sources))
        self.sections[self.section].append([number, dst, *srcs, aux])
        return dst

    def fresh(self) -> int:
        self.registers += 1
        if self.registers > MAX_REGISTERS:
            raise NotTier0("too many values")
        return self.registers - 1

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
        """The register holding ``inst``'s element at ``pos`` (computed in this section or
        an earlier one, which runs before it for the same output element)."""
        if id(inst) in self.bound:
            return self.bound[id(inst)]
        for section in range(self.section + 1):
            found = self.memo.get((id(inst), pos, section))
            if found is not None:
                return found
        register = self._value(inst, pos)
        self.memo[(id(inst), pos, self.section)] = register
        return register

    def output(self, root: HloInstruction, idx: tuple[int, ...], pos: Position) -> int:
        """The register holding output ``idx`` of a step whose root is ``root``."""
        if not idx:
            return self.value(root, pos)
        if len(idx) == 1 and root.opcode == Opcode.TUPLE:
            return self.value(root.operands[idx[0]], pos)
        if len(idx) == 1 and root.opcode == Opcode.REDUCE:
            return self.reduction(root, pos)[idx[0]]
        raise NotTier0(f"output {idx} of {root.name}")

    # --- reductions -------------------------------------------------------------------------
    def reduction(self, inst: HloInstruction, pos: Position) -> list[int]:
        """The accumulators holding reduce ``inst``'s results at ``pos``."""
        key = (id(inst), pos)
        if key not in self.reductions:
            self.reductions[key] = _reduce_accumulators(self, inst, pos)
        return self.reductions[key]

    def reduced_space(self, inst: HloInstruction, pos: Position,
                      reduced: tuple[int, ...]) -> None:
        """Check that ``inst``, read at ``pos``, can be a loop over ``reduced`` in this
        program: read in the tail, once per output element, over the program's one reduced
        space."""
        if self.section != TAIL_SECTION or self.bound:
            raise NotTier0(f"{inst.name}: a reduction inside a reduction")
        count = next(iter(inst.shape.leaves()))[1].element_count
        if pos.stages or pos.base != start(self.space).base \
                or count != self.space.element_count:
            raise NotTier0(f"{inst.name}: read at many output positions")
        if self.reduced is not None and self.reduced != reduced:
            raise NotTier0(f"{inst.name}: a second reduced space")
        if len(pos.base) + len(reduced) > MAX_RANK:
            raise NotTier0(f"{inst.name}: rank")
        if count * int(np.prod(reduced, dtype=np.int64)) > MAX_BODY_RUNS:
            raise NotTier0(f"{inst.name}: too long to interpret")
        self.reduced = reduced

    def call(self, comp: HloComputation, args: list[int], pos: Position) -> list[int]:
        """A reducer computation on registers: the registers of its root's values."""
        saved = self.memo, self.bound
        self.memo, self.bound = {}, {id(p): a for p, a in zip(comp.parameters, args)}
        try:
            root = comp.root_instruction
            scalar = pos.picked([], [])
            if root.opcode == Opcode.TUPLE:
                return [self.value(o, scalar) for o in root.operands]
            return [self.value(root, scalar)]
        finally:
            self.memo, self.bound = saved

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

    @property
    def per(self) -> int:
        """Output elements a work-item computes: one where each loops over a reduction."""
        return ELEMENTS if self.reduced is None else 1

    def words(self) -> np.ndarray:
        instructions = [i for section in self.sections for i in section]
        reduced = self.reduced or ()
        header = [0] * HEADER_WORDS
        header[0], header[1] = len(instructions), self.space.rank
        for k, d in enumerate(reversed(self.space.minor_to_major)):
            header[2 + k] = self.space.dims[d]
        header[PER], header[REDUCED_RANK] = self.per, len(reduced)
        header[INIT], header[BODY], header[TAIL] = (len(s) for s in self.sections)
        header[REDUCED_COUNT] = int(np.prod(reduced, dtype=np.int64)) if self.reduced else 0
        header[REDUCED_DIMS:REDUCED_DIMS + len(reduced)] = reduced
        maps_at = HEADER_WORDS + INSTRUCTION_WORDS * len(instructions)
        body: list[int] = []
        for number, dst, a, b, c, aux in instructions:
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


# --- reductions and dots --------------------------------------------------------------------

def _reduce_accumulators(p: OpProgram, inst: HloInstruction, pos: Position) -> list[int]:
    """A reduce's accumulators: started from its initial values (init), the reducer applied
    to them and each input element in its input's memory order (body)."""
    n = len(inst.operands) // 2
    inputs, inits = inst.operands[:n], inst.operands[n:]
    src = inputs[0].array_shape
    reduced_dims = set(inst.dimensions)
    order = [d for d in reversed(src.minor_to_major) if d in reduced_dims]
    p.reduced_space(inst, pos, tuple(src.dims[d] for d in order))
    p.section = INIT_SECTION
    accs = [p.emit(("move",), (p.value(i, pos.picked([], [])),)) for i in inits]
    p.section = BODY_SECTION
    kept = iter(range(len(pos.rows)))
    rows: list[tuple[int, ...] | int] = []
    consts: list[int] = []
    for d in range(src.rank):
        if d in reduced_dims:
            rows.append(order.index(d))
            consts.append(0)
        else:
            k = next(kept)
            rows.append(pos.rows[k])
            consts.append(pos.consts[k])
    at = in_reduced_space(pos, p.reduced or (), rows, consts)
    xs = [p.value(x, at) for x in inputs]
    new = p.call(inst.to_apply, accs + xs, at)
    # a reducer returning an accumulator as another's new value reads it before it changes
    new = [p.emit(("move",), (v,)) if v in accs else v for v in new]
    for acc, value in zip(accs, new):
        p.emit(("move",), (value,), dst=acc)
    p.section = TAIL_SECTION
    return accs


def _reduce(p: OpProgram, inst: HloInstruction, pos: Position) -> int:
    """A one-output reduce (``_value`` declines a variadic one read whole; its elements are
    ``_get_tuple_element``'s)."""
    return p.reduction(inst, pos)[0]


def _get_tuple_element(p: OpProgram, inst: HloInstruction, pos: Position) -> int:
    op = inst.operands[0]
    if op.opcode != Opcode.REDUCE:
        raise NotTier0(f"{inst.name}: an element of {op.opcode}")
    return p.reduction(op, pos)[int(inst.index)]


def _dot(p: OpProgram, inst: HloInstruction, pos: Position) -> int:
    """As the elemental dot: each operand converted to the result's type, then products
    summed in its accumulation type from zero, the contracting dimensions in order, and the
    sum converted to the result's type once."""
    lhs, rhs = inst.operands
    lc, rc = inst.ints_attr("lhs_contracting_dims"), inst.ints_attr("rhs_contracting_dims")
    lb, rb = inst.ints_attr("lhs_batch_dims"), inst.ints_attr("rhs_batch_dims")
    et = inst.array_shape.element_type
    acc_et = accumulation_type(et)
    p.reduced_space(inst, pos, tuple(lhs.array_shape.dims[d] for d in lc))
    p.section = INIT_SECTION
    acc = p.emit(("const", cltypes.compute_type(acc_et)), aux=0)
    p.section = BODY_SECTION
    # each operand dimension: (k,) for the result's dimension k (batch dimensions, then the
    # lhs's free ones, then the rhs's), j for contracting dimension j
    out = iter(range(len(pos.rows)))
    placed: list[dict[int, int | tuple[int]]] = [{}, {}]
    for a, b in zip(lb, rb):
        placed[0][a] = placed[1][b] = (next(out),)
    for side, (op, contracting, batch) in enumerate(((lhs, lc, lb), (rhs, rc, rb))):
        for d in range(op.shape.rank):
            if d not in contracting and d not in batch:
                placed[side][d] = (next(out),)
        for j, d in enumerate(contracting):
            placed[side][d] = j
    terms = []
    for op, where in zip((lhs, rhs), placed):
        rows: list[tuple[int, ...] | int] = []
        consts = []
        for d in range(op.shape.rank):
            w = where[d]
            rows.append(pos.rows[w[0]] if isinstance(w, tuple) else w)
            consts.append(pos.consts[w[0]] if isinstance(w, tuple) else 0)
        x = p.value(op, in_reduced_space(pos, p.reduced or (), rows, consts))
        x = _converted(p, x, op.array_shape.element_type, et)
        terms.append(_converted(p, x, et, acc_et))
    product = p.emit(("arith", str(Opcode.MULTIPLY), acc_et.name, acc_et.name), tuple(terms))
    total = p.emit(("arith", str(Opcode.ADD), acc_et.name, acc_et.name), (acc, product))
    p.emit(("move",), (total,), dst=acc)
    p.section = TAIL_SECTION
    return _converted(p, acc, acc_et, et)


def _converted(p: OpProgram, register: int, src: ElementType, dst: ElementType) -> int:
    return register if src is dst else p.emit(("convert", src.name, dst.name), (register,))


VALUE_RULES: dict[Opcode, Callable[[OpProgram, HloInstruction, Position], int]] = {
    Opcode.COMPARE: _compare, Opcode.SELECT: _select, Opcode.CONVERT: _convert,
    Opcode.BITCAST_CONVERT: _bitcast_convert, Opcode.BITCAST: _bitcast_value,
    Opcode.CONSTANT: _constant, Opcode.IOTA: _iota, Opcode.REDUCE: _reduce,
    Opcode.GET_TUPLE_ELEMENT: _get_tuple_element, Opcode.DOT: _dot,
}
