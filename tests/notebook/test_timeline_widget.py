"""The interactive timeline's data (the assignment's own numbers, as columns) and its widget
(binary columns, selection, the static fallback in its display bundle)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import hlo_magic
import runtime
from hlo_magic.sharing import reuses
from hlo_magic.timeline_data import (
    HANDS_OVER, KINDS, NUMERIC_COLUMNS, TAKES_OVER, timeline_data,
)
from hlo_magic.timeline_widget import MemoryTimeline
from runtime.pipeline import buffer_assignment, run as run_pipeline

from ..conftest import corpus_dir
from .hlo_texts import ADD_MUL


def corpus_plan(name: str):
    text = (corpus_dir() / f"{name}.hlo").read_text()
    return run_pipeline(runtime.parse(text), alignment=128)


@pytest.mark.parametrize("name", ["random_threefry", "attention", "while_loop_count"])
def test_columns_are_the_assignments_records(name):
    plan = corpus_plan(name)
    data = timeline_data(plan)
    records = {r["name"]: r for r in plan.records() if r["size"]}
    assert sorted(data.names) == sorted(records)
    for i, buffer in enumerate(data.names):
        record = records[buffer]
        for column in ("size", "allocation", "offset", "start", "end"):
            assert data.column(column)[i] == record[column], (buffer, column)
        assert KINDS[int(data.column("kind")[i])] in (record["kind"], "aliased")
    assert data.peak == plan.peak and data.steps[data.peak_step] == plan.peak_instruction.name
    total = np.sum([data.live_by_kind[k] for k in KINDS], axis=0)
    assert total.max() == plan.peak and int(np.argmax(total)) == plan.peak_step


def test_notes_say_what_a_fusion_holds_and_whose_bytes_a_buffer_reuses():
    source = runtime.parse((corpus_dir() / "random_threefry.hlo").read_text())
    plan = run_pipeline(source, alignment=128)
    data = timeline_data(plan, source)
    fusions = [i for i, op in enumerate(data.opcodes) if op == "fusion"]
    assert fusions and all(data.notes[i].startswith("fused from ") for i in fusions)
    names = {i.name for i in source.instructions()}
    for i in fusions:
        listed = data.notes[i].splitlines()[0].split(": ", 1)[1].split(" (+")[0].split(", ")
        assert set(listed) <= names, listed
    handed_over = plan.temp_arena.reuse
    for later, earlier in handed_over.items():          # in place: at the holder's last use
        note = data.notes[data.index_of(plan.placement(later).name)]
        assert f"takes over {plan.placement(earlier).name}'s bytes" in note
    for r in reuses(plan):                               # every reused range says who held it
        note = data.notes[data.index_of(r.buffer.name)]
        assert f"{r.previous.name}'s bytes at offset {r.offset}" in note


def test_widget_sends_binary_columns_and_selects_by_name():
    plan = buffer_assignment(runtime.parse(ADD_MUL))
    widget = MemoryTimeline(plan)
    columns = np.frombuffer(widget.columns, dtype=np.float64).reshape(len(NUMERIC_COLUMNS), -1)
    assert np.array_equal(columns, widget.data.numeric)
    assert widget.meta["names"] == widget.data.names and widget.meta["peak"] == plan.peak
    widget.select("s")
    assert widget.selected == "s"
    with pytest.raises(KeyError, match="no buffer named 'nope'"):
        widget.select("nope")


def test_bundle_falls_back_to_the_static_figure():
    plan = buffer_assignment(runtime.parse(ADD_MUL))
    data, _ = MemoryTimeline(plan)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["image/png"].startswith(b"\x89PNG")
    assert data["text/plain"].startswith(f"add_mul: {len(plan.records())} buffers")


def test_front_end_is_shipped_and_loads_nothing_from_the_network():
    js = (Path(hlo_magic.__file__).parent / "static" / "timeline.js").read_text()
    assert "export default" in js and "render(" in js
    # (the SVG namespace of a saved figure is a name, not an address it loads)
    assert not re.search(r"^\s*import\b|https?://(?!www\.w3\.org/2000/svg\b)|\bimport\(",
                         js, re.M)


def test_result_timeline_is_the_widget_and_the_report_keeps_the_png(ip):
    result = ip.run_cell_magic("hlo", "--show timeline -o r", ADD_MUL)
    assert isinstance(result.timeline(), MemoryTimeline)
    assert "image/png" in result._repr_mimebundle_()
    assert result.live_bytes().axes[0].get_ylabel() == "live bytes"


def test_in_a_kernel_show_timeline_displays_the_report_then_the_widget(ip, monkeypatch):
    from IPython.utils.capture import capture_output
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    with capture_output() as cap:
        returned = ip.run_cell_magic("hlo", "--show timeline,assignment -o r", ADD_MUL)
    assert returned is None
    report, copy, widget = cap.outputs
    assert "Allocations" in report.data["text/html"]
    assert "data:image/png" not in report.data["text/html"]
    assert copy.data["image/png"].startswith(b"\x89PNG")
    assert 'class="hlo-magic-static hlo-magic-static-' in copy.data["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in widget.data
    assert "image/png" not in widget.data


def test_an_executed_notebook_keeps_the_png_for_nbconvert(tmp_path, monkeypatch):
    """nbclient runs ``--show timeline`` in a real kernel (the widget is displayed after its
    static copy); nbconvert, with no widget state saved, shows the copy's figure once."""
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    from ..conftest import REPO
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3",
                                                           "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("%load_ext hlo_magic"),
                nbformat.v4.new_code_cell(f"%%hlo --show timeline\n{ADD_MUL}")]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    report, copy, widget = nb.cells[1].outputs
    assert "Memory (XLA&#x27;s vocabulary)" in report.data["text/html"]
    assert 'class="hlo-magic-static hlo-magic-static-' in copy.data["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in widget.data
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert html.count('src="data:image/png;base64,') == 1          # the copy's figure


WITH_METADATA = """HloModule jit_f

ENTRY main {
  x = f32[8] parameter(0), metadata={op_name="x"}
  y = f32[8,8] dot(x, x), lhs_contracting_dims={}, rhs_contracting_dims={}, metadata={op_type="dot_general" op_name="jit(f)/dot_general" source_file="/home/me/model.py" source_line=12}
  ROOT n = f32[8,8] negate(y), metadata={op_type="neg" op_name="jit(f)/neg" source_file="/home/me/model.py" source_line=13}
  z = f32[8] negate(x)
}
"""


def test_buffers_name_their_source_op_and_python_line_from_the_metadata():
    source = runtime.parse(WITH_METADATA)
    data = timeline_data(buffer_assignment(source), source)
    sources = dict(zip(data.names, data.sources))
    assert sources["x"] == "x"
    assert sources["y"] == "jit(f)/dot_general (model.py:12)"
    assert sources[data.names[data.instructions.index("n")]] == "jit(f)/neg (model.py:13)"
    assert data.meta()["sources"] == data.sources


def test_in_place_hand_overs_are_marked_for_the_front_end():
    text = (Path(__file__).parents[1] / "browser" / "data" / "train_step.hlo").read_text()
    plan = run_pipeline(runtime.parse(text), alignment=128)
    data = timeline_data(plan)
    flags = data.column("in_place")
    assert plan.temp_arena.reuse
    for later, earlier in plan.temp_arena.reuse.items():
        assert int(flags[data.index_of(plan.placement(later).name)]) & TAKES_OVER
        assert int(flags[data.index_of(plan.placement(earlier).name)]) & HANDS_OVER


def test_a_fusion_names_the_source_of_its_root():
    source = runtime.parse(WITH_METADATA.replace("dot(x, x), lhs_contracting_dims={}, "
                                                 "rhs_contracting_dims={}", "multiply(x2, x2)")
                           .replace("f32[8,8] multiply", "f32[8] multiply")
                           .replace("ROOT n = f32[8,8]", "ROOT n = f32[8]")
                           .replace("  x = f32[8] parameter(0), metadata={op_name=\"x\"}",
                                    "  x = f32[8] parameter(0), metadata={op_name=\"x\"}\n"
                                    "  x2 = f32[8] exponential(x)"))
    plan = run_pipeline(source, alignment=128)
    data = timeline_data(plan, source)
    fused = [i for i, op in enumerate(data.opcodes) if op == "fusion"]
    assert fused and data.sources[fused[0]] == "jit(f)/neg (model.py:13)"


def test_the_displayed_timeline_is_linked_with_the_reports_annotated_view(ip, monkeypatch):
    """The front end finds the annotated view by the key they share (``link``); each of its
    slots names the buffer the timeline draws, and another cell's report has another key."""
    from IPython.utils.capture import capture_output
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    with capture_output() as cap:
        ip.run_cell_magic("hlo", "--show timeline,annotated -o r", ADD_MUL)
    report, _, _ = cap.outputs
    result = ip.user_ns["r"]
    timeline = result.timeline()
    assert timeline.link and timeline.link == result.annotated().link
    assert f'<div class="hlo-annotated" data-hlo-link="{timeline.link}"' in \
        report.data["text/html"]
    spans = set(re.findall(r'<span data-buffer="([^"]+)"', report.data["text/html"]))
    assert set(timeline.data.names) <= spans
    other = ip.run_cell_magic("hlo", "--show annotated", ADD_MUL)
    assert other.link != result.link
