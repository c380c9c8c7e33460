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

from runtime import HloArgumentError, reassign
from runtime.buffers import BufferAssignment
from runtime.hlo.ir import AliasEntry
from runtime.hlo.shape import Shape, index_text

from .formatting import format_bytes, format_change

SHOWN_NAMES = 4        # donated parameter names listed in the summary before "..."


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
    trial = reassign(assignment, frozenset({number}))
    if aliased_outputs(trial, number):
        return None
    reasons = [d.reason for d in trial.unused_donors if d.parameter_number == number]
    return "buffer_donor matches no output: " + "; ".join(reasons)


def aliased_outputs(assignment: BufferAssignment, number: int) -> list[str]:
    """The output indices (as text) that live in parameter ``number``'s bytes in this plan."""
    return outputs_by_parameter(assignment).get(number, [])


def outputs_by_parameter(assignment: BufferAssignment) -> dict[int, list[str]]:
    """``aliased_outputs`` of every parameter at once: a panel's rows read all of them at each
    toggle, and one pass over the allocations per row is quadratic in a model's parameters."""
    found: dict[int, list[str]] = {}
    for a in assignment.allocations:
        if a.kind == "parameter" and a.parameter_number is not None \
                and a.aliased_output is not None:
            found.setdefault(a.parameter_number, []).append(index_text(a.aliased_output))
    return found


class DonationModel:
    """A set of donated parameters and the buffer assignment it leads to.

    Must-alias parameters are always donated: a run that does not donate them fails.
    ``baseline`` is the plan with nothing optional donated, what the summary compares with.
    Plans are kept per donation set (``plan``), so flipping a toggle back, or to a set seen
    before, costs nothing; a new set costs one ``reassign`` (about 0.16 s of CPU for ViT-tiny's
    243 parameters, docs/performance.md).
    """

    def __init__(self, assignment: BufferAssignment, donated: Iterable[int] = ()) -> None:
        self.parameters = describe_parameters(assignment)
        self._numbers = {p.number: p for p in self.parameters}
        self.forced = frozenset(p.number for p in self.parameters if p.must_alias)
        self.donatable = frozenset(p.number for p in self.parameters
                                   if p.blocked is None and not p.must_alias)
        chosen = frozenset(donated)
        for number in sorted(chosen):
            self._check_donatable(self._parameter(number))
        self._source = assignment
        self._plans: dict[frozenset[int], BufferAssignment] = {}
        self.baseline = self.plan(self.forced)
        self.donated = chosen | self.forced
        self.assignment = self.plan(self.donated)
        self.last_change = ""

    @property
    def peak(self) -> int:
        return self.assignment.peak

    def plan(self, donated: frozenset[int]) -> BufferAssignment:
        """The buffer assignment for exactly ``donated`` (kept for the next time)."""
        if donated not in self._plans:
            self._plans[donated] = reassign(self._source, donated)
        return self._plans[donated]

    def set_donated(self, number: int, donate: bool) -> str:
        """Donate (or keep) parameter ``number``; returns the sentence that says what changed."""
        param = self._parameter(number)
        if donate:
            self._check_donatable(param)
        elif param.must_alias:
            raise HloArgumentError(f"parameter {number} ({param.name}) is must-alias: every run "
                                   "has to donate it")
        donated = self.donated | {number} if donate else self.donated - {number}
        return self._choose(donated, param.name, donate)

    def donate_all(self, donate: bool = True) -> str:
        """Donate every donatable parameter (``donate=False``: none but the must-alias ones)."""
        donated = self.forced | self.donatable if donate else self.forced
        count = len(self.donatable)
        what = (f"all {count} donatable parameter{'' if count == 1 else 's'}" if donate
                else "every optional parameter")
        return self._choose(donated, what, donate)

    def _choose(self, donated: frozenset[int], what: str, donate: bool) -> str:
        if donated == self.donated:
            return self.last_change
        before = self.assignment
        changed = self.donated ^ donated
        self.donated = donated
        self.assignment = self.plan(donated)
        self.last_change = describe_change(what, donate, changed, before, self.assignment)
        return self.last_change

    def summary(self) -> str:
        """``peak 12.0 KiB -> 8.0 KiB, -33 %; total allocated ...`` against the plan that
        donates nothing optional: both figures, since donation can shrink the total allocated
        and leave the peak where it was."""
        base, now = self.baseline.memory_stats, self.assignment.memory_stats
        optional = sorted(self.donated - self.forced)
        if not optional:
            return (f"peak {format_bytes(now.peak)}, total allocated {format_bytes(now.total)} "
                    "(nothing donated)")
        names = [self._numbers[n].name for n in optional]
        arrow = "\u2192"
        shown = ", ".join(names[:SHOWN_NAMES]) + (f" \u2026 {len(names)} in all"
                                                    if len(names) > SHOWN_NAMES else "")
        peak = (f"peak {format_bytes(now.peak)} (unchanged)" if base.peak == now.peak else
                f"peak {_from_to(base.peak, now.peak, arrow)}, "
                f"{format_change(base.peak, now.peak)}")
        return (f"{peak}; total allocated "
                f"{_from_to(base.total, now.total, arrow)}, "
                f"{format_change(base.total, now.total)} (donating {shown})")

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


def _from_to(before: int, after: int, arrow: str = "->") -> str:
    """``1.6 MiB -> 1.2 MiB``; in bytes where the rounded figures would read the same."""
    if format_bytes(before) == format_bytes(after):
        return f"{before:,} B {arrow} {after:,} B"
    return f"{format_bytes(before)} {arrow} {format_bytes(after)}"


def _difference(name: str, before: int, after: int) -> tuple[str, str]:
    """(verb, phrase): ``("saves", "4.0 KiB of peak (12.0 KiB -> 8.0 KiB)")``."""
    if before == after:
        return "saves", f"0 B of {name} ({format_bytes(after)})"
    verb = "saves" if after < before else "costs"
    return verb, f"{format_bytes(abs(before - after))} of {name} ({_from_to(before, after)})"


def _indices(outputs: set) -> str:
    """``output {0}`` or ``outputs {0}, {1}, {2}, {3} ... (166)``."""
    said = [index_text(o) for o in sorted(outputs)]
    more = f" \u2026 ({len(said)})" if len(said) > SHOWN_NAMES else ""
    return f"output{'' if len(said) == 1 else 's'} {', '.join(said[:SHOWN_NAMES])}{more}"


def _outputs_in(plan: BufferAssignment, numbers: frozenset[int]) -> set:
    return {a.aliased_output for a in plan.allocations
            if a.kind == "parameter" and a.parameter_number in numbers
            and a.aliased_output is not None}


def _why_peak(before: BufferAssignment, after: BufferAssignment, plan: BufferAssignment,
              outputs: set) -> str:
    """Why the peak moved or did not: whether the outputs that changed buffers are live at
    the peak of ``plan``, the one (``before`` or ``after``) where they have their own buffers.
    An output's own allocation counts in the total allocated whenever it exists, but in the
    peak only at the steps where it is live; where they are not live there, a small change of
    the peak comes from the plan around them (schedule, packing), not from their bytes."""
    if not outputs:
        return ""
    owned = {a.index for a in plan.allocations
             if a.kind == "output" and a.output_index in outputs}
    live = sum(b.size for b in plan.live_at_peak() if b.allocation in owned)
    be = "is" if len(outputs) == 1 else "are"
    at = f"step {plan.peak_step}, {plan.peak_instruction.name}"
    if before.peak == after.peak:
        if not live:
            return f"the peak does not move: {_indices(outputs)} {be} not live at the peak ({at})"
        return f"the peak does not move: another step reaches the same peak ({at})"
    if not live:
        return f"{_indices(outputs)} {be} not live at the peak ({at})"
    own = "in its own buffer" if be == "is" else "in their own buffers"
    return f"{_indices(outputs)} {be} live at the peak ({at}) {own}"


def describe_change(what: str, donate: bool, numbers: Iterable[int],
                    before: BufferAssignment, after: BufferAssignment) -> str:
    """``donating w saves 4.0 MiB of peak (12.0 MiB -> 8.0 MiB) and 4.0 MiB of total
    allocated (...); runs in place``: both figures (a donation may shrink only the total),
    why the peak moved or not, and what happens to the outputs."""
    numbers = frozenset(numbers)
    verb = "donating" if donate else "keeping"
    (peak_verb, peak), (total_verb, total) = (
        _difference("peak", before.peak, after.peak),
        _difference("total allocated", before.memory_stats.total, after.memory_stats.total))
    head = (f"{verb} {what} {peak_verb} {peak} and "
            f"{'' if total_verb == peak_verb else total_verb + ' '}{total}")
    moved = _outputs_in(after if donate else before, numbers)
    why = _why_peak(before, after, before if donate else after, moved)
    if why:
        head = f"{head}; {why}"
    if not donate:
        if not moved:
            return f"{head}; no output lived in its buffer"
        gets = "gets its own buffer" if len(moved) == 1 else "get their own buffers"
        return f"{head}; {_indices(moved)} {gets}"
    if not moved:
        return f"{head}; no output is left to take its buffer"
    known = {c.reason for c in before.copies}
    added = [c for c in after.copies if c.reason not in known]
    if added:
        copies = "; ".join(f"{c.instruction}: {c.reason}" for c in added)
        return f"{head}; in place after copy insertion adds {copies}"
    return f"{head}; runs in place"
