"""Reorder each sequential computation's instructions into its schedule.

After this pass the module is ``is_scheduled``: its text order *is* the schedule, so later
passes (copy insertion) reason about the order the program will really run in, printing the
module shows that order, and XLA's convention for scheduled dumps holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..hlo.clone import clone_module
from ..hlo.ir import HloInstruction, HloModule


def apply_schedule(module: HloModule,
                   sequences: Mapping[str, Sequence[HloInstruction]]) -> HloModule:
    """``sequences``: computation name -> that computation's instructions (of ``module``) in
    schedule order; computations not named keep their order."""
    new, mapping = clone_module(module)
    schedule_in_place(new, {name: [mapping.instruction(i) for i in sequence]
                            for name, sequence in sequences.items()})
    return new


def schedule_in_place(module: HloModule,
                      sequences: Mapping[str, Sequence[HloInstruction]]) -> None:
    """The pass itself, for pipelines that already work on a clone they own."""
    for comp in module.computations:
        sequence = sequences.get(comp.name)
        if sequence is None:
            continue
        assert len(sequence) == len(comp.instructions) \
            and set(sequence) == set(comp.instructions), \
            f"the schedule of {comp.name} is not a permutation of its instructions"
        comp.instructions = list(sequence)
    module.is_scheduled = True
