"""A whole model's report stays short: every table keeps ``max_table_rows`` rows in view and
folds the rest under "N more", and the answers come before any table."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hlo_magic.render import to_html, to_text
from hlo_magic.report import FOLDED_TIMES, Folded, Table, build_report

from .hlo_texts import model_step


@pytest.fixture(scope="module")
def model_result(shell):
    shell.run_line_magic("load_ext", "hlo_magic")
    try:
        yield shell.run_cell_magic("hlo", "--show assignment,kernels", model_step())
    finally:
        shell.run_line_magic("unload_ext", "hlo_magic")


def _tables(parts):
    for part in parts:
        if isinstance(part, Table):
            yield part
        elif isinstance(part, Folded):
            yield from _tables(part.parts)


def test_the_module_is_model_sized(model_result):
    assert len(model_result.parameters) == 249
    assert len(model_result.records()) == 831        # nothing donated: outputs have their own


def test_every_table_is_capped_and_folds_the_rest(model_result):
    parts = build_report(model_result)
    limit = model_result.max_table_rows
    tables = list(_tables(parts))
    assert {"Parameters", "Allocations", "Kernels"} <= {t.title for t in tables}
    for table in tables:
        assert len(table.rows) <= limit, table.title
        assert len(table.folded) <= FOLDED_TIMES * limit, table.title
        assert len(table.rows) + table.omitted >= len(table.folded), table.title
    (params,) = [t for t in tables if t.title == "Parameters"]
    assert (len(params.rows), params.omitted, len(params.folded)) == (25, 224, 100)
    html = to_html(parts)
    assert "<summary><i>\u2026 224 more parameters</i></summary>" in html
    assert "124 more not listed" in html
    assert "\u2026 224 more parameters" in to_text(parts)


def test_the_report_is_small_and_answers_before_any_table(model_result):
    html = replace(model_result, show=("assignment",))._repr_html_()
    assert len(html) < 110_000
    first_table = html.index("<h4")
    for answer in ("peak", "peak holds", "biggest saving"):
        assert html.index(f'">{answer}</th>') < first_table
    assert "parameter 996.0 KiB (249 buffers)" in html[:first_table]
