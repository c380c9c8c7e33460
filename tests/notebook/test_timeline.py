"""Memory figures: geometry of rectangles, curves and markers (never pixels)."""

from __future__ import annotations

import pytest
from matplotlib.collections import PatchCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

import runtime
from hlo_magic.timeline import (
    KIND_STYLES, allocation_bands, compare, figure_png, live_bytes_by_kind, plot_memory,
    plot_packing, plot_peak_buffers, plot_timeline,
)
from runtime.pipeline import buffer_assignment

from ..conftest import corpus_dir
from .fresh_python import run_python
from .hlo_texts import ADD_MUL
from runtime import reassign


@pytest.fixture(scope="module")
def donated():
    """ADD_MUL with x donated: allocations x(+m) 128 B, y 128 B, t 16 B, s 128 B."""
    return buffer_assignment(runtime.parse(ADD_MUL))


def rectangles(ax) -> dict[str, Rectangle]:
    return {p.get_gid(): p for p in ax.patches if isinstance(p, Rectangle) and p.get_gid()}


def geometry(rect: Rectangle) -> tuple[float, float, float, float]:
    return (rect.get_x(), rect.get_y(), rect.get_width(), rect.get_height())


def test_packing_map_places_each_buffer_at_its_live_range_and_offset(donated):
    fig = plot_packing(donated)
    ax = fig.axes[0]
    rects = rectangles(ax)
    # bands: x at 0, y at 128, t at 256, s at 272; steps 0:x 1:y 2:s 3:m 4:t
    assert geometry(rects["x"]) == (-0.5, 0, 5, 128)
    assert geometry(rects["y"]) == (-0.5, 128, 5, 128)
    assert geometry(rects["t"]) == (3.5, 256, 1, 16)
    assert geometry(rects["s"]) == (1.5, 272, 3, 128)
    assert "m" not in rects      # m lives in x's bytes: one buffer, drawn once
    assert rects["x"].get_hatch() == "///" and not rects["y"].get_hatch()
    assert rects["s"].get_facecolor()[:3] == pytest.approx(
        tuple(int(KIND_STYLES["output"].colour[i:i + 2], 16) / 255 for i in (1, 3, 5)))
    assert {f"allocation-{i}" for i in range(4)} <= set(rects)
    assert "program order" in ax.get_xlabel() and "not time" in ax.get_xlabel()
    labels = {t.get_gid() for t in ax.texts}
    assert {"label-x", "label-y", "label-s"} <= labels


def test_small_buffers_are_lumped_beyond_the_limit(donated):
    ax = plot_packing(donated, max_buffers=2).axes[0]
    drawn = {g for g in rectangles(ax) if not g.startswith("allocation-")}
    assert len(drawn) == 2 and "t" not in drawn
    (other,) = [c for c in ax.collections if c.get_gid() == "other"]
    assert isinstance(other, PatchCollection) and len(other.get_paths()) == 2
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "2 smaller buffers (144 B)" in legend


def test_timeline_stacks_live_bytes_by_kind_and_marks_the_peak(donated):
    assert live_bytes_by_kind(donated)["aliased"] == [128] * 5
    assert live_bytes_by_kind(donated)["output"] == [0, 0, 128, 128, 144]
    ax = plot_timeline(donated).axes[0]
    (peak,) = [line for line in ax.lines if line.get_gid() == "peak"]
    assert list(peak.get_xdata()) == [4] and list(peak.get_ydata()) == [400]
    (total,) = [line for line in ax.lines if line.get_gid() == "live-total"]
    assert list(total.get_ydata()) == [*donated.live_bytes(), donated.live_bytes()[-1]]
    assert list(total.get_xdata()) == [-0.5, 0.5, 1.5, 2.5, 3.5, 4.5]
    assert {c.get_gid() for c in ax.collections} == {"live-aliased", "live-parameter",
                                                     "live-output"}
    assert ax.get_xlabel() == "program order (schedule step, not time)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0 x", "1 y", "2 s", "3 m", "4 t"]
    assert any("peak 400 B at step 4 (t)" in t.get_text() for t in ax.texts)


def test_peak_buffers_are_sorted_by_size(donated):
    ax = plot_peak_buffers(donated, top=3).axes[0]
    widths = [bar.get_width() for bar in ax.patches]
    assert widths == [128, 128, 128, 16]     # x, y, s, then "1 more" (t)
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "s f32[4,8]", "x f32[4,8]", "y f32[4,8]", "1 more"]


def test_plots_draw_into_a_given_axis():
    fig = Figure()
    ax = fig.add_subplot()
    assignment = buffer_assignment(runtime.parse(ADD_MUL))
    assert plot_timeline(assignment, ax=ax) is fig
    assert plot_packing(assignment, ax=ax) is fig


def test_compare_puts_both_plans_on_one_scale(donated):
    kept = reassign(donated, frozenset())
    fig = compare(kept, donated, labels=("kept", "donated"))
    live, left, right = fig.axes
    assert {line.get_gid() for line in live.lines} >= {"live-kept", "live-donated"}
    assert "peak 528 B \u2192 400 B (\u221224 %)" in live.get_title()
    assert left.get_ylim() == right.get_ylim() == (0, 528)
    assert "m" in rectangles(left) and "m" not in rectangles(right)


def test_corpus_module_rectangles_match_the_records():
    assignment = buffer_assignment(runtime.parse((corpus_dir() / "mlp_train_step.hlo").read_text()))
    fig = plot_memory(assignment, max_buffers=30)
    packing = fig.axes[1]
    bands = {b.allocation: b.base for b in allocation_bands(assignment)}
    rects = rectangles(packing)
    drawn = {g: r for g, r in rects.items() if not g.startswith("allocation-")}
    assert len(drawn) == 30
    for record in assignment.records():
        if record["name"] in drawn:
            assert geometry(drawn[record["name"]]) == (
                record["start"] - 0.5, bands[record["allocation"]] + record["offset"],
                record["end"] - record["start"] + 1, record["size"])
    assert figure_png(fig).startswith(b"\x89PNG")


def test_library_code_never_imports_pyplot():
    code = ("import sys, runtime\nfrom runtime.pipeline import buffer_assignment\n"
            "from hlo_magic.timeline import plot_memory, figure_png\n"
            "text = 'HloModule m\\nENTRY e {\\n  a = f32[4] parameter(0)\\n"
            "  ROOT n = f32[4] negate(a)\\n}\\n'\n"
            "figure_png(plot_memory(buffer_assignment(runtime.parse(text))))\n"
            "print('matplotlib.pyplot' in sys.modules)\n")
    assert run_python(code) == ["False"]


def test_compare_steps_are_whole_numbers():
    """A short schedule is where matplotlib's default locator puts ticks at 0.5 steps."""
    from .hlo_texts import INCREMENT
    plan = buffer_assignment(runtime.parse(INCREMENT))
    fig = compare(reassign(plan, frozenset()), plan)
    live = fig.axes[0]
    low, high = live.get_xlim()
    ticks = [t for t in live.get_xticks() if low <= t <= high]
    assert ticks and all(float(t).is_integer() for t in ticks)


def test_the_dark_theme_draws_light_ink_on_a_transparent_background(donated):
    import io

    import matplotlib.image

    from hlo_magic.themes import THEMES, set_figure_theme
    set_figure_theme("dark")
    try:
        fig = plot_timeline(donated)
    finally:
        set_figure_theme("light")
    ax = fig.axes[0]
    assert fig.get_facecolor()[3] == 0 and ax.get_facecolor()[3] == 0
    assert ax.title.get_color() == THEMES["dark"]["text.color"]
    assert {line.get_gid(): line.get_color() for line in ax.lines}["live-total"] == \
        THEMES["dark"]["text.color"]
    pixels = matplotlib.image.imread(io.BytesIO(figure_png(fig)))
    assert pixels[0, 0, 3] == 0                      # the corner is transparent
    light = plot_timeline(donated)
    assert light.get_facecolor()[:3] == (1, 1, 1) and light.axes[0].title.get_color() == "black"
