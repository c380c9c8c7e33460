"""Typed values of instruction attributes.

The parser turns each ``name=value`` into one of these (or a plain int, bool, str, tuple); the
printer turns them back into text. Attributes whose structure nothing in the runtime needs
(sharding, frontend attributes, statistics...) stay as ``RawText`` so they round-trip verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING


from .shape import ShapeIndex, index_text

if TYPE_CHECKING:
    from .literal import Literal


@dataclass(frozen=True)
class RawText:
    """Attribute text kept exactly as written (balanced brackets included)."""

    text: str

    def to_text(self) -> str:
        return self.text


@dataclass(frozen=True)
class Identifier:
    """An enum-like bare word (``kLoop``, ``EQ``, ``API_VERSION_TYPED_FFI``, ``rng_default``)."""

    name: str

    def to_text(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class WindowDim:
    size: int
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    lhs_dilation: int = 1
    rhs_dilation: int = 1
    reversal: bool = False


@dataclass(frozen=True)
class Window:
    dims: tuple[WindowDim, ...]

    def to_text(self) -> str:
        if not self.dims:
            return "{}"
        d = self.dims
        parts = ["size=" + "x".join(str(w.size) for w in d)]
        if any(w.stride != 1 for w in d):
            parts.append("stride=" + "x".join(str(w.stride) for w in d))
        if any(w.pad_low or w.pad_high for w in d):
            parts.append("pad=" + "x".join(f"{w.pad_low}_{w.pad_high}" for w in d))
        if any(w.lhs_dilation != 1 for w in d):
            parts.append("lhs_dilate=" + "x".join(str(w.lhs_dilation) for w in d))
        if any(w.rhs_dilation != 1 for w in d):
            parts.append("rhs_dilate=" + "x".join(str(w.rhs_dilation) for w in d))
        if any(w.reversal for w in d):
            parts.append("rhs_reversal=" + "x".join(str(int(w.reversal)) for w in d))
        return "{" + " ".join(parts) + "}"


@dataclass(frozen=True)
class ConvDimensionNumbers:
    """``dim_labels`` decoded: which dimension of each operand plays which role."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]
    text: str

    def to_text(self) -> str:
        return self.text


_DIM_LABELS = re.compile(r"^([0-9bf?]{2,})_([0-9io?]{2,})->([0-9bf?]{2,})$")


def parse_dim_labels(text: str) -> ConvDimensionNumbers:
    """Decode ``b01f_01io->b01f``; raises ValueError with the reason when malformed."""
    m = _DIM_LABELS.match(text)
    if not m:
        raise ValueError(f"malformed dim_labels {text!r}")
    lhs, rhs, out = m.groups()
    if not (len(lhs) == len(rhs) == len(out)):
        raise ValueError(f"dim_labels {text!r}: the three parts must have the same rank")
    rank = len(lhs)
    spatial = rank - 2

    def roles(labels: str, first: str, second: str, what: str) -> tuple[int, int, tuple[int, ...]]:
        if labels.count(first) != 1 or labels.count(second) != 1:
            raise ValueError(f"dim_labels {text!r}: {what} needs exactly one '{first}' and one '{second}'")
        digits: dict[int, int] = {}   # spatial label -> position
        for pos, ch in enumerate(labels):
            if ch.isdigit():
                k = int(ch)
                if k >= spatial or k in digits:
                    raise ValueError(f"dim_labels {text!r}: bad spatial label {ch!r} in {what}")
                digits[k] = pos
        if len(digits) != spatial:
            raise ValueError(f"dim_labels {text!r}: {what} is missing spatial dimensions")
        return labels.index(first), labels.index(second), tuple(digits[k] for k in range(spatial))

    ib, if_, isp = roles(lhs, "b", "f", "input")
    ki, ko, ksp = roles(rhs, "i", "o", "kernel")
    ob, of, osp = roles(out, "b", "f", "output")
    return ConvDimensionNumbers(ib, if_, isp, ki, ko, ksp, ob, of, osp, text)


@dataclass(frozen=True)
class SliceDim:
    start: int
    limit: int
    stride: int = 1


@dataclass(frozen=True)
class SliceSpec:
    dims: tuple[SliceDim, ...]

    def to_text(self) -> str:
        return "{" + ", ".join(f"[{d.start}:{d.limit}:{d.stride}]" for d in self.dims) + "}"


@dataclass(frozen=True)
class PadDim:
    low: int
    high: int
    interior: int = 0


@dataclass(frozen=True)
class PaddingConfig:
    dims: tuple[PadDim, ...]

    def to_text(self) -> str:
        if not self.dims:
            return "{}"
        return "x".join(f"{d.low}_{d.high}" + (f"_{d.interior}" if d.interior else "")
                        for d in self.dims)


@dataclass(frozen=True)
class OperandAlias:
    """One entry of ``output_to_operand_aliasing``: output leaf ``output_index`` is operand
    ``operand_number``'s leaf ``operand_index``."""

    output_index: ShapeIndex
    operand_number: int
    operand_index: ShapeIndex


@dataclass(frozen=True)
class OperandAliasing:
    entries: tuple[OperandAlias, ...]

    def to_text(self) -> str:
        inner = ", ".join(f"{index_text(e.output_index)}: ({e.operand_number}, "
                          f"{index_text(e.operand_index)})" for e in self.entries)
        return "{" + inner + "}"


@dataclass(frozen=True)
class BackendConfig:
    """``backend_config``: a quoted string (opaque bytes) or a brace blob (JSON / MLIR dict)."""

    text: str
    quoted: bool

    def to_text(self) -> str:
        return quote_string(self.text) if self.quoted else self.text

    @property
    def opaque(self) -> bytes:
        return self.text.encode("utf-8", "surrogateescape")


_METADATA_ITEM = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|[^\s,}]+)')


@dataclass(frozen=True)
class Metadata:
    """``metadata={op_type=".." op_name=".." source_file=".." source_line=N ...}``, verbatim."""

    text: str

    def to_text(self) -> str:
        return self.text

    @property
    def fields(self) -> dict[str, str]:
        out = {}
        for key, value in _METADATA_ITEM.findall(self.text):
            out[key] = unquote_string(value[1:-1]) if value.startswith('"') else value
        return out


@dataclass(frozen=True)
class ShapedLiteral:
    """The custom-call ``literal=`` attribute: a shape and a literal of that shape."""

    literal: Literal

    def to_text(self) -> str:
        return self.literal.to_text(with_shape=True)


@dataclass(frozen=True)
class IdentifierList:
    """``operand_precision={DEFAULT, HIGHEST}`` and similar braced word lists."""

    names: tuple[str, ...]

    def to_text(self) -> str:
        return "{" + ", ".join(self.names) + "}"


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def quote_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_UNESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def unquote_string(body: str) -> str:
    """Undo C escapes inside a string literal's body (without its quotes)."""
    def repl(m: re.Match[str]) -> str:
        e: str = m.group(1)
        if e[0] == "x" and len(e) == 3:
            return chr(int(e[1:], 16))
        if e.isdigit() and all(c in "01234567" for c in e) and e != "0":
            return chr(int(e, 8))
        return _SIMPLE.get(e, e)
    return _UNESCAPE.sub(repl, body)
