"""Row plans: which values of a fused computation are the same for a whole row of its output.

A fusion whose reductions are broadcast back over the reduced dimensions (layer norm, softmax)
must not recompute each reduction for every output element. The fix is a "row" kernel: a
work-item fixes the output's major (row) dimensions, computes every value that depends only on
those dimensions once, then loops over the minor (column) dimensions for the outputs. This
module decides whether that is valid and which values to compute once.

The analysis walks the fused computation from the root and records, for every dimension of
every value, which output dimension indexes it (``("out", k)``), that it is always 0 (a
dimension of size 1), that it is a reduction's loop variable, or that it is unknown (a slice
offset, a general reshape, a gather...). A value is *row-invariant* for a choice of row
dimensions when each of its dimensions is indexed by a row dimension or is 0, the same way on
every path from the root: then the one value computed per row is the value every use reads.
The fusion pass and the code generator both call ``plan_rows`` so they agree by construction.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from ..hlo.ir import HloInstruction
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ArrayShape, Shape

ZERO = "zero"          # a dimension of size 1: always index 0
UNKNOWN = "unknown"    # indexed by something other than an output dimension

DimSource = object     # ("out", k) | ("loop", id(reduce), d) | ZERO | UNKNOWN
Sources = tuple[DimSource, ...]   # one per dimension of a value

PARALLEL_ROWS = 256    # rows worth having before recomputing cheap values to get more

def is_expensive(inst: HloInstruction) -> bool:
    """Whether evaluating ``inst`` again costs real time: the opcode table's cost class."""
    cost = OPCODES[inst.opcode].cost
    if cost == "expensive-int":
        et = getattr(inst.shape, "element_type", None)
        return et is not None and et.is_integer
    return cost == "expensive"


@dataclass(frozen=True)
class RowPlan:
    """How a row kernel computes a fused computation.

    ``row_dims`` / ``column_dims``: the root's dimensions a work-item fixes and the ones it
    loops over, each major to minor in the root's physical order. ``hoisted``: the values
    computed once per row before the column loop (every reduction among them), operands
    first. ``index_of[inst]``: for each dimension of a hoisted value, the output dimension
    indexing it, or None where the index is 0.
    """

    row_dims: tuple[int, ...]
    column_dims: tuple[int, ...]
    hoisted: tuple[HloInstruction, ...]
    index_of: dict[HloInstruction, tuple[int | None, ...]]


def _dims(shape: Shape) -> tuple[int, ...]:
    if isinstance(shape, ArrayShape):
        return shape.dims
    first = next(iter(shape.leaves()), None)   # a variadic reduce: every output has these dims
    return first[1].dims if first is not None else ()


def _squeezed(shape: Shape) -> list[int]:
    """Positions of the dimensions larger than 1."""
    return [d for d, n in enumerate(_dims(shape)) if n != 1]


def _size_one_reshape(a: HloInstruction, b: HloInstruction) -> bool:
    """Whether ``a`` (a reshape or bitcast of ``b``) only inserts or removes size-1 dims."""
    big_a, big_b = _squeezed(a.shape), _squeezed(b.shape)
    da, db = _dims(a.shape), _dims(b.shape)
    if [da[d] for d in big_a] != [db[d] for d in big_b]:
        return False
    if a.opcode != Opcode.BITCAST:
        return True
    # a bitcast reinterprets bytes: the large dimensions must also keep their memory order
    order_a = [big_a.index(d) for d in a.array_shape.minor_to_major if d in big_a]
    order_b = [big_b.index(d) for d in b.array_shape.minor_to_major if d in big_b]
    return order_a == order_b


def _operand_sources(user: HloInstruction, k: int, sources: Sources) -> Sources:
    """How operand ``k`` of ``user`` is indexed, given how ``user`` is indexed."""
    op = user.operands[k]
    rank = len(_dims(op.shape))
    unknown = (UNKNOWN,) * rank
    if rank == 0:
        return ()
    spec = OPCODES[user.opcode]
    if spec.elementwise or user.opcode in (Opcode.GET_TUPLE_ELEMENT, Opcode.REDUCE_PRECISION):
        return sources if len(sources) == rank else unknown
    if user.opcode == Opcode.BROADCAST:
        return tuple(sources[d] for d in user.ints_attr("dimensions"))
    if user.opcode == Opcode.TRANSPOSE:
        out: list[DimSource] = [UNKNOWN] * rank
        for i, p in enumerate(user.dimensions):
            out[p] = sources[i]
        return tuple(out)
    if user.opcode in (Opcode.RESHAPE, Opcode.BITCAST):
        if not _size_one_reshape(user, op):
            return unknown
        big = iter(sources[d] for d in _squeezed(user.shape))
        return tuple(next(big) if n != 1 else ZERO for n in _dims(op.shape))
    if user.opcode == Opcode.REDUCE:
        n = len(user.operands) // 2
        if k >= n:
            return unknown
        reduced = tuple(user.dimensions)
        kept = iter(sources)
        return tuple(("loop", id(user), d) if d in reduced else next(kept) for d in range(rank))
    if user.opcode == Opcode.SLICE:
        return tuple(sources[d] if s.start == 0 and s.stride == 1 else UNKNOWN
                     for d, s in enumerate(user.slice.dims))
    return unknown


def _merge(a: Sources | None, b: Sources) -> Sources:
    if a is None:
        return b
    return tuple(x if x == y else UNKNOWN for x, y in zip(a, b))


def index_sources(root: HloInstruction,
                  members: set[HloInstruction]) -> dict[HloInstruction, Sources]:
    """For every member reachable from ``root``: per dimension, what indexes it (see module
    doc), merged over every path from the root (disagreeing paths give UNKNOWN)."""
    order = _topological(root, members)
    users: dict[HloInstruction, list[tuple[HloInstruction, int]]] = {m: [] for m in order}
    for m in order:
        for k, op in enumerate(m.operands):
            if op in users:
                users[op].append((m, k))
    sources: dict[HloInstruction, Sources] = {
        root: tuple(("out", d) for d in range(len(_dims(root.shape))))}
    for inst in reversed(order):
        if inst is not root:
            merged = None
            for user, k in users[inst]:
                merged = _merge(merged, _operand_sources(user, k, sources[user]))
            sources[inst] = merged if merged is not None else ()
        dims = _dims(inst.shape)
        sources[inst] = tuple(ZERO if dims[d] == 1 else s for d, s in enumerate(sources[inst]))
    return sources


def _topological(root: HloInstruction, members: Collection[HloInstruction]) -> list[HloInstruction]:
    """Members reachable from ``root`` through members, operands first."""
    order: list[HloInstruction] = []
    seen = {root}
    stack = [(root, iter(root.operands))]
    while stack:
        node, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            stack.pop()
            order.append(node)
        elif nxt not in seen and nxt in members:
            seen.add(nxt)
            stack.append((nxt, iter(nxt.operands)))
    return order


def reads_many_times(user: HloInstruction, k: int) -> bool:
    """Whether computing one element of ``user`` may read an element of operand ``k`` that
    other elements of ``user`` read too (so a fused producer is evaluated repeatedly)."""
    op = user.operands[k]
    if user.opcode == Opcode.BROADCAST:
        return _element_count(user.shape) > _element_count(op.shape)
    if OPCODES[user.opcode].elementwise:
        return len(_dims(op.shape)) == 0 and len(_dims(user.shape)) > 0
    if user.opcode in (Opcode.REDUCE, Opcode.REDUCE_WINDOW):
        return k >= len(user.operands) // 2 or user.opcode == Opcode.REDUCE_WINDOW
    if user.opcode == Opcode.GATHER:
        # the source, and each index vector, which the slice's elements all read
        return k == 0 or len(_dims(op.shape)) == 0 or math.prod(user.slice_sizes) > 1
    if user.opcode in (Opcode.DYNAMIC_SLICE, Opcode.DYNAMIC_UPDATE_SLICE, Opcode.PAD):
        return len(_dims(op.shape)) == 0
    return user.opcode in (Opcode.DOT, Opcode.CONVOLUTION, Opcode.SELECT_AND_SCATTER,
                           Opcode.SCATTER, Opcode.SORT, Opcode.MAP)


def _element_count(shape: Shape) -> int:
    return math.prod(_dims(shape))


def reused_members(root: HloInstruction, members: Collection[HloInstruction]) -> set[HloInstruction]:
    """Members whose elements are read more than once per element of ``root``, when every
    reduction and every expensive value read many times is computed once (by a row plan):
    reading those again costs nothing, so their operands are not re-read because of it."""
    order = _topological(root, set(members))
    reused: set[HloInstruction] = set()
    for inst in reversed(order):
        once = inst.opcode == Opcode.REDUCE or (inst in reused and is_expensive(inst))
        for k, op in enumerate(inst.operands):
            if op in members and ((inst in reused and not once) or reads_many_times(inst, k)):
                reused.add(op)
    return reused


def _invariant(sources: Sources, rows: Collection[int]) -> bool:
    return all(s == ZERO or (isinstance(s, tuple) and s[0] == "out" and s[1] in rows)
               for s in sources)


def _computes(inst: HloInstruction) -> bool:
    """Values worth computing once: arithmetic and reductions (not free index math)."""
    return inst.opcode == Opcode.REDUCE or (OPCODES[inst.opcode].elementwise
                                       and inst.opcode not in (Opcode.COPY, Opcode.CONVERT))


@dataclass(frozen=True)
class _Split:
    """The fewest major output dimensions indexing every value that must be computed once."""

    split: int
    physical: tuple[int, ...]
    shape: ArrayShape
    has_reduce: bool
    order: list[HloInstruction]
    sources: dict[HloInstruction, Sources]


def _minimal_split(root: HloInstruction, members: Collection[HloInstruction]) -> _Split | None:
    member_set = set(members)
    order = _topological(root, member_set)
    reused = reused_members(root, member_set)
    required = [m for m in order if m.opcode == Opcode.REDUCE or (m in reused and is_expensive(m))]
    if not required or (root.shape.is_tuple and root.opcode != Opcode.REDUCE):
        return None
    sources = index_sources(root, member_set)
    shape = root.shape if isinstance(root.shape, ArrayShape) else \
        next(iter(root.shape.leaves()))[1]
    physical = tuple(reversed(shape.minor_to_major))
    split = next((k for k in range(len(physical) + 1)
                  if all(_invariant(sources[m], physical[:k]) for m in required)), None)
    if split is None:
        return None
    return _Split(split, physical, shape, any(m.opcode == Opcode.REDUCE for m in required), order,
                  sources)


def row_count(root: HloInstruction, members: Collection[HloInstruction]) -> int | None:
    """Rows of the fewest-rows plan computing every reduction and repeatedly-read expensive
    value once (None: no such plan, or nothing needs one). The fusion pass merges only
    what keeps this defined and large enough."""
    found = _minimal_split(root, members)
    return None if found is None else _count(found.shape, found.physical[:found.split])


def plan_rows(root: HloInstruction, members: Collection[HloInstruction]) -> RowPlan | None:
    """The row plan that computes every reduction, and every expensive value read many
    times, once per row; None when there is none, or when a plain one-output-per-work-item
    kernel already computes each of them once.

    Rows are the fewest major dimensions that index all of those values: a row dimension
    that does not index a value makes every row recompute it. Without reductions, extra
    row dimensions are added until there are ``PARALLEL_ROWS`` rows, trading a little
    recomputation of cheap values for parallelism.
    """
    found = _minimal_split(root, members)
    if found is None:
        return None
    split, physical = found.split, found.physical
    while not found.has_reduce and split < len(physical) and \
            _count(found.shape, physical[:split]) < PARALLEL_ROWS:
        split += 1
    if split == len(physical) and not found.has_reduce:
        return None
    rows = physical[:split]
    hoisted = tuple(m for m in found.order
                    if _computes(m) and _invariant(found.sources[m], rows))
    index_of = {m: tuple(s[1] if isinstance(s, tuple) else None for s in found.sources[m])
                for m in hoisted}
    return RowPlan(tuple(rows), tuple(physical[split:]), hoisted, index_of)


def _count(shape: ArrayShape, dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= shape.dims[d]
    return n
