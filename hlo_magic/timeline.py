"""Memory figures of a buffer assignment, drawn with ``matplotlib.figure.Figure`` (never pyplot:
a pyplot figure returned from a cell is shown twice and stays in pyplot's registry).

* ``plot_timeline``: bytes live at each program point, stacked by kind, with the peak marked.
  The x axis is the position in the flattened schedule: program order, not time.
* ``plot_packing``: the memory map. One rectangle per buffer, x = its live range, y = its offset
  within its allocation (allocations stacked, the temp arena on top); colour by kind, hatched
  where a parameter's bytes also hold an output (aliased or donated); names inside rectangles
  that fit; beyond ``max_buffers`` the smallest buffers are lumped into one grey "other" layer.
* ``plot_peak_buffers``: the buffers live at the peak, largest first (XProf's breakdown).
* ``plot_memory``: the three together; ``compare``: two plans side by side (donation).

Every function takes ``ax=`` (or returns a new figure) so users can compose them, and draws
under the current figure theme (``themes``: light, or dark on a transparent background). Program point
``s`` is the integer ``x = s``; a buffer live over steps 4..9 spans ``x`` from 3.5 to 9.5.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.collections import PatchCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator, MultipleLocator

from runtime.buffers import AssignedBuffer, BufferAssignment

from .formatting import BYTE_UNITS, format_bytes, format_change
from .themes import ink, themed


@dataclass(frozen=True)
class KindStyle:
    label: str
    colour: str
    hatch: str = ""


# Stable colours per buffer kind (colour-blind-safe palette), in stacking order.
KIND_STYLES: dict[str, KindStyle] = {
    "parameter": KindStyle("parameter", "#4477AA"),
    "aliased": KindStyle("parameter holding an output (aliased/donated)", "#4477AA", "///"),
    "constant": KindStyle("constant", "#BBBBBB"),
    "output": KindStyle("output", "#228833"),
    "temp": KindStyle("temporary", "#EE7733"),
}
OTHER_COLOUR = "#DDDDDD"
COLLECTIVE_COLOUR = "#7B3294"   # purple: no buffer kind uses it
PROGRAM_ORDER = "program order (schedule step, not time)"
MAX_NAMED_TICKS = 40


def buffer_kind(assignment: BufferAssignment, placed: AssignedBuffer) -> str:
    """The ``KIND_STYLES`` key of a buffer: its allocation's kind, or "aliased" for a
    parameter allocation that an output lives in."""
    allocation = assignment.allocations[placed.allocation]
    if allocation.kind == "parameter" and allocation.aliased_output is not None:
        return "aliased"
    return allocation.kind


def figure_png(fig: Figure, dpi: int = 100) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def _target(ax: Axes | None, size: tuple[float, float]) -> tuple[Figure, Axes]:
    """The figure and axes to draw in: ``ax``'s (the whole figure for a subfigure's axes), or
    a new figure's."""
    if ax is not None:
        root = ax.get_figure(root=True)
        assert root is not None   # every Axes is made in a figure
        return root, ax
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


_NICE_STEPS = (1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 40, 50, 64, 100, 128, 200, 250, 256, 500, 512)


def _bytes_axis(axis, top: float, ticks: int = 5) -> None:
    """Ticks at round numbers of the unit the axis reaches (B, KiB, MiB...), labelled in it."""
    power = 0
    while top >= 2 * 1024 ** (power + 1) and power < len(BYTE_UNITS) - 1:
        power += 1
    unit = 1024 ** power
    step = next((n * unit for n in _NICE_STEPS if top / (n * unit) <= ticks), 1024 * unit)
    axis.set_major_locator(MultipleLocator(step))

    def label(value: float, _) -> str:
        return f"{value / unit:g} {BYTE_UNITS[power]}"
    axis.set_major_formatter(FuncFormatter(label))


def _program_axis(ax: Axes, assignment: BufferAssignment) -> None:
    steps = assignment.schedule.flattened
    ax.set_xlim(-0.5, len(steps) - 0.5)
    ax.set_xlabel(PROGRAM_ORDER)
    if len(steps) <= MAX_NAMED_TICKS:
        ax.set_xticks(range(len(steps)))
        ax.set_xticklabels([f"{n} {inst.name}" for n, inst in enumerate(steps)], rotation=90,
                           fontsize=7)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def live_bytes_by_kind(assignment: BufferAssignment) -> dict[str, list[int]]:
    """Bytes live at each step per ``KIND_STYLES`` key; the sum over kinds is ``live_bytes``."""
    steps = len(assignment.schedule.flattened)
    delta = {kind: [0] * (steps + 1) for kind in KIND_STYLES}
    for placed, start, end in assignment.live_intervals():
        d = delta[buffer_kind(assignment, placed)]
        d[start] += placed.size
        d[end + 1] -= placed.size
    series = {}
    for kind, d in delta.items():
        running, values = 0, []
        for step in range(steps):
            running += d[step]
            values.append(running)
        series[kind] = values
    return series


@themed
def plot_timeline(assignment: BufferAssignment, *, ax: Axes | None = None,
                  title: str | None = None) -> Figure:
    """Live bytes over program order, stacked by kind, with the peak marked."""
    fig, ax = _target(ax, (10, 3.2))
    series = live_bytes_by_kind(assignment)
    edges = [s - 0.5 for s in range(len(assignment.schedule.flattened) + 1)]
    lower = [0] * len(edges)
    for kind, values in series.items():
        if not any(values):
            continue
        style = KIND_STYLES[kind]
        upper = [a + b for a, b in zip(lower, _edge_values(values))]
        ax.fill_between(edges, lower, upper, step="post", facecolor=style.colour,
                        hatch=style.hatch, edgecolor=ink() if style.hatch else style.colour,
                        linewidth=0, alpha=0.85, label=style.label, gid=f"live-{kind}")
        lower = upper
    ax.step(edges, lower, where="post", color=ink(), linewidth=0.8, gid="live-total")
    _mark_peak(ax, assignment, ink())
    _mark_collectives(ax, assignment)
    _program_axis(ax, assignment)
    top = max(assignment.peak, 1) * 1.18
    ax.set_ylim(0, top)
    _bytes_axis(ax.yaxis, top)
    ax.set_ylabel("live bytes")
    ax.set_title(title or f"{assignment.module.name}: bytes live at each program point",
                 fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    return fig


def _edge_values(values: list[int]) -> list[int]:
    """Per-step values for a ``step="post"`` drawing over the edges ``s - 0.5``: step ``s``
    covers ``[s - 0.5, s + 0.5)``, the last value is repeated for the closing edge."""
    return [*values, values[-1]] if values else [0]


def _mark_peak(ax: Axes, assignment: BufferAssignment, colour: str, label: str = "",
               row: int = 0) -> None:
    """The peak's line, marker and label; ``row`` stacks labels of plans whose peaks meet
    (``compare``: two plans with the same peak at the same step would overprint)."""
    step, peak = assignment.peak_step, assignment.peak
    ax.axvline(step, color=colour, linestyle=":", linewidth=0.8, gid="peak-line")
    ax.plot([step], [peak], marker="v", color=colour, markersize=7, linestyle="none", gid="peak")
    right_half = step > 0.55 * len(assignment.schedule.flattened)
    ax.annotate(f"{label}peak {format_bytes(peak)} at step {step} "
                f"({assignment.peak_instruction.name})", (step, peak),
                xytext=(-6 if right_half else 6, 4 + 11 * row),
                ha="right" if right_half else "left",
                textcoords="offset points", fontsize=8, color=colour)


def _mark_collectives(ax: Axes, assignment: BufferAssignment) -> None:
    """A band over each collective's step, labelled with its kind at the top (a partitioned
    module: where the devices trade data)."""
    from runtime import collective_traffic
    for t in collective_traffic(assignment):
        ax.axvspan(t.step - 0.5, t.step + 0.5, color=COLLECTIVE_COLOUR, alpha=0.3, linewidth=0,
                   gid=f"collective-{t.instruction}")
        ax.annotate(str(t.kind), (t.step, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(0, -3), textcoords="offset points", rotation=90, ha="center",
                    va="top", fontsize=6, color=COLLECTIVE_COLOUR)


@dataclass(frozen=True)
class Band:
    """Where one allocation sits on the packing map's y axis."""

    allocation: int
    base: int
    size: int
    label: str


def allocation_bands(assignment: BufferAssignment) -> list[Band]:
    """Allocations stacked bottom-up in index order (parameters, constants, outputs, temp)."""
    bands, base = [], 0
    for a in assignment.allocations:
        label = f"#{a.index} {a.kind} {format_bytes(a.size)}"
        bands.append(Band(a.index, base, a.size, label))
        base += max(a.size, 1)
    return bands


def map_height(assignment: BufferAssignment) -> int:
    """The packing map's y extent: every allocation stacked (an empty one still takes 1)."""
    return sum(max(a.size, 1) for a in assignment.allocations)


def outlined_bands(assignment: BufferAssignment, bands: list[Band]) -> list[Band]:
    """The bands the map outlines and labels: consecutive constant allocations are merged into
    one (a module may have a hundred scalar constants; a hundred outlines hide everything)."""
    merged: list[Band] = []
    run: list[Band] = []

    def flush() -> None:
        if len(run) == 1:
            merged.append(run[0])
        elif run:
            size = sum(max(b.size, 1) for b in run)
            merged.append(Band(run[0].allocation, run[0].base, size,
                               f"#{run[0].allocation}\u2013#{run[-1].allocation} {len(run)} "
                               f"constants {format_bytes(sum(b.size for b in run))}"))
        run.clear()

    for band in bands:
        if assignment.allocations[band.allocation].kind == "constant":
            run.append(band)
            continue
        flush()
        merged.append(band)
    flush()
    return merged


def _split_small(buffers: list[AssignedBuffer], max_buffers: int
                 ) -> tuple[list[AssignedBuffer], list[AssignedBuffer]]:
    if len(buffers) <= max_buffers:
        return buffers, []
    ranked = sorted(buffers, key=lambda b: (-b.size, -(b.live.end - b.live.start), b.name))
    return ranked[:max_buffers], ranked[max_buffers:]


@themed
def plot_packing(assignment: BufferAssignment, *, ax: Axes | None = None,
                 max_buffers: int = 40, title: str | None = None,
                 height: int | None = None) -> Figure:
    """The memory map: one rectangle per buffer at (live range, offset in its allocation).
    ``height`` fixes the y range in bytes (to draw two plans on one scale)."""
    fig, ax = _target(ax, (10, 4.2))
    bands = {b.allocation: b for b in allocation_bands(assignment)}
    buffers = [b for b in assignment.buffers() if b.size]
    shown, lumped = _split_small(buffers, max_buffers)
    steps = len(assignment.schedule.flattened)
    outlined = outlined_bands(assignment, list(bands.values()))
    for band in outlined:
        ax.add_patch(Rectangle((-0.5, band.base), steps, max(band.size, 1), fill=False,
                               edgecolor="#888888", linewidth=0.5, linestyle="--",
                               gid=f"allocation-{band.allocation}"))
    kinds_used = set()
    for b in shown:
        kind = buffer_kind(assignment, b)
        kinds_used.add(kind)
        style = KIND_STYLES[kind]
        ax.add_patch(Rectangle((b.live.start - 0.5, bands[b.allocation].base + b.offset),
                               b.live.end - b.live.start + 1, b.size, facecolor=style.colour,
                               hatch=style.hatch, edgecolor=ink(), linewidth=0.5, alpha=0.9,
                               gid=b.name))
    if lumped:
        ax.add_collection(PatchCollection(
            [Rectangle((b.live.start - 0.5, bands[b.allocation].base + b.offset),
                       b.live.end - b.live.start + 1, b.size) for b in lumped],
            facecolor=OTHER_COLOUR, edgecolor="none", gid="other"))
    ax.set_xlim(-0.5, steps - 0.5)
    ax.set_ylim(0, height or map_height(assignment))
    _program_axis(ax, assignment)
    _label_bands(ax, outlined)
    _label_rectangles(ax, fig, shown, bands)
    handles = [Patch(facecolor=KIND_STYLES[k].colour, hatch=KIND_STYLES[k].hatch,
                     edgecolor=ink(), label=KIND_STYLES[k].label)
               for k in KIND_STYLES if k in kinds_used]
    if lumped:
        handles.append(Patch(facecolor=OTHER_COLOUR, label=f"{len(lumped)} smaller buffers "
                             f"({format_bytes(sum(b.size for b in lumped))})"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7,
              frameon=False)
    ax.set_title(title or f"{assignment.module.name}: {len(buffers)} buffers in "
                 f"{len(assignment.allocations)} allocations (y: offset within each allocation)",
                 fontsize=10)
    return fig


def _pixels(ax: Axes, width: float, height: float) -> tuple[float, float]:
    (x0, y0), (x1, y1) = ax.transData.transform([(0, 0), (width, height)])
    return abs(x1 - x0), abs(y1 - y0)


def _label_bands(ax: Axes, bands: list[Band]) -> None:
    """Y ticks at the allocations that are tall enough on screen to carry a label."""
    ticks, labels = [], []
    for band in bands:
        _, height = _pixels(ax, 0, max(band.size, 1))
        if height >= 9:
            ticks.append(band.base + max(band.size, 1) / 2)
            labels.append(band.label)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)


def _label_rectangles(ax: Axes, fig: Figure, shown: list[AssignedBuffer],
                      bands: dict[int, Band]) -> None:
    font = 7
    char_width = font * 0.62 * fig.dpi / 72
    line_height = font * 1.3 * fig.dpi / 72
    for b in shown:
        width, height = _pixels(ax, b.live.end - b.live.start + 1, b.size)
        if width >= char_width * (len(b.name) + 1) and height >= line_height:
            ax.text((b.live.start + b.live.end) / 2, bands[b.allocation].base + b.offset
                    + b.size / 2, b.name, ha="center", va="center", fontsize=font,
                    clip_on=True, gid=f"label-{b.name}")


@themed
def plot_peak_buffers(assignment: BufferAssignment, *, ax: Axes | None = None,
                      top: int = 12) -> Figure:
    """The buffers live at the peak, largest first, with their shapes and sizes."""
    fig, ax = _target(ax, (4, 4))
    live = assignment.live_at_peak()
    shown, rest = live[:top], live[top:]
    names = [f"{b.name} {b.values[0].shape.to_text(False)}" for b in shown]
    sizes = [b.size for b in shown]
    colours = [KIND_STYLES[buffer_kind(assignment, b)].colour for b in shown]
    hatches = [KIND_STYLES[buffer_kind(assignment, b)].hatch for b in shown]
    if rest:
        names.append(f"{len(rest)} more")
        sizes.append(sum(b.size for b in rest))
        colours.append(OTHER_COLOUR)
        hatches.append("")
    y = list(range(len(names)))
    bars = ax.barh(y, sizes, color=colours, edgecolor=ink(), linewidth=0.5, gid="peak-buffers")
    for bar, hatch in zip(bars, hatches):
        bar.set_hatch(hatch)
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=7)
    ax.invert_yaxis()
    right = max(sizes, default=1) * 1.35
    ax.set_xlim(0, right)
    _bytes_axis(ax.xaxis, right, ticks=3)
    for yi, size in zip(y, sizes):
        ax.text(size, yi, " " + format_bytes(size), va="center", fontsize=7)
    ax.set_title(f"live at the peak: {format_bytes(assignment.peak)}", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)
    return fig


@themed
def plot_memory(assignment: BufferAssignment, *, max_buffers: int = 40,
                peak_buffers: int = 12) -> Figure:
    """Live bytes and the packing map over the same x axis, and the peak's buffers."""
    fig = Figure(figsize=(13, 7.5), layout="constrained")
    grid = fig.add_gridspec(2, 2, width_ratios=(3.2, 1), height_ratios=(1, 1.5))
    live = fig.add_subplot(grid[0, 0])
    packing = fig.add_subplot(grid[1, 0], sharex=live)
    peak = fig.add_subplot(grid[:, 1])
    plot_timeline(assignment, ax=live)
    plot_packing(assignment, ax=packing, max_buffers=max_buffers)
    plot_peak_buffers(assignment, ax=peak, top=peak_buffers)
    live.tick_params(labelbottom=False)
    live.set_xlabel("")
    return fig


@themed
def compare(before: BufferAssignment, after: BufferAssignment, *,
            labels: tuple[str, str] = ("before", "after"), max_buffers: int = 40) -> Figure:
    """Two plans of one module (e.g. without and with donation): both live-bytes curves on one
    axis, and the two packing maps side by side on the same byte scale."""
    fig = Figure(figsize=(13, 7.5), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=(1, 1.5))
    live = fig.add_subplot(grid[0, :])
    for row, (assignment, label, colour, style) in enumerate((
            (before, labels[0], "#777777", "--"), (after, labels[1], "#CC3311", "-"))):
        values = assignment.live_bytes()
        live.step([s - 0.5 for s in range(len(values) + 1)], _edge_values(values), where="post",
                  color=colour, linestyle=style,
                  label=f"{label}: peak {format_bytes(assignment.peak)}", gid=f"live-{label}")
        _mark_peak(live, assignment, colour, f"{label}: ", row)
    longest = max(len(before.schedule.flattened), len(after.schedule.flattened))
    live.set_xlim(-0.5, longest - 0.5)
    live.xaxis.set_major_locator(MaxNLocator(integer=True))
    top = max(before.peak, after.peak, 1) * 1.25
    live.set_ylim(0, top)
    live.set_xlabel(PROGRAM_ORDER)
    live.set_ylabel("live bytes")
    _bytes_axis(live.yaxis, top)
    # outside the axes, where no peak label can reach it
    live.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    live.set_title(f"{after.module.name}: peak {format_bytes(before.peak)} \u2192 "
                   f"{format_bytes(after.peak)} ({format_change(before.peak, after.peak)})",
                   fontsize=10)
    left = fig.add_subplot(grid[1, 0])
    right = fig.add_subplot(grid[1, 1])
    height = max(map_height(before), map_height(after))
    for ax, assignment, label in ((left, before, labels[0]), (right, after, labels[1])):
        plot_packing(assignment, ax=ax, max_buffers=max_buffers, height=height,
                     title=f"{label}: {format_bytes(assignment.memory_stats.total)} allocated")
    return fig
