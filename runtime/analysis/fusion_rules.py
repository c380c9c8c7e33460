"""What the fusion pass may fuse, per device target: the pass's cost model as data.

A row of this table says which opcodes may root a fusion (and of which kind), which may be
pulled into a consumer's kernel, which are cheap enough to copy into several kernels, and
which fusions beyond XLA's plain loop/input fusion are worth making on the device: output
fusion of elementwise consumers into a dot or convolution, and "row" fusion of reductions
whose results are broadcast back along the reduced dimensions (computed once per row by the
row kernel). Changing a decision for one device kind means changing its ``Target``'s rules, not the pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hlo.ir import HloInstruction
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES

_ELEMENTWISE = frozenset(n for n, s in OPCODES.items()
                         if s.elementwise and not s.side_effect and n != Opcode.STOCHASTIC_CONVERT)
_DATA_MOVEMENT = frozenset(n for n, s in OPCODES.items() if s.data_movement)
_LOOP_ROOTS = _ELEMENTWISE | _DATA_MOVEMENT | frozenset(n for n, s in OPCODES.items()
                                                         if s.loop_root)


@dataclass(frozen=True)
class FusionRules:
    roots: dict[Opcode, str]            # opcode -> kind of the fusion it roots
    producers: frozenset[Opcode]        # fused into a consumer's kernel
    duplicable: frozenset[Opcode]       # may be copied into several kernels (cheap to recompute)
    duplicate_cheap_elementwise: bool   # ... and so may any elementwise op that is not expensive
    max_duplicates: int                 # copies per kernel, constants/iota/broadcasts aside:
                                        # bounds the work a kernel recomputes per element (what
                                        # a copy may read is the cost model's rule)
    heroes: frozenset[Opcode]           # fused with their elementwise consumers (kOutput)
    row_fusion: bool                    # merge reductions into consumers that broadcast them back
    min_rows: int                       # ... when the row kernel gets at least this many rows
    max_row_merges: int                 # bound on merges per consumer (keeps the pass linear)
    max_members: int                    # bound on a fused computation's size
    max_parameters: int                 # bound on a fusion's operands (kernel arguments)
    multi_output: bool                  # loop kernels also write same-shape operands others
                                        # read (``multi_output_fusion``)


def _roots() -> dict[Opcode, str]:
    roots = {op: "kLoop" for op in _LOOP_ROOTS}
    roots[Opcode.REDUCE] = "kInput"
    return roots


CPU_RULES = FusionRules(
    roots=_roots(),
    producers=_ELEMENTWISE | _DATA_MOVEMENT | frozenset(
        {Opcode.IOTA, Opcode.CONSTANT, Opcode.BITCAST, Opcode.DYNAMIC_SLICE, Opcode.GATHER,
         Opcode.MAP, Opcode.REDUCE_WINDOW}),
    duplicable=frozenset({Opcode.BROADCAST, Opcode.IOTA, Opcode.CONSTANT, Opcode.RESHAPE,
                          Opcode.BITCAST, Opcode.TRANSPOSE, Opcode.SLICE, Opcode.REVERSE,
                          Opcode.DYNAMIC_SLICE}),
    duplicate_cheap_elementwise=True,
    max_duplicates=64,      # an erf polynomial and its argument (about 40 cheap ops) fit
    heroes=frozenset({Opcode.DOT, Opcode.CONVOLUTION}),
    row_fusion=True,
    min_rows=2,
    max_row_merges=16,
    max_members=256,
    max_parameters=32,
    multi_output=True,
)


def in_epilogue(inst: HloInstruction) -> bool:
    """Whether an output fusion may hold ``inst`` beside its dot or convolution: anything
    else would leave the dot to the element-by-element loop kernel (a beam search's
    32x256x256 step dot fused with its embedding gather took 738 us that way)."""
    spec = OPCODES[inst.opcode]
    return spec.elementwise or spec.epilogue_safe


def in_place_roots() -> tuple[Opcode, ...]:
    return tuple(n for n, s in OPCODES.items() if s.updates is not None)


def in_place_operands(inst: HloInstruction) -> range:
    """Operands a fusion rooted at ``inst`` must keep as parameters: the buffers it updates in
    place (fusing their producers would make the update read what it overwrites)."""
    if inst.opcode == Opcode.DYNAMIC_UPDATE_SLICE:
        return range(1)
    if inst.opcode == Opcode.SCATTER:
        return range((len(inst.operands) - 1) // 2)
    return range(0)
