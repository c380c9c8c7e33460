"""What a ``%%hlo`` report says, as plain data: facts, tables, preformatted text and pictures.

The report is built once from the result of a cell and rendered twice (``render.to_html`` and
``render.to_text``), so the HTML and the plain-text fallback can never disagree. Long tables
keep their first ``max_table_rows`` rows and say how many were left out; the full data stays
on the result object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

import numpy as np

from runtime.hlo.dtypes import from_numpy
from runtime.hlo.shape import ArrayShape, index_text

from .donation import ParameterInfo, aliased_outputs
from .formatting import format_bytes, format_seconds

if TYPE_CHECKING:
    from runtime.buffers import Allocation, BufferAssignment
    from runtime.execute import RunRecord

    from .result import HloResult

SECTIONS = ("hlo", "assignment", "timeline", "kernels", "panel")
CONSTANT_ROWS = 3      # beyond this many constant allocations, the table gives them one row


@dataclass(frozen=True)
class Facts:
    """Label/value pairs: the module summary at the top of every report."""

    title: str
    items: list[tuple[str, str]]


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]
    notes: list[str] = field(default_factory=list)
    omitted: int = 0
    omitted_what: str = "rows"


@dataclass(frozen=True)
class Preformatted:
    title: str
    text: str


@dataclass(frozen=True)
class Picture:
    title: str
    png: bytes
    alt: str


Part = Union[Facts, Table, Preformatted, Picture]


def build_report(result: HloResult) -> list[Part]:
    """The parts shown for ``result.show`` (the summary, parameters and memory always)."""
    limit = result.max_table_rows
    parts: list[Part] = [summary_facts(result),
                         parameter_table(result.parameters, result.donated, result.assignment,
                                         result.run),
                         memory_table(result.assignment)]
    if result.outputs is not None:
        parts.append(output_table(result.outputs, limit))
    if "assignment" in result.show:
        parts += [allocation_table(result.assignment, limit), peak_table(result.assignment, limit)]
        parts += copy_tables(result.assignment)
    if "timeline" in result.show:
        parts.append(Picture("Memory timeline", result.timeline_png(),
                             f"live bytes and buffer packing of {result.name}"))
    if "hlo" in result.show:
        parts.append(Preformatted("HLO (as parsed)", result.executable.module.to_text()))
    if "kernels" in result.show:
        parts += kernel_parts(result.executable.program)
    return parts


def summary_facts(result: HloResult) -> Facts:
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
    return Facts(f"HloModule {module.name}", items)


def run_text(run: RunRecord) -> str:
    text = f"{run.name} in {format_seconds(run.seconds)}; donated {list(run.donated) or 'none'}"
    if run.copied:
        text += (f"; copy-protected {list(run.copied)} "
                 f"({format_bytes(run.copied_bytes)} copied)")
    for number, reason in sorted(run.unusable.items()):
        text += f"; donation of {number} unused: {reason}"
    return text


def parameter_status(param: ParameterInfo, donated: frozenset[int], plan: BufferAssignment,
                     run: RunRecord | None = None) -> str:
    """What happens to the parameter's buffer in this plan (and in the run, if there was one)."""
    if param.blocked is not None:
        return f"cannot alias: {param.blocked}"
    outputs = ", ".join(aliased_outputs(plan, param.number))
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
    rows = [(str(p.number), p.name, p.shape_text, p.dtype, format_bytes(p.size),
             p.declared() or "\u2014", parameter_status(p, donated, plan, run)) for p in params]
    return Table("Parameters", ("#", "name", "shape", "dtype", "size", "module says",
                                "this plan"), rows)


def memory_table(plan: BufferAssignment) -> Table:
    s = plan.memory_stats
    constant = sum(a.size for a in plan.allocations if a.kind == "constant")
    peak_inst = plan.peak_instruction.name
    rows = [("argument", format_bytes(s.argument), "parameter allocations"),
            ("output", format_bytes(s.output), "maybe-live-out allocations (aliased parameters "
                                                "and tuple tables included)"),
            ("alias", format_bytes(s.alias), "parameter bytes an output lives in"),
            ("temp", format_bytes(s.temp), "the temp arena, shared by every temporary"),
            ("constant", format_bytes(constant), "constant allocations"),
            ("total", format_bytes(s.total), "argument + output + temp \u2212 alias"),
            ("peak", format_bytes(s.peak),
             f"live-range peak: the most bytes live at one step of the schedule (parameters, "
             f"constants, outputs and temporaries), reached at step {plan.peak_step} "
             f"({peak_inst})")]
    arena = plan.temp_arena
    if arena is not None:
        rows.append(("fragmentation", format_bytes(plan.fragmentation),
                     f"temp arena beyond its liveness lower bound of "
                     f"{format_bytes(arena.lower_bound)} ({arena.order} packing)"))
    return Table("Memory (XLA's vocabulary)", ("", "bytes", "meaning"), rows)


def _allocation_holds(a: Allocation) -> str:
    if a.kind == "parameter":
        text = f"parameter {a.parameter_number} {index_text(a.parameter_index)}"
        if a.aliased_output is not None:
            text += f", output {index_text(a.aliased_output)} lives here"
        return text
    if a.kind == "constant":
        return f"constant {a.constant.name}"
    if a.kind == "output":
        return f"output {index_text(a.output_index)}"
    return f"{len(a.buffers)} temporaries packed (size {format_bytes(a.size)})"


def _names(names: list[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (" \u2026" if len(names) > shown else "")


def allocation_table(plan: BufferAssignment, limit: int) -> Table:
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
                             _names([c.constant.name for c in constants])))
            continue
        rows.append((str(a.index), a.kind, format_bytes(a.size), _allocation_holds(a),
                     _names([b.name for b in a.buffers])))
    return _limited(Table("Allocations", ("#", "kind", "size", "holds", "buffers"), rows,
                          omitted_what="allocations"), limit)


def peak_table(plan: BufferAssignment, limit: int) -> Table:
    rows = []
    cumulative = 0
    for b in plan.live_at_peak():
        cumulative += b.size
        rows.append((b.name, format_bytes(b.size), format_bytes(cumulative),
                     b.values[0].shape.to_text(False), plan.allocations[b.allocation].kind,
                     f"{b.live.start}\u2013{b.live.end}"))
    return _limited(Table(f"Buffers live at the peak (step {plan.peak_step}, largest first)",
                          ("buffer", "size", "cumulative", "shape", "kind", "live"), rows,
                          omitted_what="buffers"), limit)


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


def kernel_parts(program) -> list[Part]:
    rows = [(name, ", ".join(program.kernel_instructions.get(name, ())))
            for name in program.kernel_names]
    return [Table("Kernels", ("kernel", "instructions"), rows),
            Preformatted("OpenCL source", program.source)]


def _limited(table: Table, limit: int) -> Table:
    if len(table.rows) <= limit:
        return table
    return Table(table.title, table.columns, table.rows[:limit], table.notes,
                 len(table.rows) - limit, table.omitted_what)
