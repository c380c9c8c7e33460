"""What code generation and the passes need to know about a kind of device: one ``Target``.

A target is data: the fusion pass's rules, how long reductions are split, the work-group and
vector shapes of the kernel families. Lowering rules are chosen per target kind too (a rule
registered for "cpu" wins over a common one there; see ``codegen.registry``). The target of a
device comes from its OpenCL device type (``Device.kind``), never from its name; analysis
without a device uses ``Target.for_kind("cpu")``. A GPU target's work-group shapes come from
the device's limits (local memory, work-group size) where there is a device.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .passes.fusion_rules import CPU_RULES, FusionRules


@dataclass(frozen=True)
class ReductionShape:
    """Row-kernel shape: partial accumulators per work-item, work-group size, and whether
    index arithmetic is 64-bit even when 32 bits would do. On PoCL (LLVM) a 32-bit
    ``row * stride + (j + k)`` is sign-extended per lane and the lanes' loads are no longer
    seen as consecutive: the row sums ran at half speed (0.8 ms against 0.4 ms for 32 MB)."""

    lanes: int
    local_size: int
    wide_index: bool


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
class Target:
    kind: str                  # "cpu" | "gpu": the key of target-specific lowering rules
    fusion: FusionRules
    split: SplitRules
    reduction: ReductionShape
    loop_local_size: int       # work-group size of one-element-per-work-item kernels
    work_groups: WorkGroups | None = None   # local-memory kernel shapes (GPU-like devices)

    @staticmethod
    def for_kind(kind: str) -> Target:
        """The target of a device kind ("cpu"; "gpu" or "accelerator" give the GPU target)."""
        return CPU if kind == "cpu" else GPU

    @staticmethod
    def for_device(device) -> Target:
        """The target of a ``runtime.Device``, from its OpenCL device type; a GPU target's
        work-group shapes from the device's local memory and work-group size limits."""
        target = Target.for_kind(device.kind)
        if target.work_groups is None:
            return target
        return replace(target, work_groups=WorkGroups.for_limits(device.local_mem_bytes,
                                                                  device.max_work_group_size))


CPU = Target(
    kind="cpu",
    fusion=CPU_RULES,
    split=SplitRules(min_length=1 << 16, max_outputs=64, target_rows=128, min_chunk=4096),
    reduction=ReductionShape(lanes=16, local_size=8, wide_index=True),
    loop_local_size=64,
)

# GPUs use the CPU's fusion decisions. Dots and row reductions get work-group kernels with
# local memory (``families.workgroup_dot``, ``families.workgroup_rows``); register tiles,
# vector loops and blocked transposes are registered for "cpu" only.
GPU = Target(
    kind="gpu",
    fusion=CPU_RULES,
    split=SplitRules(min_length=1 << 16, max_outputs=64, target_rows=1024, min_chunk=1024),
    reduction=ReductionShape(lanes=1, local_size=64, wide_index=False),
    loop_local_size=256,
    work_groups=DEFAULT_WORK_GROUPS,
)

TARGETS = {t.kind: t for t in (CPU, GPU)}
