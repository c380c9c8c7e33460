"""Which outputs live in which parameters' bytes: ``input_output_alias``, ``buffer_donor`` and
the caller's donation choices.

``donated`` is the set of parameter numbers whose buffers the caller hands over (None: as the
module says, i.e. every parameter named in ``input_output_alias`` or ``buffer_donor``). An
``input_output_alias`` entry is applied only if its parameter is donated; otherwise its output
gets its own allocation and the parameter stays read-only. ``buffer_donor`` entries of donated
parameters are matched to outputs that no applied alias already covers, as XLA's
OptimizeInputOutputBufferAlias does: donors and outputs sorted by byte size (largest first,
stable), equal sizes pair up, a donor larger than every remaining output is skipped. A donor
that matches nothing is reported with the reason (XLA drops it silently).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import HloArgumentError
from ..hlo.ir import AliasEntry, HloModule
from ..hlo.shape import ShapeIndex, index_text, subshape


@dataclass(frozen=True)
class UnusedDonor:
    parameter_number: int
    parameter_index: ShapeIndex
    reason: str


@dataclass(frozen=True)
class AliasPlan:
    aliases: list[AliasEntry]          # applied: declared ones of donated parameters, then donors
    unused_donors: list[UnusedDonor]
    not_donated: list[AliasEntry]      # declared aliases of parameters not donated (not applied)


def plan_aliasing(module: HloModule, donated: frozenset[int] | None) -> AliasPlan:
    entry = module.entry
    assert entry is not None
    params = entry.parameters
    if donated is not None:
        bad = sorted(n for n in donated if not 0 <= n < len(params))
        if bad:
            raise HloArgumentError(f"donated names parameter {bad[0]}, but {entry.name} has "
                                   f"{len(params)} parameters")

    def is_donated(number: int) -> bool:
        return donated is None or number in donated

    applied = [a for a in module.input_output_alias if is_donated(a.parameter_number)]
    skipped = [a for a in module.input_output_alias if not is_donated(a.parameter_number)]
    covered_outputs = {a.output_index for a in applied}
    covered_params = {(a.parameter_number, a.parameter_index): a.output_index for a in applied}
    unused: list[UnusedDonor] = []
    donors: list[tuple[int, int, ShapeIndex]] = []
    for d in sorted(module.buffer_donors, key=lambda d: (d.parameter_number, d.parameter_index)):
        if not is_donated(d.parameter_number):
            continue
        key = (d.parameter_number, d.parameter_index)
        shape = subshape(params[d.parameter_number].shape, d.parameter_index)
        if key in covered_params:
            unused.append(UnusedDonor(*key, "already aliased with output "
                                      f"{index_text(covered_params[key])} by input_output_alias"))
        elif shape.is_tuple or not shape.is_array:
            unused.append(UnusedDonor(*key, f"{shape} is not an array; only array leaves can "
                                      "be donated"))
        else:
            donors.append((shape.byte_size, *key))
    leaves = list(entry.result_shape.leaves())
    if donors and any(shape.is_dynamic or shape.is_unbounded for _, shape in leaves):
        unused += [UnusedDonor(p, i, "the result has dynamic dimensions, which disables donor "
                               "matching") for _, p, i in donors]
        donors = []
    donees = [(shape.byte_size, index) for index, shape in leaves
              if donors and shape.is_array and index not in covered_outputs]
    donors.sort(key=lambda d: -d[0])
    donees.sort(key=lambda d: -d[0])
    everyone = ", ".join(f"{index_text(i)} ({s} bytes)" for s, i in donees) or "none"
    matched: list[AliasEntry] = []
    j = 0
    for size, number, index in donors:
        while j < len(donees) and donees[j][0] > size:
            j += 1
        if j < len(donees) and donees[j][0] == size:
            matched.append(AliasEntry(donees[j][1], number, index, "may-alias"))
            j += 1
        else:
            unused.append(UnusedDonor(number, index, f"no output of {size} bytes is left to "
                                      f"take it (outputs without an input_output_alias: "
                                      f"{everyone})"))
    return AliasPlan(applied + matched, unused, skipped)
