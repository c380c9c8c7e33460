"""Rendering report parts: escaped static HTML and aligned plain text from the same data."""

from hlo_magic.render import to_html, to_text
from hlo_magic.report import Facts, Picture, Preformatted, Table


def test_html_escapes_everything_from_the_module_and_uses_no_script_or_background():
    html = to_html([Facts("HloModule <m>", [("name", "a&b")]),
                    Table("T", ("col<",), [("<b>x</b>",)], notes=["n>1"], omitted=4,
                          omitted_what="buffers"),
                    Preformatted("HLO", "ROOT x = f32[] add(<a>, b)")])
    assert "<m>" not in html and "HloModule &lt;m&gt;" in html and "a&amp;b" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "col&lt;" in html and "n&gt;1" in html
    assert "\u2026 4 more buffers" in html
    assert "add(&lt;a&gt;, b)" in html and "<details>" in html
    assert "<script" not in html and "background" not in html


def test_pictures_are_inline_png_data():
    html = to_html([Picture("Memory", b"\x89PNG", "alt <text>")])
    assert '<img src="data:image/png;base64,iVBORw==" alt="alt &lt;text&gt;"' in html
    assert to_text([Picture("Memory", b"", "figure")]) == (
        "Memory: (figure; shown as an image in a notebook)")


def test_text_tables_align_columns_and_keep_multi_line_cells_together():
    text = to_text([Table("Outputs", ("output", "values"), [("{0}", "[1 2\n 3 4]"),
                                                            ("{1}", "5")], omitted=1)])
    assert text.splitlines() == [
        "Outputs:",
        "  output  values",
        "  ------  ------",
        "  {0}     [1 2",
        "           3 4]",
        "  {1}     5",
        "  \u2026 1 more rows",
    ]
