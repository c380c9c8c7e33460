"""Row vector loop kernels: each work-item computes ``L`` consecutive elements of one row of
the output (its physical minor dimension, whose size ``L`` divides), through any chain of
index-mapping operations the lanes survive.

Why: the vector loop (``vector_loop``) takes only kernels whose operands it reads at the
output's own position or through a broadcast, and pure float arithmetic. Whole models are
full of loop fusions beyond that, and one element per work-item leaves them scalar: a UNet's
nearest-neighbour upsample and skip concatenation (broadcasts and reshapes into a
``concatenate``), a softmax numerator whose row maximum passes through ``maximum`` before
its broadcast, a ReLU gradient (``select`` on a ``compare``), a group norm reshaping its
channels into groups, a causal mask built from ``iota``.

How: because ``L`` divides the row, a block never leaves its row, so every lane shares the
block's first index in all dimensions but one, the *lane dimension*, where lane ``j`` is at
``first + j``. ``_LanePlan`` follows that dimension from the output down to the leaves: an
elementwise op keeps it, a transpose permutes it, a reshape carries it to its operand's last
dimension of the same group (when blocks stay aligned there), a broadcast that drops it makes
the operand *uniform*: one value for the whole block, which the scalar elemental emitter
computes once per work-item at the block's first index (a row statistic, a bias, a scalar
expression; even a reduction). Concatenation, padding and update windows along the lane
dimension are taken when their pieces are aligned to whole blocks, so the branch each takes is
the same for every lane. A leaf read along the lane dimension is one vector load where that
dimension is contiguous in its layout, a gather of ``L`` elements otherwise. A reshape
splitting the row into groups shorter than a block (a group norm's channels) spreads the lanes
over two dimensions, whole groups per block (``Lanes``); a broadcast of per-group values then
repeats each along its group, and a reshape joining the groups again brings the lanes back to
one dimension; a reshape that only inserts or drops dimensions of size 1 carries any lanes part
by part (per-group values reshaped for their broadcast and computed on first).

A dynamic-update-slice computed in its operand's bytes writes only its update window, in
blocks along the window's rows (a scan step storing its slice of the stacked outputs). A
multi-output fusion whose outputs share one shape and layout (``passes.multi_output_fusion``)
computes every output's block, then stores each; one with windows among its outputs
(``analysis.loop_outputs``) stores each window's block at its place in the operand it updates,
whose rows must run along the kernel's.

Values are ``floatL`` (f32, and bf16 or f16 rounded after every inexact operation, bit for
bit the scalar kernel's), ``intL`` (s32), ``uintL`` (u32, with the operations of a counter-
based random number generator: add, multiply, logic, shifts, and its bits read as f32: a
dropout step's threefry rounds over 256x2560 values took 368 us a round element by element,
176 us on vectors) and ``intL`` lane masks (pred: -1 or 0, as vector comparisons give them,
stored as 1 or 0); a float converted to an integer type is stored converted, or, when it is
converted back to a float (a quantised value fed on), is one operation on float lanes.
Anything else declines to the one-element kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ...analysis.loop_outputs import LoopOutput, window_dimensions
from ...hlo.dtypes import ElementType
from ...hlo.ir import HloInstruction
from ...hlo.shape import ArrayShape, leaf_shape, subshape
from ...hlo.opcode_enum import Opcode
from .. import cltypes, templates as E
from ..context import LoweringContext
from ..elemental import (RULES, SCALAR, BufferLeaf, ElementalEmitter, Index, Value, ValueLeaf,
                        arithmetic, common_factors, dynamic_starts, element_strides, layout_key,
                        pad_source, update_window)
from .loop import (begin_1d, kernel_builder, launch_1d, operand_leaves, updates_in_place,
                   window_index, window_target, windows_in_place)
from ..plan import Step
from ..registry import LOOP, register
from ...target import TargetKind
from .vector_loop import same_shape_outputs, stored_value

# element types a lane value may have, by the OpenCL scalar its vector is made of
_LANE_SCALAR = {"f32": "float", "bf16": "float", "f16": "float", "s32": "int", "u32": "uint",
                "pred": "int"}
_FLOAT = frozenset({"f32", "bf16", "f16"})
# lane values that kernels store: floats, u32 (random bits) and pred (a dropout mask)
_STORED = _FLOAT | {"u32", "pred"}
_SMALLEST = 4


@register(LOOP, target=TargetKind.CPU, priority=5)
def row_vector_loop(ctx: LoweringContext, inst: HloInstruction, root: HloInstruction,
                    params: list[HloInstruction] | None) -> list[Step] | None:
    """One row vector launch computing ``inst`` (``root`` over ``params``), or None."""
    outputs = same_shape_outputs(inst, root)
    if outputs is None:
        found = windows_in_place(ctx, inst)
        return None if found is None else _space_launch(ctx, inst, params, *found)
    outputs = [(stored_value(value, s), index, s) for value, index, s in outputs]
    out = outputs[0][2]
    if out.rank == 0 or any(value.array_shape.element_type.name not in _STORED
                            for value, _, _ in outputs):
        return None
    leaves = operand_leaves(ctx, inst, params)
    minor = out.minor_to_major[0]
    if root.opcode == Opcode.DYNAMIC_UPDATE_SLICE and updates_in_place(ctx, inst, root, params):
        update = root.operands[1]
        plan = _plan(ctx, [(update, minor)], update.array_shape.dims[minor], leaves)
        return None if plan is None else [_launch_window(ctx, inst, root, leaves, plan)]
    plan = _plan(ctx, [(value, minor) for value, _, _ in outputs], out.dims[minor], leaves)
    return None if plan is None else [_launch(ctx, inst, outputs, leaves, plan)]


def _plan(ctx: LoweringContext, values: list[tuple[HloInstruction, int]], row: int,
          leaves: dict) -> _LanePlan | None:
    """The widest lanes (down to ``_SMALLEST``) dividing ``row`` that the lanes of every one of
    ``values`` along its dimension can follow, with their plan."""
    lanes = ctx.target.lanes(32)
    while lanes >= _SMALLEST:
        if row % lanes == 0:
            plan = _LanePlan(lanes, {key[0] for key in leaves})
            if all(plan.varying(value, plan.along(d), True) for value, d in values):
                return plan
        lanes //= 2
    return None


def lane_emitter(em: ElementalEmitter, inst: HloInstruction, lanes: int, dim: int,
                 aligned: bool) -> _RowEmitter | None:
    """An emitter giving ``inst`` as ``lanes``-wide vectors along its dimension ``dim`` (lane
    j at the index's ``dim`` plus j), sharing ``em``'s kernel, leaves and memoised values; None
    where the lanes cannot follow ``inst`` down to its leaves. ``aligned``: as ``_LanePlan``'s.

    Why: a row kernel (``families.reduction``) walks each row's contiguous run in blocks of
    ``lanes``; its fused producers computed one element at a time stayed scalar (a softmax
    over a gathered bf16 attention bias ran ``exp`` sixteen times per block, at 5 ns an
    element). Values ``em`` already reads as one value per row (the row's hoisted reductions)
    stay uniform: splatted, never recomputed."""
    if lanes < _SMALLEST:
        return None
    plan = _LanePlan(lanes, {key[0] for key, leaf in em.leaves.items()
                             if isinstance(leaf, BufferLeaf)})
    plan.uniform |= {key[0] for key, leaf in em.leaves.items() if isinstance(leaf, ValueLeaf)}
    if not plan.varying(inst, plan.along(dim), aligned):
        return None
    vector_em = _RowEmitter(em.kb, em.leaves, em.embed, plan)
    vector_em.scopes = em.scopes
    return vector_em


def store_lanes(em: ElementalEmitter, et: ElementType, ptr: str, offset: str, value: str,
                lanes: int, computed: ElementType | None = None) -> None:
    """Store a lane value's ``lanes`` elements of type ``et`` at ``ptr + offset`` onwards; a
    float value (``computed``) into an integer ``et`` is converted as ``convert`` does."""
    if et.name in E.NARROW_FLOAT_VECTORS:
        value = E.narrow_vector(et, lanes, value)
    elif et.name in E.VECTOR_INTEGERS and computed is not None and computed.is_float:
        value = E.convert_vector("f32", et, value, lanes)
    elif et.name == "pred":                     # a lane mask (-1 or 0) stored as 1 or 0
        value = f"convert_uchar{lanes}({value} & (int{lanes})1)"
    em.kb.line(f"vstore{lanes}({value}, 0, {ptr} + {offset});")


# --- which dimension the lanes run along, instruction by instruction ---------------------

# Where lane j of a value is, part by part (outer first): ``(dimension, divisor, modulus)``
# adds ``(j // divisor) % modulus`` to the block's first index along ``dimension``. One part
# ``(d, 1, lanes)`` is a lane dimension. A reshape that splits the row's dimension into groups
# shorter than the block (a group norm's channels) gives two parts, and a broadcast dropping
# the inner one leaves a value repeated along it (the group's statistics).
Lanes = tuple[tuple[int, int, int], ...]


def _lane_dimension(m: Lanes) -> int | None:
    """The lane dimension of a one-part map (lane j at ``first + j``), else None."""
    return m[0][0] if len(m) == 1 and m[0][1] == 1 else None


@dataclass
class _LanePlan:
    """The lanes (``Lanes``) of every instruction they reach (``lane``); an instruction
    absent from it is uniform. ``aligned``: the block's first index along the lane dimension
    is a multiple of ``lanes`` and so is that dimension's size, so a block never straddles a
    boundary at a multiple of ``lanes``."""

    lanes: int
    leaves: set[int]
    lane: dict[int, Lanes] = field(default_factory=dict)
    uniform: set[int] = field(default_factory=set)
    _checked: set = field(default_factory=set)

    def along(self, d: int) -> Lanes:
        """The lanes of a value whose lane dimension is ``d``."""
        return ((d, 1, self.lanes),)

    def varying(self, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
        """Whether ``inst`` can be computed with its lanes at ``d``."""
        if inst.shape.is_tuple or inst.shape.rank == 0 or id(inst) in self.uniform:
            return False
        if self.lane.setdefault(id(inst), d) != d:
            return False              # read along two lane maps: not one block shape
        if (id(inst), aligned) in self._checked or (id(inst), False) in self._checked:
            return True               # what holds unaligned holds aligned
        self._checked.add((id(inst), aligned))
        if inst.shape.element_type.name not in _LANE_SCALAR:
            return False
        if id(inst) in self.leaves or inst.opcode == Opcode.CONSTANT:
            return True
        rule = _PLAN_RULES.get(inst.opcode)
        if rule is None and inst.opcode in _ARITHMETIC:
            rule = _elementwise_plan
        if rule is not None:
            return rule(self, inst, d, aligned)
        along = _DIMENSION_RULES.get(inst.opcode)
        dim = _lane_dimension(d)
        return along is not None and dim is not None and along(self, inst, dim, aligned)

    def operands(self, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
        """Each operand at the same index (rank-0 operands are uniform)."""
        return all(op.shape.rank == 0 or self.varying(op, d, aligned)
                   for op in inst.operands)

    def make_uniform(self, inst: HloInstruction) -> bool:
        """``inst`` is read once per block (the scalar emitter computes it): it may not also
        be a lane value."""
        self.uniform.add(id(inst))
        return id(inst) not in self.lane

    def whole_blocks(self, aligned: bool, *sizes: int) -> bool:
        return aligned and all(n % self.lanes == 0 for n in sizes)


def _elementwise_plan(plan: _LanePlan, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
    ets = {op.array_shape.element_type.name for op in inst.operands} | {inst.array_shape.element_type.name}
    compute = "f32" if ets <= _FLOAT else "u32" if ets == {"u32"} else None
    return compute is not None \
        and E.vector_lanes(inst.opcode, compute, 32 * plan.lanes) is not None \
        and plan.operands(inst, d, aligned)


def _convert_plan(plan: _LanePlan, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
    through = _through_integer(inst)
    if through is not None:
        return plan.varying(through, d, aligned)
    pair = (inst.operands[0].array_shape.element_type.name, inst.array_shape.element_type.name)
    return pair in _CONVERTS and plan.operands(inst, d, aligned)


def _through_integer(inst: HloInstruction) -> HloInstruction | None:
    """The float value of a float -> integer -> float convert pair (a quantised value fed on
    as a float: an int8 dot's operand computed on f32 copies, ``passes.contraction_upcast``),
    else None: the pair is one operation on float lanes."""
    middle = inst.operands[0]
    if inst.array_shape.element_type.name not in _FLOAT or middle.opcode != Opcode.CONVERT \
            or middle.array_shape.element_type.name not in E.VECTOR_INTEGERS:
        return None
    source = middle.operands[0]
    return source if source.array_shape.element_type.name in _FLOAT else None


def _compare_plan(plan: _LanePlan, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
    et = inst.operands[0].array_shape.element_type.name
    kind = inst.comparison_type or ""
    compared = (et in _FLOAT and kind in ("", "FLOAT")) or (et == "s32" and kind in ("", "SIGNED")) \
        or (et == "u32" and kind in ("", "UNSIGNED"))
    return compared and str(inst.direction) in _DIRECTIONS and plan.operands(inst, d, aligned)


def _select_plan(plan: _LanePlan, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
    return plan.operands(inst, d, aligned)


def _logical_plan(plan: _LanePlan, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
    return inst.array_shape.element_type.name in ("pred", "u32") and plan.operands(inst, d, aligned)


def _bitcast_plan(plan: _LanePlan, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
    pair = (inst.operands[0].array_shape.element_type.name, inst.array_shape.element_type.name)
    return pair in _BITCASTS and plan.operands(inst, d, aligned)


def _broadcast_plan(plan: _LanePlan, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
    op = inst.operands[0]
    dims = tuple(inst.dimensions)
    kept = tuple((dims.index(dim), div, mod) for dim, div, mod in d
                 if dim in dims and op.array_shape.dims[dims.index(dim)] != 1)
    if not kept:
        return plan.make_uniform(op)
    return plan.varying(op, kept, aligned)


def _reshape_plan(plan: _LanePlan, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
    op = inst.operands[0]
    src, dims = op.array_shape.dims, inst.array_shape.dims
    if src == dims:
        return plan.varying(op, d, aligned)
    kept = _kept_dimensions(src, dims)
    if kept is not None:
        return all(dim in kept for dim, _, _ in d) \
            and plan.varying(op, tuple((kept[dim], div, mod) for dim, div, mod in d), aligned)
    lane = _lane_dimension(d)
    if lane is None:
        return _merging_reshape_plan(plan, inst, d)
    for src_dims, out_dims in common_factors(src, dims):
        if lane not in out_dims:
            continue
        if lane != out_dims[-1]:
            return False              # consecutive lanes are far apart in the operand
        if len(src_dims) == 1 and len(out_dims) == 1:
            return plan.varying(op, plan.along(src_dims[0]), aligned)
        # the group's linear index runs on by one per lane and, with whole blocks, never
        # carries out of the operand's last dimension inside a block ...
        inner = src[src_dims[-1]]
        if plan.whole_blocks(aligned, dims[lane], inner):
            return plan.varying(op, plan.along(src_dims[-1]), True)
        # ... or a block covers whole runs of it and never carries out of the one before
        outer = plan.lanes // inner
        return len(src_dims) > 1 and plan.lanes % inner == 0 \
            and plan.whole_blocks(aligned, dims[lane]) and src[src_dims[-2]] % outer == 0 \
            and plan.varying(op, ((src_dims[-2], inner, outer), (src_dims[-1], 1, inner)), True)
    return False


def _kept_dimensions(src: tuple[int, ...], dims: tuple[int, ...]) -> dict[int, int] | None:
    """Where a reshape only inserts or drops dimensions of size 1 (a group norm's statistics
    ``[B, G]`` made ``[B, 1, 1, G, 1]`` to broadcast over an image), each output dimension of
    another size and the operand's dimension it is, else None: every lane map follows it part
    by part, a group's value repeated along its group included (a UNet's group norm and SiLU
    had taken blocks of one group, 4 lanes, not 16)."""
    out = [k for k, n in enumerate(dims) if n != 1]
    kept = [k for k, n in enumerate(src) if n != 1]
    if [dims[k] for k in out] != [src[k] for k in kept]:
        return None
    return dict(zip(out, kept))


def _merging_reshape_plan(plan: _LanePlan, inst: HloInstruction, d: Lanes) -> bool:
    """A reshape joining the dimensions a block's lanes run over (a group norm's groups back
    into channels): when lane j is ``j`` elements on in the joined group, the operand's lanes
    run along the group's last dimension, in whole blocks."""
    op = inst.operands[0]
    src, dims = op.array_shape.dims, inst.array_shape.dims
    for src_dims, out_dims in common_factors(src, dims):
        if {dim for dim, _, _ in d} <= set(out_dims):
            stride = {dim: math.prod(dims[k] for k in out_dims if k > dim) for dim in out_dims}
            linear = [sum((j // div) % mod * stride[dim] for dim, div, mod in d)
                      for j in range(plan.lanes)]
            return linear == list(range(plan.lanes)) \
                and plan.whole_blocks(True, src[src_dims[-1]]) \
                and plan.varying(op, plan.along(src_dims[-1]), True)
    return False


def _transpose_plan(plan: _LanePlan, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
    return plan.varying(inst.operands[0],
                        tuple((inst.dimensions[dim], div, mod) for dim, div, mod in d), aligned)


def _identity_plan(plan: _LanePlan, inst: HloInstruction, d: Lanes, aligned: bool) -> bool:
    return plan.varying(inst.operands[0], d, aligned)


def _slice_plan(plan: _LanePlan, inst: HloInstruction, d: int, aligned: bool) -> bool:
    s = inst.slice.dims[d]
    op = inst.operands[0]
    return s.stride == 1 and plan.varying(
        op, plan.along(d), plan.whole_blocks(aligned, s.start, op.array_shape.dims[d]))


def _dynamic_slice_plan(plan: _LanePlan, inst: HloInstruction, d: int, aligned: bool) -> bool:
    op = inst.operands[0]
    whole = inst.dynamic_slice_sizes[d] == op.array_shape.dims[d]     # its start clamps to 0
    return plan.varying(op, plan.along(d), aligned and whole)


def _gather_plan(plan: _LanePlan, inst: HloInstruction, d: int, aligned: bool) -> bool:
    """Lanes along one of a gather's slice dimensions (a gathered row: an embedding, a graph
    message): the block's start indices are uniform, read once, and its lanes are the
    operand's along the slice's dimension."""
    offset_dims = tuple(inst.offset_dims)
    if d not in offset_dims:
        return False
    operand, indices = inst.operands
    dropped = set(inst.collapsed_slice_dims) \
        | set(inst.ints_attr("operand_batching_dims"))
    window = [k for k in range(operand.shape.rank) if k not in dropped]
    along = window[offset_dims.index(d)]
    whole = inst.slice_sizes[along] == operand.array_shape.dims[along]
    return plan.make_uniform(indices) and plan.varying(operand, plan.along(along),
                                                       aligned and whole)


def _dynamic_update_slice_plan(plan: _LanePlan, inst: HloInstruction, d: int,
                               aligned: bool) -> bool:
    base, update = inst.operands[:2]
    return update.array_shape.dims[d] == base.array_shape.dims[d] \
        and plan.varying(base, plan.along(d), aligned) \
        and plan.varying(update, plan.along(d), aligned)


def _concatenate_plan(plan: _LanePlan, inst: HloInstruction, d: int, aligned: bool) -> bool:
    if inst.dimensions[0] == d and not plan.whole_blocks(
            aligned, *(op.array_shape.dims[d] for op in inst.operands)):
        return False
    return plan.operands(inst, plan.along(d), aligned)


def _pad_plan(plan: _LanePlan, inst: HloInstruction, d: int, aligned: bool) -> bool:
    p = inst.padding.dims[d]
    op = inst.operands[0]
    if (p.low, p.high, p.interior) != (0, 0, 0) and (
            p.interior or not plan.whole_blocks(aligned, p.low, op.array_shape.dims[d])):
        return False
    return plan.varying(op, plan.along(d), aligned)


def _reverse_plan(plan: _LanePlan, inst: HloInstruction, d: int, aligned: bool) -> bool:
    return d not in inst.dimensions and plan.varying(inst.operands[0], plan.along(d), aligned)


def _iota_plan(plan: _LanePlan, inst: HloInstruction, d: int, aligned: bool) -> bool:
    return True


# rules for any lanes (elementwise ops keep them; broadcast, reshape and transpose move them)
_PLAN_RULES: dict[Opcode, Callable[[_LanePlan, HloInstruction, Lanes, bool], bool]] = {
    Opcode.CONVERT: _convert_plan, Opcode.COMPARE: _compare_plan, Opcode.SELECT: _select_plan,
    Opcode.AND: _logical_plan, Opcode.OR: _logical_plan, Opcode.XOR: _logical_plan,
    Opcode.NOT: _logical_plan,
    Opcode.BROADCAST: _broadcast_plan, Opcode.RESHAPE: _reshape_plan,
    Opcode.TRANSPOSE: _transpose_plan,
    Opcode.COPY: _identity_plan, Opcode.BITCAST_CONVERT: _bitcast_plan,
}
# rules for a lane dimension (their branches and offsets are per dimension)
_DIMENSION_RULES: dict[Opcode, Callable[[_LanePlan, HloInstruction, int, bool], bool]] = {
    Opcode.SLICE: _slice_plan, Opcode.DYNAMIC_SLICE: _dynamic_slice_plan,
    Opcode.GATHER: _gather_plan,
    Opcode.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice_plan, Opcode.CONCATENATE: _concatenate_plan,
    Opcode.PAD: _pad_plan, Opcode.REVERSE: _reverse_plan, Opcode.IOTA: _iota_plan,
}
_ARITHMETIC = frozenset(op for op in RULES if RULES[op] is RULES[Opcode.ADD])
_DIRECTIONS = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


# --- emitting ---------------------------------------------------------------------------------

class _RowEmitter(ElementalEmitter):
    """The elemental emitter with lanes: ``value`` of an instruction the lanes reach is a
    vector over the block (its index is the block's first lane's); of a uniform one, the
    scalar emitter's value splatted. Inside a uniform value (``_scalar_depth``) everything is
    the scalar emitter's."""

    def __init__(self, kb, leaves, embed, plan: _LanePlan) -> None:
        super().__init__(kb, leaves, embed)
        self.plan = plan
        self.n = plan.lanes
        self._scalar_depth = 0

    def vector_type(self, inst: HloInstruction) -> str:
        return f"{_LANE_SCALAR[inst.array_shape.element_type.name]}{self.n}"

    def value(self, inst: HloInstruction, index: Index,
              shape_index: tuple[int, ...] = ()) -> Value:
        if self._scalar_depth or shape_index:
            return super().value(inst, index, shape_index)
        # the lanes' width and map are part of the value: a row kernel's passes read one value
        # at the same index along other dimensions or widths (``families.reduction``)
        key = ("lanes", self.n, self.plan.lane.get(id(inst)), id(inst), index.exprs)
        hit = self._lookup(key)
        if hit is not None:
            return hit
        result: Value
        if id(inst) not in self.plan.lane:
            result = self.splat(inst, self.scalar(inst, index))
        elif (id(inst), ()) in self.leaves:
            result = self._load(inst, self.buffer_leaf(inst), index)
        elif inst.opcode == Opcode.CONSTANT and inst.array_shape.element_count != 1:
            result = self._load(inst, BufferLeaf(inst.array_shape, self.embedded(inst),
                                                 ("embedded", id(inst))), index)
        elif inst.opcode in _EMIT_RULES:
            result = _EMIT_RULES[inst.opcode](self, inst, index)
        elif inst.opcode in _ARITHMETIC:
            result = _arithmetic(self, inst, index)
        else:
            result = RULES[inst.opcode](self, inst, index)
        self.scopes[-1][key] = result
        return result

    def scalar(self, inst: HloInstruction, index: Index) -> str:
        """``inst``'s one value at ``index`` by the scalar emitter."""
        self._scalar_depth += 1
        try:
            return self.element(inst, index)
        finally:
            self._scalar_depth -= 1

    def scalar_index_value(self, inst: HloInstruction, index: Index = SCALAR) -> tuple[str, str]:
        self._scalar_depth += 1
        try:
            return super().scalar_index_value(inst, index)
        finally:
            self._scalar_depth -= 1

    def splat(self, inst: HloInstruction, scalar: str) -> str:
        vec = self.vector_type(inst)
        if inst.array_shape.element_type.name == "pred":
            return self.kb.let(vec, f"({vec})(-(int)({scalar}))", "m")
        return self.kb.let(vec, f"({vec})({scalar})", "u")

    def _load(self, inst: HloInstruction, leaf: BufferLeaf, index: Index) -> str:
        shape, et, n = leaf.shape, leaf.shape.element_type, self.n
        vec = self.vector_type(inst)
        ptr = self.kb.buffer(et, leaf.ref, key=leaf.key)
        offset = self.kb.let(self.kb.index_type, self.offset(shape, index, leaf.key), "o")
        parts = self.plan.lane[id(inst)]
        strides = element_strides(shape)
        if [sum((j // div) % mod * strides[dim] for dim, div, mod in parts)
                for j in range(n)] == list(range(n)):            # lane j at offset + j
            raw = f"vload{n}(0, {ptr} + {offset})"
            if et.name in E.NARROW_FLOAT_VECTORS:
                expr = E.widen_vector(et, n, raw)
            elif et.name == "pred":
                expr = f"(convert_{vec}({raw}) != ({vec})0)"
            else:
                expr = raw
            return self.kb.let(vec, expr, "x")
        steps = [self.kb.param(strides[dim], key=(leaf.key, "stride", dim)) for dim, _, _ in parts]
        lanes = [cltypes.load(et, ptr, offset + "".join(
            f" + {(j // div) % mod} * {step}" for (_, div, mod), step in zip(parts, steps)))
            for j in range(n)]
        if et.name == "pred":
            lanes = [f"-(int)({x})" for x in lanes]
        return self.kb.let(vec, f"({vec})({', '.join(lanes)})", "x")

    def rounded(self, inst: HloInstruction, expr: str) -> str:
        """A float lane value of ``inst``'s type: bf16 rounds to nearest even."""
        if inst.array_shape.element_type.name in E.NARROW_FLOAT_VECTORS:
            expr = E.round_vector(inst.array_shape.element_type, self.n, expr)
        return self.kb.let(self.vector_type(inst), expr, "v")


def _arithmetic(em: _RowEmitter, inst: HloInstruction, index: Index) -> str:
    # rank-0 operands (clamp's bounds) are uniform, read at the empty index
    args = [em.element(op, SCALAR if op.shape.rank == 0 else index) for op in inst.operands]
    compute = "u32" if inst.array_shape.element_type.name == "u32" else "f32"
    et = inst.array_shape.element_type
    expr = arithmetic(inst.opcode, compute, compute, args, lanes=em.n, xla_type=et)
    if not E.rounds(inst.opcode, et):
        return em.kb.let(em.vector_type(inst), expr, "v")
    return em.rounded(inst, expr)


def _convert(em: _RowEmitter, inst: HloInstruction, index: Index) -> str:
    op = inst.operands[0]
    through = _through_integer(inst)
    if through is not None:
        integers = E.convert_vector("f32", op.array_shape.element_type, em.element(through, index), em.n)
        return em.rounded(inst, f"convert_float{em.n}({integers})")
    x = em.element(op, index)
    pair = (op.array_shape.element_type.name, inst.array_shape.element_type.name)
    return em.rounded(inst, _CONVERTS[pair].replace("$x", x).replace("$n", str(em.n)))


# (from, to) -> the conversion of lane value $x (before bf16 rounding of a bf16 result)
_CONVERTS = {
    **{(a, b): "$x" for a in _FLOAT for b in _FLOAT},
    **{(a, b): "convert_float$n($x)" for a in ("s32", "u32") for b in _FLOAT},
    **{("pred", b): "select((float$n)0, (float$n)1, $x)" for b in _FLOAT},
    ("s32", "u32"): "as_uint$n($x)", ("u32", "s32"): "as_int$n($x)",
}


def _bitcast(em: _RowEmitter, inst: HloInstruction, index: Index) -> str:
    pair = (inst.operands[0].array_shape.element_type.name, inst.array_shape.element_type.name)
    x = em.element(inst.operands[0], index)
    return em.kb.let(em.vector_type(inst), _BITCASTS[pair].replace("$x", x).replace("$n", str(em.n)),
                     "v")


# (from, to) -> the bits of lane value $x read as the other 32-bit type
_BITCASTS = {("u32", "f32"): "as_float$n($x)", ("f32", "u32"): "as_uint$n($x)",
             ("s32", "f32"): "as_float$n($x)", ("f32", "s32"): "as_int$n($x)",
             ("s32", "u32"): "as_uint$n($x)", ("u32", "s32"): "as_int$n($x)"}


def _compare(em: _RowEmitter, inst: HloInstruction, index: Index) -> str:
    a, b = (em.element(op, index) for op in inst.operands)
    return em.kb.let(em.vector_type(inst), f"({a} {_DIRECTIONS[str(inst.direction)]} {b})", "m")


def _select(em: _RowEmitter, inst: HloInstruction, index: Index) -> str:
    p, a, b = inst.operands
    on_true, on_false = em.element(a, index), em.element(b, index)
    if p.shape.rank == 0:
        return em.kb.let(em.vector_type(inst), f"({em.scalar(p, SCALAR)}) ? {on_true} : {on_false}")
    return em.kb.let(em.vector_type(inst), f"select({on_false}, {on_true}, {em.element(p, index)})")


def _logical(em: _RowEmitter, inst: HloInstruction, index: Index) -> str:
    args = [em.element(op, index) for op in inst.operands]
    expr = f"(~{args[0]})" if inst.opcode == Opcode.NOT else \
        f"({args[0]} {_LOGICAL[inst.opcode]} {args[1]})"
    return em.kb.let(em.vector_type(inst), expr, "m")


_LOGICAL = {Opcode.AND: "&", Opcode.OR: "|", Opcode.XOR: "^"}


def _iota(em: _RowEmitter, inst: HloInstruction, index: Index) -> str:
    d = int(inst.iota_dimension)
    if d != _lane_dimension(em.plan.lane[id(inst)]):
        return em.splat(inst, em.scalar(inst, index))
    steps = ", ".join(str(j) for j in range(em.n))
    ints = f"((int{em.n})({index.exprs[d]}) + (int{em.n})({steps}))"
    name = inst.array_shape.element_type.name
    if name == "s32":
        return em.kb.let(em.vector_type(inst), ints, "v")
    if name == "u32":       # a u32 iota's lanes are uints (JAX builds diagonal masks from them)
        return em.kb.let(em.vector_type(inst), f"as_uint{em.n}({ints})", "v")
    return em.rounded(inst, f"convert_float{em.n}({ints})")


def _branches(em: _RowEmitter, inst: HloInstruction,
              cases: list[tuple[str, Callable[[], str]]]) -> str:
    """A lane value chosen by conditions on the block's first index (the same for every lane
    of a block, by the plan): ``if (c0) ... else if (c1) ... else ...``."""
    result = em.kb.declare(em.vector_type(inst), "r")
    for k, (condition, compute) in enumerate(cases):
        header = "if" if k == 0 else "else if"
        header = f"{header} ({condition})" if k < len(cases) - 1 or k == 0 else "else"
        with em.block(header):
            em.kb.line(f"{result} = {compute()};")
    return result


def _concatenate(em: _RowEmitter, inst: HloInstruction, index: Index) -> str:
    d = inst.dimensions[0]
    key = ("concat", id(inst))
    cases: list[tuple[str, Callable[[], str]]] = []
    offset = 0
    for k, op in enumerate(inst.operands):
        start = em.kb.param(offset, key=(key, "start", k))
        offset += op.array_shape.dims[d]
        end = em.kb.param(offset, key=(key, "end", k))

        def compute(op=op, start=start) -> str:
            exprs = list(index.exprs)
            exprs[d] = em.kb.let(em.kb.index_type, f"{index.exprs[d]} - {start}", "i")
            return em.element(op, Index(tuple(exprs)))
        cases.append((f"{index.exprs[d]} < {end}", compute))
    return _branches(em, inst, cases)


def _pad(em: _RowEmitter, inst: HloInstruction, index: Index) -> str:
    inside, source = pad_source(em, inst, index)
    return _branches(em, inst, [
        (inside, lambda: em.element(inst.operands[0], source)),
        ("1", lambda: em.splat(inst, em.scalar(inst.operands[1], SCALAR)))])


def _dynamic_update_slice(em: _RowEmitter, inst: HloInstruction, index: Index) -> str:
    inside, relative = update_window(em, inst, index)
    return _branches(em, inst, [(inside, lambda: em.element(inst.operands[1], relative())),
                                ("1", lambda: em.element(inst.operands[0], index))])


# rules whose lane form differs from the scalar one; the index-mapping rules (broadcast,
# reshape, transpose, slice, dynamic-slice, copy, reverse) are the scalar emitter's own: they
# derive the operand's first-lane index and ask for its value, which is then a lane value
_EMIT_RULES: dict[Opcode, Callable[[_RowEmitter, HloInstruction, Index], str]] = {
    Opcode.CONVERT: _convert, Opcode.COMPARE: _compare, Opcode.SELECT: _select,
    Opcode.BITCAST_CONVERT: _bitcast,
    Opcode.AND: _logical, Opcode.OR: _logical, Opcode.XOR: _logical, Opcode.NOT: _logical,
    Opcode.IOTA: _iota,
    Opcode.CONCATENATE: _concatenate, Opcode.PAD: _pad,
    Opcode.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice,
}


def _begin(ctx: LoweringContext, inst: HloInstruction, leaves: dict, plan: _LanePlan,
           count: int) -> tuple[_RowEmitter, str]:
    """The emitter of a launch of ``count`` blocks and the block's first linear index."""
    kb = kernel_builder(*(s for _, s in inst.shape.leaves()),
                        *(s for op in inst.operands for _, s in op.shape.leaves()))
    gid = begin_1d(kb, count)
    em = _RowEmitter(kb, leaves, ctx.program.embed, plan)
    return em, kb.let(kb.index_type, f"{gid} * {plan.lanes}", "base")


def _store(ctx: LoweringContext, em: _RowEmitter, inst: HloInstruction, value: str,
           offset: str, index: tuple[int, ...] = (),
           computed: ElementType | None = None) -> None:
    """Store the block's lanes (of type ``computed``, where it is not the output's) at
    ``offset`` of output ``index``."""
    out = leaf_shape(inst.shape, index[:1])
    ptr = em.kb.buffer(out.element_type, ctx.ref(inst, index), writable=True, key=("out", index))
    store_lanes(em, out.element_type, ptr, offset, value, em.n, computed)


def _launch(ctx: LoweringContext, inst: HloInstruction, outputs: list, leaves: dict,
            plan: _LanePlan) -> Step:
    out: ArrayShape = outputs[0][2]
    count = out.element_count // plan.lanes
    em, base = _begin(ctx, inst, leaves, plan, count)
    exprs = em.delinearize(base, out.dims, out.minor_to_major, "out")
    index = Index(exprs, (layout_key(out), base))
    values = [em.element(value, index) for value, _, _ in outputs]   # every load before a store
    for value, (computed, out_index, _) in zip(values, outputs):
        _store(ctx, em, inst, value, base, out_index, computed.shape.element_type)
    return launch_1d(ctx, em.kb, inst, count)


def _launch_window(ctx: LoweringContext, inst: HloInstruction, root: HloInstruction,
                   leaves: dict, plan: _LanePlan) -> Step:
    """A dynamic-update-slice whose result lives in its operand's bytes writes only its
    update window (as the loop kernel's in-place form does), here in blocks along the
    output's rows: the window's row may start anywhere, so its stores are unaligned."""
    out: ArrayShape = inst.array_shape
    window: ArrayShape = root.operands[1].array_shape
    count = window.element_count // plan.lanes
    em, base = _begin(ctx, inst, leaves, plan, count)
    rel = em.delinearize(base, window.dims, out.minor_to_major, "upd")
    linear = (layout_key(window), base) if window.minor_to_major == out.minor_to_major else None
    value = em.element(root.operands[1], Index(rel, linear))
    starts = dynamic_starts(em, root, 2, window.dims)
    target = tuple(em.kb.let(em.kb.index_type, f"{s} + {r}", "i") for s, r in zip(starts, rel))
    _store(ctx, em, inst, value, em.offset(out, Index(target), ("out", ())))
    return launch_1d(ctx, em.kb, inst, count)


def _space_launch(ctx: LoweringContext, inst: HloInstruction, params,
                  space: ArrayShape, outputs: list[LoopOutput]) -> list[Step] | None:
    """A loop fusion with window outputs (``analysis.loop_outputs``): blocks along the
    space's rows, plain outputs stored at the block, each window's update at its place in
    the operand it updates, whose rows must run along the space's (a scan step storing its
    values into the stacked outputs as it computes them)."""
    if space.rank == 0 or any(s.element_type.name not in _FLOAT
                              for _, s in inst.shape.leaves()):
        return None
    minor = space.minor_to_major[0]
    lane_dims = []
    for out in outputs:
        if out.window is None:
            lane_dims.append(minor)
            continue
        to_space = window_dimensions(space, out.window.operands[1].array_shape)
        along = [d for d, s in (to_space or {}).items() if s == minor]
        if not along or out.window.array_shape.minor_to_major[0] != along[0]:
            return None               # the window's row is not contiguous in its operand
        lane_dims.append(along[0])
    leaves = operand_leaves(ctx, inst, params)
    plan = _plan(ctx, [(o.value, d) for o, d in zip(outputs, lane_dims)], space.dims[minor],
                 leaves)
    if plan is None:
        return None
    count = space.element_count // plan.lanes
    em, base = _begin(ctx, inst, leaves, plan, count)
    index = Index(em.delinearize(base, space.dims, space.minor_to_major, "out"),
                  (layout_key(space), base))
    places = [index if o.window is None else window_index(index, space, o.window)
              for o in outputs]
    values = [em.element(o.value, at) for o, at in zip(outputs, places)]   # loads, then stores
    offsets = [base if o.window is None else em.offset(
        leaf_shape(inst.shape, o.index), window_target(em, o.window, at), ("out", o.index))
        for o, at in zip(outputs, places)]
    for o, value, offset in zip(outputs, values, offsets):
        _store(ctx, em, inst, value, offset, o.index)
    return [launch_1d(ctx, em.kb, inst, count)]
