"""sort, topk and XLA's TopK custom call.

sort: the outputs are first filled from the inputs (unless they already share bytes), then
one work-item per row (all indices but the sort dimension) sorts its row in place with a
stable merge sort that needs no scratch memory: insertion sort on blocks of 16, then
bottom-up SymMerge (rotation-based stable merging, as Go's ``sort.Stable``), with an explicit
stack because OpenCL C has no recursion. The comparator computation is inlined at each
comparison; swaps move the elements of every operand together. Equal elements keep their
order, so ``is_stable`` always holds.

top-k: one work-item per row keeps the best k seen so far in the output arrays (values and
int32 indices), inserting each element after the ones it does not beat: ties keep the lower
index first, as XLA's TopK does. Once k are kept, a vector of elements none of which beats
the k-th is passed over whole (f32 and s32 rows, compared by their order keys).
"""

from __future__ import annotations

from ...errors import HloUnsupportedError
from ...hlo.dtypes import S32
from ...hlo.ir import HloComputation, HloInstruction
from ...hlo.shape import ArrayShape, leaf_shape
from ...hlo.opcode_enum import Opcode
from .. import cltypes, templates as E
from ..elemental import ElementalEmitter, Index, SCALAR
from ..kernel import KernelBuilder
from ..context import LoweringContext
from ..registry import register
from .loop import begin_1d, kernel_builder, launch_1d
from ..plan import CopyBytes, Step

_BLOCK = 16
_STACK = 96     # frames of the SymMerge stack: 2 * log2(2^31) is enough


def _row_geometry(shape: ArrayShape, dim: int) -> tuple[int, int, int]:
    """(rows, row length, stride of the sort dimension) in elements of the physical layout."""
    m2m = shape.minor_to_major
    stride = 1
    for d in m2m:
        if d == dim:
            break
        stride *= shape.dims[d]
    n = shape.dims[dim] if shape.rank else 1
    rows = shape.element_count // n if n else 0
    return rows, n, stride


class RowAccess:
    """C expressions addressing element ``i`` of the current row of every operand."""

    def __init__(self, kb: KernelBuilder, ptrs: list[str], shapes: list[ArrayShape], dim: int,
                 row: str, key: object) -> None:
        self.kb = kb
        self.ptrs = ptrs
        self.shapes = shapes
        t = kb.index_type
        rows, n, stride = _row_geometry(shapes[0], dim)
        self.n = kb.param(n, key=(key, "n"))
        self.stride = kb.param(stride, key=(key, "stride"))
        # row r: the element offsets of everything but the sort dimension, from r
        inner = kb.let(t, f"{row} % {self.stride}", "r")
        outer = kb.let(t, f"{row} / {self.stride}", "r")
        self.base = kb.let(t, f"{outer} * {self.n} * {self.stride} + {inner}", "base")

    def at(self, i: str) -> str:
        return f"{self.base} + ({i}) * {self.stride}"

    def load(self, k: int, i: str) -> str:
        return cltypes.load(self.shapes[k].element_type, self.ptrs[k], self.at(i))

    def swap(self, i: str, j: str) -> None:
        kb = self.kb
        for k, s in enumerate(self.shapes):
            st = cltypes.storage_type(s.element_type)
            p = self.ptrs[k]
            a = kb.let(st, f"{p}[{self.at(i)}]", "sw")
            kb.line(f"{p}[{self.at(i)}] = {p}[{self.at(j)}];")
            kb.line(f"{p}[{self.at(j)}] = {a};")


def _less(em: ElementalEmitter, comp: HloComputation, row: RowAccess, i: str, j: str) -> str:
    """``comp(a_i, a_j, b_i, b_j, ...)``: does element i go before element j?"""
    args = []
    for k, s in enumerate(row.shapes):
        ct = cltypes.compute_type(s.element_type)
        args.append(em.kb.let(ct, row.load(k, i), "x"))
        args.append(em.kb.let(ct, row.load(k, j), "y"))
    em.scopes.append({})
    v = em.call(comp, args)
    em.scopes.pop()
    return em.kb.let("int", f"({v}) != 0", "lt")


def emit_stable_sort(em: ElementalEmitter, comp: HloComputation, row: RowAccess) -> None:
    kb = em.kb
    t = kb.index_type
    n = row.n
    blk = kb.param(_BLOCK, key="sort_block")
    # 1. insertion sort on blocks
    with em.block(f"for ({t} z_lo = 0; z_lo < {n}; z_lo += {blk})"):
        hi = kb.let(t, f"min(z_lo + {blk}, {n})", "z_hi")
        with em.block(f"for ({t} z_i = z_lo + 1; z_i < {hi}; ++z_i)"):
            with em.block(f"for ({t} z_j = z_i; z_j > z_lo; --z_j)"):
                lt = _less(em, comp, row, "z_j", "z_j - 1")
                kb.line(f"if (!{lt}) break;")
                row.swap("z_j", "z_j - 1")
    # 2. bottom-up SymMerge of blocks
    kb.line(f"{t} z_sa[{_STACK}], z_sm[{_STACK}], z_sb[{_STACK}];")
    with em.block(f"for ({t} z_width = {blk}; z_width < {n}; z_width *= 2)"):
        with em.block(f"for ({t} z_a0 = 0; z_a0 + z_width < {n}; z_a0 += 2 * z_width)"):
            kb.line("int z_top = 0;")
            kb.line(f"z_sa[0] = z_a0; z_sm[0] = z_a0 + z_width; z_sb[0] = min(z_a0 + 2 * z_width, {n}); z_top = 1;")
            with em.block("while (z_top > 0)"):
                kb.line("--z_top;")
                kb.line(f"{t} z_a = z_sa[z_top], z_m = z_sm[z_top], z_b = z_sb[z_top];")
                kb.line("if (z_a >= z_m || z_m >= z_b) continue;")
                with em.block("if (z_m - z_a == 1)"):
                    # insert element a into [m, b): first position whose element is not less
                    kb.line(f"{t} z_i = z_m, z_j = z_b;")
                    with em.block("while (z_i < z_j)"):
                        kb.line(f"{t} z_h = (z_i + z_j) >> 1;")
                        lt = _less(em, comp, row, "z_h", "z_a")
                        kb.line(f"if ({lt}) z_i = z_h + 1; else z_j = z_h;")
                    with em.block(f"for ({t} z_k = z_a; z_k < z_i - 1; ++z_k)"):
                        row.swap("z_k", "z_k + 1")
                    kb.line("continue;")
                with em.block("if (z_b - z_m == 1)"):
                    kb.line(f"{t} z_i = z_a, z_j = z_m;")
                    with em.block("while (z_i < z_j)"):
                        kb.line(f"{t} z_h = (z_i + z_j) >> 1;")
                        lt = _less(em, comp, row, "z_m", "z_h")
                        kb.line(f"if (!{lt}) z_i = z_h + 1; else z_j = z_h;")
                    with em.block(f"for ({t} z_k = z_m; z_k > z_i; --z_k)"):
                        row.swap("z_k", "z_k - 1")
                    kb.line("continue;")
                kb.line(f"{t} z_mid = (z_a + z_b) >> 1;")
                kb.line(f"{t} z_nn = z_mid + z_m;")
                kb.line(f"{t} z_start, z_r;")
                kb.line("if (z_m > z_mid) { z_start = z_nn - z_b; z_r = z_mid; } else { z_start = z_a; z_r = z_m; }")
                kb.line(f"{t} z_p = z_nn - 1;")
                with em.block("while (z_start < z_r)"):
                    kb.line(f"{t} z_c = (z_start + z_r) >> 1;")
                    lt = _less(em, comp, row, "z_p - z_c", "z_c")
                    kb.line(f"if (!{lt}) z_start = z_c + 1; else z_r = z_c;")
                kb.line(f"{t} z_end = z_nn - z_start;")
                with em.block("if (z_start < z_m && z_m < z_end)"):
                    _rotate(em, row, "z_start", "z_m", "z_end")
                kb.line("if (z_a < z_start && z_start < z_mid) { z_sa[z_top] = z_a; "
                        "z_sm[z_top] = z_start; z_sb[z_top] = z_mid; ++z_top; }")
                kb.line("if (z_mid < z_end && z_end < z_b) { z_sa[z_top] = z_mid; "
                        "z_sm[z_top] = z_end; z_sb[z_top] = z_b; ++z_top; }")


def _rotate(em: ElementalEmitter, row: RowAccess, a: str, m: str, b: str) -> None:
    """Rotate [a, b) so that [m, b) comes first, by block swaps (Go's ``rotate``)."""
    kb = em.kb
    t = kb.index_type
    kb.line(f"{t} z_ri = {m} - {a}, z_rj = {b} - {m};")
    with em.block("while (z_ri != z_rj)"):
        with em.block("if (z_ri > z_rj)"):
            with em.block(f"for ({t} z_q = 0; z_q < z_rj; ++z_q)"):
                row.swap(f"{m} - z_ri + z_q", f"{m} + z_q")
            kb.line("z_ri -= z_rj;")
        with em.block("else"):
            with em.block(f"for ({t} z_q = 0; z_q < z_ri; ++z_q)"):
                row.swap(f"{m} - z_ri + z_q", f"{m} + z_rj - z_ri + z_q")
            kb.line("z_rj -= z_ri;")
    with em.block(f"for ({t} z_q = 0; z_q < z_ri; ++z_q)"):
        row.swap(f"{m} - z_ri + z_q", f"{m} + z_q")


def _fill_outputs(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    """Copy each operand into its output unless they already share bytes."""
    steps: list[Step] = []
    outputs = list(inst.shape.leaves())
    for k, (idx, shape) in enumerate(outputs):
        src = inst.operands[k]
        if ctx.ref(src) == ctx.ref(inst, idx) or not shape.byte_size:
            continue
        if src.array_shape.minor_to_major != shape.minor_to_major and shape.rank > 1:
            raise HloUnsupportedError(f"sort {inst.name}: operand {k} and result have different "
                                      f"layouts", instruction=inst.name)
        steps.append(CopyBytes(ctx.ref(src), ctx.ref(inst, idx), shape.byte_size, inst.name))
    return steps


def lower_sort(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    steps = _fill_outputs(ctx, inst)
    outputs = list(inst.shape.leaves())
    first: ArrayShape = outputs[0][1]
    dim = int(inst.dimensions[0])
    rows, n, _ = _row_geometry(first, dim)
    if rows == 0 or n <= 1:
        return steps
    for _, s in outputs[1:]:
        if s.minor_to_major != first.minor_to_major:
            raise HloUnsupportedError(f"sort {inst.name}: operands with different layouts",
                                      instruction=inst.name)
    kb = kernel_builder(first)
    gid = begin_1d(kb, rows)
    ptrs = [kb.buffer(s.element_type, ctx.ref(inst, idx), writable=True, key=("out", idx))
            for idx, s in outputs]
    em = ElementalEmitter(kb, {}, ctx.program.embed)
    row = RowAccess(kb, ptrs, [s for _, s in outputs], dim, gid, ("sort", id(inst)))
    emit_stable_sort(em, inst.to_apply, row)
    steps.append(launch_1d(ctx, kb, inst, rows, long_items=True))
    return steps


def _topk_launch(ctx: LoweringContext, inst: HloInstruction, better,
                 skip: tuple[str, str] | None = None) -> list[Step]:
    """``better(em, x, y, ix, iy) -> C condition``: value x (at index ix) ranks strictly
    before value y (at index iy). ``skip``: where that order is a comparison of integer keys
    of the values alone, (the key of a vector of them as ``$v``, the comparison ``>`` or
    ``<`` by which a key ranks before another), for skipping whole vectors of elements
    (f32 and s32 values only: their C type is their storage type)."""
    operand = inst.operands[0]
    src: ArrayShape = operand.array_shape
    values = leaf_shape(inst.shape, (0,))
    k = values.dims[-1] if values.rank else 0
    rows, n, _ = _row_geometry(src, src.rank - 1)
    if rows == 0 or k == 0:
        return []
    if src.minor_to_major[0] != src.rank - 1 or values.minor_to_major[0] != values.rank - 1:
        raise HloUnsupportedError(f"top-k {inst.name}: the last dimension must be the minor one",
                                  instruction=inst.name)
    kb = kernel_builder(src, values)
    t = kb.index_type
    gid = begin_1d(kb, rows)
    x = kb.buffer(src.element_type, ctx.ref(operand), key="in")
    vo = kb.buffer(values.element_type, ctx.ref(inst, (0,)), writable=True, key=("out", 0))
    io = kb.buffer(S32, ctx.ref(inst, (1,)), writable=True, key=("out", 1))
    em = ElementalEmitter(kb, {}, ctx.program.embed)
    nn = kb.param(n, key="n")
    kk = kb.param(k, key="k")
    xb = kb.let(t, f"{gid} * {nn}", "xb")
    ob = kb.let(t, f"{gid} * {kk}", "ob")
    ct = cltypes.compute_type(src.element_type)
    kb.line("int count = 0;")
    with em.block(f"for ({t} i = 0; i < {nn}; ++i)"):
        if skip is not None:
            _skip_vectors(ctx, em, skip, ct, x, vo, xb, ob, nn, kk)
        v = kb.let(ct, cltypes.load(src.element_type, x, f"{xb} + i"), "v")
        # position: after every kept element that v does not beat
        kb.line("int pos = count;")
        with em.block("while (pos > 0)"):
            prev = kb.let(ct, cltypes.load(values.element_type, vo, f"{ob} + pos - 1"), "p")
            prev_i = kb.let("int", f"{io}[{ob} + pos - 1]", "pi")
            em.scopes.append({})
            cond = better(em, v, prev, "(int)i", prev_i)
            em.scopes.pop()
            kb.line(f"if (!({cond})) break;")
            kb.line("--pos;")
        with em.block(f"if (pos < {kk})"):
            last = kb.let("int", f"min(count, (int){kk} - 1)", "last")
            with em.block(f"for (int q = {last}; q > pos; --q)"):
                kb.line(cltypes.store(values.element_type, vo, f"{ob} + q",
                                      cltypes.load(values.element_type, vo, f"{ob} + q - 1")) + ";")
                kb.line(f"{io}[{ob} + q] = {io}[{ob} + q - 1];")
            kb.line(cltypes.store(values.element_type, vo, f"{ob} + pos", v) + ";")
            kb.line(f"{io}[{ob} + pos] = (int)i;")
            kb.line(f"if (count < {kk}) ++count;")
    return [launch_1d(ctx, kb, inst, rows, long_items=True)]


def _skip_vectors(ctx: LoweringContext, em: ElementalEmitter, skip: tuple[str, str], ct: str,
                  x: str, vo: str, xb: str, ob: str, n: str, k: str) -> None:
    """Once the k best are found, a vector of elements none of which ranks before the k-th
    is passed over whole: an element that does not beat the k-th is not kept, so this
    changes nothing but the time. Nearly every element of a long row is such an element: the
    top 8 of 64 rows of 2,048 normal values (a beam search's chunks) 117 -> 62 us of kernel
    time (AMD EPYC, Zen 5, AVX-512; 70 us with ``any`` for the lanes' OR). ``ct``: the
    values' C type (kept values share it); ``xb``/``ob``: the row's first input and output
    element; ``n``/``k``: the row's length and k."""
    key, beats = skip
    kb = em.kb
    lanes = ctx.target.lanes(32)
    if lanes == 1:
        return
    with em.block(f"if (count == {k} && i + {lanes} <= {n})"):
        xs = kb.let(f"{ct}{lanes}", f"vload{lanes}(0, {x} + {xb} + i)", "xs")
        kth = kb.let(ct, f"{vo}[{ob} + {k} - 1]", "kth")
        hit = kb.let(f"int{lanes}", f"{key.replace('$N', str(lanes)).replace('$v', xs)} "
                     f"{beats} (int{lanes})({key.replace('$N', '').replace('$v', kth)})", "hit")
        width = lanes
        while width > 1:
            width //= 2
            hit = kb.let(f"int{width}" if width > 1 else "int", f"{hit}.lo | {hit}.hi", "hit")
        with em.block(f"if (!{hit})"):
            kb.line(f"i += {lanes} - 1;")
            kb.line("continue;")


# keys whose signed order is the values' order (``$N``: the vector width, 1 for a scalar):
# XLA's total order of f32 flips every bit but the sign of a negative float
_ORDER_KEYS = {
    "f32": "(as_int$N($v) ^ as_int$N(as_uint$N(as_int$N($v) >> 31) >> 1))",
    "s32": "($v)",
}


@register(Opcode.TOPK)
def lower_topk(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    et = inst.operands[0].array_shape.element_type
    largest = bool(inst.attrs.get("largest", True))
    direction = "GT" if largest else "LT"
    ctype = "TOTALORDER" if et.is_float else None

    def better(em: ElementalEmitter, a: str, b: str, ia: str, ib: str) -> str:
        return E.compare(direction, ctype, et, a, b)
    key = _ORDER_KEYS.get(et.name)
    skip = None if key is None else (key, ">" if largest else "<")
    return _topk_launch(ctx, inst, better, skip)


def lower_topk_custom_call(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    """XLA's ``TopK`` custom call: the called computation is the "goes before" comparator."""
    comps = inst.optional_attr("called_computations", tuple) or ()
    if len(comps) != 1:
        raise HloUnsupportedError(f"TopK custom call {inst.name} needs exactly one comparator "
                                  f"in called_computations", instruction=inst.name)
    comp = comps[0]

    def better(em: ElementalEmitter, a: str, b: str, ia: str, ib: str) -> str:
        args = [a, b, ia, ib][:len(comp.parameters)]
        return str(em.call(comp, args))
    return _topk_launch(ctx, inst, better)


register(Opcode.SORT)(lower_sort)

__all__ = ["lower_sort", "lower_topk", "lower_topk_custom_call", "emit_stable_sort",
           "Index", "SCALAR"]
