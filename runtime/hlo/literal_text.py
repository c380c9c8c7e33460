"""Reading constant values from their text: one element, or a whole nested-brace array.

Array literals are read from the raw ``{...}`` text the lexer captured rather than token by
token, because constants from JAX can hold many thousands of elements and a small dedicated
tokenizer is several times faster than the general one. Errors carry the offset within that
raw text so the parser can point its caret at the offending element.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .dtypes import ELEMENT_TYPES, ElementType
from .literal import nan_with_payload
from .shape import ArrayShape


class LiteralTextError(ValueError):
    """A literal's text is malformed; ``pos`` is the offset of the problem in that text."""

    def __init__(self, message: str, pos: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


_NAN = re.compile(r"^(-?)nan(?:\(0x([0-9a-fA-F]+)\))?$")


def scalar_value(text: str, et: ElementType) -> bool | int | float | np.generic:
    """One real element: range-checked integers, pred, floats with inf and NaN payloads (a NaN
    comes back as a numpy scalar of ``et`` so its payload bits survive)."""
    if et.is_pred:
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise LiteralTextError(f"expects true or false for a pred literal but sees '{text}'")
    if et.is_integer:
        return _integer_value(text, et)
    if et.is_float:
        return _float_value(text, et)
    raise LiteralTextError(f"literals of type {et.name} are not supported")


def _integer_value(text: str, et: ElementType) -> int:
    if text in ("true", "false"):
        return 1 if text == "true" else 0
    if not re.fullmatch(r"-?[0-9]+", text):
        raise LiteralTextError(f"expects an integer for a {et.name} literal but sees '{text}'")
    v = int(text)
    if et.is_signed:
        lo, hi = -(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1
    else:
        lo, hi = 0, (1 << et.bits) - 1
    if not lo <= v <= hi:
        raise LiteralTextError(f"value {v} is out of range for literal's primitive type "
                               f"{et.name.upper()} namely [{lo}, {hi}].")
    return v


def _float_value(text: str, et: ElementType) -> float | np.generic:
    m = _NAN.match(text)
    if m:
        payload = int(m.group(2), 16) if m.group(2) else None
        try:
            nan: np.generic = nan_with_payload(et, payload, bool(m.group(1)))
        except ValueError as e:
            raise LiteralTextError(str(e)) from None
        return nan
    if text in ("inf", "-inf"):
        return float(text)
    if not re.fullmatch(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", text):
        raise LiteralTextError(f"expects a number for a {et.name} literal but sees '{text}'")
    return float(text)


def complex_part(et: ElementType) -> ElementType:
    """The element type of each part of a complex literal value."""
    return ELEMENT_TYPES["f32" if et.name == "c64" else "f64"]


def to_array(values: list[Any], et: ElementType, dims: tuple[int, ...]) -> np.ndarray:
    """Values as an array of ``et``, rounded to the type; out-of-range floats become
    infinities, as XLA's parser makes them. Values are Python numbers, numpy scalars (NaNs with
    payloads) or, for complex types, (re, im) pairs of those: the parts are stored separately
    so a NaN payload never passes through a conversion that would quiet it."""
    if et.is_complex:
        arr = np.zeros(len(values), dtype=et.numpy)
        parts = arr.view(complex_part(et).numpy)
        parts[0::2] = _real_array([v[0] for v in values], complex_part(et))
        parts[1::2] = _real_array([v[1] for v in values], complex_part(et))
        return arr.reshape(dims)
    return _real_array(values, et).reshape(dims)


def _real_array(values: list[Any], et: ElementType) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        if any(isinstance(v, np.generic) for v in values):
            arr = np.empty(len(values), dtype=et.numpy)
            for k, v in enumerate(values):
                arr[k] = v
            return arr
        return np.array(values, dtype=et.numpy) if values else np.zeros(0, dtype=et.numpy)


_TOKEN = re.compile(
    r"(?P<blank>(?:\s++|//[^\n]*+|/\*.*?\*/)++)"
    r"|(?P<punct>[{}(),])"
    r"|(?P<word>-?nan\(0x[0-9a-fA-F]+\)|[^\s{}(),/]+)"
    r"|(?P<bad>.)",
    re.S,
)


def read_array(raw: str, shape: ArrayShape) -> np.ndarray:
    """The array written as ``raw`` (nested braces, one level per dimension, row-major)."""
    return _ArrayReader(raw, shape).read()


def read_scalar(raw: str, shape: ArrayShape) -> np.ndarray:
    """The rank-0 value written as ``raw`` (one number, or ``(re, im)`` for complex types)."""
    return _ArrayReader(raw, shape).read_scalar()


class _ArrayReader:
    """Checks the element count at every level, as XLA does, so a short row is reported
    where it is rather than as a size mismatch at the end."""

    def __init__(self, raw: str, shape: ArrayShape) -> None:
        self.raw = raw
        self.dims = shape.dims
        self.et = shape.element_type
        self.tokens: list[tuple[int, str]] = []
        for m in _TOKEN.finditer(raw):
            if m.lastgroup == "bad":
                raise LiteralTextError(f"unexpected {m.group()!r} in an array literal", m.start())
            if m.lastgroup != "blank":
                self.tokens.append((m.start(), m.group()))
        self.i = 0
        self.values: list[Any] = []   # scalars, or (re, im) pairs for complex types

    def read(self) -> np.ndarray:
        self.level(0, ())
        self.end()
        return to_array(self.values, self.et, self.dims)

    def read_scalar(self) -> np.ndarray:
        self.element()
        self.end()
        return to_array(self.values, self.et, ())

    def end(self) -> None:
        if self.i != len(self.tokens):
            pos, text = self.tokens[self.i]
            raise LiteralTextError(f"unexpected '{text}' after the literal", pos)

    def peek(self) -> tuple[int, str]:
        return self.tokens[self.i] if self.i < len(self.tokens) else (len(self.raw), "")

    def take(self) -> tuple[int, str]:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, want: str, context: str) -> None:
        pos, tok = self.take()
        if tok != want:
            raise LiteralTextError(f"expects '{want}' {context} but sees "
                                   f"{repr(tok) if tok else 'the end of the literal'}", pos)

    def level(self, depth: int, index: tuple[int, ...]) -> None:
        pos, tok = self.take()
        if tok != "{":
            raise LiteralTextError(f"expects nested array in rank {len(self.dims)}, but sees "
                                   f"{depth}" if tok else "unterminated array literal", pos)
        count = 0
        if self.peek()[1] == "}":
            pos, _ = self.take()
        else:
            while True:
                if depth + 1 < len(self.dims):
                    self.level(depth + 1, index + (count,))
                else:
                    self.element()
                count += 1
                pos, tok = self.take()
                if tok == "}":
                    break
                if tok != ",":
                    raise LiteralTextError(f"expects ',' or '}}' in an array literal but sees "
                                           f"'{tok}'" if tok else "unterminated array literal", pos)
        if count != self.dims[depth]:
            where = ",".join(str(i) for i in index)
            raise LiteralTextError(f"expects {self.dims[depth]} elements in the [{where}]th "
                                   f"element, but sees {count}", pos)

    def element(self) -> None:
        et = self.et
        if et.is_complex:
            self.expect("(", "to open a complex value (re, im)")
            re_ = self.word(complex_part(et))
            self.expect(",", "between the real and imaginary parts")
            im = self.word(complex_part(et))
            self.expect(")", "to close the complex value")
            self.values.append((re_, im))
        else:
            self.values.append(self.word(et))

    def word(self, et: ElementType) -> bool | int | float | np.generic:
        pos, tok = self.take()
        if tok == "{":
            raise LiteralTextError(f"expects nested array in rank {len(self.dims)}, but sees "
                                   f"{len(self.dims) + 1}", pos)
        if tok == "(":
            raise LiteralTextError("parenthesised values are only valid for complex types", pos)
        if tok in ("}", ",", ")", ""):
            raise LiteralTextError(f"expects a value but sees '{tok}'" if tok
                                   else "unterminated array literal", pos)
        try:
            return scalar_value(tok, et)
        except LiteralTextError as e:
            raise LiteralTextError(e.message, pos) from None
