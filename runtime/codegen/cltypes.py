"""How each HLO element type lives in OpenCL C: storage, compute type, loads, stores, literals.

Every value in a generated kernel is a C expression of its element type's *compute* type that
holds a value exactly representable in the element type. f16 and bf16 are stored as 16 bits
and computed in float, and are rounded back (round to nearest even) after every operation, as
XLA's CPU backend does; pred is a uchar holding 0 or 1.

The OpenCL C helper functions the templates call are data too (``Helper`` rows). Templates
name them in their text; ``helpers_used`` finds the names in generated code and
``prelude_for`` emits just those helpers and what they need, in a fixed order, so the same
module always produces byte-identical source (PoCL's kernel cache is keyed by the text).
"""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass
from .template_fill import fill
from typing import Iterable

import ml_dtypes
import numpy as np

from ..errors import HloUnsupportedError
from ..hlo.dtypes import BYTE_FLOATS, ELEMENT_TYPES, EXPONENT_FLOATS, SMALL_FLOATS, ElementType

FP64_PRAGMA = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable"


@dataclass(frozen=True)
class Helper:
    """One OpenCL C function of the prelude, and the helpers its body calls."""

    name: str
    code: str
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClType:
    """One element type's representation. Templates use ``$ptr``, ``$index``, ``$value``, ``$x``."""

    name: str
    family: str  # "pred" | "sint" | "uint" | "float": which template row applies
    bits: int
    storage: str
    compute: str
    load: str
    store: str
    round: str = "$x"
    # a float's convert to f64 (``$x`` its compute value) and from f64 (``$x`` a double), where
    # XLA's differs from C's conversion through float (which flushes f32 denormals)
    to_double: str = "((double)($x))"
    from_double: str | None = None

    @property
    def unsigned(self) -> str:
        """The unsigned C type of the same width (bit patterns and wrapping go through it)."""
        return C_UNSIGNED[self.storage]


# OpenCL C scalar types: width, and the unsigned / signed type of the same width.
C_BITS = {"char": 8, "uchar": 8, "short": 16, "ushort": 16, "int": 32, "uint": 32,
          "long": 64, "ulong": 64, "float": 32, "double": 64}
C_UNSIGNED = {"char": "uchar", "uchar": "uchar", "short": "ushort", "ushort": "ushort",
              "int": "uint", "uint": "uint", "long": "ulong", "ulong": "ulong",
              "float": "uint", "double": "ulong"}
C_SIGNED = {"char": "char", "uchar": "char", "short": "short", "ushort": "short",
            "int": "int", "uint": "int", "long": "long", "ulong": "long",
            "float": "int", "double": "long"}


def _plain(name: str, family: str, bits: int, c_type: str) -> ClType:
    return ClType(name, family, bits, c_type, c_type, "$ptr[$index]", "$ptr[$index] = $value;")


def _half_like(name: str) -> ClType:
    return ClType(name, "float", 16, "ushort", "float", f"xla_{name}_to_float($ptr[$index])",
                  f"$ptr[$index] = xla_float_to_{name}($value);", f"xla_round_{name}($x)")


# XLA narrows a NaN to f8e5m2 as 0x7f, whatever its sign, from f16 (the format its f8e5m2
# arithmetic is computed in) and from every float narrower than f32; from f32 and f64 as
# 0x7e with its sign, as to the other byte floats (``_byte_float_helpers``).
NAN_FROM_NARROW = {"f8e5m2": 0x7f}


def rounds_narrow(name: str) -> str:
    """The helper rounding a value of a float narrower than f32 to byte float ``name``, once
    (``xla_round_<name>`` for a float whose NaN is narrowed as from f32)."""
    return f"xla_narrow_{name}" if name in NAN_FROM_NARROW else f"xla_round_{name}"


def _byte_float(name: str) -> ClType:
    return ClType(name, "float", 8, "uchar", "float", f"xla_{name}_to_float($ptr[$index])",
                  f"$ptr[$index] = xla_float_to_{name}($value);",
                  f"{rounds_narrow(name)}(xla_round_f16($x))")


def _exponent_float(name: str) -> ClType:
    """An unsigned-exponent byte float (``dtypes.EXPONENT_FLOATS``): its arithmetic is f32's,
    rounded once. Its code 0 (2^-127) is an f32 denormal, which C's float-to-double flushes and
    XLA's convert keeps; from f64, XLA rounds the double itself (``xla_double_to_...``)."""
    return ClType(name, "float", 8, "uchar", "float", f"xla_{name}_to_float($ptr[$index])",
                  f"$ptr[$index] = xla_float_to_{name}($value);", f"xla_round_{name}($x)",
                  "(as_uint($x) == 0x400000u ? 0x1p-127 : (double)($x))",
                  f"xla_{name}_to_float(xla_double_to_{name}($x))")


def _packed_int(name: str, family: str, bits: int) -> ClType:
    """A 2- or 4-bit integer: computed in char/uchar holding the value (sign-extended),
    wrapped back to ``bits`` after every operation (``round``), as XLA's i4/i2 arithmetic."""
    shift = 32 - bits
    if family == "sint":
        load = f"((char)((int)(xla_load_code{bits}($ptr, $index) << {shift}u) >> {shift}))"
        wrap = f"((char)((int)((uint)($x) << {shift}u) >> {shift}))"
        return ClType(name, family, bits, "uchar", "char", load,
                      f"xla_store_code{bits}($ptr, $index, (uint)($value));", wrap)
    return ClType(name, family, bits, "uchar", "uchar", f"((uchar)xla_load_code{bits}($ptr, $index))",
                  f"xla_store_code{bits}($ptr, $index, (uint)($value));",
                  f"((uchar)(($x) & 0x{(1 << bits) - 1:x}u))")


def _small_float(name: str) -> ClType:
    """A 4- or 6-bit float: computed in f32 like the 8-bit ones, from and to its code (a
    packed 4-bit code, or a byte for the 6-bit formats, which XLA's CPU backend never packs)."""
    bits = ELEMENT_TYPES[name].storage_bits
    if bits < 8:
        load = f"xla_{name}_to_float(xla_load_code{bits}($ptr, $index))"
        store = f"xla_store_code{bits}($ptr, $index, xla_float_to_{name}($value));"
    else:
        load = f"xla_{name}_to_float($ptr[$index])"
        store = f"$ptr[$index] = xla_float_to_{name}($value);"
    return ClType(name, "float", ELEMENT_TYPES[name].bits, "uchar", "float", load, store,
                  f"xla_round_{name}(xla_round_f16($x))")


# 2- and 4-bit types are packed (``dtypes.PACKED``): a load takes its code's bits of the
# byte; a store changes only its own bits, by two atomic operations on the aligned 32-bit
# word holding them (clear, then set), so work-items writing the other elements of the same
# byte (a loop kernel writes neighbours from neighbouring work-items) never lose each other's
# bits.

# the 8-bit floats (ml_dtypes' formats, which are XLA's; ``dtypes.BYTE_FLOATS``): stored as
# their byte, computed in f32 (every value is exact there). XLA's CPU backend computes their
# arithmetic in f16 and converts the result, so a result is rounded to f16 and then to the
# format (f32's 24 bits make f16's correctly rounded +, -, *, / from f32's); a convert rounds
# once (``templates.convert``), as XLA's does. The exponent-only f8e8m0fnu
# (``dtypes.EXPONENT_FLOATS``) is computed in f32, denormals flushed as for f32 (its code 0,
# 2^-127, is an f32 denormal) but where XLA's are not (``templates.EXPONENT_FLOAT_TINY``),
# and converted back.

CL_TYPES: dict[str, ClType] = {t.name: t for t in (
    ClType("pred", "pred", 8, "uchar", "uchar", "$ptr[$index]",
           "$ptr[$index] = (uchar)(($value) != 0);"),
    _plain("s8", "sint", 8, "char"),
    _plain("s16", "sint", 16, "short"),
    _plain("s32", "sint", 32, "int"),
    _plain("s64", "sint", 64, "long"),
    _plain("u8", "uint", 8, "uchar"),
    _plain("u16", "uint", 16, "ushort"),
    _plain("u32", "uint", 32, "uint"),
    _plain("u64", "uint", 64, "ulong"),
    _half_like("f16"),
    _half_like("bf16"),
    _plain("f32", "float", 32, "float"),
    _plain("f64", "float", 64, "double"),
    *(_byte_float(name) for name in BYTE_FLOATS if name not in EXPONENT_FLOATS),
    *(_exponent_float(name) for name in EXPONENT_FLOATS),
    _packed_int("s2", "sint", 2), _packed_int("s4", "sint", 4),
    _packed_int("u2", "uint", 2), _packed_int("u4", "uint", 4),
    *(_small_float(name) for name in SMALL_FLOATS),
)}

_ONE_BIT = "the OpenCL backend implements integers of 2 bits and more"
_UNSUPPORTED_REASONS = {
    "sint": _ONE_BIT,
    "uint": _ONE_BIT,
    "complex": "kernels compute complex values as pairs of reals (passes/complex_lowering), "
               "and this one was not rewritten",
}


def cl_type(et: ElementType | ClType | str) -> ClType:
    """The row for ``et``; an element type the backend cannot run raises HloUnsupportedError."""
    name = et if isinstance(et, str) else et.name
    row = CL_TYPES.get(name)
    if row is not None:
        return row
    known = ELEMENT_TYPES.get(name)
    reason = _UNSUPPORTED_REASONS.get(known.kind, "it is not an array element type") \
        if known else "it is not an HLO element type"
    raise HloUnsupportedError(f"element type {name} is not supported: {reason}")


def storage_type(et: ElementType | str) -> str:
    return cl_type(et).storage


def compute_type(et: ElementType | str) -> str:
    return cl_type(et).compute


def load(et: ElementType | str, ptr: str, index: str) -> str:
    """An expression of the compute type reading element ``index`` of storage pointer ``ptr``."""
    return fill(cl_type(et).load, ptr=ptr, index=index)


def store(et: ElementType | str, ptr: str, index: str, value: str) -> str:
    """A statement writing compute-type ``value`` to element ``index`` of ``ptr``."""
    return fill(cl_type(et).store, ptr=ptr, index=index, value=value)


def round_to_storage(et: ElementType | ClType | str, expr: str) -> str:
    """``expr`` rounded (to nearest even) to ``et``'s precision, still in the compute type."""
    return fill(cl_type(et).round, x=expr)


def component(vector: str, lane: int) -> str:
    """Lane ``lane`` of an OpenCL vector (``v.s0`` ... ``v.sf``)."""
    return f"{vector}.s{lane:x}"


def needs_fp64(et: ElementType | str) -> bool:
    """Whether a program touching ``et`` needs ``FP64_PRAGMA`` (and a device with fp64)."""
    return cl_type(et).compute == "double"


def literal(et: ElementType | str, value: object) -> str:
    """An exact, deterministic C literal of ``et``'s compute type for a scalar value."""
    row = cl_type(et)
    numpy_type = ELEMENT_TYPES[row.name].numpy
    scalar = np.asarray(value).astype(numpy_type)
    if row.family == "pred":
        return "((uchar)1)" if bool(scalar) else "((uchar)0)"
    if row.family in ("sint", "uint"):
        return _integer_literal(row, int(scalar))
    if row.compute == "double":
        return _float_literal(float(scalar), "double", int(np.float64(scalar).view(np.uint64)))
    as_float = np.float32(scalar)
    return _float_literal(float(as_float), "float", int(as_float.view(np.uint32)))


_INTEGER_SUFFIX = {"int": "", "uint": "u", "long": "L", "ulong": "UL"}


def _integer_literal(row: ClType, value: int) -> str:
    c_type = row.compute
    if c_type not in _INTEGER_SUFFIX:
        return f"(({c_type}){value})"
    suffix = _INTEGER_SUFFIX[c_type]
    if row.family == "sint" and value == -(1 << (row.bits - 1)):
        return f"(-{(1 << (row.bits - 1)) - 1}{suffix} - 1{suffix})"
    return f"({value}{suffix})" if value < 0 else f"{value}{suffix}"


def _float_literal(value: float, c_type: str, bits: int) -> str:
    suffix = "f" if c_type == "float" else ""
    if math.isnan(value):
        cast = "as_float" if c_type == "float" else "as_double"
        return f"{cast}(0x{bits:x}{'u' if c_type == 'float' else 'UL'})"
    if math.isinf(value):
        text = "INFINITY" if c_type == "float" else "((double)INFINITY)"
        return text if value > 0 else f"(-{text})"
    if value == 0:
        return f"(-0.0{suffix})" if math.copysign(1.0, value) < 0 else f"0.0{suffix}"
    exact_integer_limit = 2 ** 24 if c_type == "float" else 2 ** 53
    if value.is_integer() and abs(value) < exact_integer_limit:
        text = f"{int(value)}.0{suffix}"
    else:
        mantissa, exponent = value.hex().split("p")
        text = f"{mantissa.rstrip('0').rstrip('.')}p{exponent}{suffix}"
    return f"({text})" if value < 0 else text


def _decoding_helpers(name: str) -> tuple[Helper, ...]:
    """Decoding by a table of the codes' f32 bits (from ml_dtypes: exact, NaN signs kept, but
    the "fnuz" formats' NaN is +NaN, as XLA widens it; 256 codes, 16 or 64 for the 4- and
    6-bit formats)."""
    et = ELEMENT_TYPES[name]
    codes = 1 << et.bits
    with np.errstate(invalid="ignore"):
        bits = np.arange(codes, dtype=np.uint8).view(et.numpy).astype(np.float32).view(np.uint32)
    if et.bits == 8 and int(np.array(-0.0, np.float32).astype(et.numpy).view(np.uint8)) == 0:
        bits[codes >> 1] = 0x7fc00000      # an "fnuz" NaN (0x80) widens as +NaN in XLA
    rows = [" ".join(f"0x{b:08x}u," for b in bits[k:k + 8]) for k in range(0, codes, 8)]
    table = "\n  " + "\n  ".join(rows).rstrip(",")
    return (
        Helper(f"xla_{name}_bits", f"__constant uint xla_{name}_bits[{codes}] = {{{table}\n}};\n"),
        Helper(f"xla_{name}_to_float",
               f"float xla_{name}_to_float(uchar h) {{\n"
               f"  return as_float(xla_{name}_bits[h]);\n"
               "}\n", (f"xla_{name}_bits",)),
    )


def _rounding_helper(name: str) -> Helper:
    return Helper(f"xla_round_{name}",
                  f"float xla_round_{name}(float x) {{\n"
                  f"  return xla_{name}_to_float(xla_float_to_{name}(x));\n"
                  "}\n", (f"xla_{name}_to_float", f"xla_float_to_{name}"))


def _byte_float_helpers(name: str) -> tuple[Helper, ...]:
    """Decoding by table (``_decoding_helpers``); encoding by rounding the f32 bits to nearest
    even: below the smallest normal a scaled ``rint`` (subnormals, and the smallest normal
    itself when a value rounds up to it), above it the mantissa's low bits added with the tie
    going to even and the exponent rebiased. A code past the largest finite one is the
    format's overflow (infinity where it has one, else NaN); NaN keeps its sign where the
    format has one; formats without negative zero ("fnuz", whose 0x80 is NaN) give +0. The
    formats without NaN (f4, f6) saturate, and make a NaN -0 whatever its sign, as XLA's
    convert does (ml_dtypes gives -NaN +0)."""
    et = ELEMENT_TYPES[name]
    info = ml_dtypes.finfo(et.numpy)
    codes = 1 << et.bits
    sign_bit = codes >> 1

    def code(value: float) -> int:
        return int(np.array(value, np.float32).astype(et.numpy).view(np.uint8))
    mantissa = int(info.nmant)
    bias = 1 - int(np.log2(float(info.smallest_normal)))
    shift = 23 - mantissa
    smallest_normal = float(np.float32(info.smallest_normal))
    min_normal = _float_literal(smallest_normal, "float", int(np.float32(smallest_normal).view(np.uint32)))
    scale = _float_literal(2.0 ** (bias - 1 + mantissa), "float",
                           int(np.float32(2.0 ** (bias - 1 + mantissa)).view(np.uint32)))
    unsigned_zero = code(-0.0) == 0
    return (
        *_decoding_helpers(name),
        Helper(f"xla_float_to_{name}",
               f"uchar xla_float_to_{name}(float x) {{\n"
               f"  uint sign = (as_uint(x) >> {32 - et.bits}) & 0x{sign_bit:x}u;\n"
               + (_nan_encoding(name, code(np.nan), code(np.inf), mantissa)
                  if et.bits == 8 else f"  if (isnan(x)) return (uchar)0x{sign_bit:x}u;\n") +
               "  float a = fabs(x);\n"
               "  uint u = as_uint(a);\n"
               f"  uint code = a < {min_normal} ? (uint)rint(a * {scale})\n"
               f"      : ((u + 0x{(1 << (shift - 1)) - 1:x}u + ((u >> {shift}) & 1u)) >> {shift})"
               f" - 0x{(127 - bias) << mantissa:x}u;\n"
               f"  code = code > 0x{code(float(info.max)):02x}u ? 0x{code(np.inf):02x}u : code;\n"
               + ("  return (uchar)(code == 0u ? 0u : (code | sign));\n" if unsigned_zero
                  else "  return (uchar)(code | sign);\n")
               + "}\n"),
        *_nan_rounding_helpers(name, code(np.nan), mantissa),
    )


def _nan_encoding(name: str, nan: int, inf: int, mantissa: int) -> str:
    """A NaN's code: ``nan`` with its sign; in a format in ``NAN_FROM_NARROW``, a NaN whose
    top mantissa bits are not all zero keeps them too (``xla_narrow_<name>``'s NaN is one;
    decoded NaNs are XLA's quiet ones, which keep ``nan``)."""
    if name not in NAN_FROM_NARROW:
        return f"  if (isnan(x)) return (uchar)(0x{nan:02x}u | sign);\n"
    mask = (1 << mantissa) - 1
    return (f"  uint payload = (as_uint(x) >> {23 - mantissa}) & 0x{mask:x}u;\n"
            f"  if (isnan(x)) return (uchar)(0x{inf:02x}u | sign | "
            f"(payload ? payload : 0x{nan & mask:x}u));\n")


def _nan_rounding_helpers(name: str, nan: int, mantissa: int) -> tuple[Helper, ...]:
    """``xla_round_<name>``; for a format in ``NAN_FROM_NARROW`` it makes a NaN ``nan`` with
    its sign (as from f32), and ``xla_narrow_<name>`` makes it the f32 NaN whose top mantissa
    bits are those of XLA's code from a narrower float (which the encoding keeps)."""
    if name not in NAN_FROM_NARROW:
        return (_rounding_helper(name),)
    narrow_nan = 0x7f800000 | ((NAN_FROM_NARROW[name] & ((1 << mantissa) - 1)) << (23 - mantissa))
    return (
        Helper(f"xla_round_{name}",
               f"float xla_round_{name}(float x) {{\n"
               f"  uchar nan = (uchar)(0x{nan:02x}u | ((as_uint(x) >> 24) & 0x80u));\n"
               f"  return xla_{name}_to_float(isnan(x) ? nan : xla_float_to_{name}(x));\n"
               "}\n", (f"xla_{name}_to_float", f"xla_float_to_{name}")),
        Helper(f"xla_narrow_{name}",
               f"float xla_narrow_{name}(float x) {{\n"
               f"  return isnan(x) ? as_float(0x{narrow_nan:08x}u) : xla_round_{name}(x);\n"
               "}\n", (f"xla_round_{name}",)),
    )


def _exponent_float_helpers(name: str) -> tuple[Helper, ...]:
    """An unsigned 8-bit exponent (f8e8m0fnu: code c is 2^(c-127), 0xFF NaN), encoded from the
    f32 bits as XLA's convert does (measured on every f32 exponent, the mantissas about each
    rounding point and every denormal; ml_dtypes agrees): a normal rounds half up in value
    (a mantissa of 0x400000 or more goes to the next code, the f32 bits plus 0x400000 shifted
    right by 23, which carries into 0xFF past the largest); a denormal is code 0 (2^-127)
    up to and including 2^-127 and code 1 (2^-126) above it. Zero, negatives (-0 too),
    infinities and NaNs are NaN. The bits are read as they are, not flushed. (XLA's constant
    folder differs: it makes 0 code 0 and -2 code 128; this is its compiled code's rule.)

    From f64 XLA rounds the double directly, not through f32 (ml_dtypes goes through f32:
    (1.5 - 2^-40) * 2^-126 is code 1 in XLA, 2 in ml_dtypes): half up in value from 2^-126,
    code 0 for 2^-127 itself and 1 between the two, NaN below 2^-127 (measured)."""
    return (
        *_decoding_helpers(name),
        Helper(f"xla_float_to_{name}",
               f"uchar xla_float_to_{name}(float x) {{\n"
               "  uint u = as_uint(x);\n"
               "  if (u == 0u || u >= 0x7f800000u) return (uchar)0xffu;\n"
               "  return (uchar)(u < 0x800000u ? (uint)(u > 0x400000u)\n"
               "                                : (u + 0x400000u) >> 23);\n"
               "}\n"),
        Helper(f"xla_double_to_{name}",
               f"uchar xla_double_to_{name}(double x) {{\n"
               "  ulong u = as_ulong(x);\n"
               "  if (u < 0x3800000000000000UL || u >= 0x7ff0000000000000UL)\n"
               "    return (uchar)0xffu;\n"
               "  if (u < 0x3810000000000000UL) return (uchar)(u > 0x3800000000000000UL);\n"
               "  return (uchar)min(((u + 0x8000000000000UL) >> 52) - 896UL, 0xffUL);\n"
               "}\n"),
        _rounding_helper(name),
    )


HELPERS: tuple[Helper, ...] = (
    *(h for name in BYTE_FLOATS + SMALL_FLOATS if name not in EXPONENT_FLOATS
      for h in _byte_float_helpers(name)),
    *(h for name in EXPONENT_FLOATS for h in _exponent_float_helpers(name)),
    # packed codes: ``bits`` bits of element i, the first element in a byte's low bits
    *(h for bits in (2, 4) for h in (
        Helper(f"xla_load_code{bits}",
               f"uint xla_load_code{bits}(const __global uchar* p, ulong i) {{\n"
               f"  return ((uint)p[i / {8 // bits}] >> ((uint)(i % {8 // bits}) * {bits}u)) & "
               f"0x{(1 << bits) - 1:x}u;\n"
               "}\n"),
        Helper(f"xla_store_code{bits}",
               f"void xla_store_code{bits}(__global uchar* p, ulong i, uint code) {{\n"
               f"  __global uchar* byte = p + i / {8 // bits};\n"
               "  volatile __global uint* word = (volatile __global uint*)((uintptr_t)byte & "
               "~(uintptr_t)3);\n"
               f"  uint shift = (uint)((uintptr_t)byte & 3) * 8u + (uint)(i % {8 // bits}) * "
               f"{bits}u;\n"
               f"  uint mask = 0x{(1 << bits) - 1:x}u << shift;\n"
               "  atomic_and(word, ~mask);\n"
               "  atomic_or(word, (code << shift) & mask);\n"
               "}\n"))),
    # f16 goes through the core vload_half / vstore_half_rte (no cl_khr_fp16 needed). Loads
    # and stores move NaNs bit for bit (a copy keeps signalling NaNs, as in XLA); rounding a
    # computed value quiets a NaN and truncates its payload, as x86's F16C does for XLA.
    Helper("xla_f16_to_float",
           "float xla_f16_to_float(ushort h) {\n"
           "  float f = vload_half(0, (const __private half*)&h);\n"
           "  uint nan_bits = ((uint)(h & 0x8000u) << 16) | 0x7f800000u | ((uint)(h & 0x3ffu) << 13);\n"
           "  return (h & 0x7fffu) > 0x7c00u ? as_float(nan_bits) : f;\n"
           "}\n"),
    Helper("xla_float_to_f16",
           "ushort xla_float_to_f16(float x) {\n"
           "  ushort h;\n"
           "  vstore_half_rte(x, 0, (__private half*)&h);\n"
           "  uint u = as_uint(x);\n"
           "  uint payload = (u >> 13) & 0x3ffu;\n"
           "  ushort nan_bits = (ushort)(((u >> 16) & 0x8000u) | 0x7c00u | (payload ? payload : 0x200u));\n"
           "  return isnan(x) ? nan_bits : h;\n"
           "}\n"),
    Helper("xla_round_f16",
           "float xla_round_f16(float x) {\n"
           "  float quiet_nan = as_float(as_uint(x) | 0x400000u);\n"
           "  return isnan(x) ? xla_f16_to_float(xla_float_to_f16(quiet_nan))\n"
           "                  : xla_f16_to_float(xla_float_to_f16(x));\n"
           "}\n",
           ("xla_f16_to_float", "xla_float_to_f16")),
    # bf16 is the upper half of an f32. Stores truncate NaNs bit for bit; rounding is integer
    # arithmetic on the f32 bits (to nearest even) and makes every NaN the canonical quiet NaN
    # with its sign, as XLA's convert does.
    Helper("xla_bf16_to_float",
           "float xla_bf16_to_float(ushort h) {\n"
           "  return as_float((uint)h << 16);\n"
           "}\n"),
    Helper("xla_float_to_bf16",
           "ushort xla_float_to_bf16(float x) {\n"
           "  uint u = as_uint(x);\n"
           "  ushort high = (ushort)(u >> 16);\n"
           "  ushort rounded = (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"
           "  return isnan(x) ? ((high & 0x7fu) ? high : (ushort)(high | 0x40u)) : rounded;\n"
           "}\n"),
    Helper("xla_round_bf16",
           "float xla_round_bf16(float x) {\n"
           "  float canonical_nan = as_float((as_uint(x) & 0x80000000u) | 0x7fc00000u);\n"
           "  return isnan(x) ? canonical_nan : xla_bf16_to_float(xla_float_to_bf16(x));\n"
           "}\n",
           ("xla_bf16_to_float", "xla_float_to_bf16")),
    # x86's vpmaddwd on lanes holding pairs of 16-bit integers (the low half the earlier
    # contraction step): each 32-bit lane gets the sum of its two products, exactly (the
    # one sum past 2^31, (-2^15)^2 * 2, wraps as XLA's s32 sum does). PoCL's clang only
    # (``TileShape.pair_madd``); 512 bits need AVX512BW, 256 bits AVX2.
    Helper("xla_pair_madd8",
           "uint8 xla_pair_madd8(uint8 x, uint8 y) {\n"
           "  return as_uint8(__builtin_ia32_pmaddwd256(as_short16(x), as_short16(y)));\n"
           "}\n"),
    Helper("xla_pair_madd16",
           "typedef short xla_short32 __attribute__((ext_vector_type(32)));\n"
           "uint16 xla_pair_madd16(uint16 x, uint16 y) {\n"
           "  return as_uint16(__builtin_ia32_pmaddwd512(__builtin_astype(x, xla_short32),\n"
           "                                             __builtin_astype(y, xla_short32)));\n"
           "}\n"),
)

# Modules whose HELPERS tuples make up the prelude, in emission order.
_HELPER_MODULES = ("runtime.codegen.cltypes", "runtime.codegen.templates",
                   "runtime.codegen.rng_algorithms")
_library: dict[str, Helper] | None = None


def helper_library() -> dict[str, Helper]:
    """Every helper by name, in emission order; each helper's needs come before it."""
    global _library
    if _library is None:
        library: dict[str, Helper] = {}
        for module_name in _HELPER_MODULES:
            for helper in importlib.import_module(module_name).HELPERS:
                missing = [n for n in helper.needs if n not in library]
                if missing or helper.name in library:
                    raise AssertionError(f"helper {helper.name} is defined twice or before "
                                         f"{missing}")
                library[helper.name] = helper
        _library = library
    return _library


_IDENTIFIER = re.compile(r"\bxla_\w+")


def helpers_used(code: str) -> list[str]:
    """The prelude helpers that generated ``code`` calls, in order of first appearance."""
    library = helper_library()
    return list(dict.fromkeys(n for n in _IDENTIFIER.findall(code) if n in library))


def prelude_for(names: Iterable[str]) -> str:
    """The C definitions of ``names`` and everything they need, in the library's order."""
    library = helper_library()
    wanted: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name not in library:
            raise KeyError(f"no OpenCL helper named {name}")
        if name not in wanted:
            wanted.add(name)
            pending.extend(library[name].needs)
    return "".join(h.code + "\n" for n, h in library.items() if n in wanted)


__all__ = [
    "ClType", "CL_TYPES", "C_BITS", "C_UNSIGNED", "C_SIGNED", "Helper", "HELPERS", "FP64_PRAGMA", "cl_type", "storage_type",
    "compute_type", "load", "store", "round_to_storage", "needs_fp64", "literal",
    "helper_library", "helpers_used", "prelude_for",
]
