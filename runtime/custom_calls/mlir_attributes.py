"""MLIR dictionary attributes: how typed-FFI custom calls carry their named attributes.

XLA prints a typed-FFI call's attributes as the MLIR dictionary of its ``backend_config``
(``{alpha = 2.000000e+00 : f32, n = 3 : i64, name = "abc"}``). A handler receives them
decoded to its declared C++ types; here they become Python values of the written type, so a
``: f32`` attribute arrives as ``np.float32`` and ``: ui8`` as ``np.uint8`` (what JAX's LAPACK
targets use for their ``'L'``/``'U'`` flags). Values: numbers with an optional ``: type``
(numpy scalars; untyped integers are ``i64`` and untyped floats ``f64``, MLIR's defaults; a
hexadecimal number with a float type is its bit pattern, how MLIR prints NaN and infinity),
strings (``str``), ``true``/``false`` (``bool``), ``unit`` and valueless keys (``True``),
``dense<...> : tensor<NxT>`` and ``array<T: ...>`` (numpy arrays), ``[...]`` (lists) and
nested dictionaries (``dict``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ..errors import HloParseError, SourceLocation
from ..hlo.attributes import unquote_string

SCALAR_TYPES: dict[str, np.dtype] = {
    "i1": np.dtype(np.bool_),
    **{f"{sign}{bits}": np.dtype(f"int{bits}") for sign in ("i", "si") for bits in (8, 16, 32, 64)},
    **{f"ui{bits}": np.dtype(f"uint{bits}") for bits in (8, 16, 32, 64)},
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64), "index": np.dtype(np.int64),
}
_FLOAT_TYPES = frozenset(name for name in ("f16", "bf16", "f32", "f64"))

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<number>[-+]?(?:0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))
    | (?P<word>[A-Za-z_][A-Za-z0-9_$.]*)
    | (?P<punct>[{}\[\]<>=:,])
    )""", re.X)
_TENSOR_TYPE = re.compile(r"\s*tensor\s*<\s*((?:\d+x)*)([A-Za-z][A-Za-z0-9]*)\s*>")


class _Syntax(Exception):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass
class _Token:
    kind: str
    text: str
    offset: int
    end: int


class _Parser:
    """Recursive descent over ``text``; tokens are read lazily so a tensor type such as
    ``2x3xf32`` can be matched as one piece of text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.offset = 0
        self._next: _Token | None = None

    # --- tokens -----------------------------------------------------------------------------
    @property
    def peek(self) -> _Token:
        if self._next is None:
            self._next = self._scan()
        return self._next

    def _scan(self) -> _Token:
        rest = len(self.text) - len(self.text[self.offset:].lstrip())
        if rest == len(self.text):
            return _Token("end", "", rest, rest)
        m = _TOKEN.match(self.text, self.offset)
        if m is None:
            raise _Syntax(f"unexpected character {self.text[rest]!r}", rest)
        kind = m.lastgroup
        assert kind is not None
        return _Token(kind, m.group(kind), m.start(kind), m.end())

    def take(self) -> _Token:
        token = self.peek
        self.offset = token.end
        self._next = None
        return token

    def match_text(self, pattern: re.Pattern) -> re.Match | None:
        """Match ``pattern`` at the current position, bypassing the tokenizer."""
        self._next = None
        m = pattern.match(self.text, self.offset)
        if m is not None:
            self.offset = m.end()
        return m

    def at(self, text: str) -> bool:
        return self.peek.kind in ("punct", "word") and self.peek.text == text

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.take()
            return True
        return False

    def expect(self, text: str, why: str) -> None:
        if not self.accept(text):
            raise self.error(f"expects '{text}' {why}")

    def error(self, message: str) -> _Syntax:
        token = self.peek
        seen = "the end" if token.kind == "end" else repr(token.text)
        return _Syntax(f"{message} but sees {seen}", token.offset)

    # --- grammar ----------------------------------------------------------------------------
    def dictionary(self) -> dict[str, object]:
        self.expect("{", "to open the attribute dictionary")
        out: dict[str, object] = {}
        while not self.at("}"):
            token = self.peek
            if token.kind not in ("string", "word"):
                raise self.error("expects an attribute name")
            self.take()
            key = unquote_string(token.text[1:-1]) if token.kind == "string" else token.text
            if key in out:
                raise _Syntax(f"attribute {key!r} is given twice", token.offset)
            out[key] = self.value() if self.accept("=") else True
            if not self.accept(","):
                break
        self.expect("}", "to close the attribute dictionary")
        return out

    def value(self) -> object:
        token = self.peek
        if token.kind == "punct" and token.text == "{":
            return self.dictionary()
        if token.kind == "punct" and token.text == "[":
            return self.listing(self.value, "the array attribute")
        if token.kind == "string":
            self.take()
            return unquote_string(token.text[1:-1])
        if token.kind == "number":
            self.take()
            dtype = self.scalar_type() if self.accept(":") else _default_type(token.text)
            return convert_element(token, dtype)
        if token.kind == "word" and token.text in _WORD_VALUES:
            self.take()
            return _WORD_VALUES[token.text](self)
        raise self.error("expects an attribute value (a number, string, true/false, "
                         "dense<...>, array<...>, [...] or {...})")

    def listing(self, item, what: str) -> list:
        self.expect("[", f"to open {what}")
        items = []
        while not self.at("]"):
            items.append(item())
            if not self.accept(","):
                break
        self.expect("]", f"to close {what}")
        return items

    def scalar_type(self) -> np.dtype:
        token = self.peek
        dtype = SCALAR_TYPES.get(token.text) if token.kind == "word" else None
        if dtype is None:
            raise self.error(f"expects an element type ({', '.join(SCALAR_TYPES)})")
        self.take()
        return dtype

    def element(self) -> _Token:
        """One element of dense<...> or array<...>, converted once its type is known."""
        token = self.peek
        if token.kind != "number" and token.text not in ("true", "false"):
            raise self.error("expects a number or true/false")
        return self.take()

    def dense(self) -> np.ndarray:
        self.expect("<", "after dense")
        start = self.peek.offset
        body = [] if self.at(">") else self.dense_body()
        self.expect(">", "to close dense<...>")
        self.expect(":", "before the dense attribute's tensor type")
        m = self.match_text(_TENSOR_TYPE)
        dtype = SCALAR_TYPES.get(m.group(2)) if m else None
        if m is None or dtype is None:
            raise self.error("expects a tensor type such as tensor<2x3xf32>")
        dims = tuple(int(d) for d in m.group(1).split("x") if d)
        values = [convert_element(token, dtype) for token in _flatten(body)]
        count = int(np.prod(dims))
        if len(values) == 1:
            values = values * count
        if len(values) != count:
            raise _Syntax(f"dense attribute has {len(values)} values but its type "
                          f"{m.group(0).strip()} holds {count}", start)
        return np.array(values, dtype=dtype).reshape(dims)

    def dense_body(self) -> object:
        if self.at("["):
            return self.listing(self.dense_body, "a dense attribute's list")
        return self.element()

    def array(self) -> np.ndarray:
        self.expect("<", "after array")
        dtype = self.scalar_type()
        tokens = []
        if self.accept(":"):
            tokens.append(self.element())
            while self.accept(","):
                tokens.append(self.element())
        self.expect(">", "to close array<...>")
        return np.array([convert_element(t, dtype) for t in tokens], dtype=dtype)


_WORD_VALUES = {
    "true": lambda parser: True,
    "false": lambda parser: False,
    "unit": lambda parser: True,
    "dense": _Parser.dense,
    "array": _Parser.array,
}


def _is_hex(text: str) -> bool:
    return text.lstrip("+-").lower().startswith("0x")


def _default_type(text: str) -> np.dtype:
    """MLIR's types for untyped numbers: i64 for integers, f64 for floats."""
    is_float = not _is_hex(text) and any(c in text for c in ".eE")
    return np.dtype(np.float64 if is_float else np.int64)


def _flatten(body: object) -> list[_Token]:
    if isinstance(body, list):
        return [leaf for item in body for leaf in _flatten(item)]
    assert isinstance(body, _Token)
    return [body]


def convert_element(token: _Token, dtype: np.dtype) -> object:
    if token.kind == "word":
        if dtype.kind != "b":
            raise _Syntax(f"{token.text} is not a valid {_type_name(dtype)} value", token.offset)
        return token.text == "true"
    return convert_number(token.text, dtype, token.offset)


def convert_number(text: str, dtype: np.dtype, offset: int) -> np.generic:
    """``text`` as a scalar of ``dtype``; hexadecimal with a float type is a bit pattern."""
    is_hex = _is_hex(text)
    try:
        if _type_name(dtype) in _FLOAT_TYPES:
            if is_hex:
                bits = np.array(int(text, 16), dtype=f"uint{dtype.itemsize * 8}")
                scalar: Any = bits.view(dtype)[()]   # numpy's stubs type a 0-d index as an array
                return scalar
            return dtype.type(float(text))
        value = int(text, 16) if is_hex else int(text)
        if dtype.kind == "b":
            if value not in (0, 1):
                raise ValueError
            return np.bool_(value)
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise ValueError
        return dtype.type(value)
    except (ValueError, OverflowError):
        raise _Syntax(f"{text} is not a valid {_type_name(dtype)} value", offset) from None


def _type_name(dtype: np.dtype) -> str:
    return next(name for name, d in SCALAR_TYPES.items() if d == dtype)


def parse_attributes(text: str, *, location: SourceLocation | None = None,
                     instruction: str | None = None) -> dict[str, object]:
    """The attribute dictionary written in ``text`` (an empty text means no attributes).

    ``location`` is where ``text`` starts in the HLO source: errors point their caret at the
    offending character there.
    """
    if not text.strip():
        return {}
    try:
        parser = _Parser(text)
        out = parser.dictionary()
        if parser.peek.kind != "end":
            raise parser.error("expects the end of the attribute dictionary")
        return out
    except _Syntax as problem:
        where = None
        if location is not None:
            where = SourceLocation(location.line, location.column + problem.offset,
                                   location.source_line)
        context = f" of {instruction}" if instruction else ""
        raise HloParseError(f"in the typed-FFI attributes (backend_config){context}: "
                            f"{problem.message}", location=where,
                            instruction=instruction) from None


__all__ = ["parse_attributes", "convert_number", "SCALAR_TYPES"]
