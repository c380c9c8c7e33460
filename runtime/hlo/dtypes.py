"""The HLO element types, as one table.

Each row says how wide the type is, what family it belongs to (which decides the default
comparison type, which ops accept it, how literals are read) and which numpy dtype carries it
across the API (ml_dtypes for bf16, f8 and sub-byte types, as JAX does).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class ElementType:
    name: str
    bits: int
    kind: str  # "pred" | "sint" | "uint" | "float" | "complex" | "token" | "opaque"
    numpy_name: str | None

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("sint", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind == "sint"

    @property
    def is_complex(self) -> bool:
        return self.kind == "complex"

    @property
    def is_pred(self) -> bool:
        return self.kind == "pred"

    @property
    def is_array_type(self) -> bool:
        """Types that can be array elements (token and opaque cannot)."""
        return self.kind not in ("token", "opaque")

    @property
    def unpacked_bytes(self) -> int:
        """Bytes per element when not packed (sub-byte types take a whole byte)."""
        return max(1, (self.bits + 7) // 8) if self.bits else 0

    @property
    def storage_bits(self) -> int:
        """Bits an element takes in a device buffer: 2- and 4-bit types are packed, as XLA's
        CPU backend stores them (``PACKED``); every other type takes whole bytes."""
        return self.bits if self.name in PACKED else 8 * self.unpacked_bytes

    @property
    def arithmetic_type(self) -> str | None:
        """The type XLA's CPU backend computes this float's arithmetic in, where it is not
        the type itself: f16 for the 8-bit floats, f32 for bf16 and the exponent-only ones
        (whose range f16 cannot hold). Its float normalisation computes each operation in it
        and converts the result back (``passes/float_normalization``)."""
        if self.name == "bf16" or self.name in EXPONENT_FLOATS:
            return "f32"
        return "f16" if self.name in BYTE_FLOATS else None

    @property
    def numpy(self) -> np.dtype:
        if self.numpy_name is None:
            raise TypeError(f"element type {self.name} has no numpy dtype")
        return _numpy_dtype(self.numpy_name)

    def __str__(self) -> str:
        return self.name


def _numpy_dtype(name: str) -> np.dtype:
    module = np if hasattr(np, name) and name not in (
        "int4", "uint4", "int2", "uint2", "int1", "uint1") else ml_dtypes
    dtype: np.dtype[Any] = np.dtype(getattr(module, name))
    return dtype


_ROWS = [
    # name, bits, kind, numpy
    ("pred", 8, "pred", "bool_"),
    ("s1", 1, "sint", "int1"), ("s2", 2, "sint", "int2"), ("s4", 4, "sint", "int4"),
    ("s8", 8, "sint", "int8"), ("s16", 16, "sint", "int16"), ("s32", 32, "sint", "int32"),
    ("s64", 64, "sint", "int64"),
    ("u1", 1, "uint", "uint1"), ("u2", 2, "uint", "uint2"), ("u4", 4, "uint", "uint4"),
    ("u8", 8, "uint", "uint8"), ("u16", 16, "uint", "uint16"), ("u32", 32, "uint", "uint32"),
    ("u64", 64, "uint", "uint64"),
    ("f16", 16, "float", "float16"), ("bf16", 16, "float", "bfloat16"),
    ("f32", 32, "float", "float32"), ("f64", 64, "float", "float64"),
    ("c64", 64, "complex", "complex64"), ("c128", 128, "complex", "complex128"),
    ("f8e5m2", 8, "float", "float8_e5m2"), ("f8e4m3fn", 8, "float", "float8_e4m3fn"),
    ("f8e4m3b11fnuz", 8, "float", "float8_e4m3b11fnuz"),
    ("f8e5m2fnuz", 8, "float", "float8_e5m2fnuz"), ("f8e4m3fnuz", 8, "float", "float8_e4m3fnuz"),
    ("f8e4m3", 8, "float", "float8_e4m3"), ("f8e3m4", 8, "float", "float8_e3m4"),
    ("f8e8m0fnu", 8, "float", "float8_e8m0fnu"),
    ("f6e2m3fn", 6, "float", "float6_e2m3fn"), ("f6e3m2fn", 6, "float", "float6_e3m2fn"),
    ("f4e2m1fn", 4, "float", "float4_e2m1fn"),
    ("token", 0, "token", None), ("opaque", 0, "opaque", None),
]

ELEMENT_TYPES: dict[str, ElementType] = {
    name: ElementType(name, bits, kind, np_name) for name, bits, kind, np_name in _ROWS
}

# the 8-bit floats: the backend stores them as their byte and computes in f32
# (codegen.cltypes)
BYTE_FLOATS = ("f8e5m2", "f8e4m3fn", "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz", "f8e4m3",
               "f8e3m4", "f8e8m0fnu")
# the byte floats that are an unsigned exponent alone (no sign, no mantissa, no zero; 0xFF is
# NaN): encoded by their own rule, and their arithmetic is XLA's f32 arithmetic converted back
# (f16's range cannot hold them), where the others' goes through f16
EXPONENT_FLOATS = ("f8e8m0fnu",)

# the floats narrower than a byte (ml_dtypes' formats, no infinities or NaNs): computed in f32
# like BYTE_FLOATS, from their own codes (codegen.cltypes)
SMALL_FLOATS = ("f4e2m1fn", "f6e2m3fn", "f6e3m2fn")
# the floats whose sums and products XLA's CPU backend rounds to their own type at every
# step (f16 and bf16 too, not only the narrower ones), so the order of the steps shows in a
# reduction's result by several units in the last place: those reductions keep XLA's order
# (``passes.tree_reductions``, ``analysis.reducers.reorderable``)
ROUNDED_EVERY_STEP = ("f16", "bf16") + BYTE_FLOATS + SMALL_FLOATS
# the types stored packed, first element in the low bits of a byte (XLA's CPU backend gives
# every 2- and 4-bit type an ``E(bits)`` layout: two s4 or four s2 a byte, whatever the text's
# layout says); the 6-bit floats take a byte each (XLA's CPU backend cannot compile them)
PACKED = ("s2", "s4", "u2", "u4", "f4e2m1fn")

PRED = ELEMENT_TYPES["pred"]
S32 = ELEMENT_TYPES["s32"]
U32 = ELEMENT_TYPES["u32"]
S64 = ELEMENT_TYPES["s64"]
U64 = ELEMENT_TYPES["u64"]
F32 = ELEMENT_TYPES["f32"]
F64 = ELEMENT_TYPES["f64"]
TOKEN = ELEMENT_TYPES["token"]


def element_type(name: str) -> ElementType:
    return ELEMENT_TYPES[name]


def from_numpy(dtype: np.dtype) -> ElementType:
    """The element type carried by a numpy dtype (bool -> pred, bfloat16 -> bf16, ...)."""
    dtype = np.dtype(dtype)
    for et in ELEMENT_TYPES.values():
        if et.numpy_name is not None and et.bits >= 8 and et.numpy == dtype:
            return et
    for et in ELEMENT_TYPES.values():
        if et.numpy_name is not None and et.numpy == dtype:
            return et
    raise KeyError(f"no HLO element type for numpy dtype {dtype}")


def preserves_values(src: ElementType, dst: ElementType) -> bool:
    """Whether every value of ``src`` converts to ``dst`` exactly (NaN, infinities and -0
    too), as XLA's ``CastPreservesValues`` decides: its algebraic simplifier makes a convert
    from ``src`` to such a ``dst`` and back the value itself, so a NaN keeps its payload
    where converting through ``dst`` would make it the canonical one."""
    if src == dst or src.is_pred:
        return True
    if dst.is_pred or dst.name in EXPONENT_FLOATS:      # f8e8m0fnu has no zero
        return False
    if dst.is_complex:
        return preserves_values(complex_component(src) if src.is_complex else src,
                                complex_component(dst))
    if src.is_complex:
        return False
    if src.is_float and dst.is_float:
        return _float_facts(src).fits_in(_float_facts(dst))
    if not src.is_integer or (src.is_signed and dst.kind == "uint"):
        return False
    value_bits = src.bits - 1 if src.is_signed else src.bits
    if dst.is_float:
        facts = _float_facts(dst)
        return value_bits <= facts.digits and src.bits - 1 < facts.max_exponent
    return value_bits <= (dst.bits - 1 if dst.is_signed else dst.bits)


@dataclass(frozen=True)
class _FloatFacts:
    digits: int                 # significand bits, the implicit one included
    max_exponent: int           # 2^max_exponent is the first power of two past the range
    largest: float
    smallest: float             # the smallest positive value (a subnormal where there are)
    specials: frozenset[str]    # which of "inf", "nan", "-0" the format has

    def fits_in(self, other: _FloatFacts) -> bool:
        return (self.specials <= other.specials and self.digits <= other.digits
                and self.largest <= other.largest and self.smallest >= other.smallest)


@cache
def _float_facts(et: ElementType) -> _FloatFacts:
    info = ml_dtypes.finfo(et.numpy)  # type: ignore[no-untyped-call]
    with np.errstate(invalid="ignore", over="ignore"):
        inf, nan, minus_zero = np.array([np.inf, np.nan, -0.0], np.float32).astype(
            et.numpy).astype(np.float32)
    specials = {name for name, present in (
        ("inf", np.isinf(inf)), ("nan", np.isnan(nan)),
        ("-0", minus_zero == 0 and np.signbit(minus_zero))) if present}
    return _FloatFacts(int(info.nmant) + 1, int(info.maxexp), float(info.max),
                       float(info.smallest_subnormal), frozenset(specials))


def complex_component(et: ElementType) -> ElementType:
    """The real type of a complex type's parts (c64 -> f32, c128 -> f64)."""
    return {"c64": ELEMENT_TYPES["f32"], "c128": ELEMENT_TYPES["f64"]}[et.name]
