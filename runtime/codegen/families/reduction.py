"""Reductions: a reduce, or a fusion containing reductions, as one kernel shaped by memory order.

Every kernel here follows a row plan (``analysis.rows``): a work-item fixes the output's row
dimensions, computes each reduction (and each expensive value the outputs read many times)
once for that row, then writes the row's outputs. Where the reduced dimensions sit in memory
decides the inner loops:

* reduced dimensions include the input's contiguous one ("row" reductions, the common case):
  one work-item per output row walks its contiguous run with ``lanes`` independent partial
  accumulators, unrolled, so the compiler vectorises the loads and adds (PoCL runs work-items
  one after another, so vectors inside a work-item are the only SIMD a loop gets). Partials
  start at ``init`` only when it is the reducer's identity; otherwise one accumulator keeps
  the sequential order. Where the reducer is one vector operation and the run's lanes can
  follow the fused producers down to their leaves (``row_vector_loop.lane_emitter``), the
  producers are computed on ``lanes``-wide vectors too (vector loads or lane gathers, vector
  ``exp``), and so are the row's outputs along the output's contiguous dimension: a T5
  attention softmax (f32 scores, a transposed bf16 position bias, a length mask) 1.34 ->
  0.39 ms a layer, where sixteen scalar lanes had each run ``exp`` at 5 ns an element. A
  maximum's or minimum's lanes then combine as a tree of halves (their order does not change
  the result); a sum's lanes combine in order. A row of at most ``_UNROLLED_BLOCKS`` vectors
  is written out block by block, so its passes share each fused value.
  JAX's argmax and argmin (a two-operand reduction whose result does not depend on the
  order, ``reducers.argminmax_direction``) keep their lanes in a value and an index vector.
  Reductions that must keep their order (an init that is not the identity; another
  multi-operand reducer) still compute their inputs on vectors, ``lanes`` at a time, and
  combine them one by one in order (a categorical sample's Gumbel noise over 8 x 8192
  logits 2.6 ms -> 0.29 ms).
* the contiguous dimension is kept ("column" reductions such as sums over the batch): each
  work-item owns ``column_lanes`` adjacent outputs along it and loops over the reduced
  dimensions, reading that many contiguous inputs per step.
* a layer norm: the row's reductions first (the second reading the first's result), then a
  loop over the row's columns computes the normalised outputs.

Rows spread over at least ``MIN_GROUPS`` work-groups where there are that many (PoCL runs a
work-group on one thread). Full reductions to few outputs are split into two reductions by
``passes.split_reductions``
before buffer assignment (the partials are an ordinary temp of the assignment), and both
halves land here as row reductions. Reducer computations are inlined (multi-operand argmax
included), and the reduction order is fixed, so results are deterministic.
"""

from __future__ import annotations

from ...analysis.reducers import argminmax_direction, reorderable
from ...analysis.rows import RowPlan, plan_rows
from ...hlo.ir import HloComputation, HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.opcodes import OPCODES
from ...hlo.shape import ArrayShape
from ...target import ReductionShape
from .. import cltypes, templates as E
from ..elemental import (SCALAR, ElementalEmitter, Index, ValueLeaf, accumulation_subtracts,
                         arithmetic)
from ..kernel import KernelBuilder, needs_long_index
from ..context import LoweringContext
from .loop import begin_1d, fused_parts, operand_leaves
from ..plan import Launch, Step
from ..registry import FUSION, register
from .row_vector_loop import lane_emitter, store_lanes


def lower_rows(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    """A row kernel for ``inst`` (a reduce, or a fusion), or None when no row plan applies."""
    root, params = fused_parts(inst)
    members = inst.calls.instructions if params is not None else [inst]
    plan = plan_rows(root, members)
    if plan is None:
        return None
    out = _first_leaf(inst)
    if out.element_count == 0:
        return []
    shape = ctx.target.reduction
    wide = shape.wide_index or needs_long_index(*_shapes(inst, members))
    kb = KernelBuilder(index_type="long" if wide else "int")
    hero = _column_hero(root, plan, members, shape)
    if hero is not None:
        count = _column_kernel(ctx, kb, inst, root, params, plan, hero, shape.column_lanes)
    else:
        count = _row_kernel(ctx, kb, inst, root, params, plan, shape.lanes)
    return [_launch(ctx, kb, inst, count, shape.local_size)]


@register(Opcode.REDUCE, fusion_root_too=True)
def lower_reduce(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    """A reduce (or a fusion rooted at one) as a row kernel; declines to the loop kernel."""
    return lower_rows(ctx, inst)


@register(FUSION, priority=10)
def _row_fusion(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
    """Structural fusion rule: a fusion with reductions (or values read many times) inside."""
    return lower_rows(ctx, inst)


# --- kernels --------------------------------------------------------------------------------

def _row_kernel(ctx: LoweringContext, kb: KernelBuilder, inst: HloInstruction,
                root: HloInstruction, params, plan: RowPlan, lanes: int) -> int:
    out = _first_leaf(inst)
    rows = _count(out, plan.row_dims)
    gid = begin_1d(kb, rows)
    outputs = _output_pointers(ctx, kb, inst)
    em = ElementalEmitter(kb, operand_leaves(ctx, inst, params), ctx.program.embed)
    row = em.delinearize(gid, out.dims, tuple(reversed(plan.row_dims)), "row")
    for value in plan.hoisted:
        index = Index(tuple(row[k] if k is not None else "0" for k in plan.index_of[value]))
        if value.opcode == Opcode.REDUCE:
            _bind(em, value, _reduce(em, value, index, lanes))
        else:
            _bind(em, value, [em.element(value, index)])
    vector = _column_vectors(em, inst, root, plan, lanes)
    columns: dict[int, str] = {}
    blocks = []
    for d in plan.column_dims[:-1] if vector is not None else plan.column_dims:
        var = kb.fresh("c")
        n = kb.param(out.dims[d], key=("column", d))
        blocks.append(em.block(f"for ({kb.index_type} {var} = 0; {var} < {n}; ++{var})"))
        blocks[-1].__enter__()
        columns[d] = var
    if vector is not None and len(plan.column_dims) == 1 \
            and _unrolled(out.dims[plan.column_dims[0]], vector[1]):
        vector_em, width = vector
        d = plan.column_dims[0]
        size = out.dims[d]
        for start in range(0, size - size % width, width):
            index = Index(tuple(str(start) if k == d else row[k] for k in range(out.rank)))
            store_lanes(em, out.element_type, outputs[0][2], em.offset(out, index, ("out", ())),
                        vector_em.element(root, index), width)
        for k in range(size - size % width, size):
            _store(em, inst, root, outputs,
                   Index(tuple(str(k) if c == d else row[c] for c in range(out.rank))))
        return rows
    if vector is not None:
        vector_em, width = vector
        d = plan.column_dims[-1]
        columns[d] = kb.declare(kb.index_type, "c", "0")
        n = kb.param(out.dims[d], key=("column", d))
        index = Index(tuple(columns.get(k, row[k]) for k in range(out.rank)))
        with em.block(f"for (; {columns[d]} + {width} <= {n}; {columns[d]} += {width})"):
            store_lanes(em, out.element_type, outputs[0][2], em.offset(out, index, ("out", ())),
                        vector_em.element(root, index), width)
        blocks.append(em.block(f"for (; {columns[d]} < {n}; ++{columns[d]})"))
        blocks[-1].__enter__()
    index = Index(tuple(columns.get(d, row[d]) for d in range(out.rank)))
    _store(em, inst, root, outputs, index)
    for blk in reversed(blocks):
        blk.__exit__(None, None, None)
    return rows


def _column_vectors(em: ElementalEmitter, inst: HloInstruction, root: HloInstruction,
                    plan: RowPlan, lanes: int) -> tuple[ElementalEmitter, int] | None:
    """The lane emitter and width computing the row's outputs in vectors along the output's
    contiguous dimension (then the innermost column loop), or None: the row's hoisted values
    are splatted, its other values computed on vectors and stored whole. Targets keeping one
    accumulator per work-item (``lanes`` 1) keep the element loop."""
    out = inst.shape
    if out.is_tuple or not plan.column_dims or out.element_type.name not in ("f32", "bf16") \
            or plan.column_dims[-1] != out.minor_to_major[0]:
        return None
    d = plan.column_dims[-1]
    width = _lanes_for_run(lanes, out.dims[d])
    vector_em = lane_emitter(em, root, width, d, out.dims[d] % width == 0)
    return None if vector_em is None else (vector_em, width)


def _column_kernel(ctx: LoweringContext, kb: KernelBuilder, inst: HloInstruction,
                   root: HloInstruction, params, plan: RowPlan, hero: HloInstruction,
                   lanes: int) -> int:
    """Each work-item owns ``lanes`` adjacent outputs along the output's contiguous dimension
    and reduces them together, reading ``lanes`` contiguous inputs per step."""
    out = _first_leaf(inst)
    minor = out.minor_to_major[0]
    n = out.dims[minor]
    blocks = -(-n // lanes)
    count = out.element_count // n * blocks
    t = kb.index_type
    gid = begin_1d(kb, count)
    outputs = _output_pointers(ctx, kb, inst)
    em = ElementalEmitter(kb, operand_leaves(ctx, inst, params), ctx.program.embed)
    block = kb.let(t, f"{gid} % {kb.param(blocks, key='blocks')}", "b")
    rest = kb.let(t, f"{gid} / {kb.param(blocks, key='blocks')}", "q")
    outer = em.delinearize(rest, out.dims, out.minor_to_major[1:], "outer")
    last = kb.param(n - 1, key="last")
    cols = [kb.let(t, f"{block} * {lanes} + {k}", "c") for k in range(lanes)]
    indices = [Index(tuple(kb.let(t, f"min({c}, {last})", "i") if d == minor else outer[d]
                           for d in range(out.rank))) for c in cols]
    hero_indices = [Index(tuple(ix.exprs[k] if k is not None else "0"
                                for k in plan.index_of[hero])) for ix in indices]
    results = _reduce_columns(em, hero, hero_indices)
    for k, (index, c) in enumerate(zip(indices, cols)):
        _bind(em, hero, results[k])
        with em.block(f"if ({c} <= {last})"):
            _store(em, inst, root, outputs, index)
    return count


# --- reductions -----------------------------------------------------------------------------

def _reduce(em: ElementalEmitter, red: HloInstruction, index: Index, lanes: int) -> list[str]:
    """Accumulators holding ``red`` at ``index``: loops over the reduced dimensions in memory
    order, the contiguous one with ``lanes`` partial accumulators when that is allowed."""
    kb = em.kb
    inputs, inits, comp = _parts(red)
    src: ArrayShape = inputs[0].array_shape
    reduced = tuple(red.dimensions)
    accs = _accumulators(em, inits)
    if src.element_count == 0:
        return accs
    order = [d for d in reversed(src.minor_to_major) if d in reduced]
    contiguous = bool(order) and src.minor_to_major[0] == order[-1]
    if contiguous:
        lanes = _lanes_for_run(lanes, src.dims[order[-1]])
    if lanes == 1 or not contiguous or not reorderable(red):
        if lanes > 1 and contiguous and _argminmax_lanes(em, red, index, order, accs, lanes):
            return accs
        if lanes > 1 and contiguous and _in_order_blocks(em, red, index, order, accs, lanes):
            return accs
        variables, blocks = _loops(em, red, order)
        _combine(em, comp, accs, [em.value(x, _input_index(red, index, variables))
                                  for x in inputs])
        _close(blocks)
        return accs
    operation = _lane_operation(comp, inputs, lanes)
    vector = ""   # the accumulator vector, where there is an operation
    if operation is not None:
        vec = f"{_ctype(comp, 0)}{lanes}"
        vector = kb.declare(vec, "accv", f"({vec})({accs[0]})")
        partial = [[cltypes.component(vector, k)] for k in range(lanes)]
    else:
        partial = [_accumulators(em, inits) for _ in range(lanes)]
    variables, blocks = _loops(em, red, order[:-1])
    lane_dim = order[-1]
    vector_em = None if operation is None else lane_emitter(
        em, inputs[0], lanes, lane_dim, src.dims[lane_dim] % lanes == 0)
    if operation is not None and vector_em is not None and not blocks \
            and _unrolled(src.dims[lane_dim], lanes):
        size = src.dims[lane_dim]
        for start in range(0, size - size % lanes, lanes):
            at = _input_index(red, index, {lane_dim: str(start)})
            _combine_lanes(em, comp, operation, vector, vector_em.element(inputs[0], at), lanes)
        for k in range(size - size % lanes, size):
            _combine(em, comp, partial[0], [em.value(x, _input_index(red, index, {lane_dim: str(k)}))
                                            for x in inputs])
    else:
        _lane_loops(em, red, index, variables, lane_dim, lanes, vector_em, operation, vector,
                    partial)
    _close(blocks)
    if operation is not None and OPCODES[operation].order_free == "any":
        partial = [[_halved(em, comp, operation, vector, lanes)]]
    for lane in partial:
        _combine(em, comp, accs, lane)
    return accs


def _lane_loops(em: ElementalEmitter, red: HloInstruction, index: Index,
                variables: dict[int, str], lane_dim: int, lanes: int,
                vector_em: ElementalEmitter | None, operation: Opcode | None,
                vector: str, partial: list[list[str]]) -> None:
    """The contiguous run in blocks of ``lanes`` (on vectors, or element by element into
    ``lanes`` partial accumulators), then the remainder element by element."""
    kb = em.kb
    inputs, _, comp = _parts(red)
    src: ArrayShape = inputs[0].array_shape
    j = kb.declare(kb.index_type, "j", "0")
    n = kb.param(src.dims[lane_dim], key=(("reduce", id(red)), "n", lane_dim))
    subtracting = accumulation_subtracts(comp, inputs)
    with em.block(f"for (; {j} + {lanes} <= {n}; {j} += {lanes})", subtracting):
        if operation is not None and vector_em is not None:
            x = vector_em.element(inputs[0], _input_index(red, index, {**variables, lane_dim: j}))
            _combine_lanes(em, comp, operation, vector, x, lanes)
        else:
            xs = []
            for k in range(lanes):
                at = {**variables, lane_dim: kb.let(kb.index_type, f"{j} + {k}", "i")}
                xs.append([em.value(x, _input_index(red, index, at)) for x in inputs])
            if operation is not None:
                _combine_lanes(em, comp, operation, vector, _pack(em, comp, [x[0] for x in xs]),
                               lanes)
            else:
                for k in range(lanes):
                    _combine(em, comp, partial[k], xs[k])
    with em.block(f"for (; {j} < {n}; ++{j})", subtracting):
        at = {**variables, lane_dim: j}
        _combine(em, comp, partial[0], [em.value(x, _input_index(red, index, at))
                                        for x in inputs])


# vectors a row's run is at most to be written out block by block rather than looped over
# (8 made a T5 encoder's and a mixed bf16 block's softmax over 128 1-6% slower)
_UNROLLED_BLOCKS = 4


def _unrolled(size: int, lanes: int) -> bool:
    """Whether a row of ``size`` elements is short enough to be written out block by block,
    at constant offsets and outside any loop: each of the row's passes (its reductions, then
    its outputs) then reads its fused producers at the same indices, and the emitter computes
    each of them once for all the passes, as a loop per pass cannot (a softmax over rows of
    49, a Swin window's attention, computed each score's scaling in all three passes and its
    exponential in two: 47,040 such rows 2.13 -> 1.66 ms a run, AMD EPYC, Zen 5)."""
    return size <= _UNROLLED_BLOCKS * lanes


def _halved(em: ElementalEmitter, comp: HloComputation, operation: Opcode, vector: str,
            lanes: int) -> str:
    """The lanes of ``vector`` combined by an order-free reducer as a tree of halves: log2
    lanes vector operations where the lanes in order are a chain of that many dependent
    scalar ones. A softmax over rows of 49 (a Swin window's attention) spent a third of its
    kernel on the sixteen NaN-propagating maxima a row: 47,040 rows 3.39 -> 2.15 ms (AMD
    EPYC, Zen 5, AVX-512), the same bits."""
    et = comp.root_instruction.array_shape.element_type
    ctype = cltypes.compute_type(et)
    while lanes > 1:
        lanes //= 2
        halves = [f"{vector}.lo", f"{vector}.hi"]
        vector = em.kb.let(f"{ctype}{lanes}" if lanes > 1 else ctype,
                           arithmetic(operation, et, et, halves, lanes=lanes), "half")
    return vector


# input types whose lane values are vectors of their compute type (a pred's lanes are int
# masks, not its uchar)
_STORED_LANES = frozenset({"f32", "bf16", "f16", "s32", "u32"})


def _in_order_blocks(em: ElementalEmitter, red: HloInstruction, index: Index, order: list[int],
                     accs: list[str], lanes: int) -> bool:
    """The reduction in its sequential order with its inputs computed ``lanes`` at a time on
    vectors, when the lanes follow every input down to its leaves (else False, nothing
    emitted). For reducers that partial accumulators would change (an argmax, whose first
    NaN wins; an init that is not the identity): the fused producers are what costs, and a
    categorical sample's Gumbel noise (two ``log``s an element) over 8 x 8192 logits took
    2.6 ms a step element by element."""
    kb = em.kb
    inputs, _, comp = _parts(red)
    src: ArrayShape = inputs[0].array_shape
    lane_dim = order[-1]
    aligned = src.dims[lane_dim] % lanes == 0
    if any(x.array_shape.element_type.name not in _STORED_LANES for x in inputs):
        return False
    emitters = [e for x in inputs
                if (e := lane_emitter(em, x, lanes, lane_dim, aligned)) is not None]
    if len(emitters) != len(inputs):
        return False
    variables, blocks = _loops(em, red, order[:-1])
    j = kb.declare(kb.index_type, "j", "0")
    n = kb.param(src.dims[lane_dim], key=(("reduce", id(red)), "n", lane_dim))
    subtracting = accumulation_subtracts(comp, inputs)
    with em.block(f"for (; {j} + {lanes} <= {n}; {j} += {lanes})", subtracting):
        at = _input_index(red, index, {**variables, lane_dim: j})
        blocks_of = []
        for x, vector_em in zip(inputs, emitters):
            ctype = cltypes.compute_type(x.array_shape.element_type)
            name = kb.fresh("block")
            kb.line(f"{ctype} {name}[{lanes}];")
            kb.line(f"vstore{lanes}({vector_em.element(x, at)}, 0, {name});")
            blocks_of.append(name)
        k = kb.fresh("k")
        with em.block(f"for (int {k} = 0; {k} < {lanes}; ++{k})", subtracting):
            _combine(em, comp, accs, [f"{name}[{k}]" for name in blocks_of])
    with em.block(f"for (; {j} < {n}; ++{j})", subtracting):
        at = _input_index(red, index, {**variables, lane_dim: j})
        _combine(em, comp, accs, [em.value(x, at) for x in inputs])
    _close(blocks)
    return True


def _argminmax_lanes(em: ElementalEmitter, red: HloInstruction, index: Index, order: list[int],
                     accs: list[str], lanes: int) -> bool:
    """JAX's argmax or argmin (``reducers.argminmax_direction``) with ``lanes`` partial
    accumulators in two vectors (value, index), combined as a tree of halves, then the
    remainder in order (else False, nothing emitted). Each lane keeps the element of greatest
    key (is NaN, value, -index), which is the sequential result; a zero result then takes the
    sign of the last zero in the row, as the sequence's ties would (the rare case reads the
    row again from its end). In order, every element went through the reducer's chain of
    compares and selects: an argmax over 8 x 8192 took 341 us a run, now 73; over 64 x 32000
    (a batch's vocabulary) 4.45 -> 0.24 ms; a categorical sampling loop 18.0 -> 13.6 ms
    (XLA 18.9; AMD EPYC, Zen 5, AVX-512)."""
    direction = argminmax_direction(red)
    inputs, _, comp = _parts(red)
    src: ArrayShape = inputs[0].array_shape
    if direction is None or src.element_type.name != "f32" or lanes not in E.VECTOR_WIDTHS:
        return False
    lane_dim = order[-1]
    aligned = src.dims[lane_dim] % lanes == 0
    value_em = lane_emitter(em, inputs[0], lanes, lane_dim, aligned)
    index_em = lane_emitter(em, inputs[1], lanes, lane_dim, aligned)
    if value_em is None or index_em is None:
        return False
    kb = em.kb
    better = ">" if direction == "GT" else "<"
    fv, iv = f"float{lanes}", f"int{lanes}"
    best = kb.declare(fv, "bestv", f"({fv})({accs[0]})")
    best_index = kb.declare(iv, "besti", f"({iv})({accs[1]})")
    j = kb.declare(kb.index_type, "j", "0")
    n = kb.param(src.dims[lane_dim], key=(("reduce", id(red)), "n", lane_dim))
    with em.block(f"for (; {j} + {lanes} <= {n}; {j} += {lanes})"):
        at = _input_index(red, index, {lane_dim: j})
        x = kb.let(fv, value_em.element(inputs[0], at), "x")
        x_index = kb.let(iv, index_em.element(inputs[1], at), "xi")
        nan = kb.let(iv, f"isnan({x})", "nan")
        take = kb.let(iv, f"({nan} & ~isnan({best})) | ({x} {better} {best})", "take")
        kb.line(f"{best} = select({best}, {x}, {take});")
        kb.line(f"{best_index} = select({best_index}, {x_index}, {take});")
    value, position = best, best_index
    width = lanes
    while width > 1:
        width //= 2
        a, b = f"{value}.lo", f"{value}.hi"
        ai, bi = f"{position}.lo", f"{position}.hi"
        if width > 1:
            a_nan = kb.let(f"int{width}", f"isnan({a})", "nan")
            b_nan = kb.let(f"int{width}", f"isnan({b})", "nan")
            tie = f"((({b}) == ({a})) | ({a_nan} & {b_nan}))"
            take = kb.let(f"int{width}", f"({b_nan} & ~{a_nan}) | ({b} {better} {a}) | "
                                         f"({tie} & ({bi} < {ai}))", "take")
            position = kb.let(f"int{width}", f"select({ai}, {bi}, {take})", "besti")
            value = kb.let(f"float{width}", f"select({a}, {b}, {take})", "bestv")
        else:
            take = kb.let("int", _greater_key(better, a, ai, b, bi), "take")
            position = kb.let("int", f"{take} ? {bi} : {ai}", "besti")
            value = kb.let("float", f"{take} ? {b} : {a}", "bestv")
    kb.line(f"{accs[0]} = {value};")
    kb.line(f"{accs[1]} = {position};")
    with em.block(f"for (; {j} < {n}; ++{j})"):
        _combine(em, comp, accs, [em.value(x, _input_index(red, index, {lane_dim: j}))
                                  for x in inputs])
    with em.block(f"if ({accs[0]} == 0.0f)"):
        z = kb.declare(kb.index_type, "z", f"{n} - 1")
        with em.block(f"for (; {z} >= 0; --{z})"):
            zero = em.value(inputs[0], _input_index(red, index, {lane_dim: z}))
            with em.block(f"if ({zero} == 0.0f)"):
                kb.line(f"{accs[0]} = {zero};")
                kb.line("break;")
    return True


def _greater_key(better: str, a: str, ai: str, b: str, bi: str) -> str:
    """Whether scalar ``(b, bi)`` has a greater argmax/argmin key (is NaN, value by
    ``better``, -index) than ``(a, ai)``: combining by it is associative and commutative."""
    tie = f"(({b}) == ({a}) || (isnan({a}) && isnan({b})))"
    return f"(isnan({b}) && !isnan({a})) || ({b} {better} {a}) || ({tie} && {bi} < {ai})"


def _lanes_for_run(lanes: int, run: int) -> int:
    """Partial accumulators for a contiguous run of ``run`` elements: ``lanes``, halved while
    wider than the run. A group norm over channels-last data reduces runs of a few channels
    (4 of every 32) under loops over the image: sixteen lanes never filled, and every
    element went through the scalar remainder loop."""
    while lanes > run and lanes > 1:
        lanes //= 2
    return lanes


def _lane_operation(comp: HloComputation, inputs: list[HloInstruction],
                    lanes: int) -> Opcode | None:
    """The opcode of a reducer that is one float operation of its two parameters with a form
    on ``lanes``-wide vectors, else None. Such a reduction keeps its partial accumulators in
    one vector: PoCL's compiler vectorises sixteen scalar partial sums, but not sixteen
    NaN-propagating maxima (a row maximum ran at 3.7 GB/s against the sum's 20.8)."""
    root = comp.root_instruction
    params = comp.parameters
    if len(inputs) != 1 or len(comp.instructions) != 3 or len(root.operands) != 2 \
            or {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    et = root.array_shape.element_type
    if et.name not in ("f32", "f64") or lanes not in E.VECTOR_WIDTHS \
            or E.vector_lanes(root.opcode, et, lanes * et.bits) != lanes:
        return None
    return root.opcode


def _pack(em: ElementalEmitter, comp: HloComputation, values: list) -> str:
    """One vector of the reducer's type holding ``values`` as its lanes."""
    ctype = cltypes.compute_type(comp.root_instruction.array_shape.element_type)
    vec = f"{ctype}{len(values)}"
    return em.kb.let(vec, f"({vec})({', '.join(map(str, values))})", "x")


def _combine_lanes(em: ElementalEmitter, comp: HloComputation, operation: Opcode,
                   vector: str,
                   x: str, lanes: int) -> None:
    """``vector``'s lane k = reducer(lane k, lane k of ``x``), in the reducer's operand order."""
    et = comp.root_instruction.array_shape.element_type
    args = [vector, x] if comp.root_instruction.operands[0] is comp.parameters[0] else [x, vector]
    em.kb.line(f"{vector} = {arithmetic(operation, et, et, args, lanes=lanes)};")


def _reduce_columns(em: ElementalEmitter, red: HloInstruction,
                    indices: list[Index]) -> list[list[str]]:
    """One sequential reduction per index, sharing one loop nest (the column kernel)."""
    inputs, inits, comp = _parts(red)
    src: ArrayShape = inputs[0].array_shape
    reduced = tuple(red.dimensions)
    results = [_accumulators(em, inits) for _ in indices]
    if src.element_count == 0:
        return results
    variables, blocks = _loops(em, red, [d for d in reversed(src.minor_to_major) if d in reduced])
    for accs, index in zip(results, indices):
        _combine(em, comp, accs, [em.value(x, _input_index(red, index, variables))
                                  for x in inputs])
    _close(blocks)
    return results


def _parts(red: HloInstruction) -> tuple[list[HloInstruction], list[HloInstruction], HloComputation]:
    n = len(red.operands) // 2
    return red.operands[:n], red.operands[n:], red.to_apply


def _accumulators(em: ElementalEmitter, inits: list[HloInstruction]) -> list[str]:
    return [em.kb.declare(cltypes.compute_type(i.array_shape.element_type), "acc",
                          str(em.value(i, SCALAR))) for i in inits]


def _combine(em: ElementalEmitter, comp: HloComputation, accs: list[str], xs: list) -> None:
    """accs = comp(accs, xs); every new value is computed before any accumulator changes."""
    new = em.call(comp, list(accs) + list(xs))
    values = list(new) if isinstance(new, tuple) else [new]
    temps = [em.kb.let(_ctype(comp, i), str(v), "t") for i, v in enumerate(values)]
    for acc, tmp in zip(accs, temps):
        em.kb.line(f"{acc} = {tmp};")


def _ctype(comp: HloComputation, i: int) -> str:
    shape = comp.root_instruction.shape
    leaf = list(shape.leaves())[i][1]
    return cltypes.compute_type(leaf.element_type)


def _loops(em: ElementalEmitter, red: HloInstruction, dims: list[int]):
    """``for`` loops over the given input dimensions of ``red`` (outermost first)."""
    src: ArrayShape = red.operands[0].array_shape
    variables: dict[int, str] = {}
    blocks = []
    inputs, _, comp = _parts(red)
    subtracting = accumulation_subtracts(comp, inputs)
    for d in dims:
        var = em.kb.fresh("r")
        n = em.kb.param(src.dims[d], key=(("reduce", id(red)), "n", d))
        blocks.append(em.block(f"for ({em.kb.index_type} {var} = 0; {var} < {n}; ++{var})",
                               subtracting))
        blocks[-1].__enter__()
        variables[d] = var
    return variables, blocks


def _close(blocks) -> None:
    for blk in reversed(blocks):
        blk.__exit__(None, None, None)


def _input_index(red: HloInstruction, index: Index, variables: dict[int, str]) -> Index:
    """The input index: kept dimensions from the result's index, reduced ones from loops."""
    src: ArrayShape = red.operands[0].array_shape
    reduced = tuple(red.dimensions)
    kept = iter(index.exprs)
    return Index(tuple(variables.get(d, "0") if d in reduced else next(kept)
                       for d in range(src.rank)))


# --- helpers --------------------------------------------------------------------------------

def _bind(em: ElementalEmitter, inst: HloInstruction, values: list[str]) -> None:
    """From now on ``inst`` reads as these values (one per output of a variadic reduce)."""
    if inst.shape.is_tuple:
        for k, v in enumerate(values):
            em.leaves[(id(inst), (k,))] = ValueLeaf(v)
    else:
        em.leaves[(id(inst), ())] = ValueLeaf(values[0])


def _column_hero(root: HloInstruction, plan: RowPlan, members, shape: ReductionShape):
    """The reduction a column kernel is built around: the only one, computed per output,
    keeping its input's contiguous dimension as the output's contiguous dimension."""
    reduces = [m for m in members if m.opcode == Opcode.REDUCE]
    if plan.column_dims or len(reduces) != 1 or shape.column_lanes == 1:
        return None
    red = reduces[0]
    src: ArrayShape = red.operands[0].shape
    reduced = tuple(red.dimensions)
    minor = src.minor_to_major[0] if src.rank else None
    if minor is None or minor in reduced or red not in plan.index_of:
        return None
    kept = [d for d in range(src.rank) if d not in reduced]
    out = root.shape if isinstance(root.shape, ArrayShape) else next(iter(root.shape.leaves()))[1]
    return red if plan.index_of[red][kept.index(minor)] == out.minor_to_major[0] else None


def _store(em: ElementalEmitter, inst: HloInstruction, root: HloInstruction,
           outputs: list[tuple[tuple[int, ...], ArrayShape, str]], index: Index) -> None:
    for idx, shape, ptr in outputs:
        value = em.value(root, index, idx) if idx else em.value(root, index)
        offset = em.offset(shape, index, ("out", idx))
        text = cltypes.store(shape.element_type, ptr, offset, str(value))
        em.kb.line(text if text.rstrip().endswith(";") else text + ";")


def _output_pointers(ctx: LoweringContext, kb: KernelBuilder, inst: HloInstruction):
    return [(idx, s, kb.buffer(s.element_type, ctx.ref(inst, idx), writable=True,
                               key=("out", idx)))
            for idx, s in inst.shape.leaves()]


def _launch(ctx: LoweringContext, kb: KernelBuilder, inst: HloInstruction, count: int,
            local: int) -> Launch:
    if ctx.target.min_row_groups:
        local = max(1, min(local, count // ctx.target.min_row_groups))
    name = ctx.program.add_kernel(kb, inst.name)
    size = max(1, -(-count // local)) * local
    return Launch(name, tuple(b.ref for b in kb.buffers), tuple(kb.scalar_arg_values()),
                  (size,), (local,), inst.name)


def _first_leaf(inst: HloInstruction) -> ArrayShape:
    return next(iter(inst.shape.leaves()))[1]


def _shapes(inst: HloInstruction, members) -> list[ArrayShape]:
    shapes = [s for _, s in inst.shape.leaves()]
    for m in list(members) + list(inst.operands):
        shapes.extend(s for _, s in m.shape.leaves())
    return shapes


def _count(shape: ArrayShape, dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= shape.dims[d]
    return n
