"""The text report of a buffer assignment, modelled on XLA's BufferAssignment dump.

Allocations with their values (id, name, shape index, size, offset, shape, defining
instruction, live range), then the copies copy insertion added and why, donations that did
nothing and why, the schedule, and statistics in XLA's vocabulary with the buffers live at the
peak. Three different "peaks" circulate (hlo-reference §8.11); the report says which it shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..hlo.shape import index_text, subshape

if TYPE_CHECKING:
    from .assignment import Allocation, BufferAssignment


def _labels(ba: BufferAssignment, a: Allocation) -> list[str]:
    if a.kind == "parameter":
        assert a.parameter_number is not None and a.parameter_index is not None
        param = ba.module.parameter_shapes[a.parameter_number]
        labels = [f"parameter {a.parameter_number}",
                  f"shape |{subshape(param, a.parameter_index)}| at ShapeIndex "
                  f"{index_text(a.parameter_index)}"]
    elif a.kind == "constant":
        labels = ["constant"]
    elif a.kind == "output":
        assert a.output_index is not None
        labels = [f"output {index_text(a.output_index)}"]
    else:
        labels = ["preallocated-temp"]
    if a.maybe_live_out:
        labels.append("maybe-live-out")
    if a.aliased_output is not None:
        kind = "must-alias" if a.must_alias else "may-alias"
        labels.append(f"aliased with output {index_text(a.aliased_output)} ({kind})")
    return labels


def assignment_text(ba: BufferAssignment) -> str:
    schedule = ba.schedule
    lines = [f"BufferAssignment for module {ba.module.name} (alignment {ba.alignment} bytes):"]
    for a in ba.allocations:
        lines.append(f"allocation {a.index}: size {a.size}, {', '.join(_labels(ba, a))}:")
        for placed in a.buffers:
            for value in placed.values:
                live = ba.liveness[value]
                lines.append(
                    f" value: <{value.id} {value.label}> "
                    f"(size={value.size},offset={placed.offset}): "
                    f"{value.shape} defined by {value.instruction.opcode} {value.instruction.name}"
                    f" ({value.kind}), live {live.start}-{live.end}")
    if ba.copies:
        lines += ["", "Inserted copies:"]
        lines += [f" {c.instruction}: {c.reason}" for c in ba.copies]
    if ba.unused_donors:
        lines += ["", "Buffer donors not used:"]
        lines += [f" parameter {d.parameter_number} {index_text(d.parameter_index)}: {d.reason}"
                  for d in ba.unused_donors]
    if ba.not_donated:
        lines += ["", "Aliases not applied (parameter not donated):"]
        lines += [f" output {index_text(a.output_index)} <- parameter {a.parameter_number} "
                  f"{index_text(a.parameter_index)} ({a.kind})" for a in ba.not_donated]
    peaks = ", ".join(f"{name} {peak}" for name, peak in schedule.peaks.items())
    lines += ["", f"Schedule: {schedule.scheduler} ({len(schedule.flattened)} steps; simulated "
              f"peaks: {peaks})"]
    lines.append(" " + " ".join(f"{n}:{inst.name}" for n, inst in enumerate(schedule.flattened)))
    stats = ba.memory_stats
    constant = sum(a.size for a in ba.allocations if a.kind == "constant")
    lines += ["", "Memory statistics (bytes, XLA's vocabulary):",
              f" argument: {stats.argument}", f" output: {stats.output}",
              f" alias: {stats.alias}", f" temp: {stats.temp}", f" constant: {constant}",
              f" total (argument + output + temp - alias): {stats.total}"]
    arena = ba.temp_arena
    if arena is not None:
        share = 100.0 * ba.fragmentation / arena.size if arena.size else 0.0
        lines.append(f" temp arena: {arena.size} ({arena.order} order); liveness lower bound "
                     f"{arena.lower_bound}; fragmentation {ba.fragmentation} ({share:.1f}%)")
    lines.append(f" live-range peak (largest total bytes live at one step): {stats.peak} at step "
                 f"{ba.peak_step} ({ba.peak_instruction.name})")
    lines += ["", "Buffers live at the peak (largest first):"]
    cumulative = 0
    for placed in ba.live_at_peak():
        cumulative += placed.size
        kind = ba.allocations[placed.allocation].kind
        lines.append(f" {placed.name}: {placed.size} bytes (cumulative {cumulative}), "
                     f"{placed.values[0].shape}, {kind}, "
                     f"live {placed.live.start}-{placed.live.end}")
    return "\n".join(lines) + "\n"
