"""The module after the passes, annotated with where each instruction's result lives.

Like ``%%cython -a`` for memory: every instruction the program runs as a step of the schedule
gets its step, the allocation, offset and size of each leaf of its result, and the live range
of the buffer there; a fusion also lists the instructions it was fused from, by the names of the
module the user wrote (and their lines), and expands to its fused computation. The numbers are
read from the buffer assignment (``slice``, ``placement``), never recomputed. Each instruction
also carries the Python line JAX recorded for it (``runtime.hlo.source_locations``) and what its
kernel costs (bytes moved and element operations, ``fusion_cost.kernel_cost``), and the view
groups instructions by Python line, as ``%%cython -a`` groups C by Python: where the bytes and
the work of a program come from. Rendered as HTML (rows tinted by cost, a coloured edge for
the allocation, fusions in ``<details>``, the instructions in a box of bounded height that
scrolls, so a whole model's view stays in reach) and as plain text. Each row carries its
instruction's name and each slot its buffer's, so a live memory timeline of the same result
(``link``) can point at a row and be pointed to from one.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from runtime.buffers import BufferAssignment
from runtime.hlo import HloModule
from runtime.hlo.ir import HloInstruction
from runtime.hlo.opcode_enum import Opcode
from runtime.hlo.opcodes import OPCODES
from runtime.hlo.printer import instruction_to_text
from runtime.hlo.shape import ShapeIndex, index_text
from runtime.hlo.source_locations import SourceLocation, source_location
from runtime.analysis.fusion_cost import kernel_cost

from .formatting import format_bytes
from .names import fused_members, source_name

# Allocation colours (Paul Tol's "light" scheme): rows are tinted, so they stay readable in
# light and dark themes alike.
PALETTE = ("#77AADD", "#EE8866", "#EEDD88", "#FFAABB", "#99DDFF", "#44BB99", "#BBCC33",
           "#AAAA00", "#DDDDDD")
# the instruction keeps to one line, cut with an ellipsis at its column's width (the whole
# text is its tooltip), so a row is as tall as its notes and the table fits a 1280 px screen
_CODE = ("font-family:var(--jp-code-font-family,monospace);white-space:pre;display:inline-block;"
         "max-width:calc(100% - 1.2em);overflow:hidden;text-overflow:ellipsis;vertical-align:top")
# the cost tint: the most expensive instruction (bytes moved plus element operations) at full
# strength, as %%cython -a yellows the lines that call into Python most
_HEAT = "#F2B01E"
_NOTE = "font-size:0.85em;opacity:0.8;white-space:normal;overflow-wrap:anywhere"
_CELL = "padding:1px 8px 1px 0;text-align:left;vertical-align:top"
# a model's view has thousands of rows: they scroll in a box, so the report stays short
_BODY = "max-height:32em;overflow:auto;resize:vertical"
# the columns of an instruction table (step, Python line, allocation, instruction) and their
# widths: fixed, so the instruction column takes what the page leaves instead of pushing the
# Python line off-screen
_COLUMNS = (("step", "3.5em"), ("Python", "9em"), ("allocation +offset size, live range", "21em"),
            ("instruction (after the passes)", "auto"))
# a slot on one line too (allocation, offset, size and live range come first; the buffer it
# shares, last, may be cut), so a row is not four lines tall; the whole text is its tooltip
_SLOT = ("display:inline-block;max-width:100%;white-space:nowrap;overflow:hidden;"
         "text-overflow:ellipsis;vertical-align:top")
_TABLE = "border-collapse:collapse;table-layout:fixed;width:100%"
# JAX's metadata attribute, shown by the Python column instead of in the instruction's line
# (it stays in the tooltip)
_METADATA = re.compile(r", metadata=\{[^{}]*\}")
# a model's entry takes hundreds of parameters: its signature keeps to one line (a tooltip
# holds it all) instead of filling the box before the first row
_SIGNATURE = ("display:inline-block;max-width:100%;white-space:nowrap;overflow:hidden;"
              "text-overflow:ellipsis;vertical-align:bottom")


@dataclass(frozen=True)
class Slot:
    """Where one leaf (or tuple table) of an instruction's result lives."""

    index: ShapeIndex
    buffer: str
    allocation: int
    kind: str
    offset: int
    size: int
    live: tuple[int, int]
    defined_here: bool          # False: the instruction forwards bytes defined elsewhere

    @property
    def where(self) -> str:
        return f"#{self.allocation} {self.kind}"


@dataclass(frozen=True)
class AnnotatedInstruction:
    name: str
    opcode: Opcode
    text: str                                   # the printed HLO line
    step: int | None                            # None inside fusions and called computations
    slots: list[Slot] = field(default_factory=list)
    fused_from: list[str] = field(default_factory=list)   # names in the source module
    fused: list[AnnotatedInstruction] = field(default_factory=list)
    source_lines: list[int] = field(default_factory=list)
    origin: str = ""                            # what made it, when the source has no such name
    python: SourceLocation | None = None        # JAX's record of the Python line (a fusion: its
                                                # root's, else its first member's that has one)
    bytes: float = 0.0                          # its kernel's bytes read and written
    operations: float = 0.0                     # its kernel's element operations

    @property
    def allocation(self) -> int | None:
        return self.slots[0].allocation if self.slots else None


@dataclass(frozen=True)
class PythonLine:
    """The instructions one Python line became, and what they cost together."""

    location: SourceLocation
    instructions: list[AnnotatedInstruction]

    @property
    def bytes(self) -> float:
        return sum(i.bytes for i in self.instructions)

    @property
    def operations(self) -> float:
        return sum(i.operations for i in self.instructions)


@dataclass(frozen=True)
class AnnotatedComputation:
    name: str
    role: str                                   # "entry" | "sequential" | "called"
    signature: str
    instructions: list[AnnotatedInstruction]


class AnnotatedModule:
    """``annotate(plan, source)``; ``view["name"]`` is one instruction, ``view.to_text()`` the
    plain rendering, and in a notebook it shows as HTML."""

    def __init__(self, name: str, computations: list[AnnotatedComputation],
                 allocations: list[tuple[int, str, int]], link: str = "") -> None:
        """``link``: the key a ``MemoryTimeline`` of the same plan shares, so each finds the
        other in the page ("" links to none)."""
        self.name = name
        self.link = link
        self.computations = computations
        self.allocations = allocations          # (index, kind, size)
        self._by_name = {i.name: i for c in computations for i in c.instructions}

    def __getitem__(self, name: str) -> AnnotatedInstruction:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"{self.name} has no instruction {name!r} after the passes") from None

    def instructions(self) -> list[AnnotatedInstruction]:
        return [i for c in self.computations for i in c.instructions]

    def by_python_line(self) -> list[PythonLine]:
        """The instructions the program runs (the entry's and loop bodies', not the members
        of fusions) grouped by the Python line JAX recorded, in file and line order."""
        groups: dict[tuple[str, int], list[AnnotatedInstruction]] = {}
        for comp in self.computations:
            if comp.role == "called":
                continue
            for inst in comp.instructions:
                if inst.python is not None and (inst.bytes or inst.operations):
                    groups.setdefault((inst.python.file, inst.python.line), []).append(inst)
        return [PythonLine(members[0].python, members)  # type: ignore[arg-type]
                for _, members in sorted(groups.items())]

    def to_text(self) -> str:
        return annotated_text(self)

    def to_html(self) -> str:
        return annotated_html(self)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<AnnotatedModule {self.name}: {len(self._by_name)} instructions>"

    def _repr_html_(self) -> str:
        return self.to_html()

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(repr(self) if cycle else self.to_text())


# --- building ----------------------------------------------------------------------------------
def annotate(plan: BufferAssignment, source: HloModule | None = None, *,
             link: str = "") -> AnnotatedModule:
    """The annotated view of ``plan.module``; ``source`` (the module as the user wrote it)
    gives the names fusions are traced back to (default: the module the plan was made from);
    ``link`` is the key of the ``MemoryTimeline`` it is linked with."""
    source = source or plan.source
    lines = {i.name: i.location.line for i in source.instructions() if i.location is not None}
    names = {i.name for i in source.instructions()}
    origins = {c.instruction: f"inserted copy: {c.reason}" for c in plan.copies}
    builder = _Builder(plan, names, lines, origins, source)
    module = plan.module
    assert module.entry is not None
    fused = {c for i in module.instructions() if i.opcode == Opcode.FUSION
             for c in i.called_computations}
    steps = plan.schedule.step
    spans = plan.schedule.spans
    sequential = sorted((c for c in module.computations if c in spans),
                        key=lambda c: (c is not module.entry, spans[c][0]))
    computations = []
    for comp in sequential:
        ordered = sorted(comp.instructions, key=lambda i: steps.get(i, len(steps)))
        role = "entry" if comp is module.entry else "sequential"
        computations.append(AnnotatedComputation(comp.name, role, comp.signature_text(),
                                                 [builder.instruction(i) for i in ordered]))
    for comp in module.computations:
        if comp not in spans and comp not in fused:
            computations.append(AnnotatedComputation(
                comp.name, "called", comp.signature_text(),
                [builder.instruction(i) for i in comp.instructions]))
    allocations = [(a.index, a.kind, a.size) for a in plan.allocations]
    return AnnotatedModule(module.name, computations, allocations, link)


class _Builder:
    def __init__(self, plan: BufferAssignment, names: set[str], lines: dict[str, int],
                 origins: dict[str, str], source: HloModule) -> None:
        self.plan = plan
        self.names = names
        self.lines = lines
        self.origins = origins
        # the module the plan was made from keeps the stack-frame tables; the passes keep
        # instructions' metadata
        self.tables = source if source.stack_frames else plan.module

    def python(self, inst: HloInstruction) -> SourceLocation | None:
        if inst.opcode != Opcode.FUSION:
            return source_location(self.tables, inst)
        members = inst.calls.instructions
        root = inst.calls.root_instruction
        for member in [root, *reversed(members)]:
            found = source_location(self.tables, member)
            if found is not None:
                return found
        return source_location(self.tables, inst)

    def source_name(self, name: str) -> str | None:
        return source_name(name, self.names)

    def slots(self, inst: HloInstruction) -> list[Slot]:
        plan = self.plan
        if not plan.dataflow.has_positions(inst):
            return []
        slots = []
        for index, value in plan.dataflow.value_set(inst).items():
            placed = plan.placement(plan.aliasing.buffer_of(value))
            where = plan.value_slice(value)
            slots.append(Slot(index, placed.name, where.allocation,
                              plan.allocations[where.allocation].kind, where.offset, where.size,
                              (placed.live.start, placed.live.end),
                              value.instruction is inst))
        return slots

    def instruction(self, inst: HloInstruction) -> AnnotatedInstruction:
        fused = [self.instruction(m) for c in inst.called_computations for m in c.instructions] \
            if inst.opcode == Opcode.FUSION else []
        held = fused_members(inst, self.names) if inst.opcode == Opcode.FUSION else []
        original = self.source_name(inst.name)
        origin = ""
        if inst.name in self.origins:
            origin = self.origins[inst.name]
        elif inst.opcode == Opcode.FUSION:
            origin = "" if held else "made by fusion"
        elif original is None:
            origin = "made by the passes"
        elif original != inst.name:
            origin = f"a pass's copy of {original}"
        traced = held or ([original] if original else [])
        source_lines = sorted({self.lines[n] for n in traced if n in self.lines})
        step = self.plan.schedule.step.get(inst)
        runs = step is not None and _runs_a_kernel(inst)
        cost = kernel_cost(inst) if runs else None
        return AnnotatedInstruction(inst.name, inst.opcode, instruction_to_text(inst),
                                    step, self.slots(inst), held, fused, source_lines, origin,
                                    self.python(inst), cost.bytes if cost else 0.0,
                                    cost.operations if cost else 0.0)



def _runs_a_kernel(inst: HloInstruction) -> bool:
    """Whether lowering gives ``inst`` work of its own: not a parameter or constant (bound,
    uploaded), not a value passed on (tuple, get-tuple-element, bitcast), not control flow
    (the instructions of its computations have rows of their own)."""
    row = OPCODES[inst.opcode]
    return inst.opcode not in (Opcode.PARAMETER, Opcode.CONSTANT) and not row.forwards \
        and not row.sequential_calls


# --- rendering ---------------------------------------------------------------------------------
def _lines_text(lines: list[int]) -> str:
    if not lines:
        return ""
    if len(lines) == 1:
        return f"line {lines[0]}"
    more = " \u2026" if len(lines) > 8 else ""
    return f"lines {', '.join(map(str, lines[:8]))}{more}"


def _slot_text(inst: AnnotatedInstruction, slot: Slot) -> str:
    """``{1} #3 temp +256 4.0 KiB live 2–7 (buffer w)``: the buffer is named where it is not
    the instruction's own (an aliased parameter's, or one a forwarding instruction passes on)."""
    index = f"{index_text(slot.index)} " if slot.index else ""
    own = inst.name + (index_text(slot.index) if slot.index else "")
    buffer = "" if slot.buffer == own else f" (buffer {slot.buffer})"
    return (f"{index}{slot.where} +{slot.offset} {format_bytes(slot.size)} "
            f"live {slot.live[0]}\u2013{slot.live[1]}{buffer}")


def _notes(inst: AnnotatedInstruction) -> list[str]:
    notes = []
    if inst.fused_from:
        more = f" (+{len(inst.fused_from) - 8} more)" if len(inst.fused_from) > 8 else ""
        notes.append(f"fused from {', '.join(inst.fused_from[:8])}{more}")
    if inst.origin:
        notes.append(inst.origin)
    if inst.source_lines:
        notes.append(f"source {_lines_text(inst.source_lines)}")
    if inst.python is not None:
        notes.append(f"Python {inst.python.where}")
    return ["; ".join(notes)] if notes else []


def annotated_text(view: AnnotatedModule) -> str:
    out = [f"HloModule {view.name} after the passes: step, allocation, offset, size, live "
           f"range of each result"]
    lines = view.by_python_line()
    if lines:
        out.append("")
        out.append("By Python line (bytes moved, element operations):")
        for line in lines:
            out.append(f"  {line.location.where:<24} {_cost_text(line):<36} "
                       f"{len(line.instructions)} instruction(s)  {line.location.function}")
    for comp in view.computations:
        out.append("")
        out.append(f"{'ENTRY ' if comp.role == 'entry' else ''}%{comp.name} {comp.signature}"
                   + ("  (called: no buffers of its own)" if comp.role == "called" else ""))
        for inst in comp.instructions:
            step = "" if inst.step is None else str(inst.step)
            first = inst.slots[0] if inst.slots else None
            where = (f"{first.where:<14} {first.offset:>10} {format_bytes(first.size):>10} "
                     f"{first.live[0]:>5}\u2013{first.live[1]:<5}" if first else " " * 48)
            out.append(f"  {step:>5}  {where}  {inst.text}")
            if first and first.buffer != inst.name:
                out.append(f"{'':>9}in buffer {first.buffer}")
            for slot in inst.slots[1:]:
                out.append(f"{'':>9}{_slot_text(inst, slot)}")
            for note in _notes(inst):
                out.append(f"{'':>9}// {note}")
            for member in inst.fused:
                out.append(f"{'':>9}| {member.text}")
    return "\n".join(out)


def allocation_colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _tint(colour: str, alpha: float) -> str:
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _instruction_cell(inst: AnnotatedInstruction) -> str:
    shown = _METADATA.sub("", inst.text)
    code = f'<code style="{_CODE}" title="{_e(inst.text)}">{_e(shown)}</code>'
    if not inst.fused:
        return code
    members = "\n".join(m.text for m in inst.fused)
    return (f'<details class="hlo-fusion"><summary>{code}</summary>'
            f'<pre style="margin:2px 0 4px 1.5em;font-size:0.95em;max-width:60em;overflow-x:auto">'
            f'{_e(members)}</pre></details>')


def _slot_html(inst: AnnotatedInstruction, slot: Slot) -> str:
    """A slot's text, marked with its buffer's name (the timeline's link target)."""
    text = _e(_slot_text(inst, slot))
    return f'<span data-buffer="{_e(slot.buffer)}" title="{text}" style="{_SLOT}">{text}</span>'


def _slots_cell(inst: AnnotatedInstruction) -> str:
    if not inst.slots:
        return ""
    text = _slot_html(inst, inst.slots[0])
    if len(inst.slots) == 1:
        return text
    rest = "<br>".join(_slot_html(inst, s) for s in inst.slots[1:])
    return f"<details><summary>{text} (+{len(inst.slots) - 1} leaves)</summary>{rest}</details>"


def _cost(inst: AnnotatedInstruction | PythonLine) -> float:
    return inst.bytes + inst.operations


def _heat(cost: float, most: float) -> str:
    """The cost tint: transparent for nothing, full for the most expensive row."""
    share = cost / most if most > 0 else 0.0
    return "transparent" if share <= 0 else _tint(_HEAT, round(0.08 + 0.5 * share ** 0.5, 3))


def _cost_text(item: AnnotatedInstruction | PythonLine) -> str:
    return f"{format_bytes(int(item.bytes))} moved, {_count(item.operations)} operations"


def _count(n: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


def _python_cell(inst: AnnotatedInstruction) -> str:
    if inst.python is None:
        return ""
    where = inst.python
    title = " ".join(p for p in (where.op_name, f"{where.file}:{where.line}", where.function) if p)
    return f'<span title="{_e(title)}">{_e(where.where)}</span>'


def _row(inst: AnnotatedInstruction, most: float, python: bool) -> str:
    colour = allocation_colour(inst.allocation) if inst.allocation is not None else "transparent"
    style = f"background:{_heat(_cost(inst), most)};border-left:4px solid {colour}"
    step = "" if inst.step is None else str(inst.step)
    notes = _notes(inst) + ([_cost_text(inst)] if _cost(inst) else [])
    under = f'<div style="{_NOTE}">{"<br>".join(_e(n) for n in notes)}</div>' if notes else ""
    return (f'<tr data-instruction="{_e(inst.name)}" style="{style}">'
            f'<td style="{_CELL};text-align:right">{step}</td>'
            + (f'<td style="{_CELL};overflow-wrap:anywhere">{_python_cell(inst)}</td>'
               if python else "") +
            f'<td style="{_CELL}">{_slots_cell(inst)}</td>'
            f'<td style="{_CELL}">{_instruction_cell(inst)}{under}</td></tr>')


def _python_lines_html(view: AnnotatedModule) -> str:
    """The %%cython -a view: one row a Python line, tinted by what its instructions cost,
    folding the instructions it became."""
    lines = view.by_python_line()
    if not lines:
        return ""
    most = max(_cost(line) for line in lines)
    rows = []
    for line in lines:
        where = line.location
        names = ", ".join(i.name for i in line.instructions)
        rows.append(
            f'<tr data-python-line="{_e(where.where)}" style="background:{_heat(_cost(line), most)}">'
            f'<td style="{_CELL};white-space:nowrap" title="{_e(where.file)}">{_e(where.where)}</td>'
            f'<td style="{_CELL}">{_e(where.function)}</td>'
            f'<td style="{_CELL};white-space:nowrap">{_e(_cost_text(line))}</td>'
            f'<td style="{_CELL}"><details><summary>{len(line.instructions)} instruction(s)'
            f'</summary><span style="{_NOTE}">{_e(names)}</span></details></td></tr>')
    head = "".join(f'<th style="{_CELL}">{c}</th>' for c in
                   ("Python line", "function", "cost", "instructions"))
    return (f'<details open><summary><b>By Python line</b> <small>(JAX\'s metadata; tinted by '
            f'bytes moved plus element operations)</small></summary><table style="border-collapse:'
            f'collapse"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            f'</details>')


def annotated_html(view: AnnotatedModule) -> str:
    python = any(i.python is not None for i in view.instructions())
    shown = [c for c in _COLUMNS if python or c[0] != "Python"]     # none recorded: no column
    columns = "".join(f'<col style="width:{width}">' for _, width in shown)
    head = "".join(f'<th style="{_CELL}">{name}</th>' for name, _ in shown)
    most = max((_cost(i) for i in view.instructions()), default=0.0)
    blocks = [_python_lines_html(view)]
    for comp in view.computations:
        rows = "".join(_row(i, most, python) for i in comp.instructions)
        title = (f"{'ENTRY ' if comp.role == 'entry' else ''}%{_e(comp.name)} "
                 f'<small style="{_SIGNATURE}" title="{_e(comp.signature)}">'
                 f"{_e(comp.signature)}</small>"
                 + (" <i>(called: no buffers of its own)</i>" if comp.role == "called" else ""))
        opened = " open" if comp.role != "called" else ""
        blocks.append(f'<details{opened}><summary><b>{title}</b></summary>'
                      f'<table style="{_TABLE}"><colgroup>{columns}</colgroup>'
                      f'<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></details>')
    legend = " ".join(
        f'<span style="display:inline-block;padding:0 4px;margin:1px;'
        f'background:{_tint(allocation_colour(i), 0.35)};border-left:4px solid '
        f'{allocation_colour(i)}">#{i} {_e(kind)} {format_bytes(size)}</span>'
        for i, kind, size in view.allocations)
    link = f' data-hlo-link="{_e(view.link)}"' if view.link else ""
    return (f'<div class="hlo-annotated"{link} style="color:inherit">'
            f'<details><summary>allocations (row edges)</summary>{legend}</details>'
            f'<div class="hlo-annotated-body" style="{_BODY}">{"".join(blocks)}</div></div>')
