"""The report's layout: plain answers first, details folded, the glossary once per session,
repeated reasons said once, shared bytes explained, fusions named by their source."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import runtime
from hlo_magic.names import buffer_label, fusions
from hlo_magic.render import to_html, to_text
from hlo_magic.report import Folded, build_report
from hlo_magic.sharing import reuses, sentence

from .hlo_texts import INCREMENT
from runtime import reassign

CHAIN = """HloModule reuse

ENTRY main {
  a = f32[32,32] parameter(0)
  b = f32[32,32] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[32,32] dot(b, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d = f32[32,32] dot(c, c), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT e = f32[32,32] dot(d, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""

SGD = """HloModule sgd_step, input_output_alias={ {}: (0, {}, may-alias) }

ENTRY main {
  w = f32[256] parameter(0)
  g = f32[256] parameter(1)
  h = f32[256] parameter(2)
  lr = f32[] constant(0.01)
  lrb = f32[256] broadcast(lr), dimensions={}
  step = f32[256] multiply(lrb, g)
  ROOT new_w = f32[256] subtract(w, step)
}
"""


def test_the_answer_comes_first_and_the_details_are_folded(ip):
    ip.user_ns["x"] = np.float32(41)
    result = ip.run_cell_magic("hlo", "--run x", INCREMENT)
    parts = build_report(result)
    assert parts[0].title == "HloModule increment"
    assert [k for k, _ in parts[0].items] == ["output", "peak", "peak holds", "biggest saving"]
    answers = dict(parts[0].items)
    assert answers["output"] == "42."
    assert answers["peak"].startswith("8 B at step 1 (add_fusion.0 (out, c))")
    assert answers["peak holds"] == ("output 4 B (1 buffer), parameter 4 B (1 buffer); "
                                     "largest add_fusion.0 (out, c) (4 B)")
    assert answers["biggest saving"] == ("donating p (--donate p) would save 4 B of peak "
                                         "(8 B \u2192 4 B)")
    assert "Outputs" not in [getattr(p, "title", "") for p in parts]   # 42. is all of it
    html = to_html(parts)
    assert html.index("42.") < html.index("Parameters") < html.index("<details")
    details = [p for p in parts if isinstance(p, Folded)]
    assert [d.title for d in details] == ["Details: module, device, run, buffer assignment",
                                          "What the memory words mean"]
    assert html.index("Allocations") > html.index("<details")


def test_one_display_builds_the_report_once(ip, monkeypatch):
    """The text and the HTML of a display bundle show the same parts, built once (a model's
    take a second); a copy that shows something else builds its own."""
    from hlo_magic import result as result_module
    built = []
    monkeypatch.setattr(result_module, "build_report",
                        lambda r: built.append(r) or build_report(r))
    result = ip.run_cell_magic("hlo", "", SGD)
    bundle, _ = ip.display_formatter.format(result)
    assert {"text/plain", "text/html"} <= set(bundle) and len(built) == 1
    shown = replace(result, show=("assignment", "hlo"))
    assert "HLO (as parsed)" in shown._repr_html_() and len(built) == 2


def test_the_glossary_is_open_once_per_session_and_folded_after(ip):
    ip.run_cell_magic("hlo", "--show none -o hidden", INCREMENT)     # never displayed
    first = ip.run_cell_magic("hlo", "", INCREMENT)
    second = ip.run_cell_magic("hlo", "", INCREMENT)
    assert '<details open style="margin-top:0.5em"><summary><b>What the memory words mean' \
        in first._repr_html_()
    assert '<details style="margin-top:0.5em"><summary><b>What the memory words mean' \
        in second._repr_html_()
    assert "parameter bytes an output lives in" in first.report_text()
    assert "parameter bytes an output lives in" not in second.report_text()


def test_a_reason_shared_by_parameters_is_said_once(ip):
    result = ip.run_cell_magic("hlo", "", SGD)
    (table,) = [p for p in build_report(result) if getattr(p, "title", "") == "Parameters"]
    assert [row[-1] for row in table.rows[1:]] == ["cannot alias [1]", "cannot alias [1]"]
    assert table.notes == ["[1] no input_output_alias or buffer_donor entry names this "
                           "parameter, so no output can live in its buffer"]
    assert to_text(build_report(result)).count("no output can live in its buffer") == 1


def test_sharing_names_the_previous_holder_and_when_it_died():
    plan = runtime.compile(CHAIN).buffer_assignment
    (reuse,) = reuses(plan)
    assert (reuse.buffer.name, reuse.previous.name) == ("d", "b")
    assert reuse.offset == reuse.buffer.offset == reuse.previous.offset
    assert reuse.previous.live.end < reuse.buffer.live.start
    assert sentence(reuse) == (f"d reuses b's bytes at offset {reuse.offset} (4.0 KiB) because "
                               f"b dies at step {reuse.previous.live.end} and d starts at step "
                               f"{reuse.buffer.live.start}")


def test_every_reuse_agrees_with_the_assignment():
    text = open("notebooks/modules/attention.hlo").read()
    plan = runtime.compile(text).buffer_assignment
    for r in reuses(plan):
        for b in (r.buffer, r.previous):
            assert b.allocation == r.allocation
            assert b.offset <= r.offset and r.offset + r.size <= b.offset + b.size
        assert r.previous.live.end < r.buffer.live.start or \
            (r.in_place and r.previous.live.end == r.buffer.live.start)


def test_in_place_hand_over_is_said_as_such():
    text = """HloModule chain
ENTRY main {
  a = f32[256] parameter(0)
  b = f32[256] exponential(a)
  c = f32[256] sort(b), dimensions={0}, to_apply=lt
  d = f32[256] negate(c)
  e = f32[256] sort(d), dimensions={0}, to_apply=lt
  ROOT f = f32[256] negate(e)
}
lt {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = pred[] compare(x, y), direction=LT
}
"""
    plan = runtime.compile(text).buffer_assignment
    handed = [r for r in reuses(plan) if r.in_place]
    assert handed
    for r in handed:
        assert "in place at step" in sentence(r)
        assert plan.temp_arena.reuse[r.buffer.buffer] is r.previous.buffer


def test_fusions_are_named_by_the_source_instructions_they_hold():
    plan = reassign(runtime.compile(SGD).buffer_assignment, frozenset())   # w kept
    members = fusions(plan.module)
    (name,) = members
    assert members[name][0] == "new_w" and set(members[name]) == {"new_w", "step", "lrb", "lr"}
    (out,) = [b for b in plan.buffers() if b.buffer.first.instruction.name == name]
    assert buffer_label(out, members) == f"{name} (new_w, step, lrb, \u2026 1 more)"


def test_show_hlo_also_shows_the_module_after_the_passes(ip):
    html = ip.run_cell_magic("hlo", "--show hlo", SGD)._repr_html_()
    assert "HLO (as parsed)" in html and "HLO after the passes (fusion)" in html
    assert "fusion(" in html.split("HLO after the passes (fusion)")[1]


def test_the_answers_name_custom_calls_without_an_implementation(ip):
    text = """HloModule unknown_call

ENTRY e {
  x = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(x), custom_call_target="no_such_target"
}
"""
    result = ip.run_cell_magic("hlo", "", text)
    answers = dict(build_report(result)[0].items)
    assert answers["custom calls"] == (
        "1 without an implementation (a run that reaches one fails with CustomCallError): "
        "c (line 5): no_such_target, no implementation registered")


def test_the_peak_table_names_the_python_source_when_the_metadata_has_it():
    from hlo_magic.report import peak_table

    from .test_timeline_widget import WITH_METADATA
    plan = runtime.compile(WITH_METADATA, lazy=True).buffer_assignment
    table = peak_table(plan, 25)
    assert table.columns[-1] == "source"
    assert [row[-1] for row in table.rows] == ["jit(f)/neg (model.py:13)", "x"]
    assert "source" not in peak_table(runtime.compile(CHAIN, lazy=True).buffer_assignment,
                                      25).columns
