"""Register tiles for contractions (dot and convolution) on the CPU target.

PoCL runs a work-group as a loop over its work-items and vectorises *across* them, which
cannot help a work-item that loops over a contraction. What is fast instead (opencl-notes §5,
and re-measured here: a 512^3 f32 matmul at 150-240 GFLOP/s against 3 for local-memory tiles)
is a register tile per work-item: ``R`` rows of the output times ``V`` vectors of ``L``
lanes, accumulated with ``fma`` from one vector load of the *vector operand* (contiguous
along the output's columns) and one scalar broadcast of the *row operand* per row and
contraction step. This module holds what the dot and convolution families share: how each
element type accumulates, vector loads that widen narrow types exactly, the tile's
declaration and update, and the store phase that evaluates a fused elementwise epilogue per
element and writes it through the output's layout.

Rows beyond the last are clamped (computed again, never stored); the last column block is
shifted back so that it ends at the last column and stores only the lanes no other block
stores, so every output element is written once, by one work-item, after that work-item
read whatever the epilogue reads at that position (which may be the same bytes: an output
fusion may write over an operand it reads elementwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, TypeVar

from ...hlo.dtypes import ElementType
from ...hlo.ir import HloComputation, HloInstruction
from ...hlo.opcode_enum import Opcode
from ...hlo.opcodes import OPCODES
from ...hlo.shape import ArrayShape
from .. import cltypes, templates as E
from . import epilogue
from ..elemental import ElementalEmitter, Index, ValueLeaf, element_strides, is_elemental
from ..kernel import KernelBuilder
from ..context import LoweringContext
from ..plan import Launch, Step
from ..registry import FUSION, register
from ...analysis.fusion_rules import in_epilogue
from ...target import Target, TargetKind, TileShape

_Row = TypeVar("_Row")   # how a tile store names a row (a family's own index form)

# (element types that accumulate this way, C scalar type); vectors have the target's lanes
_ACCUMULATORS = (
    (("f16", "bf16", "f32"), "float"),
    (("f64",), "double"),
    (("s8", "s16", "s32", "u8", "u16", "u32"), "uint"),
    (("s64", "u64"), "ulong"),
)
_INTEGERS = frozenset(n for names, scalar in _ACCUMULATORS if scalar in ("uint", "ulong")
                      for n in names)
# float types ordered so that each holds every value of the types below it
_FLOAT_WIDTH = {"f16": 1, "bf16": 1, "f32": 2, "f64": 3}
# integer operands a float output holds every value of, so its accumulation widens them
# exactly at the load (an int8 weight read by a dot of f32 activations)
_EXACT_INTEGERS = {"f32": frozenset({"s8", "u8", "s16", "u16"}),
                   "f64": frozenset({"s8", "u8", "s16", "u16", "s32", "u32"})}


@dataclass(frozen=True)
class Accumulation:
    """How a contraction producing ``element_type`` accumulates: in ``scalar`` (f16 and bf16
    in float, rounded once at the end, as XLA's CPU backend upcasts them; integers in the
    unsigned type of their width, which wraps like XLA's two's-complement arithmetic), with
    vectors of up to ``lanes`` lanes."""

    element_type: ElementType
    scalar: str
    lanes: int

    @property
    def is_float(self) -> bool:
        return self.scalar in ("float", "double")

    def vector(self, lanes: int) -> str:
        return f"{self.scalar}{lanes}"

    def zero(self, lanes: int) -> str:
        return f"({self.vector(lanes)})(0)"

    def madd(self, x: str, y: str, acc: str) -> str:
        return f"fma({x}, {y}, {acc})" if self.is_float else f"{acc} + {x} * {y}"

    def finish(self, value: str) -> str:
        """The accumulated ``value`` as the element type's compute-type value."""
        et = self.element_type
        if self.is_float:
            return cltypes.round_to_storage(et, value)
        return f"(({cltypes.compute_type(et)})({value}))"

    def load_scalar(self, et: ElementType, ptr: str, offset: str) -> str:
        return f"(({self.scalar})({cltypes.load(et, ptr, offset)}))"

    def load_vector(self, et: ElementType, ptr: str, offset: str, lanes: int,
                    stride: str | None) -> str:
        """``lanes`` consecutive elements (``stride`` apart when given) widened exactly."""
        vec = self.vector(lanes)
        if stride is not None:
            parts = [self.load_scalar(et, ptr, f"{offset} + {i} * {stride}") for i in range(lanes)]
            return f"(({vec})({', '.join(parts)}))"
        name = et.name
        if name == "f16":
            loaded = f"vload_half{lanes}(0, (__global const half*)({ptr} + {offset}))"
            source = "float"
        elif name == "bf16":
            loaded = f"as_float{lanes}(convert_uint{lanes}(vload{lanes}(0, {ptr} + {offset})) << 16)"
            source = "float"
        else:
            loaded = f"vload{lanes}(0, {ptr} + {offset})"
            source = cltypes.storage_type(et)
        return loaded if source == self.scalar else f"convert_{vec}({loaded})"

    def stores_vectors(self, et: ElementType) -> bool:
        """Whether whole vectors of accumulators can be stored as ``et``: they are its stored
        bits as they are (no rounding, no narrowing), or f32 values stored as bf16 or f16
        (rounded and narrowed lane by lane as the scalar path does)."""
        storage = cltypes.storage_type(et)
        if self.is_float:
            return storage == self.scalar or (et.name in E.NARROW_FLOAT_VECTORS
                                              and self.scalar == "float")
        return cltypes.C_BITS[storage] == cltypes.C_BITS[self.scalar]

    def store_vector(self, et: ElementType, value: str, ptr: str, offset: str,
                     lanes: int) -> str:
        storage = cltypes.storage_type(et)
        if et.name in E.NARROW_FLOAT_VECTORS:
            bits = E.narrow_vector(et, lanes, E.round_vector(et, lanes, value))
        else:
            bits = value if storage == self.scalar else f"as_{storage}{lanes}({value})"
        return f"vstore{lanes}({bits}, 0, {ptr} + {offset});"


def accumulation(out: ElementType, operands: tuple[ElementType, ...],
                 target: Target) -> Accumulation | None:
    """The accumulation for ``out`` when every operand type converts into it exactly (so
    widening at the load is XLA's convert-then-multiply), else None."""
    for names, scalar in _ACCUMULATORS:
        if out.name in names:
            acc = Accumulation(out, scalar, target.tile_lanes(cltypes.C_BITS[scalar]))
            break
    else:
        return None
    for et in operands:
        if acc.is_float and et.name in _EXACT_INTEGERS.get(out.name, ()):
            continue
        if acc.is_float:
            if et.name not in _FLOAT_WIDTH or not (
                    et is out or _FLOAT_WIDTH[et.name] < _FLOAT_WIDTH[out.name]):
                return None
        elif et.name not in _INTEGERS:
            return None
    return acc


def tiled_accumulation(c: Contraction, target: Target) -> Accumulation | None:
    """The accumulation of a contraction that gets tiles: only for operand types
    ``accumulation`` accepts (the register-tiled families are registered for the CPU target;
    the GPU's work-group dot, ``workgroup_dot``, uses the same accumulations)."""
    return accumulation(c.op.array_shape.element_type,
                        tuple(o.array_shape.element_type for o in c.operands),
                        target)


def lanes_for(acc: Accumulation, columns: int, tiles: TileShape) -> int | None:
    """The widest vector (halving from the accumulation's) that fits in ``columns``."""
    lanes = acc.lanes
    while lanes > columns and lanes > tiles.min_lanes:
        lanes //= 2
    return lanes if lanes <= columns else None


# computed columns per needed column up to which the widest tile is kept
_OVERLAP = 1.05


def vectors_for(columns: int, lanes: int, tiles: TileShape) -> int:
    """Vectors per tile row: ``tiles.vectors``, or fewer when fewer tile a column count that
    ``tiles.vectors`` does not and its overlap would cost more than a few percent (the last
    tile of a row overlaps the one before it and recomputes the overlap: 64 features in tiles
    of 3 x 8 compute 72, 1024 compute 1032); one when the columns are fewer than a full
    tile. An LSTM's 256x32x1024 weight gradient on the AVX2 target: 2 vectors (8
    accumulators) ran it at 55 GFLOP/s."""
    if columns < tiles.vectors * lanes:
        return 1
    width = tiles.vectors * lanes
    if -(-columns // width) * width <= columns * _OVERLAP:
        return tiles.vectors
    for vectors in range(tiles.vectors - 1, 1, -1):
        if columns % (vectors * lanes) == 0:
            return vectors
    return tiles.vectors


def rows_for(count: int, tiles: TileShape) -> int:
    """Tile rows: ``tiles.rows``, or the power of two covering a smaller row count."""
    rows = 1
    while rows < min(count, tiles.rows):
        rows *= 2
    return rows


# --- output fusions -------------------------------------------------------------------------

@dataclass
class Contraction:
    """A dot or convolution as a kernel computes it: ``inst`` (the launch's instruction, a
    fusion or the op itself), the op, what is stored (the op, or a fused elementwise root over
    it), the outer operands feeding the op, and the fused computation's parameters."""

    inst: HloInstruction
    op: HloInstruction
    root: HloInstruction
    operands: tuple[HloInstruction, ...]
    params: list[HloInstruction] | None = None

    @property
    def fused(self) -> bool:
        return self.root is not self.op


def contraction_parts(inst: HloInstruction, opcode: Opcode) -> Contraction | None:
    """``inst`` as a contraction of kind ``opcode``: the op itself, or a fusion of one such op
    on fusion parameters whose users up to the root are elementwise (an output fusion)."""
    if inst.opcode == opcode:
        return Contraction(inst, inst, inst, tuple(inst.operands))
    comp = inst.attrs.get("calls") if inst.opcode == Opcode.FUSION else None
    if not isinstance(comp, HloComputation) or not inst.shape.is_array:
        return None
    ops = [i for i in comp.instructions if i.opcode == opcode]
    if len(ops) != 1 or any(o.opcode != Opcode.PARAMETER for o in ops[0].operands):
        return None
    op = ops[0]
    if not _epilogue_only(comp, op):
        return None
    operands = tuple(inst.operands[o.param_number] for o in op.operands)
    return Contraction(inst, op, comp.root_instruction, operands, comp.parameters)


def operand_buffer(ctx: LoweringContext, kb: KernelBuilder, c: Contraction,
                   k: int) -> tuple[ElementType, str]:
    """(element type, buffer argument) of the contraction's operand ``k``, keyed like the
    epilogue's reads of the same fusion operand."""
    outer = c.operands[k]
    number = c.op.operands[k].parameter_number if c.params is not None else k
    et = outer.array_shape.element_type
    return et, kb.buffer(et, ctx.ref(outer), key=("in", number, ()))


def _epilogue_only(comp: HloComputation, op: HloInstruction) -> bool:
    """Whether everything but ``op`` is cheap elemental code and every path from ``op`` to the
    root is elementwise (so the root's element i needs only the op's element i)."""
    users = comp.users()
    downstream: set[int] = set()
    stack = [op]
    while stack:
        for user in users[id(stack.pop())]:
            if id(user) in downstream:
                continue
            if not OPCODES[user.opcode].elementwise or user.array_shape.dims != op.array_shape.dims:
                return False
            downstream.add(id(user))
            stack.append(user)
    for i in comp.instructions:
        if i is op or id(i) in downstream:
            continue
        if not (is_elemental(i) or i.opcode == Opcode.PARAMETER) or not in_epilogue(i):
            return False
    return comp.root is op or id(comp.root) in downstream


# --- kernel pieces --------------------------------------------------------------------------

def pointer(kb: KernelBuilder, et: ElementType, base: str, offset: str, prefix: str) -> str:
    """A typed pointer ``base + offset`` (operands are read-only)."""
    name = kb.fresh(prefix)
    kb.line(f"__global const {cltypes.storage_type(et)}* {name} = {base} + {offset};")
    return name


def linear_sum(terms: list[tuple[str, str | None]]) -> str:
    """``sum(index * stride)``; a None stride means 1."""
    parts = [i if s is None else f"{i} * {s}" for i, s in terms]
    return " + ".join(parts) if parts else "0"


@dataclass
class Tile:
    """``rows`` x ``vectors`` accumulators of ``lanes`` lanes each, named ``c<r>_<v>``."""

    kb: KernelBuilder
    acc: Accumulation
    rows: int
    vectors: int
    lanes: int
    names: list[list[str]] = field(default_factory=list)

    @property
    def width(self) -> int:
        return self.vectors * self.lanes

    def declare(self) -> None:
        vec = self.acc.vector(self.lanes)
        self.names = [[self.kb.declare(vec, f"c{r}_", self.acc.zero(self.lanes))
                       for _ in range(self.vectors)] for r in range(self.rows)]

    def update(self, row: int, vector: int, x: str, y: str) -> None:
        c = self.names[row][vector]
        self.kb.line(f"{c} = {self.acc.madd(x, y, c)};")

    def declare_scalar_sums(self) -> list[list[str]]:
        """One scalar accumulator per tile element, beside the vectors: the inner forms add
        the contraction's tail past the last full vector there."""
        scalar = self.acc.scalar
        return [[self.kb.declare(scalar, "s", f"({scalar})0") for _ in range(self.vectors)]
                for _ in range(self.rows)]

    def lane_sums(self, sums: list[list[str]]) -> str:
        """The tile in a private array, row-major (``rows`` x ``vectors``): each accumulator's
        lanes summed (``horizontal_sum``) plus its scalar tail in ``sums``."""
        kb = self.kb
        name = kb.fresh("tile")
        kb.line(f"{self.acc.scalar} {name}[{self.rows * self.vectors}];")
        for r, row in enumerate(self.names):
            for j, c in enumerate(row):
                total = horizontal_sum(kb, self.acc, c, self.lanes)
                kb.line(f"{name}[{r * self.vectors + j}] = {total} + {sums[r][j]};")
        return name

    def spill(self) -> str:
        """The tile in a private array, row-major (``rows`` x ``width``)."""
        kb = self.kb
        name = kb.fresh("tile")
        kb.line(f"{self.acc.scalar} {name}[{self.rows * self.width}];")
        for r, row in enumerate(self.names):
            for v, c in enumerate(row):
                kb.line(f"vstore{self.lanes}({c}, 0, {name} + {r * self.width + v * self.lanes});")
        return name


def horizontal_sum(kb: KernelBuilder, acc: Accumulation, value: str, lanes: int) -> str:
    """The sum of a vector's lanes, as a tree of half-vector adds (fixed order)."""
    while lanes > 1:
        lanes //= 2
        value = kb.let(acc.vector(lanes) if lanes > 1 else acc.scalar,
                       f"{value}.lo + {value}.hi", "h")
    return value


@dataclass
class OutputWriter:
    """Stores tile elements: the contraction's value at an output multi-index, through the
    fused epilogue when there is one, to the launch instruction's output layout."""

    ctx: LoweringContext
    kb: KernelBuilder
    em: ElementalEmitter
    contraction: Contraction
    acc: Accumulation

    @property
    def shape(self) -> ArrayShape:
        return self.contraction.inst.array_shape

    def pointer(self) -> str:
        return self.kb.buffer(self.shape.element_type, self.ctx.ref(self.contraction.inst),
                              writable=True, key=("out", ()))

    def store(self, accumulated: str, exprs: tuple[str, ...]) -> None:
        """Store the element whose accumulator is ``accumulated`` at logical index ``exprs``."""
        kb, em = self.kb, self.em
        op = self.contraction.op
        value = kb.let(cltypes.compute_type(op.array_shape.element_type), self.acc.finish(accumulated))
        index = Index(exprs)
        if self.contraction.fused:
            em.leaves[(id(op), ())] = ValueLeaf(value)
            value = str(em.value(self.contraction.root, index))
        offset = em.offset(self.shape, index, ("out", ()))
        line = cltypes.store(self.shape.element_type, self.pointer(), offset, value)
        kb.line(line if line.rstrip().endswith(";") else line + ";")

    def can_store_rows(self, column_dim: int, lanes: int) -> bool:
        """Whether whole tile rows of ``lanes``-lane vectors may be stored as vectors: the
        accumulators store as the output's type (``Accumulation.stores_vectors``),
        ``column_dim`` (the tile's columns) is contiguous in it, and it is the contraction's
        value or an epilogue with a vector form (``epilogue.vectorizes``)."""
        if not (self.acc.stores_vectors(self.shape.element_type)
                and element_strides(self.shape)[column_dim] == 1):
            return False
        c = self.contraction
        return not c.fused or epilogue.vectorizes(c.root, c.op, self.em, column_dim,
                                                  lanes * cltypes.C_BITS[self.acc.scalar])

    def store_rows(self, tile: Tile, row_exprs: list[tuple[str, ...]], full: str,
                   column_dim: int) -> None:
        """When ``full`` holds, store each row of the tile (whose first element is at logical
        index ``row_exprs[r]``, its columns along ``column_dim``) as vectors, through the
        epilogue when the output is fused, and return."""
        kb, c = self.kb, self.contraction
        vectors = (epilogue.VectorEpilogue(self.em, c.root, c.op, column_dim, tile.lanes)
                   if c.fused else None)
        with self.em.block(f"if ({full})"):
            for r, exprs in enumerate(row_exprs):
                base = kb.let(kb.index_type, self.em.offset(self.shape, Index(exprs), ("out", ())),
                              "o")
                for j, name in enumerate(tile.names[r]):
                    value = name
                    if vectors is not None:
                        at = list(exprs)
                        at[column_dim] = f"{exprs[column_dim]} + {j * tile.lanes}"
                        value = vectors.vector(name, tuple(at))
                    kb.line(self.acc.store_vector(self.shape.element_type, value, self.pointer(),
                                                  f"{base} + {j * tile.lanes}", tile.lanes))
            kb.line("return;")

    def store_tile(self, tile: str, rows: int, width: int, first_row: str, nrows: str,
                   first_lane: str, row_index: Callable[[str], _Row],
                   element: Callable[[_Row, str], tuple[tuple[str, ...], str]]) -> None:
        """Store the spilled ``tile`` element by element: rows ``first_row + r`` below
        ``nrows`` (``row_index`` turns one into what ``element`` needs), lanes from
        ``first_lane``; ``element(row, lane)`` gives the output index and a guard."""
        kb, t = self.kb, self.kb.index_type
        r, lane = kb.fresh("r"), kb.fresh("l")
        with self.em.block(f"for ({t} {r} = 0; {r} < {rows}; ++{r})"):
            row = kb.let(t, f"{first_row} + {r}", "row")
            with self.em.block(f"if ({row} < {nrows})"):
                ri = row_index(row)
                with self.em.block(f"for ({t} {lane} = {first_lane}; {lane} < {width}; ++{lane})"):
                    exprs, guard = element(ri, lane)
                    with self.em.block(f"if ({guard})"):
                        self.store(kb.let(self.acc.scalar, f"{tile}[{r} * {width} + {lane}]", "a"),
                                   exprs)


def begin_tiles(kb: KernelBuilder, col_blocks: int, row_blocks: int) -> tuple[str, str, str]:
    """The work-item's column block, row block and outer index, and the early exit (scalar
    0, the work bound, is the number of column blocks)."""
    t = kb.index_type
    count = kb.param(col_blocks, key="count")
    nrb = kb.param(row_blocks, key="row_blocks")
    ids = ("cb", "rb", "zb")
    for dim, name in enumerate(ids):
        kb.line(f"{t} {name} = ({t})get_global_id({dim});")
    kb.line(f"if (cb >= {count} || rb >= {nrb}) return;")
    return ids


# work-groups a kernel over fewer row blocks than a group spreads its column blocks over at
# least, where it has that many (PoCL runs a work-group on one thread)
MIN_COLUMN_GROUPS = 16


def launch_3d(ctx: LoweringContext, kb: KernelBuilder, inst: HloInstruction,
              col_blocks: int, row_blocks: int, outer: int, group: int | None = None,
              spread: bool = False) -> Launch:
    """Columns blocks on dimension 0, row blocks (``group`` per work-group, by default the
    target's ``tiles.row_group``) on 1, the outer (batch-like) index on 2. ``spread`` (a
    kernel whose work-items share nothing): with fewer row blocks than a group (a decoding
    step's few rows) and column blocks for twice ``MIN_COLUMN_GROUPS`` groups, a work-group
    takes the row blocks there are and as many column blocks as keep at least that many
    groups, up to twice the group's work-items, instead of idle row blocks: a 4x256x4096
    ``A @ B^T`` (a decoder's logits) in 2,048 groups of one working item 154 -> 115-143 us a
    run, a KV-cache decoding loop 45.4 -> 40.3 ms (AMD EPYC, Zen 5, AVX-512). Fewer column
    blocks keep their groups: dropping only the idle row blocks made a diffusion sampler's
    and an LSTM's small dots 2-3% slower."""
    name = ctx.program.add_kernel(kb, inst.name)
    group = group or ctx.target.tiles.row_group
    columns = 1
    if spread and row_blocks < group and col_blocks >= 2 * MIN_COLUMN_GROUPS:
        most = 2 * group // row_blocks
        while columns * 2 <= most and col_blocks // (columns * 2) >= MIN_COLUMN_GROUPS:
            columns *= 2
        group = row_blocks
    rows = -(-row_blocks // group) * group
    cols = -(-col_blocks // columns) * columns
    return Launch(name, tuple(b.ref for b in kb.buffers), tuple(kb.scalar_arg_values()),
                  (cols, rows, outer), (columns, group, 1), inst.name)


_Plan = TypeVar("_Plan")   # a family's plan: what its planner chose and its emitter reads


def register_contraction(opcode: Opcode, plan: Callable[[Contraction, Target], _Plan | None],
                         emit: Callable[[LoweringContext, Contraction, _Plan], Launch], *,
                         target: TargetKind | None, priority: int) -> None:
    """Register a contraction family for ``target``: ``opcode`` (and fusions rooted at it)
    lower through ``plan`` (given the target) and ``emit`` (a plan of None declines to the
    elemental loop kernel); output fusions over one ``opcode`` (elementwise roots) are claimed
    by a structural fusion rule at ``priority``."""

    def lower_contraction(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
        c = contraction_parts(inst, opcode)
        if c is None:
            return None
        if inst.array_shape.element_count == 0:
            return []
        chosen = plan(c, ctx.target)
        return None if chosen is None else [emit(ctx, c, chosen)]

    def output_fusion(ctx: LoweringContext, inst: HloInstruction) -> list[Step] | None:
        root = inst.calls.root_instruction
        return None if root.opcode == opcode else lower_contraction(ctx, inst)

    register(opcode, target=target, fusion_root_too=True)(lower_contraction)
    register(FUSION, target=target, priority=priority)(output_fusion)

