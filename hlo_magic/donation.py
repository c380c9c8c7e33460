"""Which entry parameters can be donated, and what donating them does to the memory plan.

Donation only pays where an output can live in the parameter's bytes: an ``input_output_alias``
entry names the parameter, or a ``buffer_donor`` entry does and an output of the same byte size
is left to take it. ``DonationModel`` keeps a set of donated parameters and the buffer
assignment for exactly that set (``BufferAssignment.reassign``: no device involved), so a
widget, a test or a student can flip one parameter and read the new peak and a sentence that
says what changed. It holds no widget code: ``widgets.DonationPanel`` is the view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from runtime import HloArgumentError
from runtime.buffers import BufferAssignment
from runtime.hlo.ir import AliasEntry
from runtime.hlo.shape import Shape, index_text

from .formatting import format_bytes, format_change


@dataclass(frozen=True)
class ParameterInfo:
    """One entry parameter and what the module says about reusing its buffer."""

    number: int
    name: str
    shape: Shape
    aliases: tuple[AliasEntry, ...]     # the module's input_output_alias entries for it
    donor: bool                         # named in the module's buffer_donor list
    blocked: str | None                 # why donating it cannot save anything (None: it can)

    @property
    def must_alias(self) -> bool:
        return any(a.kind == "must-alias" for a in self.aliases)

    @property
    def size(self) -> int:
        return sum(leaf.byte_size for _, leaf in self.shape.leaves())

    @property
    def dtype(self) -> str:
        return "tuple" if self.shape.is_tuple else self.shape.element_type.name

    @property
    def shape_text(self) -> str:
        return self.shape.to_text(False)

    def declared(self) -> str:
        """What the module header says, e.g. ``output {0} (may-alias)`` or ``buffer_donor``."""
        parts = [f"output {index_text(a.output_index)} ({a.kind})" for a in self.aliases]
        if self.donor:
            parts.append("buffer_donor")
        return ", ".join(parts)


def describe_parameters(assignment: BufferAssignment) -> list[ParameterInfo]:
    """Every entry parameter of the module ``assignment`` was made from, and whether an output
    can live in its buffer (with the reason where none can)."""
    module = assignment.source
    donors = {d.parameter_number for d in module.buffer_donors}
    infos = []
    for param in module.entry_computation.parameters:
        number = param.param_number
        aliases = tuple(a for a in module.input_output_alias if a.parameter_number == number)
        blocked = None
        if not aliases and number in donors:
            blocked = _unmatched_donor(assignment, number)
        elif not aliases:
            blocked = ("no input_output_alias or buffer_donor entry names this parameter, so "
                       "no output can live in its buffer")
        infos.append(ParameterInfo(number, param.name, param.shape, aliases, number in donors,
                                   blocked))
    return infos


def _unmatched_donor(assignment: BufferAssignment, number: int) -> str | None:
    trial = assignment.reassign(frozenset({number}))
    if aliased_outputs(trial, number):
        return None
    reasons = [d.reason for d in trial.unused_donors if d.parameter_number == number]
    return "buffer_donor matches no output: " + "; ".join(reasons)


def aliased_outputs(assignment: BufferAssignment, number: int) -> list[str]:
    """The output indices (as text) that live in parameter ``number``'s bytes in this plan."""
    return [index_text(a.aliased_output) for a in assignment.allocations
            if a.kind == "parameter" and a.parameter_number == number
            and a.aliased_output is not None]


class DonationModel:
    """A set of donated parameters and the buffer assignment it leads to.

    Must-alias parameters are always donated: a run that does not donate them fails.
    ``baseline`` is the plan with nothing optional donated, what the summary compares with.
    """

    def __init__(self, assignment: BufferAssignment, donated: Iterable[int] = ()) -> None:
        self.parameters = describe_parameters(assignment)
        self._numbers = {p.number: p for p in self.parameters}
        self.forced = frozenset(p.number for p in self.parameters if p.must_alias)
        chosen = frozenset(donated)
        for number in sorted(chosen):
            self._check_donatable(self._parameter(number))
        self._source = assignment
        self.baseline = assignment.reassign(self.forced)
        self.donated = chosen | self.forced
        self.assignment = assignment.reassign(self.donated)
        self.last_change = ""

    @property
    def peak(self) -> int:
        return self.assignment.peak

    def set_donated(self, number: int, donate: bool) -> str:
        """Donate (or keep) parameter ``number``; returns the sentence that says what changed."""
        param = self._parameter(number)
        if donate:
            self._check_donatable(param)
        elif param.must_alias:
            raise HloArgumentError(f"parameter {number} ({param.name}) is must-alias: every run "
                                   "has to donate it")
        donated = self.donated | {number} if donate else self.donated - {number}
        if donated == self.donated:
            return self.last_change
        before = self.assignment
        self.donated = donated
        self.assignment = self._source.reassign(donated)
        self.last_change = describe_change(param, donate, before, self.assignment)
        return self.last_change

    def summary(self) -> str:
        """``peak 12.0 KiB -> 8.0 KiB, -33 %`` against the plan that donates nothing optional."""
        base, now = self.baseline.peak, self.assignment.peak
        optional = sorted(self.donated - self.forced)
        if not optional:
            return f"peak {format_bytes(now)} (nothing donated)"
        names = ", ".join(self._numbers[n].name for n in optional)
        return (f"peak {format_bytes(base)} \u2192 {format_bytes(now)}, "
                f"{format_change(base, now)} (donating {names})")

    def _parameter(self, number: int) -> ParameterInfo:
        if number not in self._numbers:
            raise HloArgumentError(f"parameter {number} does not exist: the entry has "
                                   f"{len(self.parameters)} parameter(s)")
        return self._numbers[number]

    @staticmethod
    def _check_donatable(param: ParameterInfo) -> None:
        if param.blocked is not None:
            raise HloArgumentError(f"parameter {param.number} ({param.name}) cannot be donated: "
                                   f"{param.blocked}")


def describe_change(param: ParameterInfo, donate: bool, before: BufferAssignment,
                    after: BufferAssignment) -> str:
    """``donating p0 saves 4.0 MiB: peak 12.0 MiB -> 8.0 MiB; runs in place``."""
    verb = "donating" if donate else "keeping"
    delta = before.peak - after.peak
    peaks = f"peak {format_bytes(before.peak)} -> {format_bytes(after.peak)}"
    if delta > 0:
        head = f"{verb} {param.name} saves {format_bytes(delta)}: {peaks}"
    elif delta < 0:
        head = f"{verb} {param.name} costs {format_bytes(-delta)}: {peaks}"
    else:
        head = f"{verb} {param.name} leaves the peak at {format_bytes(after.peak)}"
    if not donate:
        outputs = aliased_outputs(before, param.number)
        if not outputs:
            return f"{head}; no output lived in its buffer"
        return f"{head}; output {', '.join(outputs)} gets its own buffer"
    if not aliased_outputs(after, param.number):
        return f"{head}; no output is left to take its buffer"
    known = {c.reason for c in before.copies}
    added = [c for c in after.copies if c.reason not in known]
    if added:
        copies = "; ".join(f"{c.instruction}: {c.reason}" for c in added)
        return f"{head}; in place after copy insertion adds {copies}"
    return f"{head}; runs in place"
