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
    # integer dots of 8- and 16-bit operands into s32 multiply pairs of contraction steps
    # with x86's vpmaddwd (16-bit products, adjacent pairs summed into 32-bit lanes), which
    # PoCL's clang reaches as ``__builtin_ia32_pmaddwd256/512`` (``cltypes`` helpers
    # ``xla_pair_madd8/16``); ``Target.for_device`` turns it on where PoCL compiles for AVX2
    # or AVX-512 BW (``Device.pair_multiply_add``). A 256x2048x512 s8 dot, best of 30 (AMD EPYC, Zen 5, PoCL 3.1): 1,592 ->
    # 1,256 us on AVX-512, 4,245 -> 2,201 us compiled for AVX2 (32-bit vector multiplies
    # before); an int8-quantised MLP 10.7 -> 9.5 ms, 30.7 -> 16.1 ms on AVX2. Dots f32 sums
    # exactly keep ``contraction_upcast``'s f32 path: 1,108 us natively, 2,288 on AVX2
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
    # a while loop whose condition's and body's kernels are all chain stages doing at most this
    # much work an iteration runs as one launch that loops on the device (``device_loops``);
    # 0: never
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
    # packed panels of 128 KiB (in a 1 MiB second-level cache): GPT-2's logits dot
    # (128x768x50257, A @ B^T) 172 GFLOP/s with 32 KiB, 184 with 128 KiB, XLA 185-188.
    # The inner form computes 4 x 4 outputs a work-item (16 accumulators and 8 loads of 32
    # registers; 4 x 2 before): an LSTM step's 32x128 over 1024 106-108 -> 91-92 us a run,
    # 32x1024 over 128 78-80 -> 64-66, 16x1024 over 4096 616-660 -> 583-622 (XLA 1,040);
    # other shapes within noise, the same bits (AMD EPYC, Zen 5, best of 80, three runs)
    tiles=TileShape(rows=8, vectors=2, row_group=4, min_lanes=4, inner_rows=4, inner_cols=4,
                    pack_panel_bytes=128 * 1024, stream_rows=8),
    # the streamed order over at most 8 rows (``dot._streams``), plain -> streamed, best of 25
    # interleaved over weights rotating through 24 MB (AMD EPYC, Zen 5, AVX-512, PoCL 3.1):
    # 4x256x1024 62 -> 50 us, 4x768x768 99
    # -> 78, 2x768x3072 282 -> 193, 4x4096x1024 439 -> 302, 1x1024x4096 551 -> 349,
    # 1x4096x16384 15.0 -> 7.7 ms; 8 rows in tiles of 4 vectors: 8x768x768 114 -> 95,
    # 8x768x3072 256 -> 219, 8x4096x1024 363 -> 288; the KV-cache decoder 29.4 -> 26.4 ms
    # (XLA 29.9)
    transpose_block=16,
    # consecutive launches of kernels costing at most 2^18 (``fusion_cost.kernel_work``: a
    # 32x64x64 dot with its epilogue, 3 us on two threads) chain into one launch: an Adam step
    # over 24 layers of 32 x 64, 335 -> 26 launches (30 since merged and chained launches keep
    # within ``MAX_PARAMETER_BYTES``: the same time), 2.17 -> 1.09 ms (XLA 1.34), a diffusion
    # sampler 4.62 -> 4.01 ms, categorical sampling 13.5 -> 12.4, the other models within
    # noise (AMD EPYC, Zen 5, PoCL 3.1, best of 20 interleaved; Intel's runtime: the Adam step
    # 2.47 -> 1.92 ms). With 2^15 the Adam step's dots stayed apart (2.26 ms against 1.48 in
    # one run); counting elements read instead of bytes chained a KV-cache decoder's
    # matrix-vector products over 256 KB of cache (16 us apart on two threads, 23 us chained).
    # A work-group of one item: 64 measured the same on PoCL and on Intel's runtime.
    chain_max_work=1 << 18,
    # while loops whose iterations do at most 2^15 units run on the device (``device_loops``),
    # nested ones inline: in-process A/B against host loops, best of 15 (same EPYC and PoCL):
    # a vmapped Collatz loop 3.22 -> 0.67 ms, JAX's special functions (series loops) 4.32 ->
    # 0.38, discrete sampling 2.64 -> 0.28, gamma sampling 4.30 -> 2.35; the categorical
    # sampler 4-10% faster over four runs, the f16 dropout MLP and a LAPACK program within
    # noise
    loop_max_work=1 << 15,
    min_row_groups=16,
    upcasts_narrow_contractions=True,
    relayouts_convolution_kernels=True,
)

# CPUs without AVX-512 (PoCL naming an AVX2 or older LLVM CPU; ``POCL_KERNELLIB_NAME=avx2`` makes
# PoCL compile for one on any x86-64 CPU). With 16 registers of 256 bits the CPU's 8 x 2 float16
# tile (16 accumulators of two registers each) spills; 4 rows of 3 float8 vectors (12
# accumulators, 3 loads and 4 broadcasts per step; 2 vectors where 3 overlap at a row's end by
# more than 5% and 2 tile the columns, ``tiles.vectors_for``) was the best of the shapes tried,
# and packing panels pays for row-major columns too (64 KiB: within the 256 KiB second-level
# cache of common AVX2 CPUs; the figures below are from 16 KiB panels, before the panel's copy
# was blocked). PoCL 3.1 compiling for haswell against XLA with --xla_cpu_max_isa=AVX2 on the
# 2-core AMD EPYC (Zen 4), best of 5, GFLOP/s of the CPU target's tiles / these / XLA: GPT-2's
# MLP 128x768x3072 98 / 143 / 176, its logits 128x768x50257 (A @ B^T) 97 / 128 / 187, ViT's
# weight gradient 768x1040x192 (A^T @ B) 97 / 147 / 116; the twelve dot shapes of
# ``benchmarks/dot_shapes.py`` together 136 / 100 / 73 ms. A panel is shared by 32 row blocks
# (128 rows, as the CPU target's 16 blocks of 8): GPT-2's MLP 128x768x3072 126-148 -> 145-170
# GFLOP/s, the whole model 216 -> 190 ms, best of 9 interleaved; 16 where the row operand is
# strided along the contraction (A^T @ B: each tile step reads a new cache line of it): ViT's
# 768x1040x192 weight gradient 154-157 GFLOP/s with 16, 128-136 with 32. Vector loops and row
# reductions keep 512-bit vectors (a float16 is two registers there, more work in flight):
# bench_ew_chain_4m 3.85 against 4.35 ms with float8, layernorm 1.22 against 1.36 ms, reduce_8m
# 1.03 against 1.08 ms (best of 15). Columns of up to 512 KiB are read in place under one
# panel's rows (the second-level caches of AVX2 CPUs are smaller; on the Xeon's AVX2 setting
# 64x256x256 49 / 45 us packed / in place, 96x512x512 (1 MiB) 262 / 254, an LSTM train step
# even or 1% slower with 1 MiB). The all-rows inner form (``dot._all_rows_plan``) takes 4 x 3
# blocks (12 accumulators; the CPU target's 4 x 6 spills): on the Xeon's AVX2 setting, packed /
# 4x6 / 4x3 / 2x4, 128x768x8192 9.0 / 14.9 / 8.4 / 8.9 ms; GPT-2's logits 62.8 / - / 56.2 /
# 58.3 ms; 256x768x3072 6.40 / - / 6.09 ms.
CPU_AVX2 = replace(
    CPU,
    name="cpu-avx2",
    # inner form 4 x 2: 4 x 4 spills (32x128 over 1024 120 -> 152 us, 16x192 over 576 78 -> 123)
    # the streamed order off (measured on the EPYC with PoCL's AVX2 kernel library): 8 vectors
    # of 4 rows spill AVX2's 16 registers; weights read
    # from memory gained (1x1024x4096 394 -> 255 us, 4x4096x1024 482 -> 381), weights the
    # caches hold lost (4x768x768 103 -> 128, 4x256x1024 60 -> 63; 4 vectors alike), and the
    # KV-cache decoder measured the same either way (36.2 / 36.5 ms)
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

# CPU devices whose compiler vectorises across work-items (Intel's OpenCL CPU runtime). A row
# kernel with 16 partial accumulators per work-item (PoCL's LLVM turns them into one float16)
# is packed lane by lane across rows there; one accumulator and 32-bit index arithmetic
# measured faster on the bench programs (intel-opencl-rt 2026.2 from pip, 2-core AMD EPYC
# with AVX-512, median process CPU time of 25 interleaved runs on a loaded machine):
# bench_layernorm_4096x1024 3.05 ms against 4.23-4.30 ms, bench_reduce_8m 1.52-1.64 ms
# against 1.72-1.87 ms. A work-group of 16 or more rows is 7x slower (the compiler then
# packs 16 rows, gathering every load). Column kernels keep 16 adjacent outputs per work-item
# (a f32[4096,1024] column sum: 7.4 ms, against 32.3 ms with one). The inner-product dot
# form (A @ B^T) computes 4x4 outputs per work-item, as the CPU target's does now (there it
# was measured first: 512^3 f32 3.30-3.83 ms against 3.71-4.09 with 4x2). Vector widths below 512 bits, other loop work-group
# sizes, other outer-product tiles and smaller transpose blocks measured the same or slower
# there, so they stay the CPU's.
#
# Its compiler (intel-opencl-rt 2026.2) also vectorises the loops inside a work-item, and gets
# some float accumulations that subtract wrong: ``acc = acc - a[r + i * n]`` over rows of 100
# in work-groups of 8 returned garbage (relative error 1.4), as did ``acc + -(x + 1)``, while
# ``acc + x``, ``acc - 2 * x`` and the same loop under ``-cl-opt-disable`` were right. XLA's
# ``reduce(negate(x))`` fuses into exactly such a loop (ResNet-18's loss gradient). Loops whose
# accumulation may compile to ``acc - x`` (``elemental.accumulation_subtracts``) are kept from
# being vectorised; marking every loop instead made reductions 2.5x slower there (8M-element
# sum 1.6 -> 4.1 ms), since a row sum's speed comes from vectorising its loop. The all-rows
# inner form (``dot._all_rows_plan``) lost there: packed / 4x6 / 4x4 blocks, 128x768x8192
# 6.32 / 7.32 / 6.86 ms, GPT-2's logits 44.8 / 49.1 / 43.8 ms; packing stays.
CPU_IMPLICIT_SIMD = replace(
    CPU,
    name="cpu-implicit-simd",
    reduction=ReductionShape(lanes=1, local_size=8, wide_index=False, column_lanes=16),
    tiles=replace(CPU.tiles, all_rows_bytes=0),
    subtracting_loop_pragma="#pragma clang loop vectorize(disable)",
)

TARGETS = {t.name: t for t in (CPU, CPU_AVX2, CPU_IMPLICIT_SIMD, GPU)}
_BY_KIND = {TargetKind.CPU: CPU, TargetKind.GPU: GPU}
