"""Constant values: a shape plus numpy data (logical row-major order), or a tuple of literals.

Printing must round-trip exactly: floats are printed with the shortest text that reads back
to the same value *in their own type* (so an f32 prints like ``0.99999994``, not with 17
digits), NaN payloads are kept as ``nan(0x..)``, and integral floats print as integers the
way XLA prints them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .dtypes import ElementType
from .shape import ArrayShape, Shape


@dataclass(eq=False)
class Literal:
    shape: Shape
    data: np.ndarray | None = None          # for arrays: dims == shape.dims, dtype == element numpy
    elements: tuple[Literal, ...] = ()       # for tuples
    elided: bool = False                     # printed as {...}: values unknown, data is None

    def to_text(self, with_shape: bool = False) -> str:
        body = self._body_text()
        return f"{self.shape.to_text()} {body}" if with_shape else body

    def _body_text(self) -> str:
        if self.shape.is_tuple:
            return "(" + ", ".join(e._body_text() for e in self.elements) + ")"
        if self.elided:
            return "{...}"
        shape = self.shape
        assert isinstance(shape, ArrayShape) and self.data is not None
        fmt = element_formatter(shape.element_type)
        if shape.rank == 0:
            return fmt(self.data[()])
        return _nested_text(self.data, fmt)

    def numpy(self) -> np.ndarray:
        if self.shape.is_tuple:
            raise TypeError("a tuple literal has no single array value; use .elements")
        if self.data is None:
            raise ValueError("an elided literal ({...}) has no values; see check_runnable")
        return self.data


def _nested_text(a: np.ndarray, fmt: Formatter) -> str:
    if a.ndim == 1:
        return "{" + ", ".join(fmt(x) for x in a) + "}"
    return "{ " + ", ".join(_nested_text(sub, fmt) for sub in a) + " }"


Formatter = Callable[[Any], str]   # one element (a numpy scalar) -> its HLO text


def element_formatter(et: ElementType) -> Formatter:
    if et.is_pred:
        return lambda x: "true" if bool(x) else "false"
    if et.is_integer:
        return lambda x: str(int(x))
    if et.is_complex:
        part = _float_formatter(np.float32 if et.name == "c64" else np.float64, et.bits // 2)
        return lambda x: f"({part(x.real)}, {part(x.imag)})"
    if et.is_float:
        return _float_formatter(et.numpy.type, et.bits)
    return lambda x: str(x)


def _float_formatter(np_type: type[np.floating[Any]], bits: int) -> Formatter:
    def fmt(x: Any) -> str:
        v = np_type(x)
        f = float(v)
        if math.isnan(f):
            return _nan_text(v, bits)
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        if f == 0 and math.copysign(1, f) < 0:
            return "-0.0"
        if f == int(f) and abs(f) < 1e16:
            return str(int(f))
        if np_type in (np.float32, np.float64, np.float16):
            text = np.format_float_positional(v, unique=True, trim="-") if 1e-5 <= abs(f) < 1e16 \
                else np.format_float_scientific(v, unique=True, trim="-")
        else:
            text = _shortest(np_type, v)
        return text
    return fmt


def _shortest(np_type: type[np.floating[Any]], v: np.floating[Any]) -> str:
    f = float(v)
    for digits in range(1, 18):
        text = f"{f:.{digits}g}"
        if float(np_type(float(text))) == f:
            return text
    return repr(f)


def _nan_text(v: np.floating[Any], bits: int) -> str:
    """XLA prints a NaN's payload when it is not the default quiet NaN."""
    if bits not in (16, 32, 64):
        return "nan"
    uint = {16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
    raw = int(np.asarray(v).view(uint))
    mant_bits = _mantissa_bits(np.asarray(v).dtype, bits)
    sign = raw >> (bits - 1)
    payload = raw & ((1 << mant_bits) - 1)
    quiet = 1 << (mant_bits - 1)
    text = "nan" if payload == quiet else f"nan(0x{payload:x})"
    return ("-" if sign else "") + text


def _mantissa_bits(dtype: np.dtype[Any], bits: int) -> int:
    if dtype == np.float16:
        return 10
    if dtype == np.float32:
        return 23
    if dtype == np.float64:
        return 52
    return 7  # bfloat16


def nan_with_payload(et: ElementType, payload: int | None, negative: bool) -> Any:
    """A NaN of type ``et`` with the given mantissa payload (None: the default quiet NaN), as a
    numpy scalar of ``et``'s type (``Any``: numpy types a 0-d view's item as an array)."""
    dtype = et.numpy
    bits = et.bits
    if bits not in (16, 32, 64):
        v = dtype.type(float("nan"))
        return -v if negative else v
    mant = _mantissa_bits(dtype, bits)
    exp_bits = bits - 1 - mant
    if payload is None:
        payload = 1 << (mant - 1)
    if payload == 0 or payload >= (1 << mant):
        raise ValueError(f"NaN payload 0x{payload:x} does not fit the {mant}-bit mantissa of {et.name}")
    raw = ((1 if negative else 0) << (bits - 1)) | (((1 << exp_bits) - 1) << mant) | payload
    uint = {16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
    return np.array(raw, dtype=uint).view(dtype)[()]
