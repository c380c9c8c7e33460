"""What a ``%%hlo`` report says, as plain data: facts, tables, preformatted text and pictures.

The report is built once from the result of a cell and rendered twice (``render.to_html`` and
``render.to_text``), so the HTML and the plain-text fallback can never disagree. Plain answers
come first: the outputs, the peak and the biggest saving, then the parameters (what donation
does) and the memory figures; the rest is folded (``Folded``: HTML ``<details>``): the module,
device and run, the buffer assignment's tables, how buffers share bytes and what each fusion
holds, and the glossary, open only in the first report of a session. Buffers are named so the
user can find them: a fusion's buffer lists the source instructions it holds. Every table keeps
its first ``max_table_rows`` rows in view and folds the next ones under "N more" (at most
``FOLDED_TIMES`` times as many again, so a whole model's report stays small: the full data
stays on the result object), so the answers stay on the first screen of a 250-parameter model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Sequence, Union

import numpy as np

from runtime import reassign
from runtime.analysis.value_shardings import ValueSharding, is_sharded
from runtime.errors import HloError
from runtime.hlo.dtypes import from_numpy
from runtime.hlo.opcode_enum import Opcode
from runtime.hlo.shape import ArrayShape, index_text

from . import collectives
from .donation import ParameterInfo, aliased_outputs, outputs_by_parameter
from .formatting import format_bytes, format_seconds
from .glossary import GLOSSARY
from .names import buffer_label, fused_members, fusions, label, source_of
from .sharing import reuses, sentence

if TYPE_CHECKING:
    from runtime.buffers import Allocation, BufferAssignment
    from runtime.execution.executable import RunRecord

    from .result import HloResult

SECTIONS = ("hlo", "assignment", "timeline", "annotated", "kernels", "panel")
CONSTANT_ROWS = 3      # beyond this many constant allocations, the table gives them one row
SHOWN_NAMES = 4        # parameter names listed in one sentence before "..."
FOLDED_TIMES = 4       # a long table folds at most this many times max_table_rows more rows
PEAK_KINDS = 3         # allocation kinds named in the answer that says what holds the peak


@dataclass(frozen=True)
class Facts:
    """Label/value pairs: the module summary at the top of every report."""

    title: str
    items: list[tuple[str, str]]


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    notes: list[str] = field(default_factory=list)
    omitted: int = 0                   # rows beyond ``rows``: the first of them are ``folded``
    omitted_what: str = "rows"
    folded: Sequence[tuple[str, ...]] = field(default_factory=list)


@dataclass(frozen=True)
class Preformatted:
    title: str
    text: str


@dataclass(frozen=True)
class Picture:
    title: str
    png: bytes
    alt: str


@dataclass(frozen=True)
class Folded:
    """Parts shown under a heading that opens on request (HTML ``<details>``)."""

    title: str
    parts: list
    open: bool = False
    in_text: bool = True       # plain text cannot fold: parts said once per session stay out


@dataclass(frozen=True)
class Markup:
    """A view that renders itself (the annotated module): its HTML and its plain text."""

    title: str
    html: str
    text: str


Part = Union[Facts, Table, Preformatted, Picture, Folded, Markup]


def build_report(result: HloResult) -> list[Part]:
    """The parts shown for ``result.show``: answers first, then the details folded."""
    limit = result.max_table_rows
    plan = result.assignment
    members = fusions(plan.module)
    parts: list[Part] = [answer_facts(result, members)]
    if result.devices > 1:
        if result.outputs is not None:
            parts.append(device_output_table(result.outputs, limit))
        if result.collectives():
            parts.append(_limited(collective_table(result), limit))
    elif result.outputs is not None and not _outputs_fit(result.outputs):
        parts.append(output_table(result.outputs, limit))
    analysis = result.executable.analysis
    inputs, outputs = analysis.parameter_shardings, analysis.output_shardings
    sharded = is_sharded(inputs + outputs)
    params = parameter_table(result.parameters, result.donated, plan, result.run)
    parts.append(_limited(with_sharding_columns(params, inputs) if sharded else params, limit))
    if sharded:
        parts.append(_limited(output_sharding_table(outputs), limit))
    parts.append(memory_table(plan))
    details: list[Part] = [module_facts(result)]
    title = "Details: module, device, run"
    if "assignment" in result.show:
        title += ", buffer assignment"
        details += [allocation_table(plan, limit, members), peak_table(plan, limit, members)]
        details += [t for t in (sharing_table(plan, limit, members), fusion_table(members, limit))
                    if t.rows]
        details += [_limited(t, limit) for t in copy_tables(plan)]
    parts.append(Folded(title, details))
    parts.append(Folded("What the memory words mean", [glossary_table()],
                        open=result.explain_terms, in_text=result.explain_terms))
    if "timeline" in result.show:
        parts.append(Picture("Memory timeline", result.timeline_png(),
                             f"live bytes and buffer packing of {result.name}"))
    if "hlo" in result.show:
        parts.append(Preformatted("HLO (as parsed)", result.executable.module.to_text()))
        parts.append(Preformatted("HLO after the passes (fusion)", plan.source.to_text()))
    if "annotated" in result.show:
        view = result.annotated()
        parts.append(Markup("HLO after the passes, annotated with buffers", view.to_html(),
                            view.to_text()))
    if "kernels" in result.show:
        parts += kernel_parts(result.executable.program, limit)
    return parts


def answer_facts(result: HloResult, members: dict[str, list[str]]) -> Facts:
    """The plain answers: outputs (when it ran), the peak, and the biggest saving."""
    plan = result.assignment
    items: list[tuple[str, str]] = []
    if result.devices > 1:
        items += device_facts(result)
    elif result.outputs is not None:
        leaves = list(_output_leaves(result.outputs))
        for index, a in leaves[:3]:
            key = "output" if len(leaves) == 1 else f"output {index_text(index)}"
            items.append((key, _compact(a)))
        if len(leaves) > 3:
            items.append(("outputs", f"\u2026 {len(leaves) - 3} more (see Outputs)"))
    peak = plan.peak_instruction
    items.append(("peak", f"{format_bytes(plan.peak)} at step {plan.peak_step} "
                          f"({label(peak.name, members)}), of "
                          f"{format_bytes(plan.memory_stats.total)} allocated"))
    items.append(("peak holds", peak_holders(plan, members)))
    items.append(("biggest saving", biggest_saving(result)))
    items += [("warning", warning) for warning in result.warnings]
    unimplemented = result.executable.analysis.unimplemented_custom_calls
    if unimplemented:
        items.append(("custom calls", f"{len(unimplemented)} without an implementation (a run "
                      "that reaches one fails with CustomCallError): "
                      + "; ".join(call.summary() for call in unimplemented)))
    return Facts(f"HloModule {result.executable.module.name}", items)


def device_facts(result: HloResult) -> list[tuple[str, str]]:
    """A partitioned module's answers: the devices, the peak each holds, what the devices
    trade; the memory lines after them are one device's (every device runs this plan)."""
    header = result.executable.module.header_attrs
    grid = ", ".join(f"{k}={header[k]}" for k in ("num_partitions", "replica_count")
                     if header.get(k, 1) != 1)
    items = [("devices", f"{result.devices} ({grid}); every device runs this program on its "
                         "own shards, so the memory below is per device"),
             ("peak per device", f"{format_bytes(result.peak)}; "
                                 f"{format_bytes(result.devices * result.peak)} over all "
                                 f"{result.devices} devices"),
             ("collectives", collectives.summary(result.collectives(), result.devices))]
    if result.outputs is not None:
        items.append(("outputs", "from every device (see Outputs per device)"))
    return items


def collective_table(result: HloResult) -> Table:
    return Table("Collectives, in schedule order (bytes per device, each time it runs)",
                 collectives.COLUMNS, collectives.rows(result.collectives()),
                 notes=[collectives.COUNTING], omitted_what="collectives")


def device_output_table(outputs: list, limit: int) -> Table:
    """Every device's outputs, device by device."""
    rows = []
    for device, outs in enumerate(outputs):
        for index, a in _output_leaves(outs):
            rows.append((str(device), index_text(index), _compact(a)))
    return _limited(Table("Outputs per device", ("device", "output", "values"), rows,
                          omitted_what="outputs"), limit)


def peak_holders(plan: BufferAssignment, members: dict[str, list[str]]) -> str:
    """What the bytes live at the peak are, by allocation kind (largest share first), and the
    largest buffer: for a model, whether weights, the temp arena or outputs set the peak."""
    live = plan.live_at_peak()
    if not live:
        return "nothing (no buffer is live)"
    by_kind: dict[str, list[int]] = {}
    for b in live:
        by_kind.setdefault(plan.allocations[b.allocation].kind, []).append(b.size)
    shares = sorted(by_kind.items(), key=lambda item: -sum(item[1]))
    said = [f"{kind} {format_bytes(sum(sizes))} ({len(sizes)} buffer"
            f"{'' if len(sizes) == 1 else 's'})" for kind, sizes in shares[:PEAK_KINDS]]
    if len(shares) > PEAK_KINDS:
        said.append(f"{len(shares) - PEAK_KINDS} more kind(s)")
    return (f"{', '.join(said)}; largest {buffer_label(live[0], members)} "
            f"({format_bytes(live[0].size)})")


def _compact(a: np.ndarray) -> str:
    """One line: the whole array when it is small, else its shape and first values."""
    shape = ArrayShape(from_numpy(a.dtype), a.shape).to_text(False)
    if a.ndim == 0:
        return np.array2string(a)
    if a.size <= 6:
        return f"{shape} {' '.join(np.array2string(a, max_line_width=10**6).split())}"
    first = np.array2string(a.ravel()[:3], max_line_width=10**6)[1:-1].strip()
    return f"{shape} [{' '.join(first.split())} \u2026]"


def _outputs_fit(outputs) -> bool:
    """Whether the answer lines show every output value (small arrays, at most three)."""
    leaves = list(_output_leaves(outputs))
    return len(leaves) <= 3 and all(a.size <= 6 for _, a in leaves)


def biggest_saving(result: HloResult) -> str:
    """The sentence of the largest of the result's ``savings``."""
    found = result.savings()
    if not found:
        return "none found: nothing to donate, no bytes shared"
    return max(found, key=lambda pair: pair[0])[1]


def savings(result: HloResult) -> list[tuple[int, str]]:
    """(bytes of total allocated memory saved, sentence) for each way this plan saves or could
    save memory: the donations made (against donating nothing optional), the donations left
    (donating every donatable parameter), and sharing the temp arena (bytes of all
    temporaries beyond the arena). Empty when there is none. A donation's sentence also says
    what it does to the peak, which it often leaves alone (in a training step the new weights
    are written after the peak)."""
    plan = result.assignment
    found: list[tuple[int, str]] = []
    params = {p.number: p for p in result.parameters}
    forced = frozenset(n for n, p in params.items() if p.must_alias)
    donatable = frozenset(n for n, p in params.items() if p.blocked is None) - forced
    chosen = result.donated & donatable
    missing = donatable - chosen
    base = _replan(plan, result.donated - chosen) if chosen else None
    if base is not None:
        names = _names([params[n].name for n in sorted(chosen)], SHOWN_NAMES)
        found.append(donation_saving(f"donating {names}", "saves", base, plan))
    best = _replan(plan, result.donated | missing) if missing else None
    if best is not None:
        names = ",".join(params[n].name for n in sorted(missing))
        flag = names if len(missing) <= SHOWN_NAMES else "all"
        found.append(donation_saving(
            f"donating {_names(names.split(','), SHOWN_NAMES)} (--donate {flag})",
            "would save", plan, best))
    for allocation in plan.allocations:
        held = sum(b.size for b in allocation.buffers)
        if allocation.kind == "temp" and held > allocation.size:
            found.append((held - allocation.size,
                          f"sharing the temp arena saves {format_bytes(held - allocation.size)}: "
                          f"{len(allocation.buffers)} temporaries of {format_bytes(held)} in "
                          f"{format_bytes(allocation.size)}"))
    return found


def donation_saving(what: str, verb: str, before: BufferAssignment,
                    after: BufferAssignment) -> tuple[int, str]:
    """``donating w saves 4.0 KiB of peak (8.0 KiB -> 4.0 KiB)`` when the peak drops by what
    the total allocated drops by; otherwise both figures, each with its own change."""
    total = before.memory_stats.total - after.memory_stats.total
    peak = before.peak - after.peak
    peaks = f"{format_bytes(before.peak)} \u2192 {format_bytes(after.peak)}"
    if total == peak:
        return total, f"{what} {verb} {format_bytes(peak)} of peak ({peaks})"
    totals = (f"{format_bytes(before.memory_stats.total)} \u2192 "
              f"{format_bytes(after.memory_stats.total)}")
    text = f"{what} {verb} {format_bytes(total)} of total allocated ({totals})"
    if peak:
        return total, f"{text} and {format_bytes(peak)} of peak ({peaks})"
    return total, f"{text}; the peak stays {format_bytes(after.peak)}"


def _replan(plan: BufferAssignment, donated: frozenset[int]) -> BufferAssignment | None:
    """The plan for another donation set; None where the module allows no such plan (the
    report then leaves that saving out rather than failing)."""
    try:
        return reassign(plan, donated)
    except HloError:
        return None


def module_facts(result: HloResult) -> Facts:
    exe = result.executable
    module = exe.module
    instructions = sum(len(c.instructions) for c in module.computations)
    items = [("module", f"{module.name}: {len(module.computations)} computation(s), "
                        f"{instructions} instruction(s)"),
             ("signature", exe.signature())]
    if result.bound_as:
        note = result.bound_as
        if result.bound_as != module.name:
            note += f" ({module.name!r} is not a Python identifier)"
        items.append(("bound as", note))
    items.append(("device", str(exe.device)))
    if exe.is_built:
        done = (f"compiled in {format_seconds(exe.compile_seconds)}, "
                f"{len(exe.program.kernel_names)} kernel(s)")
    else:
        done = (f"analysed in {format_seconds(exe.compile_seconds)}; kernels are built at "
                "the first run")
    items.append(("compile", f"cache hit (first {done})" if exe.cache_hit else done))
    if exe.elided_constants:
        items.append(("constants", f"elided constants ({{...}}) filled with "
                                   f"{exe.elided_constants}: the outputs are not the model's"))
    if result.run is not None:
        items.append(("run", run_text(result.run)))
    return Facts("Module, device and run", items)


def run_text(run: RunRecord) -> str:
    text = f"{run.name} in {format_seconds(run.seconds)}; donated {list(run.donated) or 'none'}"
    if run.copied:
        text += (f"; copy-protected {list(run.copied)} "
                 f"({format_bytes(run.copied_bytes)} copied)")
    for number, reason in sorted(run.unusable.items()):
        text += f"; donation of {number} unused: {reason}"
    return text


def parameter_status(param: ParameterInfo, donated: frozenset[int], plan: BufferAssignment,
                     run: RunRecord | None = None,
                     outputs_of: dict[int, list[str]] | None = None) -> str:
    """What happens to the parameter's buffer in this plan (and in the run, if there was one).
    ``outputs_of``: ``outputs_by_parameter(plan)``, for a caller asking about every row."""
    if param.blocked is not None:
        return f"cannot alias: {param.blocked}"
    outputs = ", ".join(outputs_of.get(param.number, []) if outputs_of is not None
                        else aliased_outputs(plan, param.number))
    if param.must_alias:
        return f"must-alias: always donated, output {outputs} written in place"
    if param.number in donated:
        if not outputs:
            return "donated, but no output is left to take its buffer"
        return f"donated: output {outputs} written in place"
    if run is not None and param.number in run.copied:
        return "not donated: the run copied it first (copy-protection)"
    return "not donated: its aliased output gets its own buffer (copy-protection)"


def parameter_table(params: list[ParameterInfo], donated: frozenset[int],
                    plan: BufferAssignment, run: RunRecord | None) -> Table:
    """One row per parameter; a long reason shared by several rows is written once, as a
    note the rows point to."""
    outputs_of = outputs_by_parameter(plan)
    statuses = [parameter_status(p, donated, plan, run, outputs_of) for p in params]
    repeated = [s for s in dict.fromkeys(statuses) if statuses.count(s) > 1 and ": " in s]
    marks = {s: f"[{k + 1}]" for k, s in enumerate(repeated)}
    rows = [(str(p.number), p.name, p.shape_text, p.dtype, format_bytes(p.size),
             p.declared() or "\u2014",
             f"{status.split(': ')[0]} {marks[status]}" if status in marks else status)
            for p, status in zip(params, statuses)]
    notes = [f"{marks[s]} {s.split(': ', 1)[1]}" for s in repeated]
    return Table("Parameters", ("#", "name", "shape", "dtype", "size", "module says",
                                "this plan"), rows, notes, omitted_what="parameters")


def with_sharding_columns(table: Table, values: list[ValueSharding]) -> Table:
    """The parameter table with each parameter's sharding and bytes per device (a tuple
    parameter's leaves joined), for a module written for several devices."""
    words: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    for v in values:
        key = str(v.parameter)
        words.setdefault(key, []).append(v.words)
        sizes[key] = sizes.get(key, 0) + v.bytes_per_device
    rows = [row + ("; ".join(words.get(row[0], ["\u2014"])),
                   format_bytes(sizes[row[0]]) if row[0] in sizes else "\u2014")
            for row in table.rows]
    return replace(table, columns=table.columns + ("sharding", "per device"), rows=rows)


def output_sharding_table(values: list[ValueSharding]) -> Table:
    """Each output's sharding (the module's root annotation) and bytes per device."""
    rows = [(v.what.removeprefix("output "), v.shape.to_text(False), v.words,
             format_bytes(v.bytes_per_device)) for v in values]
    return Table("Output shardings", ("output", "shape", "sharding", "per device"), rows,
                 omitted_what="outputs")


def memory_table(plan: BufferAssignment) -> Table:
    """The figures in XLA's vocabulary; what each word means is in ``GLOSSARY``."""
    s = plan.memory_stats
    peak = plan.peak_instruction
    # the peak's own members: every fusion's (``fusions``) is a model's thousands of names
    held = {peak.name: fused_members(peak)} if peak.opcode == Opcode.FUSION else {}
    constant = sum(a.size for a in plan.allocations if a.kind == "constant")
    rows = [("argument", format_bytes(s.argument), ""),
            ("output", format_bytes(s.output), ""),
            ("alias", format_bytes(s.alias), ""),
            ("temp", format_bytes(s.temp), ""),
            ("constant", format_bytes(constant), ""),
            ("total", format_bytes(s.total), "argument + output + temp \u2212 alias"),
            ("peak", format_bytes(s.peak),
             f"reached at step {plan.peak_step} "
             f"({label(peak.name, held)})")]
    arena = plan.temp_arena
    if arena is not None:
        rows.append(("fragmentation", format_bytes(plan.fragmentation),
                     f"lower bound {format_bytes(arena.lower_bound)} ({arena.order} packing)"))
    return Table("Memory (XLA's vocabulary)", ("", "bytes", ""), rows)


def glossary_table() -> Table:
    return Table("Memory words", ("word", "meaning"), list(GLOSSARY))


def _allocation_holds(a: Allocation) -> str:
    if a.kind == "parameter" and a.parameter_index is not None:
        text = f"parameter {a.parameter_number} {index_text(a.parameter_index)}"
        if a.aliased_output is not None:
            text += f", output {index_text(a.aliased_output)} lives here"
        return text
    if a.kind == "constant" and a.constant is not None:
        return f"constant {a.constant.name}"
    if a.kind == "output" and a.output_index is not None:
        return f"output {index_text(a.output_index)}"
    return f"{len(a.buffers)} temporaries packed (size {format_bytes(a.size)})"


def _names(names: list[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (" \u2026" if len(names) > shown else "")


def allocation_table(plan: BufferAssignment, limit: int,
                     members: dict[str, list[str]] | None = None) -> Table:
    """One row per allocation, except that the constants share one row when there are more
    than a few (a module may have dozens of scalar constants, and they would push the
    outputs and the temp arena off the table)."""
    constants = [a for a in plan.allocations if a.kind == "constant"]
    rows = []
    for a in plan.allocations:
        if a.kind == "constant" and len(constants) > CONSTANT_ROWS:
            if a is constants[0]:
                rows.append((f"{constants[0].index}\u2013{constants[-1].index}", "constant",
                             format_bytes(sum(c.size for c in constants)),
                             f"{len(constants)} constants, one allocation each",
                             _names([c.constant.name for c in constants if c.constant])))
            continue
        rows.append((str(a.index), a.kind, format_bytes(a.size), _allocation_holds(a),
                     _names([buffer_label(b, members or {}) for b in a.buffers])))
    return _limited(Table("Allocations", ("#", "kind", "size", "holds", "buffers"), rows,
                          omitted_what="allocations"), limit)


def peak_table(plan: BufferAssignment, limit: int,
               members: dict[str, list[str]] | None = None) -> Table:
    """Largest first; with JAX's op_name and Python line where the module's metadata has
    them (a column only then)."""
    rows = []
    cumulative = 0
    live = plan.live_at_peak()
    sources = [source_of(b.buffer.first.instruction, plan.module) for b in live]
    for b, source in zip(live, sources):
        cumulative += b.size
        row = (buffer_label(b, members or {}), format_bytes(b.size), format_bytes(cumulative),
               b.values[0].shape.to_text(False), plan.allocations[b.allocation].kind,
               f"{b.live.start}\u2013{b.live.end}")
        rows.append(row + (source,) if any(sources) else row)
    columns = ("buffer", "size", "cumulative", "shape", "kind", "live")
    return _limited(Table(f"Buffers live at the peak (step {plan.peak_step}, largest first)",
                          columns + ("source",) if any(sources) else columns, rows,
                          omitted_what="buffers"), limit)


def sharing_table(plan: BufferAssignment, limit: int,
                  members: dict[str, list[str]] | None = None) -> Table:
    """For each buffer that reuses bytes: which buffer held them before, and until when."""
    rows = [(f"#{r.allocation} +{r.offset}", buffer_label(r.buffer, members or {}),
             buffer_label(r.previous, members or {}), sentence(r)) for r in reuses(plan)]
    return _limited(Table("How buffers share bytes", ("at", "buffer", "bytes held before by",
                                                      "why they can share"), rows,
                          omitted_what="reused ranges"), limit)


def fusion_table(members: dict[str, list[str]], limit: int) -> Table:
    """Each fusion and the source instructions it holds (root first)."""
    rows = [(name, str(len(held)), ", ".join(held)) for name, held in members.items()]
    return _limited(Table("Fusions: the source instructions each one holds",
                          ("fusion", "holds", "source instructions (root first)"), rows,
                          omitted_what="fusions"), limit)


def copy_tables(plan: BufferAssignment) -> list[Table]:
    tables = []
    if plan.copies:
        tables.append(Table("Copies inserted by copy insertion",
                            ("copy", "reason"), [(c.instruction, c.reason) for c in plan.copies]))
    if plan.unused_donors:
        tables.append(Table("Buffer donors not used", ("parameter", "reason"),
                            [(f"{d.parameter_number} {index_text(d.parameter_index)}", d.reason)
                             for d in plan.unused_donors]))
    if plan.not_donated:
        tables.append(Table("Aliases not applied (parameter not donated)", ("output", "parameter"),
                            [(index_text(a.output_index),
                              f"{a.parameter_number} {index_text(a.parameter_index)} ({a.kind})")
                             for a in plan.not_donated]))
    return tables


def _output_leaves(outputs, index: tuple[int, ...] = ()):
    if isinstance(outputs, tuple):
        for k, o in enumerate(outputs):
            yield from _output_leaves(o, index + (k,))
    else:
        yield index, np.asarray(outputs)


def output_table(outputs, limit: int) -> Table:
    rows = []
    for index, a in _output_leaves(outputs):
        text = np.array2string(a, threshold=24, edgeitems=3, max_line_width=100)
        rows.append((index_text(index), ArrayShape(from_numpy(a.dtype), a.shape).to_text(False),
                     text))
    return _limited(Table("Outputs", ("output", "array", "values"), rows,
                          omitted_what="outputs"), limit)


def kernel_parts(program, limit: int) -> list[Part]:
    rows = [(name, ", ".join(program.kernel_instructions.get(name, ())))
            for name in program.kernel_names]
    return [_limited(Table("Kernels", ("kernel", "instructions"), rows, omitted_what="kernels"),
                     limit),
            Preformatted("OpenCL source", program.source)]


def _limited(table: Table, limit: int) -> Table:
    """The first ``limit`` rows in view; the next ``FOLDED_TIMES * limit`` folded; the rest
    counted only."""
    if len(table.rows) <= limit:
        return table
    return Table(table.title, table.columns, table.rows[:limit], table.notes,
                 len(table.rows) - limit, table.omitted_what,
                 table.rows[limit:limit * (1 + FOLDED_TIMES)])
