"""Random HLO modules with random layouts, for differential testing against XLA's CPU backend.

A layout changes where an element lives, never its value, so a module whose parameters,
intermediates and root carry random non-default layouts must compute exactly what XLA
computes. Each module holds several independent *cases* (a few random steps from fresh
parameters), so one OpenCL build checks many of them; a failing case is re-emitted alone
(``Case.module_text``) to shrink it.

The steps cover what the passes rewrite around layouts: elementwise chains (fused), dots
with random dimension numbers, dense layers as JAX prints them (a tile-sized product, a free
``{0,1}`` transpose, an epilogue), convolutions with random dimension labels, reductions,
transposes, reshapes, broadcasts, slices, pads, reverses, concatenates, iotas,
dynamic-(update-)slices, gathers and scatters with out-of-range indices, sorts,
reduce-windows, converts and copies. Shapes include size-1 and odd dimensions. The steps that
compute values (every element type, constants, special inputs, every elementwise opcode,
reductions from any initial value) are ``value_steps``'s. Kept free of pytest so
``benchmarks/fuzz_layouts.py`` imports it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from . import value_steps as vs

_DIMS = (1, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17)
_MAX_ELEMENTS = 2048


@dataclass
class Value:
    name: str
    dims: tuple[int, ...]
    etype: str = "f32"
    # how the result is compared (``value_steps``): 0 bit for bit, a number of ulps of its
    # type elementwise, infinity as an order-dependent sum; ``mostly``: and most elements
    # bit for bit (a narrow contraction rounded once)
    ulps: float = math.inf
    mostly: bool = False
    product: bool = False    # a float product (XLA fuses a sum of it into a multiply-add)
    constant: bool = False   # a constant or a broadcast of one


@dataclass
class Param:
    value: Value
    layout: tuple[int, ...]
    data: np.ndarray


@dataclass
class Case:
    """One independent random computation: its parameters, instructions and outputs."""
    params: list[Param] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    outputs: list[tuple[Value, tuple[int, ...]]] = field(default_factory=list)
    # the reducer and comparator computations it calls: (kind, element type)
    reducers: set[tuple[str, str]] = field(default_factory=set)

    def module_text(self) -> str:
        return module_text([self])


def shape_text(v: Value, layout: tuple[int, ...]) -> str:
    dims = f"{v.etype}[{','.join(map(str, v.dims))}]"
    return dims + f"{{{','.join(map(str, layout))}}}" if v.dims else dims


class _Builder:
    def __init__(self, rng: np.random.Generator, prefix: str):
        self.rng = rng
        self.prefix = prefix
        self.count = itertools.count()
        self.case = Case()
        # the fraction of special values (NaN, infinities, zeros, denormals, huge) in inputs
        self.special = float(rng.choice((0.0, 0.0, 0.03, 0.1)))

    def name(self, what: str) -> str:
        return f"{self.prefix}{what}.{next(self.count)}"

    def layout(self, rank: int) -> tuple[int, ...]:
        """Row-major half the time, otherwise a random minor-to-major order."""
        if self.rng.random() < 0.5:
            return tuple(range(rank - 1, -1, -1))
        return tuple(int(d) for d in self.rng.permutation(rank))

    def dims(self, rank: int) -> tuple[int, ...]:
        while True:
            dims = tuple(int(self.rng.choice(_DIMS)) for _ in range(rank))
            if int(np.prod(dims, dtype=np.int64)) <= _MAX_ELEMENTS:
                return dims

    def param(self, dims: tuple[int, ...], etype: str = "f32", huge: bool = True) -> Value:
        v = Value(self.name("p"), dims, etype, ulps=0)
        data = vs.data(self.rng, etype, dims, self.special, huge)
        self.case.params.append(Param(v, self.layout(len(dims)), data))
        return v

    def emit(self, dims: tuple[int, ...], expr: str, etype: str = "f32", *,
             ulps: float = math.inf, mostly: bool = False, product: bool = False) -> Value:
        v = Value(self.name("v"), dims, etype, ulps, mostly, product,
                  expr.startswith("constant("))
        self.case.lines.append(f"  {v.name} = {shape_text(v, self.layout(len(dims)))} {expr}")
        return v

    def move(self, x: Value, dims: tuple[int, ...], expr: str) -> Value:
        """A data-movement step of ``x``: the same type, compared as ``x`` is."""
        return self.emit(dims, expr, x.etype, ulps=x.ulps, mostly=x.mostly, product=x.product)

    def same_shape(self, x: Value) -> Value:
        """Another value of ``x``'s shape: a fresh parameter or a broadcast of one."""
        if self.rng.random() < 0.5 or not x.dims:
            return self.param(x.dims, x.etype)
        kept = sorted(int(d) for d in self.rng.choice(len(x.dims), size=int(
            self.rng.integers(0, len(x.dims) + 1)), replace=False))
        small = self.param(tuple(x.dims[d] for d in kept), x.etype)
        return self.emit(x.dims, f"broadcast({small.name}), dimensions={{{_csv(kept)}}}",
                         x.etype, ulps=0)


def _csv(xs) -> str:
    return ",".join(str(int(x)) for x in xs)


def _transpose(b: _Builder, x: Value) -> Value:
    perm = [int(d) for d in b.rng.permutation(len(x.dims))]
    return b.move(x, tuple(x.dims[d] for d in perm),
                  f"transpose({x.name}), dimensions={{{_csv(perm)}}}")


def _reshape(b: _Builder, x: Value) -> Value:
    dims = list(x.dims)
    choice = b.rng.integers(0, 4)
    if choice == 0 and len(dims) >= 2:
        i = int(b.rng.integers(0, len(dims) - 1))
        dims[i:i + 2] = [dims[i] * dims[i + 1]]
    elif choice == 1 and any(d > 1 and d % 2 == 0 for d in dims):
        i = next(i for i, d in enumerate(dims) if d > 1 and d % 2 == 0)
        dims[i:i + 1] = [2, dims[i] // 2]
    elif choice == 2 and 1 in dims:
        dims.remove(1)
    elif len(dims) < 5:
        dims.insert(int(b.rng.integers(0, len(dims) + 1)), 1)
    return b.move(x, tuple(dims), f"reshape({x.name})")


def _broadcast(b: _Builder, x: Value) -> Value:
    if len(x.dims) >= 4:
        return vs.reduce_any(b, x)
    size = int(b.rng.choice((1, 2, 3, 4)))
    at = int(b.rng.integers(0, len(x.dims) + 1))
    dims = x.dims[:at] + (size,) + x.dims[at:]
    if np.prod(dims) > _MAX_ELEMENTS:
        return vs.reduce_any(b, x)
    mapping = [d if d < at else d + 1 for d in range(len(x.dims))]
    return b.move(x, dims, f"broadcast({x.name}), dimensions={{{_csv(mapping)}}}")


def _dot(b: _Builder, x: Value) -> Value:
    """A dot of ``x`` with a fresh operand under random dimension numbers: ``x``'s
    batch and contracting dimensions drawn at random, the other operand's order shuffled."""
    if x.etype != "f32" or not x.dims:
        return vs.typed_binary(b, x)
    rank = len(x.dims)
    order = [int(d) for d in b.rng.permutation(rank)]
    n_contract = int(b.rng.integers(0 if rank > 1 else 1, min(rank, 2) + 1))
    n_batch = int(b.rng.integers(0, min(rank - n_contract, 1) + 1)) if rank > n_contract else 0
    contract = order[:n_contract]
    batch = order[n_contract:n_contract + n_batch]
    lhs_free = [d for d in range(rank) if d not in contract and d not in batch]
    free_sizes = b.dims(int(b.rng.integers(0, 3)))
    if free_sizes and b.rng.random() < 0.5:
        free_sizes = free_sizes[:-1] + (int(b.rng.choice((8, 16, 24, 33))),)
    out_dims = (tuple(x.dims[d] for d in batch) + tuple(x.dims[d] for d in lhs_free)
                + free_sizes)
    if np.prod(out_dims, dtype=np.int64) > _MAX_ELEMENTS:
        free_sizes = ()
        out_dims = tuple(x.dims[d] for d in batch) + tuple(x.dims[d] for d in lhs_free)
    rhs_logical = ([("b", i) for i in range(len(batch))] + [("c", i) for i in range(len(contract))]
                   + [("f", i) for i in range(len(free_sizes))])
    perm = [int(p) for p in b.rng.permutation(len(rhs_logical))]
    rhs_axes = [rhs_logical[p] for p in perm]
    size_of = {"b": [x.dims[d] for d in batch], "c": [x.dims[d] for d in contract],
               "f": list(free_sizes)}
    y = b.param(tuple(size_of[k][i] for k, i in rhs_axes))
    # the rhs free dimensions appear in the output in the rhs operand's order
    rhs_free_order = [i for k, i in rhs_axes if k == "f"]
    out_dims = out_dims[:len(out_dims) - len(free_sizes)] + tuple(free_sizes[i] for i in rhs_free_order)
    rhs_batch = [rhs_axes.index(("b", i)) for i in range(len(batch))]
    rhs_contract = [rhs_axes.index(("c", i)) for i in range(len(contract))]
    swap = b.rng.random() < 0.3 and not batch
    attrs = []
    if batch:
        attrs.append(f"lhs_batch_dims={{{_csv(batch)}}}, rhs_batch_dims={{{_csv(rhs_batch)}}}")
    if swap:
        attrs.append(f"lhs_contracting_dims={{{_csv(rhs_contract)}}}, "
                     f"rhs_contracting_dims={{{_csv(contract)}}}")
        rhs_free = [i for i in range(len(rhs_axes)) if rhs_axes[i][0] == "f"]
        dims = tuple(y.dims[d] for d in rhs_free) + tuple(x.dims[d] for d in lhs_free)
        return b.emit(dims, f"dot({y.name}, {x.name}), {', '.join(attrs)}")
    attrs.append(f"lhs_contracting_dims={{{_csv(contract)}}}, "
                 f"rhs_contracting_dims={{{_csv(rhs_contract)}}}")
    return b.emit(out_dims, f"dot({x.name}, {y.name}), {', '.join(attrs)}")


def _convolution(b: _Builder, x: Value) -> Value:
    """A 1-D or 2-D convolution of a fresh input and kernel under random dimension labels,
    then added to ``x`` where the shapes allow (else a new chain starts from it)."""
    spatial = int(b.rng.integers(1, 3))
    rank = spatial + 2
    batch, fin, fout = int(b.rng.choice((1, 2, 3))), int(b.rng.choice((1, 2, 4))), \
        int(b.rng.choice((1, 3, 4)))
    sizes = [int(b.rng.choice((3, 4, 5, 8))) for _ in range(spatial)]
    window = [int(b.rng.choice((1, 2, 3))) for _ in range(spatial)]
    letters = [str(i) for i in range(spatial)]

    def labels(first: str, second: str) -> list[str]:
        order = [first, second] + letters
        return [order[int(p)] for p in b.rng.permutation(rank)]

    lhs_l, rhs_l, out_l = labels("b", "f"), labels("i", "o"), labels("b", "f")
    lhs_size = {"b": batch, "f": fin, **dict(zip(letters, sizes))}
    rhs_size = {"i": fin, "o": fout, **dict(zip(letters, window))}
    out_size = {"b": batch, "f": fout,
                **{c: s - w + 1 for c, s, w in zip(letters, sizes, window)}}
    lhs = b.param(tuple(lhs_size[c] for c in lhs_l))
    rhs = b.param(tuple(rhs_size[c] for c in rhs_l))
    dims = tuple(out_size[c] for c in out_l)
    win = " ".join([f"size={'x'.join(map(str, window))}"])
    conv = b.emit(dims, f"convolution({lhs.name}, {rhs.name}), window={{{win}}}, "
                  f"dim_labels={''.join(lhs_l)}_{''.join(rhs_l)}->{''.join(out_l)}")
    return conv


def _dense(b: _Builder, x: Value) -> Value:
    """A dense layer as JAX prints it: a matrix product of tile-sized rows and columns,
    often transposed in the layout that makes the transpose free (``{0,1}``), then an
    epilogue of elementwise ops over operands and broadcasts in random layouts, which an
    output fusion computes on the product's register tile."""
    rows = int(b.rng.choice((4, 5, 8, 13, 16)))
    cols = int(b.rng.choice((8, 16, 24, 40)))
    inner = int(b.rng.choice((2, 3, 8)))
    lhs = b.param((rows, inner))
    k = int(b.rng.integers(0, 2))     # the weight as [inner, cols] or [cols, inner]
    rhs = b.param((inner, cols) if k == 0 else (cols, inner))
    if b.rng.random() < 0.5:
        y = b.emit((cols, rows), f"dot({rhs.name}, {lhs.name}), lhs_contracting_dims={{{k}}}, "
                   "rhs_contracting_dims={1}")
        v = Value(b.name("t"), (rows, cols))
        b.case.lines.append(f"  {v.name} = {shape_text(v, (0, 1))} transpose({y.name}), "
                            "dimensions={1,0}")
    else:
        v = b.emit((rows, cols), f"dot({lhs.name}, {rhs.name}), lhs_contracting_dims={{1}}, "
                   f"rhs_contracting_dims={{{k}}}")
    for _ in range(int(b.rng.integers(1, 4))):
        v = (vs.typed_binary if b.rng.random() < 0.7 else vs.typed_unary)(b, v)
    if x.dims == v.dims and x.etype == "f32":
        v = b.emit(v.dims, f"add({v.name}, {x.name})")
    return v


def _slice(b: _Builder, x: Value) -> Value:
    if not x.dims:
        return vs.typed_unary(b, x)
    parts, dims = [], []
    for d in x.dims:
        start = int(b.rng.integers(0, d))
        limit = int(b.rng.integers(start + 1, d + 1))
        stride = int(b.rng.choice((1, 1, 2)))
        parts.append(f"[{start}:{limit}:{stride}]")
        dims.append((limit - start + stride - 1) // stride)
    return b.move(x, tuple(dims), f"slice({x.name}), slice={{{','.join(parts)}}}")


def _pad(b: _Builder, x: Value) -> Value:
    if not x.dims:
        return vs.typed_unary(b, x)
    value = b.emit((), vs.constant_text(b.rng, x.etype, ()), x.etype, ulps=0)
    parts, dims = [], []
    for d in x.dims:
        lo, hi = int(b.rng.integers(-1 if d > 2 else 0, 3)), int(b.rng.integers(0, 3))
        interior = int(b.rng.choice((0, 0, 1)))
        parts.append(f"{lo}_{hi}" + (f"_{interior}" if interior else ""))
        dims.append(lo + hi + d + max(d - 1, 0) * interior)
    if np.prod(dims) > _MAX_ELEMENTS or min(dims) < 1:
        return vs.typed_unary(b, x)
    return b.emit(tuple(dims), f"pad({x.name}, {value.name}), padding={'x'.join(parts)}",
                  x.etype, ulps=x.ulps)


def _reverse(b: _Builder, x: Value) -> Value:
    if not x.dims:
        return vs.typed_unary(b, x)
    dims = sorted(int(d) for d in b.rng.choice(len(x.dims), size=int(
        b.rng.integers(1, len(x.dims) + 1)), replace=False))
    return b.move(x, x.dims, f"reverse({x.name}), dimensions={{{_csv(dims)}}}")


def _concatenate(b: _Builder, x: Value) -> Value:
    if not x.dims or 2 * np.prod(x.dims) > _MAX_ELEMENTS:
        return vs.typed_unary(b, x)
    axis = int(b.rng.integers(0, len(x.dims)))
    other = b.param(x.dims[:axis] + (int(b.rng.choice((1, 2, 3))),) + x.dims[axis + 1:], x.etype)
    dims = x.dims[:axis] + (x.dims[axis] + other.dims[axis],) + x.dims[axis + 1:]
    operands = (x, other) if b.rng.random() < 0.5 else (other, x)
    return b.emit(dims, f"concatenate({operands[0].name}, {operands[1].name}), "
                  f"dimensions={{{axis}}}", x.etype, ulps=x.ulps)


def _iota(b: _Builder, x: Value) -> Value:
    if not x.dims or x.etype == "pred":
        return vs.typed_unary(b, x)
    axis = int(b.rng.integers(0, len(x.dims)))
    iota = b.emit(x.dims, f"iota(), iota_dimension={axis}", x.etype, ulps=0)
    return b.emit(x.dims, f"add({x.name}, {iota.name})", x.etype,
                  ulps=math.inf if x.product else x.ulps)


def _index(b: _Builder) -> Value:
    """An s32 scalar index, often out of range (XLA clamps the window into the operand)."""
    v = Value(b.name("i"), (), "s32")
    value = int(b.rng.choice((-3, -1, 0, 1, 2, 5, 100)))
    b.case.params.append(Param(v, (), np.array(value, np.int32)))
    return v


def _dynamic_slice(b: _Builder, x: Value) -> Value:
    if not x.dims:
        return vs.typed_unary(b, x)
    sizes = [int(b.rng.integers(1, d + 1)) for d in x.dims]
    starts = [_index(b).name for _ in x.dims]
    return b.move(x, tuple(sizes), f"dynamic-slice({x.name}, {', '.join(starts)}), "
                  f"dynamic_slice_sizes={{{_csv(sizes)}}}")


def _dynamic_update_slice(b: _Builder, x: Value) -> Value:
    if not x.dims:
        return vs.typed_unary(b, x)
    update = b.param(tuple(int(b.rng.integers(1, d + 1)) for d in x.dims), x.etype)
    starts = [_index(b).name for _ in x.dims]
    return b.emit(x.dims, f"dynamic-update-slice({x.name}, {update.name}, "
                  f"{', '.join(starts)})", x.etype, ulps=x.ulps)


def _indices(b: _Builder, count: int, limit: int, shape: tuple[int, ...]) -> Value:
    """s32 indices into a dimension of ``limit``, some out of range (gathers clamp them,
    scatters skip them)."""
    v = Value(b.name("ix"), shape, "s32")
    data = b.rng.integers(-1, limit + 2, size=shape).astype(np.int32)
    b.case.params.append(Param(v, b.layout(len(shape)), data))
    return v


def _gather(b: _Builder, x: Value) -> Value:
    """``jnp.take`` along a random axis: the taken rows first, the rest in order."""
    if not x.dims:
        return vs.typed_unary(b, x)
    axis = int(b.rng.integers(0, len(x.dims)))
    count = int(b.rng.choice((1, 3, 5)))
    index = _indices(b, count, x.dims[axis], (count,))
    rest = tuple(d for i, d in enumerate(x.dims) if i != axis)
    sizes = tuple(1 if i == axis else d for i, d in enumerate(x.dims))
    return b.emit((count,) + rest, f"gather({x.name}, {index.name}), "
                  f"offset_dims={{{_csv(range(1, len(x.dims)))}}}, collapsed_slice_dims={{{axis}}}, "
                  f"start_index_map={{{axis}}}, index_vector_dim=1, slice_sizes={{{_csv(sizes)}}}",
                  x.etype, ulps=x.ulps)


def _scatter(b: _Builder, x: Value) -> Value:
    """Rows added into ``x`` along a random axis at random (and out-of-range) indices."""
    if not x.dims or x.etype == "pred":
        return vs.typed_unary(b, x)
    axis = int(b.rng.integers(0, len(x.dims)))
    count = int(b.rng.choice((1, 2, 4)))
    index = _indices(b, count, x.dims[axis], (count, 1))
    rest = tuple(d for i, d in enumerate(x.dims) if i != axis)
    updates = b.param((count,) + rest, x.etype)
    b.case.reducers.add(("add", x.etype))
    return b.emit(x.dims, f"scatter({x.name}, {index.name}, {updates.name}), "
                  f"update_window_dims={{{_csv(range(1, len(x.dims)))}}}, "
                  f"inserted_window_dims={{{axis}}}, scatter_dims_to_operand_dims={{{axis}}}, "
                  f"index_vector_dim=1, to_apply=add_{x.etype}", x.etype,
                  ulps=x.ulps if x.etype in vs.INTEGERS else math.inf)


def _sort(b: _Builder, x: Value) -> Value:
    if not x.dims or x.etype == "pred":
        return vs.typed_unary(b, x)
    axis = int(b.rng.integers(0, len(x.dims)))
    b.case.reducers.add(("less", x.etype))
    return b.move(x, x.dims, f"sort({x.name}), dimensions={{{axis}}}, to_apply=less_{x.etype}")


def _copy(b: _Builder, x: Value) -> Value:
    return b.move(x, x.dims, f"copy({x.name})")


_STEPS = ((vs.typed_unary, 4), (vs.typed_binary, 6), (vs.compare_select, 2), (vs.clamp, 1),
          (_transpose, 4), (_reshape, 2), (_broadcast, 2), (vs.reduce_any, 3), (_dot, 3),
          (_slice, 1), (_pad, 1), (_reverse, 1), (_concatenate, 1), (_iota, 1),
          (_dynamic_slice, 1), (_dynamic_update_slice, 1), (vs.convert, 3), (_copy, 1),
          (_convolution, 1), (_dense, 2), (_gather, 1), (_scatter, 1), (_sort, 1),
          (vs.reduce_window_any, 2), (vs.narrow_contraction, 1))
_WEIGHTS = np.array([w for _, w in _STEPS], float) / sum(w for _, w in _STEPS)


def random_case(rng: np.random.Generator, prefix: str) -> Case:
    b = _Builder(rng, prefix)
    x = b.param(b.dims(int(rng.integers(1, 4))), str(rng.choice(vs.START_TYPES)))
    values = [x]
    for _ in range(int(rng.integers(2, 9))):
        step = _STEPS[int(rng.choice(len(_STEPS), p=_WEIGHTS))][0]
        x = step(b, x)
        values.append(x)
    # and up to two intermediates, those compared bit for bit first (a later sum would hide
    # a last-place difference in them)
    inner = sorted(values[1:-1], key=lambda v: (v.ulps, rng.random()))
    outs = [x] + inner[:int(rng.integers(0, 3))]
    b.case.outputs = [(v, b.layout(len(v.dims))) for v in outs]
    return b.case


def random_cases(seed: int, count: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    return [random_case(rng, f"k{seed}_{i}_") for i in range(count)]


def module_text(cases: list[Case]) -> str:
    """One module computing every case; its root is the tuple of all cases' outputs."""
    params = [p for c in cases for p in c.params]
    outs = [o for c in cases for o in c.outputs]
    lines = ["HloModule fuzz", ""]
    for kind, etype in sorted(set().union(*(c.reducers for c in cases))):
        if kind != "less":
            lines += vs.reducer_text(kind, etype)
            continue
        # a total order, so that NaNs sort where XLA's sort puts them
        order = ", type=TOTALORDER" if vs.is_float(etype) else ""
        lines += [f"less_{etype} {{", f"  a = {etype}[] parameter(0)",
                  f"  b = {etype}[] parameter(1)",
                  f"  ROOT r = pred[] compare(a, b), direction=LT{order}", "}", ""]
    lines.append("ENTRY main {")
    for i, p in enumerate(params):
        lines.append(f"  {p.value.name} = {shape_text(p.value, p.layout)} parameter({i})")
    for c in cases:
        lines.extend(c.lines)
    root_shape = ", ".join(shape_text(v, layout) for v, layout in outs)
    lines.append(f"  ROOT out = ({root_shape}) tuple({', '.join(v.name for v, _ in outs)})")
    lines.append("}")
    return "\n".join(lines) + "\n"


def arguments(cases: list[Case]) -> list[np.ndarray]:
    return [p.data for c in cases for p in c.params]


def output_counts(cases: list[Case]) -> list[int]:
    return [len(c.outputs) for c in cases]
