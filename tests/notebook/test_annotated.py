"""The annotated module view: its allocations, offsets, sizes and live ranges are the buffer
assignment's, fusions trace back to the source names, and both renderings carry the numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import runtime
from hlo_magic.annotated import annotate
from runtime.pipeline import run as run_pipeline

from ..conftest import corpus_dir
from .hlo_texts import ADD_MUL

SGD = """HloModule sgd_step, input_output_alias={ {}: (0, {}, may-alias) }

ENTRY main {
  w = f32[1024,1024] parameter(0)
  g = f32[1024,1024] parameter(1)
  lr = f32[] constant(0.01)
  lrb = f32[1024,1024] broadcast(lr), dimensions={}
  step = f32[1024,1024] multiply(lrb, g)
  ROOT new_w = f32[1024,1024] subtract(w, step)
}
"""


def plan_of(text: str):
    source = runtime.parse(text)
    return source, run_pipeline(source, alignment=128)


@pytest.mark.parametrize("name", ["random_threefry", "attention", "while_loop_count",
                                  "cond_pred", "argmax_argmin"])
def test_slots_are_the_assignments_slices_and_live_ranges(name):
    source, plan = plan_of((corpus_dir() / f"{name}.hlo").read_text())
    view = annotate(plan, source)
    by_buffer = {r["name"]: r for r in plan.records()}
    steps = plan.schedule.step
    checked = 0
    for shown in view.computations:
        comp = plan.module.computation(shown.name)
        assert {i.name for i in shown.instructions} == {i.name for i in comp.instructions}
        annotated = {i.name: i for i in shown.instructions}
        for inst in comp.instructions:
            ours = annotated[inst.name]
            assert ours.step == steps.get(inst)
            if not plan.dataflow.has_positions(inst):
                assert not ours.slots
                continue
            assert [s.index for s in ours.slots] == list(plan.dataflow.value_set(inst))
            for slot in ours.slots:
                where = plan.slice(inst, slot.index)
                assert (slot.allocation, slot.offset, slot.size) == \
                    (where.allocation, where.offset, where.size)
                record = by_buffer[slot.buffer]
                assert record["allocation"] == slot.allocation
                assert record["offset"] <= slot.offset <= record["offset"] + record["size"]
                assert (record["start"], record["end"]) == slot.live
                assert slot.kind == plan.allocations[slot.allocation].kind
                checked += 1
    assert checked >= len(plan.buffers())


def test_every_buffer_appears_where_it_is_defined():
    source, plan = plan_of((corpus_dir() / "random_threefry.hlo").read_text())
    view = annotate(plan, source)
    slots = {s.buffer: s for i in view.instructions() for s in i.slots}
    for record in plan.records():
        slot = slots[record["name"]]
        assert (slot.allocation, slot.offset, slot.live) == \
            (record["allocation"], record["offset"], (record["start"], record["end"]))


def test_a_fusion_names_the_source_instructions_it_holds():
    source, plan = plan_of(SGD)
    view = annotate(plan, source)
    (fusion,) = [i for i in view.instructions() if i.opcode == "fusion"]
    assert fusion.fused_from == ["new_w", "step", "lrb", "lr"]       # root first, as the report says
    assert fusion.source_lines == [6, 7, 8, 9]
    assert [m.name for m in fusion.fused][-1] == "new_w"
    # the root lives in w's buffer: donated parameter 0
    (slot,) = fusion.slots
    assert (slot.allocation, slot.kind, slot.buffer) == (0, "parameter", "w")
    text = view.to_text()
    line = next(t for t in text.splitlines() if f"%{fusion.name} =" in t)
    assert re.search(r"\b2\s+#0 parameter\s+0\s+4\.0 MiB\s+0\u20132\s", line), line
    assert "fused from new_w, step, lrb, lr; source lines 6, 7, 8, 9" in text
    assert "in buffer w" in text


def test_html_tints_rows_by_cost_edges_them_by_allocation_and_folds_fusions():
    source, plan = plan_of(SGD)
    html = annotate(plan, source).to_html()
    rows = re.findall(r'<tr data-instruction="([^"]+)" style="background:([^;]+);'
                      r'border-left:4px solid ([^"]+)"', html)
    tint = {name: background for name, background, _ in rows}
    edge = {name: border for name, _, border in rows}
    fusion = next(n for n in tint if n.startswith("subtract_fusion"))
    assert edge["w"] == edge[fusion] != edge["g"]
    assert tint["w"] == "transparent" and tint[fusion].startswith("rgba(242,176,30,")
    assert '<details class="hlo-fusion"><summary>' in html
    assert "#0 parameter +0 4.0 MiB live 0\u20132 (buffer w)" in html
    assert "12.0 MiB moved, 3.1M operations" in html  # w, g read, new_w written
    assert "<script" not in html
    assert ">Python</th>" not in html                  # no line recorded: no empty column


METADATA = """HloModule m
ENTRY e {
  x = f32[256] parameter(0)
  y = f32[256] exponential(x), metadata={op_name="jit(f)/exp" source_file="/home/u/model.py" source_line=12}
  z = f32[256] add(y, y), metadata={op_name="jit(f)/add" source_file="/home/u/model.py" source_line=13}
  ROOT s = f32[256] sine(z), metadata={op_name="jit(f)/sin" source_file="/home/u/model.py" source_line=12}
}
"""


def test_instructions_grouped_by_the_python_line_jax_recorded():
    source, plan = plan_of(METADATA)
    view = annotate(plan, source)
    lines = view.by_python_line()
    assert [line.location.where for line in lines] == ["model.py:12"]  # one fused kernel
    (fusion,) = lines[0].instructions
    assert fusion.python.op_name == "jit(f)/sin" and fusion.bytes == 2 * 256 * 4
    view = annotate(run_pipeline(runtime.parse(METADATA), alignment=128, fusion=False))
    by_line = {line.location.where: [i.name for i in line.instructions]
               for line in view.by_python_line()}
    assert by_line == {"model.py:12": ["y", "s"], "model.py:13": ["z"]}
    html = view.to_html()
    assert 'data-python-line="model.py:12"' in html and "By Python line" in html
    assert ">Python</th>" in html
    shown = re.sub(r'title="[^"]*"', "", html)           # the tooltips keep the whole line
    assert "metadata={" in html and "metadata={" not in shown and "exponential(%x)" in shown
    assert "model.py:13" in view.to_text()


def test_python_lines_from_a_stack_frame_table():
    """jax 0.12 and XLA's dumps name lines through the module's stack-frame tables: the line
    is the innermost frame outside the libraries (the user's call into an Equinox GRU)."""
    path = Path(__file__).parents[1] / "jax12" / "data" / "eqx_gru_scan.opt.hlo"
    source, plan = plan_of(path.read_text())
    lines = {line.location.where: line for line in annotate(plan, source).by_python_line()}
    assert "make_programs.py:84" in lines
    assert all(not where.startswith("_rnn.py") for where in lines)
    assert lines["make_programs.py:84"].location.function.endswith("run.<locals>.body")


def test_copies_and_pass_made_instructions_say_where_they_come_from():
    text = """HloModule m, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  p = f32[8] parameter(0)
  n = f32[8] negate(p)
  ROOT t = (f32[8], f32[8]) tuple(n, p)
}"""
    source, plan = plan_of(text)
    view = annotate(plan, source)
    copies = {c.instruction for c in plan.copies}
    assert copies
    for name in copies:
        assert view[name].origin.startswith("inserted copy: ")
    with pytest.raises(KeyError, match="no instruction 'nope'"):
        view["nope"]


def test_show_annotated_puts_the_view_in_the_report(ip):
    result = ip.run_cell_magic("hlo", "--show annotated -o r", ADD_MUL)
    html = result._repr_html_()
    assert "HLO after the passes, annotated with buffers" in html
    assert 'data-instruction="x"' in html
    text = result.report_text()
    assert "HLO after the passes, annotated with buffers:" in text
    view = result.annotated()
    for record in result.records():
        assert any(s.buffer == record["name"] and s.offset == record["offset"]
                   for i in view.instructions() for s in i.slots)


def test_the_timeline_and_peak_table_name_lines_from_stack_frames_too():
    from hlo_magic.names import source_of
    path = Path(__file__).parents[1] / "jax12" / "data" / "eqx_gru_scan.opt.hlo"
    source, plan = plan_of(path.read_text())
    named = {source_of(i, plan.module) for i in plan.module.instructions()}
    assert any(s.endswith("(make_programs.py:84)") and s.startswith("jit(") for s in named)
