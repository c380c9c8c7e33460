"""Shape rules, one function per opcode family, referenced from the opcode table.

A rule receives the instruction (operands, attributes, called computations already resolved;
``inst.shape`` is the declared result shape or None when the text omitted it) and returns the
result shape. Where a result cannot be inferred (the element type of a ``convert``, the
dimensions of a ``broadcast``) the rule checks the declared shape against the operands instead
and returns it. Problems raise ``ShapeError`` with XLA-like wording; the verifier adds the
instruction's name and location.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn, Sequence

from ..errors import HloVerifyError
from .attributes import Window, WindowDim
from .dtypes import ELEMENT_TYPES, PRED, S32, U32, TOKEN, ElementType, complex_component
from .shape import (
    ArrayShape, Shape, TupleShape, compatible, index_text, is_valid_index, subshape,
)
from .opcode_enum import Opcode

if TYPE_CHECKING:
    from .ir import HloComputation, HloInstruction


class ShapeError(HloVerifyError):
    """A shape rule failed; the verifier re-raises it located at the instruction."""


def fail(message: str, expected: str | None = None, got: str | None = None) -> NoReturn:
    raise ShapeError(message, expected=expected, got=got)


# --- helpers --------------------------------------------------------------------------------

def _array(inst: HloInstruction, i: int, what: str = "operand") -> ArrayShape:
    s = inst.operands[i].shape
    if s.is_tuple or not s.is_array:
        fail(f"{what} {i} of {inst.opcode} must be an array, but is {s}")
    return s


def _declared(inst: HloInstruction) -> Shape:
    if inst.shape is None:
        fail(f"the result shape of {inst.opcode} cannot be inferred and must be written")
    return inst.shape


def _declared_array(inst: HloInstruction) -> ArrayShape:
    s = _declared(inst)
    if s.is_tuple or not s.is_array:
        fail(f"{inst.opcode} produces an array, but the declared shape is {s}")
    return s


def _shape(et: ElementType, dims: Sequence[int], like: Shape | None = None) -> ArrayShape:
    """A result shape; takes the declared layout when the declared shape matches."""
    dims = tuple(dims)
    if like is not None and not like.is_tuple and like.dims == dims and like.element_type is et:
        return like
    return ArrayShape(et, dims)


def _check_dims_in_range(dims: Sequence[int], rank: int, what: str) -> None:
    seen = set()
    for d in dims:
        if not 0 <= d < rank:
            fail(f"{what} {d} is out of range for rank {rank}")
        if d in seen:
            fail(f"{what} {d} is repeated")
        seen.add(d)


def _same_type(a: ArrayShape, b: ArrayShape, op: str) -> None:
    if a.element_type is not b.element_type:
        fail(f"{op} operands must have the same element type: {a.element_type} vs {b.element_type}",
             expected=str(a.element_type), got=str(b.element_type))


def _scalar_of(s: ArrayShape) -> ArrayShape:
    return ArrayShape(s.element_type, ())


def check_computation_signature(comp: HloComputation, params: Sequence[Shape], what: str,
                                result: Shape | None = None) -> Shape:
    """Check a called computation's parameters (and optionally its result) against the caller."""
    got = comp.parameter_shapes
    if len(got) != len(params):
        fail(f"{what} {comp.name} takes {len(got)} parameters, but {len(params)} are passed",
             expected=str(len(params)), got=str(len(got)))
    for i, (want, have) in enumerate(zip(params, got)):
        if not compatible(want, have):
            fail(f"{what} {comp.name} parameter {i} has shape {have.to_text(False)}, "
                 f"but the caller passes {want.to_text(False)}",
                 expected=want.to_text(False), got=have.to_text(False))
    root = comp.result_shape
    if result is not None and not compatible(root, result):
        fail(f"{what} {comp.name} returns {root.to_text(False)}, expected {result.to_text(False)}",
             expected=result.to_text(False), got=root.to_text(False))
    return root


# --- elementwise ----------------------------------------------------------------------------

_CLASSES = {frozenset({"float"}): "floating-point",
            frozenset({"float", "complex"}): "floating-point or complex",
            frozenset({"sint", "uint"}): "integer", frozenset({"sint", "uint", "pred"}): "integer or pred"}


def check_operand_types(inst: HloInstruction, accepted: frozenset[str]) -> None:
    """The opcode table's operand-type classes (``OpcodeSpec.operand_types``), checked on the
    first operand (the shape rules make the others agree)."""
    x = inst.operands[0].shape
    if not isinstance(x, ArrayShape) or x.element_type.kind in accepted:
        return
    op = inst.opcode
    if accepted == frozenset({"sint", "uint", "float", "complex"}):
        fail(f"{op} does not accept pred operands")
    what = _CLASSES[accepted]
    if len(inst.operands) == 1:
        fail(f"{op} expects {'an' if what[0] == 'i' else 'a'} {what} operand, but got {x}")
    fail(f"{op} expects {what} operands, but got {x.element_type}")


def unary(inst: HloInstruction) -> Shape:
    if inst.opcode == Opcode.COPY and inst.operands[0].shape.is_tuple:
        return inst.operands[0].shape
    x = _array(inst, 0)
    et = x.element_type
    op = inst.opcode
    if op == Opcode.IS_FINITE:
        return _shape(PRED, x.dims, inst.shape)
    if et.is_complex and op in (Opcode.REAL, Opcode.IMAG, Opcode.ABS):
        return _shape(complex_component(et), x.dims, inst.shape)
    return _shape(et, x.dims, inst.shape)


def cholesky(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    if not (x.element_type.is_float or x.element_type.is_complex):
        fail(f"cholesky expects a floating-point operand, but got {x}")
    if x.rank < 2 or x.dims[-1] != x.dims[-2]:
        fail(f"cholesky needs square matrices, got {x}")
    return _shape(x.element_type, x.dims, inst.shape)


def binary(inst: HloInstruction) -> Shape:
    a, b = _array(inst, 0), _array(inst, 1)
    op = inst.opcode
    if a.dims != b.dims:
        fail(f"{op} operands must have the same dimensions (no implicit broadcasting): "
             f"{a.to_text(False)} vs {b.to_text(False)}",
             expected=a.to_text(False), got=b.to_text(False))
    _same_type(a, b, op)
    et = a.element_type
    if op == Opcode.COMPLEX:
        if et.name not in ("f32", "f64"):
            fail(f"complex expects f32 or f64 operands, but got {et}")
        return _shape(ELEMENT_TYPES["c64" if et.name == "f32" else "c128"], a.dims, inst.shape)
    return _shape(et, a.dims, inst.shape)


def compare(inst: HloInstruction) -> Shape:
    a, b = _array(inst, 0), _array(inst, 1)
    if a.dims != b.dims:
        fail(f"compare operands must have the same dimensions: {a.to_text(False)} vs {b.to_text(False)}",
             expected=a.to_text(False), got=b.to_text(False))
    _same_type(a, b, "compare")
    written, order = inst.attrs.get("type"), inst.attrs.get("order")
    if written is not None and order is not None and a.element_type.is_float \
            and (str(written) == "TOTALORDER") != (str(order) == "TOTAL"):
        fail(f"compare's type={written} and order={order} disagree",
             expected="TOTALORDER with order=TOTAL, FLOAT with order=PARTIAL",
             got=f"type={written}, order={order}")
    return _shape(PRED, a.dims, inst.shape)


def select(inst: HloInstruction) -> Shape:
    p = _array(inst, 0)
    t, f = inst.operands[1].shape, inst.operands[2].shape
    if not p.element_type.is_pred:
        fail(f"select's predicate must be pred, but is {p}")
    if not compatible(t, f):
        fail(f"select's on_true and on_false must have the same shape: {t.to_text(False)} vs "
             f"{f.to_text(False)}", expected=t.to_text(False), got=f.to_text(False))
    if t.is_tuple:
        fail("select on tuples is not supported; select the elements instead")
    if p.rank != 0 and p.dims != t.dims:
        fail(f"select's predicate {p.to_text(False)} must be a scalar or have the dimensions "
             f"of {t.to_text(False)}", expected=t.to_text(False), got=p.to_text(False))
    return inst.shape if inst.shape is not None and compatible(inst.shape, t) else t


def clamp(inst: HloInstruction) -> Shape:
    lo, x, hi = _array(inst, 0), _array(inst, 1), _array(inst, 2)
    for name, b in (("min", lo), ("max", hi)):
        _same_type(x, b, "clamp")
        if b.rank != 0 and b.dims != x.dims:
            fail(f"clamp's {name} {b.to_text(False)} must be a scalar or match {x.to_text(False)}",
                 expected=x.to_text(False), got=b.to_text(False))
    return _shape(x.element_type, x.dims, inst.shape)


def convert(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    out = _declared_array(inst)
    if out.dims != x.dims:
        fail(f"convert cannot change dimensions: {x.to_text(False)} to {out.to_text(False)}",
             expected=ArrayShape(out.element_type, x.dims).to_text(False), got=out.to_text(False))
    if x.element_type.is_complex and not out.element_type.is_complex:
        fail("convert from complex to a real type is not allowed; use real or imag")
    return out


def stochastic_convert(inst: HloInstruction) -> Shape:
    x, r = _array(inst, 0), _array(inst, 1)
    out = _declared_array(inst)
    if r.dims != x.dims or not r.element_type.is_integer:
        fail("stochastic-convert's random operand must be an unsigned integer array of the "
             "operand's dimensions")
    return out


def bitcast_convert(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    out = _declared_array(inst)
    a, b = x.element_type.bits, out.element_type.bits
    if a == b:
        ok = out.dims == x.dims
        want = ArrayShape(out.element_type, x.dims)
    elif a > b:
        ratio = a // b
        ok = a % b == 0 and out.dims == x.dims + (ratio,)
        want = ArrayShape(out.element_type, x.dims + (ratio,))
    else:
        ratio = b // a
        ok = b % a == 0 and x.rank >= 1 and x.dims[-1] == ratio and out.dims == x.dims[:-1]
        want = ArrayShape(out.element_type, x.dims[:-1])
    if not ok:
        fail(f"bitcast-convert from {x.to_text(False)} to {out.to_text(False)} does not preserve "
             f"the bytes", expected=want.to_text(False), got=out.to_text(False))
    return out


def reduce_precision(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    if not x.element_type.is_float:
        fail(f"reduce-precision expects a floating-point operand, but got {x}")
    e, m = inst.attrs.get("exponent_bits"), inst.attrs.get("mantissa_bits")
    if not isinstance(e, int) or e < 1:
        fail(f"reduce-precision exponent_bits must be at least 1, got {e}")
    if not isinstance(m, int) or m < 0:
        fail(f"reduce-precision mantissa_bits must be non-negative, got {m}")
    return _shape(x.element_type, x.dims, inst.shape)


# --- leaves and data movement ---------------------------------------------------------------

def declared(inst: HloInstruction) -> Shape:
    return _declared(inst)


def identity(inst: HloInstruction) -> Shape:
    return inst.operands[0].shape


def add_dependency(inst: HloInstruction) -> Shape:
    tok = inst.operands[1].shape
    if tok.is_tuple or tok.element_type is not TOKEN:
        fail(f"add-dependency's second operand must be a token, but is {tok}")
    return inst.operands[0].shape


def token(inst: HloInstruction) -> Shape:
    for i, op in enumerate(inst.operands):
        if op.shape.is_tuple or op.shape.element_type is not TOKEN:
            fail(f"after-all operand {i} must be a token, but is {op.shape}")
    return ArrayShape(TOKEN, ())


def u32_scalar(inst: HloInstruction) -> Shape:
    return ArrayShape(U32, ())


def iota(inst: HloInstruction) -> Shape:
    out = _declared_array(inst)
    d = inst.attrs.get("iota_dimension")
    if out.rank == 0:
        fail("iota needs an array result of rank at least 1")
    if not isinstance(d, int) or not 0 <= d < out.rank:
        fail(f"iota_dimension {d} is out of range for {out.to_text(False)}")
    if out.element_type.is_pred:
        fail("iota cannot produce pred")
    return out


def broadcast(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    out = _declared_array(inst)
    dims = inst.ints_attr("dimensions")
    if "dimensions" not in inst.attrs:
        if x.rank != 0:
            fail("attribute dimensions is expected but not seen")
        # XLA reads a scalar's omitted dimensions as {}: recorded, so every later reader
        # (``inst.dimensions`` in the kernel families) finds the attribute
        inst.attrs["dimensions"] = ()
    if len(dims) != x.rank:
        fail(f"broadcast dimensions {list(dims)} must name one output dimension per operand "
             f"dimension ({x.rank})", expected=str(x.rank), got=str(len(dims)))
    if out.element_type is not x.element_type:
        fail(f"broadcast cannot change the element type: {x.element_type} to {out.element_type}",
             expected=str(x.element_type), got=str(out.element_type))
    for i, d in enumerate(dims):
        if not 0 <= d < out.rank:
            fail(f"broadcast dimension {d} is out of range for {out.to_text(False)}")
        if x.dims[i] != out.dims[d] and x.dims[i] != 1:
            fail(f"broadcast operand dimension {i} has size {x.dims[i]}, but output dimension "
                 f"{d} has size {out.dims[d]}", expected=str(out.dims[d]), got=str(x.dims[i]))
    if list(dims) != sorted(set(dims)):
        fail(f"broadcast dimensions {list(dims)} must be strictly increasing")
    return out


def reshape(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    out = _declared_array(inst)
    if out.element_type is not x.element_type:
        fail(f"reshape cannot change the element type: {x.element_type} to {out.element_type}")
    if not x.is_unbounded and not out.is_unbounded and out.element_count != x.element_count:
        fail(f"reshape from {x.to_text(False)} to {out.to_text(False)} changes the element count "
             f"({x.element_count} to {out.element_count})",
             expected=str(x.element_count), got=str(out.element_count))
    return out


def transpose(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    perm = inst.ints_attr("dimensions")
    if sorted(perm) != list(range(x.rank)):
        fail(f"transpose dimensions {list(perm)} are not a permutation of the operand's "
             f"{x.rank} dimensions")
    return _shape(x.element_type, [x.dims[p] for p in perm], inst.shape)


def bitcast(inst: HloInstruction) -> Shape:
    x = inst.operands[0].shape
    out = _declared(inst)
    if x.is_tuple or out.is_tuple:
        fail("bitcast works on arrays only")
    if x.is_unbounded or out.is_unbounded:
        fail("bitcast needs sized shapes, but an unbounded dimension '?' has no size")
    if x.byte_size != out.byte_size:
        fail(f"bitcast from {x} ({x.byte_size} bytes) to {out} ({out.byte_size} bytes) changes "
             f"the byte size", expected=f"{x.byte_size} bytes", got=f"{out.byte_size} bytes")
    return out


def slice_(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    spec = inst.slice
    dims = spec.dims
    if len(dims) != x.rank:
        fail(f"slice has {len(dims)} ranges for an operand of rank {x.rank}",
             expected=str(x.rank), got=str(len(dims)))
    out = []
    for i, d in enumerate(dims):
        if d.stride <= 0:
            fail(f"slice stride must be positive, got {d.stride} in dimension {i}")
        if not 0 <= d.start <= d.limit <= x.dims[i]:
            fail(f"slice [{d.start}:{d.limit}] is out of bounds for dimension {i} of size {x.dims[i]}")
        out.append((d.limit - d.start + d.stride - 1) // d.stride)
    return _shape(x.element_type, out, inst.shape)


def _index_operands(inst: HloInstruction, first: int, rank: int, what: str) -> None:
    idx = inst.operands[first:]
    if len(idx) == 1 and not idx[0].shape.is_tuple and idx[0].shape.rank == 1 and rank != 1:
        if idx[0].shape.dims[0] != rank:
            fail(f"{what} index vector has {idx[0].shape.dims[0]} elements for rank {rank}")
        return
    if len(idx) != rank:
        fail(f"{what} expects {rank} start indices (one per dimension), but has {len(idx)}",
             expected=str(rank), got=str(len(idx)))
    types = set()
    for i, op in enumerate(idx):
        s = op.shape
        if s.is_tuple or s.rank != 0 or not s.element_type.is_integer:
            fail(f"{what} start index {i} must be an integer scalar, but is {s}")
        types.add(s.element_type.name)
    if len(types) > 1:
        fail(f"{what} start indices must all have the same type, got {sorted(types)}")


def dynamic_slice(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    sizes = inst.ints_attr("dynamic_slice_sizes")
    _index_operands(inst, 1, x.rank, "dynamic-slice")
    if len(sizes) != x.rank:
        fail(f"dynamic_slice_sizes has {len(sizes)} entries for rank {x.rank}")
    for i, (s, d) in enumerate(zip(sizes, x.dims)):
        if not 0 <= s <= d:
            fail(f"dynamic-slice size {s} in dimension {i} exceeds the operand's {d}")
    return _shape(x.element_type, sizes, inst.shape)


def dynamic_update_slice(inst: HloInstruction) -> Shape:
    x, u = _array(inst, 0), _array(inst, 1)
    _same_type(x, u, "dynamic-update-slice")
    if u.rank != x.rank:
        fail(f"dynamic-update-slice update rank {u.rank} differs from operand rank {x.rank}")
    for i, (s, d) in enumerate(zip(u.dims, x.dims)):
        if s > d:
            fail(f"dynamic-update-slice update dimension {i} ({s}) exceeds the operand's {d}")
    _index_operands(inst, 2, x.rank, "dynamic-update-slice")
    return _shape(x.element_type, x.dims, inst.shape)


def concatenate(inst: HloInstruction) -> Shape:
    dims = inst.ints_attr("dimensions")
    if len(dims) != 1:
        fail(f"concatenate needs exactly one dimension, got {list(dims)}")
    d = dims[0]
    first = _array(inst, 0)
    if not 0 <= d < first.rank:
        fail(f"concatenate dimension {d} is out of range for rank {first.rank}")
    total = 0
    for i in range(len(inst.operands)):
        s = _array(inst, i)
        _same_type(first, s, "concatenate")
        if s.rank != first.rank or any(a != b for k, (a, b) in enumerate(zip(s.dims, first.dims))
                                       if k != d):
            fail(f"concatenate operand {i} {s.to_text(False)} does not match {first.to_text(False)} "
                 f"outside dimension {d}", expected=first.to_text(False), got=s.to_text(False))
        total += s.dims[d]
    out = list(first.dims)
    out[d] = total
    return _shape(first.element_type, out, inst.shape)


def pad(inst: HloInstruction) -> Shape:
    x, v = _array(inst, 0), _array(inst, 1)
    _same_type(x, v, "pad")
    if v.rank != 0:
        fail(f"pad's padding value must be a scalar, but is {v}")
    cfg = inst.padding.dims
    if len(cfg) != x.rank:
        fail(f"padding has {len(cfg)} dimensions for an operand of rank {x.rank}",
             expected=str(x.rank), got=str(len(cfg)))
    out = []
    for i, (p, n) in enumerate(zip(cfg, x.dims)):
        if p.interior < 0:
            fail(f"pad interior padding must be non-negative, got {p.interior} in dimension {i}")
        size = p.low + p.high + n + max(n - 1, 0) * p.interior
        if size < 0:
            fail(f"padding {p.low}_{p.high}_{p.interior} makes dimension {i} negative")
        out.append(size)
    return _shape(x.element_type, out, inst.shape)


def reverse(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    _check_dims_in_range(inst.ints_attr("dimensions"), x.rank, "reverse dimension")
    return _shape(x.element_type, x.dims, inst.shape)


def get_tuple_element(inst: HloInstruction) -> Shape:
    t = inst.operands[0].shape
    if not t.is_tuple:
        fail(f"get-tuple-element needs a tuple operand, but {inst.operands[0].name} is {t}")
    i = inst.attrs.get("index")
    if not isinstance(i, int) or not 0 <= i < len(t.elements):
        fail(f"get-tuple-element index {i} is out of range for a tuple of {len(t.elements)} "
             f"elements")
    return t.elements[i]


def tuple_(inst: HloInstruction) -> Shape:
    return TupleShape(tuple(op.shape for op in inst.operands))


def get_dimension_size(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    dims = inst.ints_attr("dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < x.rank:
        fail(f"get-dimension-size dimension {list(dims)} is out of range for rank {x.rank}")
    return ArrayShape(S32, ())


def set_dimension_size(inst: HloInstruction) -> Shape:
    x, n = _array(inst, 0), _array(inst, 1)
    dims = inst.ints_attr("dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < x.rank:
        fail(f"set-dimension-size dimension {list(dims)} is out of range for rank {x.rank}")
    if n.rank != 0 or n.element_type is not S32:
        fail(f"set-dimension-size's size must be s32[], but is {n}")
    dynamic = list(x.dynamic)
    dynamic[dims[0]] = True
    return ArrayShape(x.element_type, x.dims, tuple(dynamic))


# --- gather / scatter -----------------------------------------------------------------------

def gather(inst: HloInstruction) -> Shape:
    x, idx = _array(inst, 0), _array(inst, 1)
    if not idx.element_type.is_integer:
        fail(f"gather indices must be integers, but are {idx}")
    offset_dims = inst.ints_attr("offset_dims")
    collapsed = inst.ints_attr("collapsed_slice_dims")
    start_map = inst.ints_attr("start_index_map")
    sizes = inst.ints_attr("slice_sizes")
    op_batch = inst.ints_attr("operand_batching_dims")
    idx_batch = inst.ints_attr("start_indices_batching_dims")
    ivd = inst.attrs.get("index_vector_dim")
    if not isinstance(ivd, int) or not 0 <= ivd <= idx.rank:
        fail(f"gather index_vector_dim {ivd} is out of range for indices of rank {idx.rank}")
    idx_dims = list(idx.dims) + ([1] if ivd == idx.rank else [])
    vec = idx_dims[ivd]
    if len(sizes) != x.rank:
        fail(f"gather slice_sizes has {len(sizes)} entries for an operand of rank {x.rank}",
             expected=str(x.rank), got=str(len(sizes)))
    if len(start_map) != vec:
        fail(f"gather start_index_map has {len(start_map)} entries, but the index vector has "
             f"{vec}", expected=str(vec), got=str(len(start_map)))
    _check_dims_in_range(start_map, x.rank, "gather start_index_map entry")
    _check_dims_in_range(collapsed + op_batch, x.rank, "gather collapsed/batching dimension")
    for d in collapsed:
        if sizes[d] > 1:
            fail(f"gather collapsed dimension {d} must have slice size 1, got {sizes[d]}")
    for i, (s, n) in enumerate(zip(sizes, x.dims)):
        if not 0 <= s <= n:
            fail(f"gather slice size {s} in dimension {i} exceeds the operand's {n}")
    if len(op_batch) != len(idx_batch):
        fail("gather operand_batching_dims and start_indices_batching_dims differ in length")
    batch_dims = [d for i, d in enumerate(idx_dims) if i != ivd]
    kept = [sizes[d] for d in range(x.rank) if d not in collapsed and d not in op_batch]
    if len(offset_dims) != len(kept):
        fail(f"gather offset_dims has {len(offset_dims)} entries, but {len(kept)} slice dimensions "
             f"remain", expected=str(len(kept)), got=str(len(offset_dims)))
    rank = len(batch_dims) + len(offset_dims)
    _check_dims_in_range(offset_dims, rank, "gather offset dimension")
    if list(offset_dims) != sorted(offset_dims):
        fail(f"gather offset_dims {list(offset_dims)} must be sorted")
    out = []
    bi = oi = 0
    for pos in range(rank):
        if pos in offset_dims:
            out.append(kept[oi])
            oi += 1
        else:
            out.append(batch_dims[bi])
            bi += 1
    return _shape(x.element_type, out, inst.shape)


def scatter(inst: HloInstruction) -> Shape:
    n_ops = len(inst.operands)
    if n_ops % 2 == 0:
        fail(f"scatter needs an odd number of operands (N inputs, indices, N updates), got {n_ops}")
    n = n_ops // 2
    inputs = [_array(inst, i) for i in range(n)]
    idx = _array(inst, n)
    updates = [_array(inst, n + 1 + i) for i in range(n)]
    if not idx.element_type.is_integer:
        fail(f"scatter indices must be integers, but are {idx}")
    for s in inputs[1:]:
        if s.dims != inputs[0].dims:
            fail("scatter inputs must all have the same dimensions")
    for i, (a, u) in enumerate(zip(inputs, updates)):
        _same_type(a, u, "scatter")
        if u.rank != updates[0].rank or u.dims != updates[0].dims:
            fail("scatter updates must all have the same dimensions")
    x = inputs[0]
    u = updates[0]
    uwd = inst.ints_attr("update_window_dims")
    iwd = inst.ints_attr("inserted_window_dims")
    sd2od = inst.ints_attr("scatter_dims_to_operand_dims")
    in_batch = inst.ints_attr("input_batching_dims")
    ivd = inst.attrs.get("index_vector_dim")
    if not isinstance(ivd, int) or not 0 <= ivd <= idx.rank:
        fail(f"scatter index_vector_dim {ivd} is out of range for indices of rank {idx.rank}")
    idx_dims = list(idx.dims) + ([1] if ivd == idx.rank else [])
    if len(sd2od) != idx_dims[ivd]:
        fail(f"scatter scatter_dims_to_operand_dims has {len(sd2od)} entries, but the index "
             f"vector has {idx_dims[ivd]}")
    _check_dims_in_range(sd2od, x.rank, "scatter_dims_to_operand_dims entry")
    _check_dims_in_range(iwd + in_batch, x.rank, "scatter inserted/batching dimension")
    _check_dims_in_range(uwd, u.rank, "scatter update_window_dims entry")
    if len(uwd) + len(iwd) + len(in_batch) != x.rank:
        fail(f"scatter window dimensions ({len(uwd)} update + {len(iwd)} inserted + "
             f"{len(in_batch)} batching) must add up to the operand rank {x.rank}")
    scatter_dims = [d for i, d in enumerate(idx_dims) if i != ivd]
    if u.rank != len(uwd) + len(scatter_dims):
        fail(f"scatter updates have rank {u.rank}, expected {len(uwd) + len(scatter_dims)}")
    window_dims = [d for d in range(x.rank) if d not in iwd and d not in in_batch]
    for ud, od in zip(uwd, window_dims):
        if u.dims[ud] > x.dims[od]:
            fail(f"scatter update window dimension {ud} ({u.dims[ud]}) exceeds the operand's "
                 f"dimension {od} ({x.dims[od]})")
    comp = inst.to_apply
    scalars = [_scalar_of(a) for a in inputs] + [_scalar_of(a) for a in updates]
    want = scalars[0] if n == 1 else TupleShape(tuple(scalars[:n]))
    check_computation_signature(comp, scalars, "scatter combiner", want)
    if n == 1:
        return _shape(x.element_type, x.dims, inst.shape)
    return TupleShape(tuple(inputs))


# --- reductions -----------------------------------------------------------------------------

def reduce(inst: HloInstruction) -> Shape:
    n_ops = len(inst.operands)
    if n_ops % 2:
        fail(f"reduce needs inputs and init values in pairs, got {n_ops} operands")
    n = n_ops // 2
    inputs = [_array(inst, i) for i in range(n)]
    inits = [_array(inst, n + i) for i in range(n)]
    dims = inst.ints_attr("dimensions")
    types = _reducer_types(inst, inputs, inits)
    _check_dims_in_range(dims, inputs[0].rank, "reduce dimension")
    kept = [d for i, d in enumerate(inputs[0].dims) if i not in dims]
    if n == 1:
        return _shape(types[0], kept, inst.shape)
    like = inst.shape.elements if inst.shape is not None and inst.shape.is_tuple else [None] * n
    return TupleShape(tuple(_shape(t, kept, l) for t, l in zip(types, like)))


def _reducer_types(inst: HloInstruction, inputs: list[ArrayShape],
                   inits: list[ArrayShape]) -> list[ElementType]:
    """Check a reduce/reduce-window reducer ``(acc..., x...) -> acc`` and return the
    accumulator types, which are the result's element types."""
    for i, v in enumerate(inits):
        if v.rank != 0:
            fail(f"{inst.opcode} init value {i} must be a scalar, but is {v}")
    for s in inputs[1:]:
        if s.dims != inputs[0].dims:
            fail(f"{inst.opcode} inputs must have the same dimensions: {inputs[0].to_text(False)} "
                 f"vs {s.to_text(False)}", expected=inputs[0].to_text(False), got=s.to_text(False))
    accumulators = [_scalar_of(v) for v in inits]
    want = accumulators[0] if len(inits) == 1 else TupleShape(tuple(accumulators))
    check_computation_signature(inst.to_apply, accumulators + [_scalar_of(a) for a in inputs],
                                "reducer", want)
    return [v.element_type for v in inits]


def _window_output(in_dims: Sequence[int], window: Window, what: str) -> list[int]:
    wd = window.dims
    if len(wd) != len(in_dims):
        fail(f"{what} window has {len(wd)} dimensions for an operand of rank {len(in_dims)}",
             expected=str(len(in_dims)), got=str(len(wd)))
    out = []
    for i, (n, w) in enumerate(zip(in_dims, wd)):
        if w.size < 0 or w.stride < 1 or w.lhs_dilation < 1 or w.rhs_dilation < 1:
            fail(f"{what} window dimension {i} has an invalid size, stride or dilation")
        padded = (max(n - 1, 0) * w.lhs_dilation + (1 if n else 0)) + w.pad_low + w.pad_high
        span = (w.size - 1) * w.rhs_dilation + 1 if w.size else 0
        out.append(0 if padded < span or n == 0 and span else (padded - span) // w.stride + 1)
    return out


def reduce_window(inst: HloInstruction) -> Shape:
    n_ops = len(inst.operands)
    if n_ops % 2:
        fail(f"reduce-window needs inputs and init values in pairs, got {n_ops} operands")
    n = n_ops // 2
    inputs = [_array(inst, i) for i in range(n)]
    inits = [_array(inst, n + i) for i in range(n)]
    out_dims = _window_output(inputs[0].dims, inst.window, "reduce-window")
    types = _reducer_types(inst, inputs, inits)
    if n == 1:
        return _shape(types[0], out_dims, inst.shape)
    return TupleShape(tuple(ArrayShape(t, tuple(out_dims)) for t in types))


def select_and_scatter(inst: HloInstruction) -> Shape:
    x, src, init = _array(inst, 0), _array(inst, 1), _array(inst, 2)
    out_dims = _window_output(x.dims, inst.window, "select-and-scatter")
    if list(src.dims) != out_dims:
        fail(f"select-and-scatter source {src.to_text(False)} must have the window output "
             f"dimensions {out_dims}", expected=str(out_dims), got=src.to_text(False))
    s = _scalar_of(x)
    check_computation_signature(inst.select, [s, s], "select",
                                ArrayShape(PRED, ()))
    check_computation_signature(inst.scatter, [_scalar_of(src), _scalar_of(src)],
                                "scatter")
    if init.rank != 0:
        fail(f"select-and-scatter init value must be a scalar, but is {init}")
    return _shape(src.element_type, x.dims, inst.shape)


def map_(inst: HloInstruction) -> Shape:
    arrays = [_array(inst, i) for i in range(len(inst.operands))]
    for s in arrays[1:]:
        if s.dims != arrays[0].dims:
            fail("map operands must all have the same dimensions")
    comp = inst.to_apply
    root = check_computation_signature(comp, [_scalar_of(a) for a in arrays], "mapped computation")
    if root.is_tuple or root.rank != 0:
        fail(f"the mapped computation must return a scalar, but returns {root}")
    return _shape(root.element_type, arrays[0].dims, inst.shape)


# --- contractions ---------------------------------------------------------------------------

def dot(inst: HloInstruction) -> Shape:
    a, b = _array(inst, 0), _array(inst, 1)
    lc, rc = inst.ints_attr("lhs_contracting_dims"), inst.ints_attr("rhs_contracting_dims")
    lb, rb = inst.ints_attr("lhs_batch_dims"), inst.ints_attr("rhs_batch_dims")
    _check_dims_in_range(lc + lb, a.rank, "dot lhs dimension")
    _check_dims_in_range(rc + rb, b.rank, "dot rhs dimension")
    if len(lc) != len(rc) or len(lb) != len(rb):
        fail("dot must contract and batch the same number of dimensions on both sides")
    for x, y in zip(lc, rc):
        if a.dims[x] != b.dims[y]:
            fail(f"dot contracting dimensions differ: lhs dimension {x} has {a.dims[x]}, rhs "
                 f"dimension {y} has {b.dims[y]}", expected=str(a.dims[x]), got=str(b.dims[y]))
    for x, y in zip(lb, rb):
        if a.dims[x] != b.dims[y]:
            fail(f"dot batch dimensions differ: lhs dimension {x} has {a.dims[x]}, rhs "
                 f"dimension {y} has {b.dims[y]}", expected=str(a.dims[x]), got=str(b.dims[y]))
    dims = [a.dims[d] for d in lb]
    dims += [n for i, n in enumerate(a.dims) if i not in lc and i not in lb]
    dims += [n for i, n in enumerate(b.dims) if i not in rc and i not in rb]
    et = _contraction_type(inst, a, b)
    return _shape(et, dims, inst.shape)


def _contraction_type(inst: HloInstruction, a: ArrayShape, b: ArrayShape) -> ElementType:
    """The operands' type, or the declared (preferred) type when the text names one."""
    if inst.shape is not None and not inst.shape.is_tuple:
        et = inst.shape.element_type
        if (et.is_float or et.is_complex) != (a.element_type.is_float or a.element_type.is_complex) \
                and not (a.element_type.is_integer and et.is_float):
            fail(f"{inst.opcode} cannot produce {et} from {a.element_type} operands")
        return et
    if a.element_type is not b.element_type:
        fail(f"{inst.opcode} operands have different element types ({a.element_type}, "
             f"{b.element_type}); write the result type")
    return a.element_type


def convolution(inst: HloInstruction) -> Shape:
    x, k = _array(inst, 0), _array(inst, 1)
    dn = inst.dim_labels
    window = inst.optional_attr("window", Window)
    g = inst.int_attr("feature_group_count", 1)
    bg = inst.int_attr("batch_group_count", 1)
    rank = len(dn.input_spatial) + 2
    if x.rank != rank or k.rank != rank:
        fail(f"convolution dim_labels {dn.text} describe rank {rank}, but the operands have "
             f"ranks {x.rank} and {k.rank}")
    spatial = len(dn.input_spatial)
    if window is None:
        window = Window(tuple(WindowDim(k.dims[d]) for d in dn.kernel_spatial))
    if len(window.dims) != spatial:
        fail(f"convolution window has {len(window.dims)} dimensions, expected {spatial}")
    for i, d in enumerate(dn.kernel_spatial):
        if window.dims[i].size != k.dims[d]:
            fail(f"convolution window size {window.dims[i].size} in spatial dimension {i} differs "
                 f"from the kernel's {k.dims[d]}", expected=str(k.dims[d]), got=str(window.dims[i].size))
    if g < 1 or bg < 1:
        fail("feature_group_count and batch_group_count must be positive")
    in_f = x.dims[dn.input_feature]
    k_in = k.dims[dn.kernel_input_feature]
    k_out = k.dims[dn.kernel_output_feature]
    if in_f % g or in_f // g != k_in:
        fail(f"convolution input features ({in_f}) divided by feature_group_count ({g}) must "
             f"equal the kernel's input features ({k_in})", expected=str(in_f // g if g else 0),
             got=str(k_in))
    if k_out % g:
        fail(f"convolution kernel output features ({k_out}) must be divisible by "
             f"feature_group_count ({g})")
    batch = x.dims[dn.input_batch]
    if batch % bg or (bg > 1 and k_out % bg):
        fail(f"convolution batch ({batch}) and output features ({k_out}) must be divisible by "
             f"batch_group_count ({bg})")
    spatial_out = _window_output([x.dims[d] for d in dn.input_spatial], window, "convolution")
    out = [0] * rank
    out[dn.output_batch] = batch // bg
    out[dn.output_feature] = k_out
    for i, d in enumerate(dn.output_spatial):
        out[d] = spatial_out[i]
    return _shape(_contraction_type(inst, x, k), out, inst.shape)


def sort(inst: HloInstruction) -> Shape:
    arrays = [_array(inst, i) for i in range(len(inst.operands))]
    dims = inst.ints_attr("dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < max(arrays[0].rank, 1):
        fail(f"sort dimension {list(dims)} is out of range for rank {arrays[0].rank}")
    for s in arrays[1:]:
        if s.dims != arrays[0].dims:
            fail("sort operands must all have the same dimensions")
    params = []
    for a in arrays:
        params += [_scalar_of(a), _scalar_of(a)]
    check_computation_signature(inst.to_apply, params, "comparator",
                                ArrayShape(PRED, ()))
    if len(arrays) == 1:
        return _shape(arrays[0].element_type, arrays[0].dims, inst.shape)
    return TupleShape(tuple(arrays))


def topk(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    k = inst.attrs.get("k")
    if x.rank < 1:
        fail("topk needs an operand of rank at least 1")
    if not isinstance(k, int) or not 0 <= k <= x.dims[-1]:
        fail(f"topk k={k} must be between 0 and the last dimension ({x.dims[-1]})")
    dims = x.dims[:-1] + (k,)
    return TupleShape((ArrayShape(x.element_type, dims), ArrayShape(S32, dims)))


def fft(inst: HloInstruction) -> Shape:
    x = _array(inst, 0)
    kind = str(inst.attrs.get("fft_type"))
    length = inst.ints_attr("fft_length")
    if kind in ("FFT", "IFFT"):
        if not x.element_type.is_complex:
            fail(f"{kind} needs a complex operand, got {x}")
        return _shape(x.element_type, x.dims, inst.shape)
    if kind == "RFFT":
        if x.element_type.name not in ("f32", "f64"):
            fail(f"RFFT needs an f32 or f64 operand, got {x}")
        dims = x.dims[:-1] + (length[-1] // 2 + 1,) if length else x.dims
        return _shape(ELEMENT_TYPES["c64" if x.element_type.name == "f32" else "c128"], dims,
                      inst.shape)
    if kind == "IRFFT":
        if not x.element_type.is_complex:
            fail(f"IRFFT needs a complex operand, got {x}")
        dims = x.dims[:-1] + (length[-1],) if length else x.dims
        return _shape(complex_component(x.element_type), dims, inst.shape)
    fail(f"unknown fft_type {kind}; expected FFT, IFFT, RFFT or IRFFT")


def triangular_solve(inst: HloInstruction) -> Shape:
    a, b = _array(inst, 0), _array(inst, 1)
    _same_type(a, b, "triangular-solve")
    if a.rank < 2 or a.dims[-1] != a.dims[-2]:
        fail(f"triangular-solve needs square matrices, got {a}")
    return _shape(b.element_type, b.dims, inst.shape)


def _batch_norm_operands(inst: HloInstruction, per_feature: Sequence[int],
                         like_operand: Sequence[int] = ()) -> tuple[ArrayShape, ArrayShape]:
    """The operand and its per-feature vector shape; checks the operands that must be such
    vectors (scale, offset, mean, variance) and those that must match the operand."""
    x = _array(inst, 0)
    if not x.element_type.is_float:
        fail(f"{inst.opcode} expects a floating-point operand, but got {x}")
    f = inst.attrs.get("feature_index")
    if not isinstance(f, int) or not 0 <= f < x.rank:
        fail(f"feature_index {f} is out of range for rank {x.rank}")
    v = ArrayShape(x.element_type, (x.dims[f],))
    for i in per_feature:
        if not compatible(_array(inst, i), v):
            fail(f"{inst.opcode} operand {i} must be {v.to_text(False)} (one value per feature), "
                 f"but is {inst.operands[i].shape.to_text(False)}",
                 expected=v.to_text(False), got=inst.operands[i].shape.to_text(False))
    for i in like_operand:
        if not compatible(_array(inst, i), x):
            fail(f"{inst.opcode} operand {i} must have the operand's shape {x.to_text(False)}, "
                 f"but is {inst.operands[i].shape.to_text(False)}",
                 expected=x.to_text(False), got=inst.operands[i].shape.to_text(False))
    return x, v


def batch_norm_training(inst: HloInstruction) -> Shape:
    x, v = _batch_norm_operands(inst, per_feature=(1, 2))
    return TupleShape((_shape(x.element_type, x.dims), v, v))


def batch_norm_inference(inst: HloInstruction) -> Shape:
    x, _ = _batch_norm_operands(inst, per_feature=(1, 2, 3, 4))
    return _shape(x.element_type, x.dims, inst.shape)


def batch_norm_grad(inst: HloInstruction) -> Shape:
    x, v = _batch_norm_operands(inst, per_feature=(1, 2, 3), like_operand=(4,))
    return TupleShape((_shape(x.element_type, x.dims), v, v))


# --- control flow ---------------------------------------------------------------------------

def while_(inst: HloInstruction) -> Shape:
    state = inst.operands[0].shape
    cond, body = inst.condition, inst.body
    check_computation_signature(cond, [state], "while condition", ArrayShape(PRED, ()))
    check_computation_signature(body, [state], "while body", state)
    return inst.shape if inst.shape is not None and compatible(inst.shape, state) else state


def conditional(inst: HloInstruction) -> Shape:
    idx = _array(inst, 0, "branch index")
    if "branch_computations" in inst.attrs:
        branches = list(inst.branch_computations)
        if idx.rank != 0 or idx.element_type is not S32:
            fail(f"conditional with branch_computations needs an s32[] index, but got {idx}")
    elif "true_computation" in inst.attrs and "false_computation" in inst.attrs:
        branches = [inst.true_computation, inst.false_computation]
        if idx.rank != 0 or not idx.element_type.is_pred:
            fail(f"conditional with true/false computations needs a pred[] predicate, got {idx}")
    else:
        fail("conditional needs branch_computations, or true_computation and false_computation")
    if len(inst.operands) != len(branches) + 1:
        fail(f"conditional has {len(branches)} branches but {len(inst.operands) - 1} branch "
             f"operands", expected=str(len(branches)), got=str(len(inst.operands) - 1))
    if not branches:
        fail("conditional needs at least one branch")
    result = check_computation_signature(branches[0], [inst.operands[1].shape], "branch 0")
    for k, comp in enumerate(branches[1:], start=1):
        root = check_computation_signature(comp, [inst.operands[k + 1].shape], f"branch {k}")
        if not compatible(result, root):
            fail(f"conditional branches return different shapes: {result.to_text(False)} vs "
                 f"{root.to_text(False)} ({comp.name})", expected=result.to_text(False),
                 got=root.to_text(False))
    return inst.shape if inst.shape is not None and compatible(inst.shape, result) else result


def call(inst: HloInstruction) -> Shape:
    comp = inst.to_apply
    root = check_computation_signature(comp, [o.shape for o in inst.operands], "called computation")
    return inst.shape if inst.shape is not None and compatible(inst.shape, root) else root


def fusion(inst: HloInstruction) -> Shape:
    comp = inst.calls
    root = check_computation_signature(comp, [o.shape for o in inst.operands], "fused computation")
    return inst.shape if inst.shape is not None and compatible(inst.shape, root) else root


def custom_call(inst: HloInstruction) -> Shape:
    """The declared shape; declared aliasing and layout constraints must fit the operands
    (XLA's verifier checks the same, and buffer assignment relies on it)."""
    out = _declared(inst)
    aliasing = inst.attrs.get("output_to_operand_aliasing")
    for entry in getattr(aliasing, "entries", ()):
        if not is_valid_index(out, entry.output_index):
            fail(f"output_to_operand_aliasing names output {index_text(entry.output_index)}, "
                 f"which {out.to_text(False)} does not have")
        if not 0 <= entry.operand_number < len(inst.operands):
            fail(f"output_to_operand_aliasing names operand {entry.operand_number}, but "
                 f"custom-call has {len(inst.operands)} operand(s)")
        operand = inst.operands[entry.operand_number].shape
        if not is_valid_index(operand, entry.operand_index):
            fail(f"output_to_operand_aliasing names operand {entry.operand_number} at "
                 f"{index_text(entry.operand_index)}, which {operand.to_text(False)} does not have")
        a, b = subshape(out, entry.output_index), subshape(operand, entry.operand_index)
        if a.is_tuple or b.is_tuple or not compatible(a, b):
            fail(f"output_to_operand_aliasing pairs output {index_text(entry.output_index)} with "
                 f"operand {entry.operand_number} {index_text(entry.operand_index)}, which must "
                 "be arrays of one shape", expected=b.to_text(False), got=a.to_text(False))
    constraints: tuple[Shape, ...] = inst.optional_attr("operand_layout_constraints", tuple) or ()
    if constraints:
        if len(constraints) != len(inst.operands):
            fail(f"operand_layout_constraints gives {len(constraints)} shape(s) for "
                 f"{len(inst.operands)} operand(s)")
        for k, (wanted, op) in enumerate(zip(constraints, inst.operands)):
            if not compatible(wanted, op.shape):
                fail(f"operand_layout_constraints entry {k} does not match operand {k}",
                     expected=op.shape.to_text(False), got=wanted.to_text(False))
    return out


# --- random ---------------------------------------------------------------------------------

def rng(inst: HloInstruction) -> Shape:
    a, b = _array(inst, 0), _array(inst, 1)
    out = _declared_array(inst)
    _same_type(a, b, "rng")
    if a.rank or b.rank:
        fail("rng parameters must be scalars")
    if out.element_type is not a.element_type:
        fail(f"rng result type {out.element_type} differs from its parameters' {a.element_type}")
    return out


def rng_bit_generator(inst: HloInstruction) -> Shape:
    state = _array(inst, 0)
    out = _declared(inst)
    if not out.is_tuple or len(out.elements) != 2:
        fail(f"rng-bit-generator returns (new_state, bits), but the declared shape is {out}")
    if not compatible(out.elements[0], state):
        fail(f"rng-bit-generator's new state {out.elements[0].to_text(False)} must match the "
             f"state operand {state.to_text(False)}")
    algo = str(inst.attrs.get("algorithm"))
    if algo not in ("rng_default", "rng_three_fry", "rng_philox"):
        fail(f"unknown rng-bit-generator algorithm {algo}")
    bits = out.elements[1]
    if bits.is_tuple:       # XLA's verifier asks no more: the element types are the lowering's
        fail(f"rng-bit-generator bits must be an array, got {bits}")
    return out
