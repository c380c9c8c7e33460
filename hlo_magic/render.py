"""Report parts as static HTML and as plain text.

``Folded`` parts become HTML ``<details>`` (open or closed as the part says); in text, which
cannot fold, they are a heading with their parts below, after the answers. A long table's
folded rows are a closed ``<details>`` titled "N more ..." under it (text only counts them).
The HTML uses no JavaScript, no external CSS or fonts and no fixed background colour, so it
reads the same in JupyterLab, Notebook 7, VS Code, nbconvert and dark themes; every name that
comes from the HLO module is escaped.
"""

from __future__ import annotations

import base64
import html
import itertools
from typing import Sequence

from .report import Facts, Folded, Markup, Part, Picture, Preformatted, Table

_CELL = "padding:1px 10px 1px 0;text-align:left"
_RULE = "border-bottom:1px solid rgba(127,127,127,0.35)"
_HEADING = "margin:0.8em 0 0.3em 0;font-size:1em"


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _omitted(table: Table) -> str:
    return f"\u2026 {table.omitted} more {table.omitted_what}"


def _html_cell(text: str) -> str:
    """A table cell; multi-line text (printed arrays) keeps its lines and alignment."""
    if "\n" in text:
        return f'<td style="{_CELL}"><code style="white-space:pre">{_e(text)}</code></td>'
    return f'<td style="{_CELL}">{_e(text)}</td>'


def _html_rows(rows: Sequence[tuple[str, ...]]) -> str:
    return "".join("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>" for row in rows)


def _html_more(table: Table) -> str:
    """The rows beyond the first ones, folded under "... N more" as aligned text (a tenth of
    the bytes of table markup, so a model's report stays small); those not even folded are
    counted and pointed to the result object."""
    if not table.omitted:
        return ""
    if not table.folded:
        return f'<p style="margin:0.2em 0"><i>{_e(_omitted(table))}</i></p>'
    rest = table.omitted - len(table.folded)
    tail = (f'<p style="margin:0.2em 0"><i>{rest} more not listed: the result object '
            "(-o NAME) holds them all</i></p>" if rest else "")
    text = "\n".join(_text_table(table.columns, table.folded))
    return (f'<details style="margin:0.2em 0"><summary><i>{_e(_omitted(table))}</i></summary>'
            f'<pre style="max-height:24em;overflow:auto">{_e(text)}</pre>{tail}</details>')


def _html_part(part: Part) -> str:
    if isinstance(part, Facts):
        rows = "".join(f'<tr><th style="{_CELL}">{_e(k)}</th><td style="{_CELL}">{_e(v)}</td></tr>'
                       for k, v in part.items)
        return f'<h3 style="{_HEADING}">{_e(part.title)}</h3><table>{rows}</table>'
    if isinstance(part, Table):
        head = "".join(f'<th style="{_CELL};{_RULE}">{_e(c)}</th>' for c in part.columns)
        notes = "".join(f"<p style=\"margin:0.2em 0\"><i>{_e(n)}</i></p>" for n in part.notes)
        return (f'<h4 style="{_HEADING}">{_e(part.title)}</h4>'
                f'<table><thead><tr>{head}</tr></thead><tbody style="vertical-align:top">'
                f"{_html_rows(part.rows)}</tbody>"
                f"</table>{_html_more(part)}{notes}")
    if isinstance(part, Preformatted):
        return (f'<details><summary><b>{_e(part.title)}</b></summary>'
                f'<pre style="max-height:32em;overflow:auto">{_e(part.text)}</pre></details>')
    if isinstance(part, Folded):
        inner = "\n".join(_html_part(p) for p in part.parts)
        return (f'<details{" open" if part.open else ""} style="margin-top:0.5em">'
                f'<summary><b>{_e(part.title)}</b></summary>'
                f'<div style="margin-left:1em">{inner}</div></details>')
    if isinstance(part, Markup):
        return f'<h4 style="{_HEADING}">{_e(part.title)}</h4>{part.html}'
    assert isinstance(part, Picture)
    data = base64.b64encode(part.png).decode("ascii")
    return (f'<h4 style="{_HEADING}">{_e(part.title)}</h4>'
            f'<img src="data:image/png;base64,{data}" alt="{_e(part.alt)}" '
            f'style="max-width:100%">')


def to_html(parts: list[Part]) -> str:
    body = "\n".join(_html_part(p) for p in parts)
    return f'<div class="hlo-magic-report" style="color:inherit">{body}</div>'


def _text_table(columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    cells = [[c.splitlines() or [""] for c in row] for row in [columns, *rows]]
    widths = [max(len(line) for row in cells for line in row[i]) for i in range(len(columns))]
    out = []
    for n, row in enumerate(cells):
        for lines in itertools.zip_longest(*row, fillvalue=""):
            out.append("  " + "  ".join(t.ljust(w) for t, w in zip(lines, widths)).rstrip())
        if n == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out


def _text_part(part: Part) -> list[str]:
    if isinstance(part, Facts):
        width = max(len(k) for k, _ in part.items)
        return [part.title] + [f"  {k.ljust(width)}  {v}" for k, v in part.items]
    if isinstance(part, Table):
        lines = [part.title + ":"] + _text_table(part.columns, part.rows)
        lines += [f"  {n}" for n in part.notes]
        if part.omitted:
            lines.append(f"  {_omitted(part)}")
        return lines
    if isinstance(part, Preformatted):
        return [part.title + ":"] + ["  " + line for line in part.text.splitlines()]
    if isinstance(part, Folded):
        return [f"== {part.title} =="] + "\n\n".join(
            "\n".join(_text_part(p)) for p in part.parts).splitlines()
    if isinstance(part, Markup):
        return [part.title + ":"] + ["  " + line for line in part.text.splitlines()]
    assert isinstance(part, Picture)
    return [f"{part.title}: ({part.alt}; shown as an image in a notebook)"]


def to_text(parts: list[Part]) -> str:
    shown = [p for p in parts if not isinstance(p, Folded) or p.in_text]
    return "\n\n".join("\n".join(_text_part(p)) for p in shown)
