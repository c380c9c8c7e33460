"""What code generation and the passes need to know about a kind of device: one ``Target``.

A target is data: the fusion pass's rules, how long reductions are split, the work-group and
vector shapes of the kernel families. Lowering rules are chosen per target kind too (a rule
registered for "cpu" wins over a common one there; see ``codegen.registry``). The target of a
device comes from its OpenCL properties and the vector ISA its compiler targets
(``Target.for_device``), never from the vendor's name; analysis without a device uses
``Target.for_kind("cpu")``.

Three CPU targets share the CPU's rules and differ in settings. PoCL wants explicit vectors
(it reports a preferred float vector width of 16 on AVX-512) and gets ``CPU``, or
``CPU_AVX2`` where it compiles for a CPU without AVX-512 (16 vector registers of 256 bits
instead of 32 of 512: narrower vectors, smaller register tiles, see there). Intel's OpenCL
CPU runtime reports a preferred width of 1: its compiler packs neighbouring work-items into
SIMD lanes itself (implicit vectorisation), and gets ``CPU_IMPLICIT_SIMD``, whose row kernels
keep one accumulator per work-item (see there for the figures). A GPU target's work-group
shapes come from the device's limits (local memory, work-group size) where there is a device.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from enum import StrEnum

from .errors import DeviceError
from .analysis.fusion_rules import CPU_RULES, FusionRules


class TargetKind(StrEnum):
    """The kinds of code generation: the key of target-specific lowering rules
    (``codegen.registry``). OpenCL's accelerators get the GPU's."""

    CPU = "cpu"
    GPU = "gpu"

    @staticmethod
    def of_device_type(device_type: str) -> TargetKind:
        """The kind for an OpenCL device type ("cpu", "gpu", "accelerator"); any other
        (a "custom" device) is refused."""
        kind = _DEVICE_TYPES.get(device_type)
        if kind is None:
            raise DeviceError(f"OpenCL device type {device_type!r} has no code generation "
                              f"target (known: {', '.join(_DEVICE_TYPES)})",
                              hint="choose a CPU or GPU device with HLO_DEVICE")
        return kind


_DEVICE_TYPES = {"cpu": TargetKind.CPU, "gpu": TargetKind.GPU, "accelerator": TargetKind.GPU}


@dataclass(frozen=True)
class ReductionShape:
    """Row-kernel shape: partial accumulators per work-item (``lanes``), adjacent outputs per
    work-item of a column kernel (``column_lanes``; 1: no column kernels), work-group size,
    and whether index arithmetic is 64-bit even when 32 bits would do. On PoCL (LLVM) a 32-bit
    ``row * stride + (j + k)`` is sign-extended per lane and the lanes' loads are no longer
    seen as consecutive: the row sums ran at half speed (0.8 ms against 0.4 ms for 32 MB)."""

    lanes: int
    local_size: int
    wide_index: bool
    column_lanes: int


@dataclass(frozen=True)
class SplitRules:
    """When a long reduction becomes two stages (``passes.split_reductions``)."""

    min_length: int        # reductions shorter than this stay in one stage
    max_outputs: int       # ... and so do ones with this many outputs (already parallel)
    target_rows: int       # first-stage rows (outputs x chunks) to aim for
    min_chunk: int         # elements per chunk at least


@dataclass(frozen=True)
class WorkGroups:
    """Work-group shapes of the GPU kernel families that share data through local memory.

    Contractions: a work-group computes a ``tile`` x ``tile`` block of the output from
    ``tile`` x ``tile`` blocks of both operands staged in local memory, one contraction step
    of ``tile`` at a time; each of its ``(tile / block)^2`` work-items accumulates ``block`` x
    ``block`` outputs in registers. Row reductions: ``reduce_group`` work-items share a row
    and combine their partials in local memory."""

    tile: int
    block: int
    reduce_group: int

    @property
    def tile_items(self) -> int:
        """Work-items of one contraction work-group."""
        return (self.tile // self.block) ** 2

    @staticmethod
    def for_limits(local_mem_bytes: int, max_work_group_size: int) -> WorkGroups:
        """The largest shapes the limits allow: two ``tile`` x ``(tile + 1)`` staging arrays of
        8-byte accumulators (the widest) must fit in local memory, the work-groups within the
        maximum size (the smallest tiling, one work-item of 8 x 8 outputs, is the floor)."""
        tile, block = _TILINGS[-1]
        for candidate, per_item in _TILINGS:
            if ((candidate // per_item) ** 2 <= max_work_group_size
                    and 2 * candidate * (candidate + 1) * 8 <= local_mem_bytes):
                tile, block = candidate, per_item
                break
        group = 1
        while group * 2 <= min(256, max_work_group_size) and group * 2 * 8 * 4 <= local_mem_bytes:
            group *= 2
        return WorkGroups(tile=tile, block=block, reduce_group=group)


# (tile, block) from the largest down; the last (one work-item per group) always fits
_TILINGS = ((32, 2), (16, 2), (8, 2), (8, 4), (8, 8))


# Analysis without a device assumes OpenCL 1.2's minimum local memory (32 KiB) and a
# work-group limit that GPUs commonly have (256).
DEFAULT_WORK_GROUPS = WorkGroups.for_limits(32 * 1024, 256)


@dataclass(frozen=True)
class TileShape:
    """Register tiles of the contraction families (``codegen.families.tiles``: dot and
    convolution): ``rows`` x ``vectors`` vectors per work-item in the outer-product form,
    ``inner_rows`` x ``inner_cols`` outputs in the inner-product form."""

    rows: int              # output rows per tile (fewer when the output has fewer)
    vectors: int           # lane vectors per tile row (one when the columns are few)
    row_group: int         # work-items per group along the row blocks: neighbouring row
                           # blocks of one column block share the vector operand in cache
    min_lanes: int         # narrowest vector a tile is built from
    inner_rows: int
    inner_cols: int
    # the packed form (A @ B^T; any dot with ``pack_contiguous``): it pays for packing only
    # over ``pack_min_rows`` output rows or more; up to ``pack_row_group`` row blocks share
    # one packed panel of the column operand, a chunk of the contraction of
    # ``pack_panel_bytes`` (``Target.for_device`` lowers it to the device's local memory
    # where that is smaller; OpenCL promises 32 KiB)
    pack_min_rows: int = 16
    # ... over a contraction of this many or more (a shorter one's panel is cheap to read in
    # place, and copying it costs more than it saves)
    pack_min_contraction: int = 64
    # A @ B^T from this many rows (below, the inner form's lane sums cost less than packing),
    # from ``pack_min_rows`` where B is larger than ``pack_nt_reread_bytes``, and from
    # ``pack_long_min_rows`` over a contraction of ``pack_long_contraction`` or more
    pack_nt_min_rows: int = 48
    pack_nt_reread_bytes: int = 4 * 1024 * 1024
    pack_long_min_rows: int = 64
    pack_long_contraction: int = 1024
    pack_row_group: int = 16
    # a dot of fewer multiply-adds than this (every output, batch and contraction step) does
    # not pack: it is a microsecond's work, and without a panel in local memory its kernel
    # can be a stage of a chain or a device loop (an Equinox GRU step's 30x10x4 dot was a
    # launch of its own every iteration, between two chains)
    pack_min_products: int = 0
    # A @ B^T whose B is larger than ``pack_nt_reread_bytes`` (it comes from memory) and
    # whose A is at most ``all_rows_bytes`` (it stays in the second-level cache) takes the
    # inner form in work-groups that hold every row, ``all_rows_inner_rows`` x
    # ``all_rows_inner_cols`` outputs a work-item: B is then read once, with no panel to
    # copy (``dot._all_rows_plan``)
    all_rows_bytes: int = 2 * 1024 * 1024
    all_rows_inner_rows: int = 4
    all_rows_inner_cols: int = 6
    # a column operand of at most this many bytes (per batch) stays in the second-level cache
    # while the outer form's work-groups read it again: where one packed work-group would
    # cover every row it is read in place; a larger one is packed, however many rows
    pack_cached_bytes: int = 1024 * 1024
    pack_panel_bytes: int = 32 * 1024
    pack_contiguous: bool = False   # pack columns that are contiguous in memory too
    # row blocks sharing a panel where the row operand is strided along the contraction (each
    # step of a tile then reads a new cache line of it): None is ``pack_row_group``
    pack_strided_row_group: int | None = None
    vector_bits: int | None = None  # the tiles' vector width, where not the target's
    # outer form over at most ``stream_rows`` rows (a decoding step's few tokens): the
    # contraction runs in steps of ``stream_k`` and each step sweeps the tile's vectors before
    # the next (0: the plain order, one column block's every step); the tile has
    # ``stream_vectors`` vectors a row, fewer where its rows would hold more than
    # ``stream_accumulators``
    stream_rows: int = 0
    stream_vectors: int = 8
    stream_k: int = 8
    stream_accumulators: int = 32
    # integer dots of 8- and 16-bit operands multiply pairs with x86's vpmaddwd
    # (``cltypes`` ``xla_pair_madd8/16``), where PoCL compiles for AVX2 or AVX-512 BW
    pair_madd: bool = False


@dataclass(frozen=True)
class Target:
    name: str                  # which target ("cpu", "cpu-implicit-simd", "gpu")
    kind: TargetKind           # the key of target-specific lowering rules
    fusion: FusionRules
    split: SplitRules
    reduction: ReductionShape
    loop_local_size: int       # work-group size of one-element-per-work-item kernels
    vector_bits: int           # width of explicit vectors (vector loops, register tiles)
    tiles: TileShape
    transpose_block: int       # side of the square blocks of the blocked transpose
    work_groups: WorkGroups | None = None   # local-memory kernel shapes (GPU-like devices)
    subtracting_loop_pragma: str = ""   # put before loops accumulating by subtraction (below)
    # work-items a scatter with possibly repeated indices aims for, each applying, in the
    # sequential order, the updates of the output elements it owns (``families.scatter``);
    # 1: one work-item runs the whole loop, which CPUs run fastest (sharing windows or rows
    # among work-items measured 2-3x slower on PoCL), while a GPU thread alone runs it at a
    # hundredth of a CPU core's speed
    scatter_work_items: int = 1
    # consecutive launches whose kernels cost at most this (``fusion_cost.kernel_work``), or
    # run as one work-group anyway, run as one launch of one work-group of
    # ``chain_local_size`` items (``launch_chaining``); 0: never (GPUs: unmeasured, and a
    # work-group there is one compute unit of many)
    chain_max_work: int = 0
    chain_local_size: int = 1
    # a while loop whose condition's and body's kernels are all chain stages, those of more
    # than one work-group doing at most this much work an iteration, runs as one launch that
    # loops on the device (``device_loops``); 0: never
    loop_max_work: int = 0
    # a work-group runs on one thread (CPU runtimes): long per-item loops (a sort, a top-k) are
    # a work-group each, and row kernels spread their rows over at least this many groups
    # (a categorical sample's 8 rows in one group kept one core busy); 0: GPUs
    min_row_groups: int = 0
    # narrow-float dots and convolutions accumulate in f32 by upcasting their operands first
    # (``passes.contraction_upcast``), where the register-tile families compute in f32
    upcasts_narrow_contractions: bool = False
    # convolution kernels copied to the CPU convolution family's layout
    # (``passes.convolution_layout``); GPUs lower convolutions elementally
    relayouts_convolution_kernels: bool = False

    def codegen_key(self) -> tuple:
        """The settings code generation reads (the fusion and split rules shape the module
        the program is generated from, which is keyed by its text already)."""
        return tuple((f.name, getattr(self, f.name)) for f in fields(self)
                     if f.name not in ("fusion", "split"))

    def lanes(self, scalar_bits: int) -> int:
        """Lanes of an explicit vector of ``scalar_bits``-bit elements (1: no vectors)."""
        return max(1, self.vector_bits // scalar_bits)

    def tile_lanes(self, scalar_bits: int) -> int:
        """Lanes of a register tile's vectors (``tiles.vector_bits``, else the target's)."""
        return max(1, (self.tiles.vector_bits or self.vector_bits) // scalar_bits)

    @staticmethod
    def for_kind(kind: TargetKind | str) -> Target:
        """The default target of a kind, or of an OpenCL device type ("accelerator" is a
        GPU; unknown types are refused)."""
        return _BY_KIND[TargetKind.of_device_type(str(kind))]

    @staticmethod
    def for_device(device) -> Target:
        """The target of a ``runtime.Device``, from its OpenCL device type and, for CPUs, its
        preferred float vector width (1: the compiler vectorises across work-items) and the
        vector ISA it compiles for (``Device.vector_isa``: PoCL names its LLVM CPU); a GPU
        target's work-group shapes from the device's local memory and work-group size limits."""
        kind = TargetKind.of_device_type(device.kind)
        if kind is TargetKind.CPU:
            if device.preferred_vector_width_float == 1:
                target = CPU_IMPLICIT_SIMD
            elif device.vector_isa in ("avx2", "baseline"):
                target = CPU_AVX2
            else:
                target = CPU
            panel = min(target.tiles.pack_panel_bytes, device.local_mem_bytes)
            return replace(target, tiles=replace(target.tiles, pack_panel_bytes=panel,
                                                 pair_madd=device.pair_multiply_add))
        target = _BY_KIND[kind]
        if target.work_groups is None:
            return target
        return replace(target, work_groups=WorkGroups.for_limits(device.local_mem_bytes,
                                                                  device.max_work_group_size))


CPU = Target(
    name="cpu",
    kind=TargetKind.CPU,
    fusion=CPU_RULES,
    split=SplitRules(min_length=1 << 16, max_outputs=64, target_rows=128, min_chunk=4096),
    reduction=ReductionShape(lanes=16, local_size=8, wide_index=True, column_lanes=16),
    loop_local_size=64,
    # 512 bits (float16, double8): what PoCL's CPU device prefers (opencl-notes §1)
    vector_bits=512,
    # 128 KiB panels and 4 x 4 inner blocks, 8 streamed rows: measured in docs/performance.md
    tiles=TileShape(rows=8, vectors=2, row_group=4, min_lanes=4, inner_rows=4, inner_cols=4,
                    pack_panel_bytes=128 * 1024, stream_rows=8, pack_min_products=1 << 13),
    transpose_block=16,
    # small consecutive launches chain into one work-group's launch (docs/performance.md)
    chain_max_work=1 << 18,
    # small while loops run on the device (docs/performance.md): the work one core does in
    # about the time a host loop's launch takes, as for chains
    loop_max_work=1 << 18,
    min_row_groups=16,
    upcasts_narrow_contractions=True,
    relayouts_convolution_kernels=True,
)

# CPUs without AVX-512 (PoCL compiling for AVX2 or older): 16 registers of 256 bits, so
# smaller register tiles and packed panels for row-major columns too (docs/performance.md)
CPU_AVX2 = replace(
    CPU,
    name="cpu-avx2",
    # 4 x 2 inner blocks and no streamed order: 4 x 4 and 8 streamed vectors spill AVX2
    tiles=replace(CPU.tiles, rows=4, vectors=3, inner_cols=2, pack_row_group=32, stream_rows=0,
                  pack_strided_row_group=16,
                  pack_panel_bytes=64 * 1024, pack_contiguous=True, vector_bits=256,
                  pack_cached_bytes=512 * 1024, all_rows_bytes=1024 * 1024,
                  all_rows_inner_cols=3),
)

# GPUs use the CPU's fusion decisions. Dots and row reductions get work-group kernels with
# local memory (``families.workgroup_dot``, ``families.workgroup_rows``); register tiles,
# vector loops and blocked transposes are registered for "cpu" only.
GPU = Target(
    name="gpu",
    kind=TargetKind.GPU,
    fusion=CPU_RULES,
    split=SplitRules(min_length=1 << 16, max_outputs=64, target_rows=1024, min_chunk=1024),
    reduction=ReductionShape(lanes=1, local_size=64, wide_index=False, column_lanes=1),
    loop_local_size=256,
    # read only by rules registered for "cpu" (vector loops, register tiles, blocked
    # transposes); kept equal to the CPU's so a GPU rule that adopts them starts from there
    vector_bits=512,
    tiles=CPU.tiles,
    transpose_block=16,
    work_groups=DEFAULT_WORK_GROUPS,
    scatter_work_items=16384,
)

# CPU devices whose compiler vectorises across work-items (Intel's OpenCL CPU runtime): one
# accumulator a row, and loops that accumulate by subtraction kept from its loop
# vectoriser, which miscompiles them (docs/performance.md)
CPU_IMPLICIT_SIMD = replace(
    CPU,
    name="cpu-implicit-simd",
    reduction=ReductionShape(lanes=1, local_size=8, wide_index=False, column_lanes=16),
    tiles=replace(CPU.tiles, all_rows_bytes=0),
    subtracting_loop_pragma="#pragma clang loop vectorize(disable)",
)

TARGETS = {t.name: t for t in (CPU, CPU_AVX2, CPU_IMPLICIT_SIMD, GPU)}
_BY_KIND = {TargetKind.CPU: CPU, TargetKind.GPU: GPU}
