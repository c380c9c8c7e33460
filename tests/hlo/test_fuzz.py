"""Whatever text comes in, ``runtime.parse`` raises only located ``HloError``s.

Hypothesis mutates real corpus modules (delete, duplicate and swap tokens and lines, change a
number, truncate, insert random bytes, splice in very deep nesting) and the small modules of
test_shapes (change numbers and element types), and checks that parsing and verifying either
succeeds or fails with an ``HloError`` subclass pointing at a line and column of the text.
A Python internal exception (IndexError, KeyError, RecursionError...) fails the test.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime
from runtime.errors import HloError

from ..conftest import corpus_hlo_files
from .test_shapes import COMPUTATIONS, DECLARED, INFERRED, INVALID, module

_TOKEN = re.compile(r"\s+|[A-Za-z0-9_.%\-]+|.", re.S)
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.%\-])[0-9]+(?![A-Za-z_])")
_ELEMENT_TYPE = re.compile(r"\b(?:pred|s4|s32|u8|u64|bf16|f32|f64|c64|token)\b")
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@lru_cache(maxsize=None)
def _text(path: Path) -> str:
    assert path.is_file(), f"corpus file missing: {path}"
    return path.read_text()


def _parse_raises_only_located_hlo_errors(text: str) -> None:
    try:
        runtime.parse(text)
    except HloError as e:
        assert e.line is not None and e.column is not None, f"unlocated error: {e}"
        assert 1 <= e.line <= text.count("\n") + 1, f"line {e.line} is outside the text: {e}"
        assert e.column >= 1


def _edit(rnd: random.Random, items: list[str]) -> list[str]:
    """Delete, duplicate or swap items of a sequence (tokens or lines)."""
    items = items or [""]
    i, j = rnd.randrange(len(items)), rnd.randrange(len(items))
    how = rnd.choice(["delete", "duplicate", "swap"])
    if how == "delete":
        del items[i]
    elif how == "duplicate":
        items.insert(i, items[j])
    else:
        items[i], items[j] = items[j], items[i]
    return items


def _mutate_tokens(rnd: random.Random, text: str) -> str:
    return "".join(_edit(rnd, _TOKEN.findall(text)))


def _mutate_lines(rnd: random.Random, text: str) -> str:
    return "\n".join(_edit(rnd, text.split("\n")))


def _change_number(rnd: random.Random, text: str) -> str:
    """Numbers decide shapes and attribute values: changing one reaches the shape rules."""
    numbers = list(_NUMBER.finditer(text))
    if not numbers:
        return text
    m = rnd.choice(numbers)
    new = rnd.choice([0, 1, 2, 3, -1, 64, int(m.group()) + 1, int(m.group()) - 1, 2**63])
    return text[:m.start()] + str(new) + text[m.end():]


def _change_element_type(rnd: random.Random, text: str) -> str:
    types = list(_ELEMENT_TYPE.finditer(text))
    if not types:
        return text
    m = rnd.choice(types)
    return text[:m.start()] + rnd.choice(["pred", "s4", "s32", "u8", "bf16", "f64", "c64", "token"]) + text[m.end():]


def _truncate(rnd: random.Random, text: str) -> str:
    return text[:rnd.randint(0, len(text))]


def _insert_bytes(rnd: random.Random, text: str) -> str:
    at = rnd.randint(0, len(text))
    junk = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 8))).decode("latin-1")
    return text[:at] + junk + text[at:]


MUTATIONS = {"tokens": _mutate_tokens, "lines": _mutate_lines, "number": _change_number,
             "truncate": _truncate, "bytes": _insert_bytes}


@settings(FUZZ, max_examples=200)
@given(path=st.sampled_from(corpus_hlo_files()), data=st.data())
def test_mutated_corpus_text_raises_only_located_hlo_errors(path, data):
    text = _text(path)
    rnd = data.draw(st.randoms(use_true_random=True), label="positions")
    for name in data.draw(st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=4),
                          label="mutations"):
        text = MUTATIONS[name](rnd, text)
    _parse_raises_only_located_hlo_errors(text)


@settings(FUZZ, max_examples=25)
@given(path=st.sampled_from(corpus_hlo_files()), data=st.data(),
       opener=st.sampled_from(["(", "{", "[", "((f32[],", "{ {", "negate(", "to_apply={"]))
def test_very_deep_nesting_is_a_located_error(path, data, opener):
    text = _text(path)
    at = data.draw(st.randoms(use_true_random=True), label="position").randint(0, len(text))
    _parse_raises_only_located_hlo_errors(text[:at] + opener * 10_000 + text[at:])


@settings(FUZZ, max_examples=60)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_arbitrary_text_raises_only_located_hlo_errors(text):
    _parse_raises_only_located_hlo_errors(text)


@settings(FUZZ, max_examples=60)
@given(st.binary(max_size=300))
def test_binary_garbage_raises_only_located_hlo_errors(blob):
    _parse_raises_only_located_hlo_errors(blob.decode("latin-1"))


SMALL_MODULES = [module(c[1], c[2], COMPUTATIONS) for c in INFERRED + DECLARED + INVALID]


@settings(FUZZ, max_examples=150)
@given(text=st.sampled_from(SMALL_MODULES), data=st.data())
def test_shape_rules_raise_only_located_errors_for_changed_numbers_and_types(text, data):
    """Every opcode family's rule meets dimensions, attribute values and element types it
    was not written for."""
    rnd = data.draw(st.randoms(use_true_random=True), label="positions")
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        text = rnd.choice([_change_number, _change_element_type])(rnd, text)
    _parse_raises_only_located_hlo_errors(text)
