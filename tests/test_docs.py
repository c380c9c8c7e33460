"""The documentation's relative links lead somewhere, and README stays a front door.

Every ``[text](path)``, ``[text](path#anchor)`` and ``[text](#anchor)`` link in README.md and
docs/*.md outside code must name an existing file, and an anchor a heading of that file (as
GitHub derives anchors from headings). README stays under 300 lines: the details live in
docs/. ``.ci/run`` reads README's first two ``bash`` blocks as the install and test commands,
so they must be there, in that order.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = sorted([README, *(REPO / "docs").glob("*.md")])

_LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)\)")
_FENCE = re.compile(r"^(```|~~~)")
_INLINE_CODE = re.compile(r"`+[^`]*`+")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans blanked."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(_INLINE_CODE.sub("", line))
    return lines


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lowercased, punctuation dropped, spaces to hyphens,
    repeats numbered ``-1``, ``-2``..."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in _prose(path.read_text()):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        heading = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda g: g.group(1) or "", m.group(1))
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _links(path: Path) -> list[str]:
    return [target for line in _prose(path.read_text()) for target in _LINK.findall(line)]


def test_docs_exist():
    assert (REPO / "docs" / "architecture.md").is_file()
    assert len(DOCS) > 1


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_lead_to_files_and_headings(doc: Path):
    dead = []
    for target in _links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):      # https:, mailto:...
            continue
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if not linked.exists():
            dead.append(f"{target}: no file {linked}")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            dead.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert not dead, f"dead links in {doc.name}:\n" + "\n".join(dead)


def test_readme_is_under_300_lines():
    assert len(README.read_text().splitlines()) < 300


def test_readme_keeps_the_install_and_test_commands_first():
    blocks, current = [], None
    for line in README.read_text().splitlines():
        if current is None and line == "```bash":
            current = []
        elif current is not None and line == "```":
            blocks.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    assert len(blocks) >= 2
    assert "pip install" in blocks[0]
    assert "pytest" in blocks[1]
