"""XLA's elementwise semantics as OpenCL C expression templates, one table row per case.

Each function takes operand expressions (in their element types' compute types, see
``cltypes``) and returns a C expression whose value is exactly representable in the result
type: f16/bf16 results are rounded after every operation that can be inexact, as XLA's CPU
backend does. A template uses each operand at most once, so operands may be arbitrary
expressions without growing the code; anything that needs an operand twice is a prelude
helper (``HELPERS``), instantiated per C type.

Tables are keyed by ``(opcode, family)`` where family is "float", "sint", "uint" or "pred".
Template placeholders: ``$x``/``$a``/``$b`` operands, ``$T`` the compute type, ``$U`` and
``$S`` the unsigned and signed C types of the same width, ``$W`` the type integer arithmetic
wraps through ("uint" up to 32 bits, "ulong" for 64), ``$pad`` the bits between the type's
width and 32 (for clz on char/short).

Where XLA's results differ from C's (hlo-reference section 7, opencl-notes section 6):
integer division by zero and INT_MIN / -1, shifts by the width or more, NaN in maximum,
minimum and float-to-int conversion, integer power, -0 versus +0 in maximum/minimum
(XLA orders -0 < +0), and which NaN a float result is (``OpcodeSpec.nan``: C's functions give
a positive canonical NaN where x86's arithmetic, which XLA's code is, keeps the operand's or
gives a negative one). XLA's CPU backend also flushes f32/f64 denormals to zero; that is a
build option (``runtime.opencl.device.Device.build_options``), not part of these templates.
"""

from __future__ import annotations

import re

from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES, NanRule
from .template_fill import fill
from typing import Sequence

from ..errors import HloUnsupportedError
from ..hlo.dtypes import (BYTE_FLOATS, ELEMENT_TYPES, EXPONENT_FLOATS, PRED, SMALL_FLOATS,
                          ElementType)
from .cltypes import (C_BITS, C_SIGNED, C_UNSIGNED, NAN_FROM_NARROW, ClType, Helper, cl_type,
                      round_to_storage, rounds_narrow)
from .cltypes import literal as cltypes_literal

FP_CONTRACT_OFF = "#pragma OPENCL FP_CONTRACT OFF"

_FLOAT_C = ("float", "double")
_INT_C = ("char", "short", "int", "long", "uchar", "ushort", "uint", "ulong")
_MIN = {"char": "CHAR_MIN", "short": "SHRT_MIN", "int": "INT_MIN", "long": "LONG_MIN"}


def _wrap_type(c_type: str) -> str:
    return "ulong" if C_BITS[c_type] == 64 else "uint"


# Lanes the vector forms of float operations may have (``lanes`` > 1 in ``unary``/``binary``/
# ``clamp``): OpenCL's vector widths; a target picks one from its ``vector_bits``.
VECTOR_WIDTHS = (2, 4, 8, 16)


def _placeholders(c_type: str, lanes: int = 1) -> dict[str, str]:
    n = str(lanes) if lanes > 1 else ""
    return {"T": c_type + n, "U": C_UNSIGNED[c_type] + n, "S": C_SIGNED[c_type] + n,
            "W": _wrap_type(c_type) + n, "bits": str(C_BITS[c_type]),
            "pad": str(max(32 - C_BITS[c_type], 0)), "MIN": _MIN.get(c_type, "0"),
            "HUGE_EXP": "512" if c_type == "double" else "64"}


def _family(c_types: Sequence[str], name: str, code: str,
            needs: Sequence[str] = (), vector: bool = False) -> tuple[Helper, ...]:
    """One helper per C type from a template (``$T`` etc. as in the module docstring); with
    ``vector`` also one per vector type of ``VECTOR_WIDTHS`` (the code must then be valid for
    vectors: comparisons give lane masks, which ``?:`` selects with per lane); a program
    includes only the helpers it names."""
    forms = [(c, 1) for c in c_types]
    if vector:
        forms += [(c, n) for c in c_types for n in VECTOR_WIDTHS]
    rows = []
    for c_type, lanes in forms:
        subs = _placeholders(c_type, lanes)
        rows.append(Helper(fill(name, subs), fill(code, subs),
                           tuple(fill(n, subs) for n in needs)))
    return tuple(rows)


_SIGNED_C = ("char", "short", "int", "long")
_UNSIGNED_C = ("uchar", "ushort", "uint", "ulong")

HELPERS: tuple[Helper, ...] = (
    # maximum/minimum: NaN wins, and -0 < +0 (for equal operands, the AND/OR of the bits picks
    # +0 for max and -0 for min); otherwise fmax/fmin. A result equal to zero is written as a
    # signed zero, so a denormal comes out flushed where the device flushes denormals (as XLA's
    # CPU backend does) and unchanged where it does not. An ``a`` NaN is the result as it is;
    # a ``b`` NaN gets XLA's sign: that of max(a, b) and min(a, b) for numbers, negative for
    # max only where both signs are, for min where either is (XLA fixes every result's sign so).
    *_family(_FLOAT_C, "xla_fmax_$T",
             "$T xla_fmax_$T($T a, $T b) {\n"
             "  $T m = (a == b) ? as_$T(as_$U(a) & as_$U(b)) : fmax(a, b);\n"
             "  m = (m == ($T)0) ? copysign(($T)0, m) : m;\n"
             "  $T nan_b = as_$T(as_$U(b) & (as_$U(a) | ~(($U)1 << ($bits - 1))));\n"
             "  return isnan(a) ? a : (isnan(b) ? nan_b : m);\n"
             "}\n", vector=True),
    # XLA's pow of a denormal base (flushed: DAZ) is that of 2^-150 (f32) or 2^-1075 (f64),
    # the exponent its libm's log2 gives a flushed input, with the sign of a negative base:
    # pow(1e-40, 0.5) is 2^-75, pow(1e-40, -1) inf. OpenCL's pow gives neither (1e-40^2
    # was 1.9e-4 on PoCL). And as glibc's pow, which reads the exponent's bits unflushed, a
    # denormal exponent is not an integer: a finite negative base gives NaN, not 1 (pow(-2,
    # 1e-40); found by the fuzzer). Measured against jaxlib 0.10.2
    # (tests/codegen/test_power_denormal.py, tests/codegen/test_nan_results.py).
    *_family(("float",), "xla_fpow_$T",
             "$T xla_fpow_$T($T a, $T b) {\n"
             "  $T tiny = exp2(-150.0f * b) * pow(copysign(($T)1, a), b);\n"
             "  $T p = (((as_$U(a) & 0x7f800000u) == 0) & ((as_$U(a) & 0x7fffffu) != 0))\n"
             "         ? tiny : pow(a, b);\n"
             "  return (((as_$U(b) & 0x7f800000u) == 0) & ((as_$U(b) & 0x7fffffu) != 0)\n"
             "          & (a < ($T)0) & isfinite(a)) ? ($T)NAN : p;\n"
             "}\n", vector=True),
    *_family(("double",), "xla_fpow_$T",
             "$T xla_fpow_$T($T a, $T b) {\n"
             "  $T tiny = exp2(-1075.0 * b) * pow(copysign(($T)1, a), b);\n"
             "  $T p = (((as_$U(a) & 0x7ff0000000000000ul) == 0)\n"
             "          & ((as_$U(a) & 0xffffffffffffful) != 0)) ? tiny : pow(a, b);\n"
             "  return (((as_$U(b) & 0x7ff0000000000000ul) == 0)\n"
             "          & ((as_$U(b) & 0xffffffffffffful) != 0) & (a < ($T)0) & isfinite(a))\n"
             "         ? ($T)NAN : p;\n"
             "}\n", vector=True),
    *_family(_FLOAT_C, "xla_fmin_$T",
             "$T xla_fmin_$T($T a, $T b) {\n"
             "  $T m = (a == b) ? as_$T(as_$U(a) | as_$U(b)) : fmin(a, b);\n"
             "  m = (m == ($T)0) ? copysign(($T)0, m) : m;\n"
             "  $T nan_b = as_$T(as_$U(b) | (as_$U(a) & (($U)1 << ($bits - 1))));\n"
             "  return isnan(a) ? a : (isnan(b) ? nan_b : m);\n"
             "}\n", vector=True),
    *_family(_FLOAT_C, "xla_sign_$T",
             "$T xla_sign_$T($T x) {\n"
             "  $T magnitude = (x == ($T)0) ? ($T)0 : ($T)1;\n"
             "  return isnan(x) ? x : copysign(magnitude, x);\n"
             "}\n", vector=True),
    # tanh in f32 (and the narrow floats computed in it) as XLA's CPU backend evaluates it: a
    # 13/6 odd rational approximation on [-9, 9] (Eigen's; 5.2 ulp from exact at worst over 4M
    # samples, XLA's own 4.5), x itself below 0.0004 and for NaN (which clamp would not keep).
    # Only FMAs and a division, so it vectorises: 0.82 against 1.80 ms for PoCL's tanh over
    # 4M floats on AVX-512, 0.88 against 2.51 on AVX2. f64 keeps the library's tanh.
    *_family(("float",), "xla_tanh_$T",
             "$T xla_tanh_$T($T x) {\n"
             "  $T c = clamp(x, ($T)(-9.0f), ($T)(9.0f));\n"
             "  $T c2 = c * c;\n"
             "  $T p = fma(c2, ($T)(-2.76076847742355e-16f), ($T)(2.00018790482477e-13f));\n"
             "  p = fma(c2, p, ($T)(-8.60467152213735e-11f));\n"
             "  p = fma(c2, p, ($T)(5.12229709037114e-08f));\n"
             "  p = fma(c2, p, ($T)(1.48572235717979e-05f));\n"
             "  p = fma(c2, p, ($T)(6.37261928875436e-04f));\n"
             "  p = fma(c2, p, ($T)(4.89352455891786e-03f)) * c;\n"
             "  $T q = fma(c2, ($T)(1.19825839466702e-06f), ($T)(1.18534705686654e-04f));\n"
             "  q = fma(c2, q, ($T)(2.26843463243900e-03f));\n"
             "  q = fma(c2, q, ($T)(4.89352518554385e-03f));\n"
             "  return (fabs(x) < ($T)(0.0004f) || isnan(x)) ? x : p / q;\n"
             "}\n", vector=True),
    *_family(("double",), "xla_tanh_$T", "$T xla_tanh_$T($T x) {\n  return tanh(x);\n}\n",
             vector=True),
    # atan2 with both operands scaled down by the same power of two when they are huge: PoCL's
    # atan2 returns 0 for atan2(1e38, 2e38). The scaling does not change the angle.
    *_family(_FLOAT_C, "xla_atan2_$T",
             "$T xla_atan2_$T($T y, $T x) {\n"
             "  $T scale = fmax(fabs(y), fabs(x)) > ($T)0x1p$HUGE_EXP ? ($T)0x1p-$HUGE_EXP : ($T)1;\n"
             "  return atan2(y * scale, x * scale);\n"
             "}\n", vector=True),
    # total order: flip every bit but the sign of negative floats, then compare as signed.
    *_family(_FLOAT_C, "xla_total_order_key_$T",
             "$S xla_total_order_key_$T($T x) {\n"
             "  $S i = as_$S(x);\n"
             "  return i ^ ($S)((($U)(i >> ($bits - 1))) >> 1);\n"
             "}\n"),
    *_family(_SIGNED_C, "xla_isign_$T",
             "$T xla_isign_$T($T x) {\n"
             "  return ($T)((x > 0) - (x < 0));\n"
             "}\n"),
    # division: x / 0 = -1 (all ones unsigned), INT_MIN / -1 = INT_MIN; x % 0 = x,
    # INT_MIN % -1 = 0. The divisor is made safe first so no lane can trap.
    *_family(_SIGNED_C, "xla_div_$T",
             "$T xla_div_$T($T a, $T b) {\n"
             "  int unsafe = (b == 0) | ((a == $MIN) & (b == -1));\n"
             "  $T q = ($T)(a / (unsafe ? ($T)1 : b));\n"
             "  return b == 0 ? ($T)-1 : q;\n"
             "}\n"),
    *_family(_SIGNED_C, "xla_rem_$T",
             "$T xla_rem_$T($T a, $T b) {\n"
             "  int unsafe = (b == 0) | ((a == $MIN) & (b == -1));\n"
             "  $T r = ($T)(a % (unsafe ? ($T)1 : b));\n"
             "  return b == 0 ? a : r;\n"
             "}\n"),
    *_family(_UNSIGNED_C, "xla_div_$T",
             "$T xla_div_$T($T a, $T b) {\n"
             "  $T q = ($T)(a / (b == 0 ? ($T)1 : b));\n"
             "  return b == 0 ? ($T)~($T)0 : q;\n"
             "}\n"),
    *_family(_UNSIGNED_C, "xla_rem_$T",
             "$T xla_rem_$T($T a, $T b) {\n"
             "  $T r = ($T)(a % (b == 0 ? ($T)1 : b));\n"
             "  return b == 0 ? a : r;\n"
             "}\n"),
    # integer power as XLA emits it: six squaring steps over the exponent's low bits (more
    # would overflow any base but 0 and +-1); an exponent with the sign bit set (also for
    # unsigned types) gives 1 for base 1, +-1 for base -1 (all ones), else 0.
    *_family(_SIGNED_C + _UNSIGNED_C, "xla_pow_$T",
             "$T xla_pow_$T($T base, $T exponent) {\n"
             "  $W acc = 1, b = ($W)base;\n"
             "  $U e = ($U)exponent;\n"
             "  for (int i = 0; i < 6; ++i) {\n"
             "    acc = (e & 1) ? acc * b : acc;\n"
             "    b = b * b;\n"
             "    e = ($U)(e >> 1);\n"
             "  }\n"
             "  $U minus_one = ($U)~($U)0;\n"
             "  $T negative = (($U)base == 1) ? ($T)1\n"
             "      : ((($U)base == minus_one) ? ((exponent & 1) ? ($T)minus_one : ($T)1) : ($T)0);\n"
             "  return ($S)exponent >= 0 ? ($T)acc : negative;\n"
             "}\n"),
    # shifts: the amount is unsigned; amounts >= the width give 0 (or the sign fill). The
    # unsigned ones have vector forms too (``VECTOR_UNSIGNED``).
    *_family(_SIGNED_C, "xla_shl_$T",
             "$T xla_shl_$T($T a, $T b) {\n"
             "  $U n = ($U)b;\n"
             "  return n >= $bits ? ($T)0 : ($T)(($W)($U)a << n);\n"
             "}\n"),
    *_family(_UNSIGNED_C, "xla_shl_$T",
             "$T xla_shl_$T($T a, $T b) {\n"
             "  $U n = ($U)b;\n"
             "  return n >= $bits ? ($T)0 : ($T)(($W)($U)a << n);\n"
             "}\n", vector=True),
    *_family(_SIGNED_C, "xla_shrl_$T",
             "$T xla_shrl_$T($T a, $T b) {\n"
             "  $U n = ($U)b;\n"
             "  return n >= $bits ? ($T)0 : ($T)(($U)a >> n);\n"
             "}\n"),
    *_family(_UNSIGNED_C, "xla_shrl_$T",
             "$T xla_shrl_$T($T a, $T b) {\n"
             "  $U n = ($U)b;\n"
             "  return n >= $bits ? ($T)0 : ($T)(($U)a >> n);\n"
             "}\n", vector=True),
    *_family(_SIGNED_C + _UNSIGNED_C, "xla_shra_$T",
             "$T xla_shra_$T($T a, $T b) {\n"
             "  $U n = ($U)b;\n"
             "  $S s = ($S)a;\n"
             "  return ($T)(n >= $bits ? (s < 0 ? ($S)-1 : ($S)0) : ($S)(s >> n));\n"
             "}\n"),
    # XLA's reduce-precision, on the bits of the source format (nbits wide, src_e exponent
    # and src_m mantissa bits): round the mantissa to nearest even, then overflow to inf and
    # flush what falls below the reduced normal range to zero; NaN stays as it is.
    Helper("xla_reduce_precision_bits",
           "ulong xla_reduce_precision_bits(ulong x, int nbits, int src_e, int src_m,\n"
           "                                int e, int m) {\n"
           "  ulong sign_mask = (ulong)1 << (nbits - 1);\n"
           "  ulong exp_mask = (((ulong)1 << src_e) - 1) << src_m;\n"
           "  int is_nan = (x & ~sign_mask) > exp_mask;\n"
           "  ulong width_mask = nbits == 64 ? ~(ulong)0 : (((ulong)1 << nbits) - 1);\n"
           "  ulong r = x;\n"
           "  if (m < src_m) {\n"
           "    ulong last = (ulong)1 << (src_m - m);\n"
           "    ulong bias = (last >> 1) - 1 + ((r & last) >> (src_m - m));\n"
           "    r = ((r + bias) & ~(last - 1)) & width_mask;\n"
           "  }\n"
           "  if (e < src_e) {\n"
           "    ulong src_bias = ((ulong)1 << (src_e - 1)) - 1;\n"
           "    ulong dst_bias = ((ulong)1 << (e - 1)) - 1;\n"
           "    ulong exponent = r & exp_mask;\n"
           "    ulong zero = r & sign_mask;\n"
           "    r = exponent > ((src_bias + dst_bias) << src_m) ? (zero | exp_mask) : r;\n"
           "    r = exponent <= ((src_bias - dst_bias) << src_m) ? zero : r;\n"
           "  }\n"
           "  return is_nan ? x : r;\n"
           "}\n"),
)


def _float_to_int(from_c: str, to_c: str) -> Helper:
    return Helper(f"xla_{from_c}_to_{to_c}",
                  f"{to_c} xla_{from_c}_to_{to_c}({from_c} x) {{\n"
                  f"  return isnan(x) ? ({to_c})0 : convert_{to_c}_sat_rtz(x);\n"
                  f"}}\n")


HELPERS += tuple(_float_to_int(f, i) for f in _FLOAT_C for i in _INT_C)

# an f64 NaN as XLA narrows it to f16: the quiet NaN with its sign, no payload
HELPERS += (Helper("xla_quiet_double",
                   "double xla_quiet_double(double x) {\n"
                   "  ulong quiet = (as_ulong(x) & 0x8000000000000000UL) | 0x7ff8000000000000UL;\n"
                   "  return as_double(isnan(x) ? quiet : as_ulong(x));\n"
                   "}\n"),)

# sin, cos and tan of f32 vectors lane by lane where a lane is huge: PoCL's vector forms take
# one range reduction for the whole vector, and the one for huge arguments (above about 1e6)
# is wrong on the other lanes: sin(1e-7) is 0.0131 beside 3.4e38 or an infinity (and tan and
# cos as wrong), while the scalar forms are right. Vectors with every lane at most 2^16 keep
# the vector form; f64's vector forms and every scalar form are right as they are.
def _trig(fn: str) -> tuple[Helper, ...]:
    name = f"xla_{fn}_$T"
    plain = f"$T {name}($T x) {{\n  return {fn}(x);\n}}\n"
    lanewise = (f"$T {name}($T x) {{\n"
                f"  if (!any(fabs(x) > ($T)65536.0f)) return {fn}(x);\n"
                f"  $T r;\n"
                f"  for (int i = 0; i < vec_step($T); i++)\n"
                f"    ((__private float*)&r)[i] = {fn}(((__private float*)&x)[i]);\n"
                f"  return r;\n"
                f"}}\n")
    forms = [(c, n) for c in _FLOAT_C for n in (1, *VECTOR_WIDTHS)]
    return tuple(Helper(fill(name, subs := _placeholders(c, n)),
                        fill(lanewise if c == "float" and n > 1 else plain, subs))
                 for c, n in forms)


HELPERS += tuple(h for fn in ("sin", "cos", "tan") for h in _trig(fn))

# log1p below 2^-24 is the argument itself in f32 (x^2/2 is under half its ulp); PoCL's
# log1p gives 0 at 2^-126, the smallest normal, where XLA gives 2^-126. A denormal is +-0,
# as XLA's flushed arithmetic makes it (the select would pass its bits on unflushed).
HELPERS += _family(_FLOAT_C, "xla_log1p_$T",
                   "$T xla_log1p_$T($T x) {\n"
                   "  $T tiny = fabs(x) < ($T)0x1p-126f ? ($T)0 : x;\n"
                   "  return fabs(x) < ($T)0x1p-24f ? copysign(tiny, x) : log1p(x);\n"
                   "}\n", vector=True)

# f8e8m0fnu's code 0 (2^-127) widens to an f32 denormal, which the device's arithmetic
# flushes, as XLA's CPU backend flushes it in add or sqrt. But XLA widens the code by a
# select of the constant 2^-127, and LLVM folds some operations into that select at compile
# time, where nothing is flushed: their result at code 0 is that of the exact 2^-127 (ceil
# and sign 1; expm1, tan and asin the argument). Its power calls glibc's powf, which under
# the CPU's flush-to-zero normalises a denormal base to a log2 of -150; its atan2(y, 1) is
# atanf(y), which returns a tiny y itself. Measured on all 256 codes, every pair for the
# binary ones (tests/codegen/test_exponent_float.py); ``EXPONENT_FLOAT_TINY`` holds the
# result at code 0 as an expression of ``x`` (unary) or ``a``, ``b`` (binary).
EXPONENT_FLOAT_TINY: dict[Opcode, str] = {
    Opcode.SIGN: "1.0f",
    Opcode.CEIL: "1.0f",
    Opcode.EXPONENTIAL_MINUS_ONE: "x",
    Opcode.TAN: "x",
    Opcode.ASIN: "x",
    Opcode.POWER: "exp2(-150.0f * b)",
    Opcode.ATAN2: "(b == 1.0f ? a : xla_atan2_float(a, b))",
}


def _exponent_float_tiny(opcode: Opcode, template: str) -> Helper:
    """``template`` (the float one, on ``x`` or ``a``, ``b``) but on code 0 (the f32 bits
    0x400000) ``EXPONENT_FLOAT_TINY``'s result."""
    unary = "$x" in template
    params = "float x" if unary else "float a, float b"
    tested = "x" if unary else "a"
    body = fill(template, _placeholders("float"), **({"x": "x"} if unary else {"a": "a", "b": "b"}))
    name = f"xla_e8m0_{opcode.name.lower()}"
    needs = tuple(sorted(set(re.findall(r"\bxla_\w+", body + EXPONENT_FLOAT_TINY[opcode]))))
    return Helper(name, f"float {name}({params}) {{\n"
                        f"  return as_uint({tested}) == 0x400000u ? {EXPONENT_FLOAT_TINY[opcode]}"
                        f" : {body};\n}}\n", needs)


def _saturating_float_to_int(to_c: str) -> Helper:
    """XLA's float-to-int for a source format without infinities (f4, f6): it saturates
    where the value reaches the integer range's ends *converted to the source format*, and a
    format that saturates there makes its largest value the integer's largest (f4's 6.0 to
    s8 is 127, as XLA's CPU backend gives)."""
    return Helper(f"xla_float_to_{to_c}_within",
                  f"{to_c} xla_float_to_{to_c}_within(float x, float lo, float hi, {to_c} min, "
                  f"{to_c} max) {{\n"
                  f"  return x >= hi ? max : (x <= lo ? min : clamp(xla_float_to_{to_c}(x), min, "
                  "max));\n"
                  "}\n", (f"xla_float_to_{to_c}",))


HELPERS += tuple(_saturating_float_to_int(i) for i in _INT_C)


def _bf16_vectors(n: int) -> tuple[Helper, ...]:
    """bf16 on ``n`` lanes at once (the vector loop's), lane by lane ``cltypes``' scalar
    helpers: widening shifts the bits up; narrowing rounds the f32 bits to nearest even and
    keeps a NaN's bits (quieted where its payload would vanish); rounding a computed value
    rounds its bits in place (the same bits as narrowing and widening again) and makes its
    NaNs canonical."""
    to_float, to_bf16 = f"xla_bf16x{n}_to_float", f"xla_float_to_bf16x{n}"
    return (
        Helper(to_float,
               f"float{n} {to_float}(ushort{n} h) {{\n"
               f"  return as_float{n}(convert_uint{n}(h) << 16);\n"
               "}\n"),
        Helper(to_bf16,
               f"ushort{n} {to_bf16}(float{n} x) {{\n"
               f"  uint{n} u = as_uint{n}(x);\n"
               f"  ushort{n} high = convert_ushort{n}(u >> 16);\n"
               f"  ushort{n} rounded = convert_ushort{n}((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"
               f"  ushort{n} nan = select((ushort{n})(high | (ushort)0x40u), high,\n"
               f"                         (high & (ushort)0x7fu) != (ushort)0);\n"
               f"  return select(rounded, nan, convert_short{n}(isnan(x)));\n"
               "}\n"),
        Helper(f"xla_round_bf16x{n}",
               f"float{n} xla_round_bf16x{n}(float{n} x) {{\n"
               f"  uint{n} u = as_uint{n}(x);\n"
               f"  float{n} rounded = as_float{n}((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);\n"
               f"  return select(rounded, as_float{n}((u & 0x80000000u) | 0x7fc00000u), isnan(x));\n"
               "}\n"),
    )


def _f16_vectors(n: int) -> tuple[Helper, ...]:
    """f16 on ``n`` lanes at once, lane by lane ``cltypes``' scalar helpers: widening and
    narrowing are PoCL's ``vload_half``/``vstore_half_rte`` (the CPU's F16C conversions on
    whole vectors: a tanh chain over 4M f16 values 10.9 ms element by element, 2.0 ms on
    float16), a NaN stored keeps its sign and payload, quieted where the payload would
    vanish, and rounding a computed value quiets its NaNs first."""
    to_float, to_f16 = f"xla_f16x{n}_to_float", f"xla_float_to_f16x{n}"
    return (
        Helper(to_float,
               f"float{n} {to_float}(ushort{n} h) {{\n"
               f"  return vload_half{n}(0, (__private const half*)&h);\n"
               "}\n"),
        Helper(to_f16,
               f"ushort{n} {to_f16}(float{n} x) {{\n"
               f"  ushort{n} h;\n"
               f"  vstore_half{n}_rte(x, 0, (__private half*)&h);\n"
               f"  uint{n} u = as_uint{n}(x);\n"
               f"  ushort{n} payload = convert_ushort{n}((u >> 13) & 0x3ffu);\n"
               f"  ushort{n} nan = convert_ushort{n}((u >> 16) & 0x8000u) | (ushort)0x7c00u\n"
               f"                  | select(payload, (ushort{n})0x200u, payload == (ushort)0);\n"
               f"  return select(h, nan, convert_short{n}(isnan(x)));\n"
               "}\n"),
        Helper(f"xla_round_f16x{n}",
               f"float{n} xla_round_f16x{n}(float{n} x) {{\n"
               f"  float{n} quiet = select(x, as_float{n}(as_uint{n}(x) | 0x400000u), isnan(x));\n"
               f"  return {to_float}({to_f16}(quiet));\n"
               "}\n",
               (to_float, to_f16)),
    )


HELPERS += tuple(h for n in VECTOR_WIDTHS for h in _bf16_vectors(n) + _f16_vectors(n))

# narrow floats that vector kernels compute in f32 lanes, widened from their stored bits
# (ushort vectors) on load, rounded after each inexact operation and narrowed on store
NARROW_FLOAT_VECTORS = frozenset({"bf16", "f16"})


def widen_vector(et: ElementType | str, lanes: int, bits: str) -> str:
    return f"xla_{_name(et)}x{lanes}_to_float({bits})"


def narrow_vector(et: ElementType | str, lanes: int, value: str) -> str:
    return f"xla_float_to_{_name(et)}x{lanes}({value})"


def round_vector(et: ElementType | str, lanes: int, value: str) -> str:
    return f"xla_round_{_name(et)}x{lanes}({value})"


def rounds(opcode: Opcode, et: ElementType | str) -> bool:
    """Whether ``opcode``'s float result of ``et`` (f16 or bf16 in a vector kernel) needs
    rounding to its precision (or a NaN made XLA's, ``_exact``)."""
    return not _exact(opcode, cl_type(et))


def _exact(opcode: Opcode, row: ClType) -> bool:
    """Whether ``opcode``'s result on ``row``'s float values needs no rounding: it is a value
    of the type itself in f16, f32 and f64. Not in the coded floats: XLA computes their
    arithmetic in f16 or f32 and converts back, which makes f8e5m2's NaN 0x7f whatever it
    was, a "fnuz" format's -0 +0, f8e3m4's floor(-15.5) -inf and f8e8m0fnu's negation NaN.
    Nor in bf16: XLA computes it in f32, and the convert back makes a NaN the canonical one
    with its sign. In every type, an operation passing a value on (copy, real) keeps its
    bits."""
    spec = OPCODES[opcode]
    return spec.exact and row.family == "float" \
        and (spec.passes_value or not (_coded(row) or row.name == "bf16"))


def _subst(template: str, row: ClType, lanes: int = 1, **operands: str) -> str:
    return fill(template, _placeholders(row.compute, lanes), **operands)


def _unsupported(what: str, et: ElementType | str) -> HloUnsupportedError:
    return HloUnsupportedError(f"{what} is not supported for element type {_name(et)}")


def _name(et: ElementType | str) -> str:
    return et if isinstance(et, str) else et.name


# --- unary ------------------------------------------------------------------------------

_UNARY: dict[tuple[str, str], str] = {
    (Opcode.ABS, "float"): "fabs($x)",
    (Opcode.ABS, "sint"): "(($T)abs($x))",
    (Opcode.ABS, "uint"): "$x",
    (Opcode.NEGATE, "float"): "(-$x)",
    (Opcode.NEGATE, "sint"): "(($T)(-($W)$x))",
    (Opcode.NEGATE, "uint"): "(($T)(-($W)$x))",
    (Opcode.SIGN, "float"): "xla_sign_$T($x)",
    (Opcode.SIGN, "sint"): "xla_isign_$T($x)",
    (Opcode.SIGN, "uint"): "(($T)($x != 0))",
    (Opcode.FLOOR, "float"): "floor($x)",
    (Opcode.CEIL, "float"): "ceil($x)",
    (Opcode.ROUND_NEAREST_AFZ, "float"): "round($x)",
    (Opcode.ROUND_NEAREST_EVEN, "float"): "rint($x)",
    (Opcode.EXPONENTIAL, "float"): "exp($x)",
    (Opcode.EXPONENTIAL_MINUS_ONE, "float"): "expm1($x)",
    (Opcode.LOG, "float"): "log($x)",
    (Opcode.LOG_PLUS_ONE, "float"): "xla_log1p_$T($x)",
    (Opcode.SQRT, "float"): "sqrt($x)",
    (Opcode.RSQRT, "float"): "(($T)1 / sqrt($x))",
    (Opcode.CBRT, "float"): "cbrt($x)",
    (Opcode.SINE, "float"): "xla_sin_$T($x)",
    (Opcode.COSINE, "float"): "xla_cos_$T($x)",
    (Opcode.TAN, "float"): "xla_tan_$T($x)",
    (Opcode.TANH, "float"): "xla_tanh_$T($x)",
    (Opcode.SINH, "float"): "sinh($x)",
    (Opcode.COSH, "float"): "cosh($x)",
    (Opcode.ASIN, "float"): "asin($x)",
    (Opcode.ACOS, "float"): "acos($x)",
    (Opcode.ATAN, "float"): "atan($x)",
    (Opcode.ASINH, "float"): "asinh($x)",
    (Opcode.ACOSH, "float"): "acosh($x)",
    (Opcode.ATANH, "float"): "atanh($x)",
    (Opcode.LOGISTIC, "float"): "(($T)1 / (($T)1 + exp(-$x)))",
    (Opcode.ERF, "float"): "erf($x)",
    (Opcode.IS_FINITE, "float"): "((uchar)isfinite($x))",
    (Opcode.REAL, "float"): "$x",                   # a real number is its own real part
    (Opcode.IMAG, "float"): "(($T)0)",              # ... and has no imaginary one
    (Opcode.NOT, "sint"): "(($T)~$x)",
    (Opcode.NOT, "uint"): "(($T)~$x)",
    (Opcode.NOT, "pred"): "((uchar)($x ^ 1))",
    (Opcode.POPCNT, "sint"): "(($T)popcount($x))",
    (Opcode.POPCNT, "uint"): "(($T)popcount($x))",
    (Opcode.COPY, "float"): "$x",
    (Opcode.COPY, "sint"): "$x",
    (Opcode.COPY, "uint"): "$x",
    (Opcode.COPY, "pred"): "$x",
}

# XLA's CPU backend computes f16 in f16: LLVM rounds every f16 operation of an expansion to
# f16, so where its elemental emitter expands an opcode, the f16 result is not the rounded f32
# one. expm1 is tanh(x/2) * (exp(x) + 1) for |x| <= 0.5 (x where x/2 is 0), exp(x) - 1 above;
# logistic is 1 / (1 + exp(-x)); each step rounded to f16 (bit for bit on all 65536 codes
# against jaxlib 0.10.2, where rounding the f32 result differs on 11381 and 11072 of them).
# The 8-bit floats, which XLA computes in f16, take the same steps (rounding once misses one
# logistic code of four of them).
def _computed_in_f16(name: str) -> bool:
    """f16, and the 8-bit floats XLA's float normalisation computes in f16."""
    return name == "f16" or (name in ELEMENT_TYPES
                             and ELEMENT_TYPES[name].arithmetic_type == "f16")


F16_STEPWISE: dict[Opcode, str] = {
    Opcode.EXPONENTIAL_MINUS_ONE: "xla_f16_expm1_$T($x)",
    Opcode.LOGISTIC: "xla_f16_logistic_$T($x)",
}
HELPERS += (Helper("xla_round_f16_float", "float xla_round_f16_float(float x) {\n"
                   "  return xla_round_f16(x);\n}\n", ("xla_round_f16",)),
            *(Helper(f"xla_round_f16_float{n}", f"float{n} xla_round_f16_float{n}(float{n} x) {{\n"
                     f"  return xla_round_f16x{n}(x);\n}}\n", (f"xla_round_f16x{n}",))
              for n in VECTOR_WIDTHS))
HELPERS += _family(("float",), "xla_f16_expm1_$T",
                   "$T xla_f16_expm1_$T($T x) {\n"
                   "  $T h = xla_round_f16_$T(x * 0.5f);\n"
                   "  $T e = xla_round_f16_$T(exp(x));\n"
                   "  $T small = xla_round_f16_$T(xla_round_f16_$T(xla_tanh_$T(h))\n"
                   "                                 * xla_round_f16_$T(e + 1.0f));\n"
                   "  $T large = xla_round_f16_$T(e - 1.0f);\n"
                   "  return h == 0.0f ? x : (fabs(x) > 0.5f ? large : small);\n"
                   "}\n", ("xla_round_f16_$T", "xla_tanh_$T"), vector=True)
HELPERS += _family(("float",), "xla_f16_logistic_$T",
                   "$T xla_f16_logistic_$T($T x) {\n"
                   "  $T e = xla_round_f16_$T(exp(-x));\n"
                   "  return xla_round_f16_$T(1.0f / xla_round_f16_$T(1.0f + e));\n"
                   "}\n", ("xla_round_f16_$T",), vector=True)

# clz through a 32- or 64-bit unsigned value, so clz(0) is the type's own width on every
# device (OpenCL's clz on char/short is easy to get wrong through integer promotion).
_CLZ = {8: "(($T)(clz((uint)($U)$x) - $pad))", 16: "(($T)(clz((uint)($U)$x) - $pad))",
        32: "(($T)clz(($U)$x))", 64: "(($T)clz(($U)$x))"}

_PRED_RESULTS = frozenset({Opcode.IS_FINITE})



def unary_result_type(opcode: Opcode, et: ElementType) -> ElementType:
    """The element type of unary ``opcode``'s result on ``et`` (pred for a test)."""
    return PRED if opcode in _PRED_RESULTS else et


def unary(opcode: Opcode, et_in: ElementType | str, et_out: ElementType | str, x: str,
          lanes: int = 1, xla_type: ElementType | str | None = None) -> str:
    """XLA's ``opcode`` applied to ``x`` (of ``et_in``), as an expression of ``et_out``; with
    ``lanes`` > 1, on vectors (only where ``vector_lanes`` says so). ``xla_type``: the type
    whose NaN results to give where ``et_in`` is its compute type (a vector kernel's f16 or
    bf16 computed in f32 vectors)."""
    row = cl_type(et_in)
    template = _packed_integer(opcode, row)
    if template is None and opcode == Opcode.COUNT_LEADING_ZEROS and row.family in ("sint", "uint"):
        template = _CLZ[row.bits]
    elif template is None:
        template = _UNARY.get((opcode, row.family))
    if template is None:
        raise _unsupported(f"unary opcode {opcode}", et_in)
    if row.name in EXPONENT_FLOATS and opcode in EXPONENT_FLOAT_TINY:
        template = f"xla_e8m0_{opcode.name.lower()}($x)"
    if _computed_in_f16(row.name if xla_type is None else _name(xla_type)):
        template = F16_STEPWISE.get(opcode, template)
    template = _nan_ruled(opcode, row, template, xla_type)
    expr = _subst(template, row, lanes, x=x)
    return expr if _exact(opcode, row) else round_to_storage(et_out, expr)


# --- binary -----------------------------------------------------------------------------

_INT_BINARY = {
    Opcode.ADD: "(($T)(($W)$a + ($W)$b))",
    Opcode.SUBTRACT: "(($T)(($W)$a - ($W)$b))",
    Opcode.MULTIPLY: "(($T)(($W)$a * ($W)$b))",
    Opcode.DIVIDE: "xla_div_$T($a, $b)",
    Opcode.REMAINDER: "xla_rem_$T($a, $b)",
    Opcode.POWER: "xla_pow_$T($a, $b)",
    Opcode.MAXIMUM: "max($a, $b)",
    Opcode.MINIMUM: "min($a, $b)",
    Opcode.AND: "(($T)($a & $b))",
    Opcode.OR: "(($T)($a | $b))",
    Opcode.XOR: "(($T)($a ^ $b))",
    Opcode.SHIFT_LEFT: "xla_shl_$T($a, $b)",
    Opcode.SHIFT_RIGHT_LOGICAL: "xla_shrl_$T($a, $b)",
    Opcode.SHIFT_RIGHT_ARITHMETIC: "xla_shra_$T($a, $b)",
    Opcode.MULHI: "mul_hi($a, $b)",
}

_BINARY: dict[tuple[str, str], str] = {
    (Opcode.ADD, "float"): "($a + $b)",
    (Opcode.SUBTRACT, "float"): "($a - $b)",
    (Opcode.MULTIPLY, "float"): "($a * $b)",
    (Opcode.DIVIDE, "float"): "($a / $b)",
    (Opcode.REMAINDER, "float"): "fmod($a, $b)",
    (Opcode.POWER, "float"): "xla_fpow_$T($a, $b)",
    (Opcode.MAXIMUM, "float"): "xla_fmax_$T($a, $b)",
    (Opcode.MINIMUM, "float"): "xla_fmin_$T($a, $b)",
    (Opcode.ATAN2, "float"): "xla_atan2_$T($a, $b)",
    **{(op, "sint"): t for op, t in _INT_BINARY.items()},
    **{(op, "uint"): t for op, t in _INT_BINARY.items()},
    # pred arithmetic is int8 arithmetic tested != 0 (XLA's EmitPredBinaryOp)
    (Opcode.ADD, "pred"): "((uchar)($a | $b))",
    (Opcode.MAXIMUM, "pred"): "((uchar)($a | $b))",
    (Opcode.OR, "pred"): "((uchar)($a | $b))",
    (Opcode.MULTIPLY, "pred"): "((uchar)($a & $b))",
    (Opcode.MINIMUM, "pred"): "((uchar)($a & $b))",
    (Opcode.AND, "pred"): "((uchar)($a & $b))",
    (Opcode.XOR, "pred"): "((uchar)($a ^ $b))",
}


HELPERS += tuple(_exponent_float_tiny(op, _UNARY.get((op, "float")) or _BINARY[(op, "float")])
                 for op in EXPONENT_FLOAT_TINY)


_CLAMP = {"float": "xla_fmin_$T(xla_fmax_$T($lo, $x), $hi)",
          "sint": "min($hi, max($lo, $x))", "uint": "min($hi, max($lo, $x))",
          "pred": "((uchar)(($lo | $x) & $hi))"}


# --- NaN results (``OpcodeSpec.nan``) -----------------------------------------------------

# the bits of x86's NaNs by C type: the quiet bit, the sign bit, the default NaN (negative),
# its positive twin and all ones
_NAN_BITS = {
    "float": {"quiet": "0x400000u", "sign-bit": "0x80000000u", "negative": "0xffc00000u",
              "positive": "0x7fc00000u", "all-ones": "0xffffffffu"},
    "double": {"quiet": "0x8000000000000UL", "sign-bit": "0x8000000000000000UL",
               "negative": "0xfff8000000000000UL", "positive": "0x7ff8000000000000UL",
               "all-ones": "0xffffffffffffffffUL"},
}
# the format XLA computes a float type's arithmetic in, by C type, as ``NanRule`` names them
_NAN_FORMATS = (("f16", "float"), ("f32", "float"), ("f64", "double"), ("f8", "float"))


def _nan_helper_name(opcode: Opcode, fmt: str) -> str:
    return f"xla_nan_{Opcode(opcode).name.lower()}_{fmt}_$T"


def _nan_helper(opcode: Opcode, rule: NanRule, fmt: str, c_type: str,
                template: str) -> tuple[Helper, ...]:
    """``template`` computed, then a NaN result made the one ``rule`` says XLA gives in
    ``fmt``: only NaN results are touched, so every other value is the template's (power's
    pow(NaN, 0) = 1 stays 1)."""
    bits = _NAN_BITS[c_type]

    def constant(kind: str) -> str:
        return f"as_$T(($U){bits[kind]})"

    def from_operand(name: str) -> str:
        flip = f" ^ ($U){bits['sign-bit']}" if rule.operand == "negated" else ""
        return f"as_$T((as_$U({name}) | ($U){bits['quiet']}){flip})"
    invalid = rule.f64_invalid if fmt == "f64" and rule.f64_invalid else rule.invalid
    one_nan = dict(rule.one_nan_in).get(fmt)
    if one_nan is not None:
        nan = constant(one_nan)
    elif "$b" not in template:
        nan = f"(isnan(x) ? {from_operand('x')} : {constant(invalid)})"
    else:
        first, second = ("a", "b") if rule.first == 0 else ("b", "a")
        nan = (f"(isnan({first}) ? {from_operand(first)} : (isnan({second}) ? "
               f"{from_operand(second)} : {constant(invalid)}))")
    params = ("$T lo, $T x, $T hi" if "$lo" in template
              else "$T x" if "$b" not in template else "$T a, $T b")
    body = fill(template, {"T": "$T", "U": "$U", "W": "$W", "S": "$S", "bits": "$bits",
                           "HUGE_EXP": "$HUGE_EXP"}, x="x", a="a", b="b", lo="lo", hi="hi")
    name = _nan_helper_name(opcode, fmt)
    return _family((c_type,), name,
                   f"$T {name}({params}) {{\n"
                   f"  $T r = {body};\n"
                   f"  return isnan(r) ? {nan} : r;\n"
                   "}\n", tuple(sorted(set(re.findall(r"\bxla_[\w$]+", body)))), vector=True)


def _nan_format(rule: NanRule | None, fmt: str) -> bool:
    """Whether ``rule`` changes a NaN result in ``fmt``."""
    return rule is not None and (rule.operand != "kept" or fmt in dict(rule.one_nan_in))


HELPERS += tuple(h for (op, family), template in {**_UNARY, **_BINARY,
                                                  (Opcode.CLAMP, "float"): _CLAMP["float"]}.items()
                 for rule in (OPCODES[Opcode(op)].nan,) if family == "float" and rule is not None
                 for fmt, c_type in _NAN_FORMATS if _nan_format(rule, fmt)
                 for h in _nan_helper(Opcode(op), rule, fmt, c_type,
                                      F16_STEPWISE.get(Opcode(op), template)
                                      if fmt in ("f16", "f8") else template))


def _nan_ruled(opcode: Opcode, row: ClType, template: str,
               xla_type: ElementType | str | None) -> str:
    """``template``, or the helper making its NaN results XLA's where ``opcode`` has a NaN
    rule, as XLA computes it for ``xla_type`` (``row``'s type where None; not for
    f8e8m0fnu, whose one NaN has no sign or payload)."""
    name = row.name if xla_type is None else _name(xla_type)
    if row.family != "float" or name in EXPONENT_FLOATS:
        return template
    fmt = "f64" if row.compute == "double" else "f8" if name in BYTE_FLOATS else (
        "f16" if name == "f16" else "f32")
    if not _nan_format(OPCODES[opcode].nan, fmt):
        return template
    call = "($lo, $x, $hi)" if "$lo" in template else "($x)" if "$b" not in template \
        else "($a, $b)"
    return _nan_helper_name(opcode, fmt) + call


def binary(opcode: Opcode, et: ElementType | str, a: str, b: str, lanes: int = 1,
           xla_type: ElementType | str | None = None) -> str:
    """XLA's ``opcode`` of ``a`` and ``b`` (both of ``et``; the result is ``et`` too;
    ``xla_type`` as for ``unary``)."""
    row = cl_type(et)
    template = _packed_integer(opcode, row) or _BINARY.get((opcode, row.family))
    if template is None:
        raise _unsupported(f"binary opcode {opcode}", et)
    if row.name in EXPONENT_FLOATS and opcode in EXPONENT_FLOAT_TINY:
        template = f"xla_e8m0_{opcode.name.lower()}($a, $b)"
    template = _nan_ruled(opcode, row, template, xla_type)
    expr = _subst(template, row, lanes, a=a, b=b)
    return expr if _exact(opcode, row) else round_to_storage(et, expr)


# 2- and 4-bit integers compute in char/uchar and wrap back after each operation
# (``cltypes``): right for everything but these, whose result depends on the bits above the
# type's width (a logical shift of a sign-extended s4, an arithmetic one of a u4, leading
# zeros, the high half); they work on the ``$B``-bit code (``$M`` its mask, ``$P`` 32 - ``$B``).
# XLA's popcnt of an s4 counts its sign-extended byte (-1 gives 8, wrapped to -8), as the
# plain template does, and of an s2 its code's bits (keys with a width are that width's only).
_PACKED_INTEGER: dict[tuple, str] = {
    (Opcode.POPCNT, "sint", 2): "(($T)popcount((uchar)($x & $M)))",
    (Opcode.SHIFT_RIGHT_LOGICAL, "sint"): "(($T)xla_shrl_uchar((uchar)($a & $M), (uchar)$b))",
    (Opcode.SHIFT_RIGHT_ARITHMETIC, "uint"):
        "(($T)xla_shra_char((char)((int)((uint)$a << $P) >> $P), (char)$b))",
    (Opcode.COUNT_LEADING_ZEROS, "sint"): "(($T)(clz((uint)($x & $M)) - $P))",
    (Opcode.COUNT_LEADING_ZEROS, "uint"): "(($T)(clz((uint)$x) - $P))",
    (Opcode.MULHI, "sint"): "(($T)(((int)$a * (int)$b) >> $B))",
    (Opcode.MULHI, "uint"): "(($T)(((uint)$a * (uint)$b) >> $B))",
}


def _packed_integer(opcode: Opcode, row: ClType) -> str | None:
    """``opcode``'s template on the codes of a 2- or 4-bit integer, where it needs one."""
    if row.family not in ("sint", "uint") or row.bits >= C_BITS[row.compute]:
        return None
    template = _PACKED_INTEGER.get((opcode, row.family, row.bits),
                                   _PACKED_INTEGER.get((opcode, row.family)))
    return None if template is None else fill(
        template, B=str(row.bits), M=f"0x{(1 << row.bits) - 1:x}", P=str(32 - row.bits),
        T="$T", a="$a", b="$b", x="$x")


# --- compare, select, clamp -------------------------------------------------------------

_DIRECTIONS = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}
_DEFAULT_COMPARISON = {"float": "FLOAT", "sint": "SIGNED", "uint": "UNSIGNED",
                       "pred": "UNSIGNED"}
# (comparison type, family) -> each operand as something C compares right; XLA's verifier
# rejects the other pairings (e.g. UNSIGNED on s32).
_COMPARE_OPERAND: dict[tuple[str, str], str] = {
    ("FLOAT", "float"): "$x",
    ("TOTALORDER", "float"): "xla_total_order_key_$T($x)",
    ("SIGNED", "sint"): "$x",
    ("UNSIGNED", "uint"): "$x",
    ("UNSIGNED", "pred"): "$x",
}


def compare(direction: str, comparison_type: str | None, et: ElementType | str,
            a: str, b: str) -> str:
    """``compare(a, b), direction=..., type=...`` as a pred (uchar 0/1) expression."""
    row = cl_type(et)
    kind = str(comparison_type) if comparison_type else _DEFAULT_COMPARISON[row.family]
    operand = _COMPARE_OPERAND.get((kind, row.family))
    if operand is None:
        raise _unsupported(f"comparison type {kind}", et)
    op = _DIRECTIONS.get(str(direction))
    if op is None:
        raise HloUnsupportedError(f"unknown comparison direction {direction}")
    return f"((uchar)({_subst(operand, row, x=a)} {op} {_subst(operand, row, x=b)}))"


def select(pred: str, on_true: str, on_false: str) -> str:
    return f"(({pred}) ? ({on_true}) : ({on_false}))"


def clamp(et: ElementType | str, lo: str, x: str, hi: str, lanes: int = 1,
          xla_type: ElementType | str | None = None) -> str:
    """XLA's ``clamp(lo, x, hi)`` = min(max(lo, x), hi) with its NaN-propagating max/min (in
    that operand order, which decides which NaN wins and its sign; ``xla_type`` as for
    ``unary``)."""
    row = cl_type(et)
    template = _CLAMP.get(row.family)
    if template is None:
        raise _unsupported("clamp", et)
    expr = _subst(_nan_ruled(Opcode.CLAMP, row, template, xla_type), row, lanes, lo=lo, x=x,
                  hi=hi)
    return round_to_storage(et, expr) if _coded(row) else expr


# unsigned opcodes whose templates are valid on vectors (operators, ``max``/``min``, the
# unsigned shift helpers' vector forms): a random number generator's mixing rounds
VECTOR_UNSIGNED = frozenset({Opcode.ADD, Opcode.SUBTRACT, Opcode.MULTIPLY, Opcode.MAXIMUM,
                             Opcode.MINIMUM, Opcode.AND, Opcode.OR,
                             Opcode.XOR, Opcode.SHIFT_LEFT, Opcode.SHIFT_RIGHT_LOGICAL})


def vector_lanes(opcode: Opcode, et: ElementType | str, vector_bits: int) -> int | None:
    """The lanes of ``opcode``'s vector form on ``et`` operands with an ``et`` result, in
    vectors of ``vector_bits`` (the target's), or None where there is none. Every float
    template is an OpenCL builtin, an operator or a helper instantiated for vectors, all
    overloaded lane by lane, and so are u32's ``VECTOR_UNSIGNED``; pred results (compare,
    is-finite), selects and conversions are not."""
    row = cl_type(et)
    if row.name == "u32":
        lanes = vector_bits // 32
        return lanes if lanes in VECTOR_WIDTHS and opcode in VECTOR_UNSIGNED else None
    float_lanes = vector_bits // C_BITS[row.compute] if row.family == "float" \
        and row.bits >= 32 else None
    if float_lanes not in VECTOR_WIDTHS or opcode in _PRED_RESULTS:
        return None
    known = ((opcode, "float") in _UNARY or (opcode, "float") in _BINARY
             or opcode == Opcode.CLAMP)
    return float_lanes if known else None


# --- conversions ------------------------------------------------------------------------

# XLA tests a bf16 for != 0 on its bits, so a bf16 denormal is true even where f32 denormals
# are flushed.
_TO_PRED = {"bf16": "((uchar)((as_uint($x) & 0x7fffffffu) != 0))"}


def convert(et_from: ElementType | str, et_to: ElementType | str, x: str) -> str:
    """XLA's ``convert``: saturating float->int with NaN -> 0, RNE to floats, != 0 to pred,
    wrapping int->int. Narrow floats round through f32 (as XLA does, even from f64)."""
    src, dst = cl_type(et_from), cl_type(et_to)
    if src.name == dst.name:
        return x
    if dst.family == "pred":
        return fill(_TO_PRED.get(src.name, "((uchar)(($x) != 0))"), x=x)
    if src.family == "float" and dst.family in ("sint", "uint"):
        low = -(1 << (dst.bits - 1)) if dst.family == "sint" else 0
        high = (1 << (dst.bits - 1)) - 1 if dst.family == "sint" else (1 << dst.bits) - 1
        if src.name in SMALL_FLOATS:
            bounds = ", ".join(cltypes_literal(src.name, v) for v in (low, high))
            return (f"xla_float_to_{dst.compute}_within({x}, {bounds}, "
                    f"{cltypes_literal(dst.name, low)}, {cltypes_literal(dst.name, high)})")
        saturated = f"xla_{src.compute}_to_{dst.compute}({x})"
        if dst.bits < C_BITS[dst.compute]:       # a 2- or 4-bit integer saturates at its own range
            return f"clamp({saturated}, ({dst.compute})({low}), ({dst.compute})({high}))"
        return saturated
    if dst.family in ("sint", "uint"):
        return round_to_storage(dst, f"(({dst.compute})({x}))")     # wraps
    if src.name in NAN_FROM_NARROW:
        # its code again: a NaN its arithmetic made (``xla_narrow_...``) widens as XLA's
        x = f"xla_{src.name}_to_float(xla_float_to_{src.name}({x}))"
    if dst.compute == "double":
        return fill(src.to_double, x=x)
    if src.compute == "double" and dst.from_double is not None:
        return fill(dst.from_double, x=x)
    if src.compute == "double" and dst.name == "f16":
        x = f"xla_quiet_double({x})"        # XLA makes every f64 NaN f16's canonical one
    value = x if src.compute == "float" else f"((float)({x}))"
    if dst.name in BYTE_FLOATS or dst.name in SMALL_FLOATS:
        # once, not through f16 (``cltypes``); a NaN as XLA narrows it from ``src``
        narrow = src.bits < 32 and src.family == "float"
        return f"{rounds_narrow(dst.name) if narrow else f'xla_round_{dst.name}'}({value})"
    return round_to_storage(dst, value)


# integer types a float vector converts into with one OpenCL builtin (``convert_vector``)
VECTOR_INTEGERS = frozenset({"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"})


def convert_vector(et_from: ElementType | str, et_to: ElementType | str, x: str,
                   lanes: int) -> str:
    """``convert`` of a vector of ``lanes`` floats ``x`` to an integer type in
    ``VECTOR_INTEGERS``: saturating, toward zero, NaN to 0, as the scalar form."""
    src, dst = cl_type(et_from), cl_type(et_to)
    vec = f"{src.compute}{lanes}"
    return f"convert_{dst.compute}{lanes}_sat_rtz(select({x}, ({vec})(0), isnan({x})))"


# A compute value's storage bits (as the same-width unsigned type), and back.
_TO_BITS = {"f32": "as_uint($x)", "f64": "as_ulong($x)", "f16": "xla_float_to_f16($x)",
            "bf16": "xla_float_to_bf16($x)"}
_FROM_BITS = {"f32": "as_float((uint)($x))", "f64": "as_double((ulong)($x))",
              "f16": "xla_f16_to_float((ushort)($x))", "bf16": "xla_bf16_to_float((ushort)($x))",
              "pred": "((uchar)(($x) != 0))"}


def _coded(row: ClType) -> bool:
    """Whether ``row`` is a float stored as a code of ml_dtypes' (8 bits and fewer)."""
    return row.name in BYTE_FLOATS or row.name in SMALL_FLOATS


def _to_bits(row: ClType, x: str) -> str:
    if row.family in ("sint", "uint") and row.bits < C_BITS[row.compute]:
        return f"((uchar)((uchar)({x}) & 0x{(1 << row.bits) - 1:x}u))"
    template = _TO_BITS.get(row.name, f"xla_float_to_{row.name}($x)" if _coded(row)
                            else "(($U)($x))")
    return fill(template, U=row.unsigned, x=x)


def _from_bits(row: ClType, bits: str) -> str:
    if row.family in ("sint", "uint") and row.bits < C_BITS[row.compute]:
        return round_to_storage(row, f"(({row.compute})({bits}))")
    template = _FROM_BITS.get(row.name, f"xla_{row.name}_to_float((uchar)($x))"
                              if _coded(row) else "(($T)($U)($x))")
    return fill(template, T=row.compute, U=row.unsigned, x=bits)


def bitcast_convert(et_from: ElementType | str, et_to: ElementType | str, x: str) -> str:
    """Reinterpret the bits of ``x`` as ``et_to`` (same bit width)."""
    src, dst = cl_type(et_from), cl_type(et_to)
    if src.bits != dst.bits:
        raise HloUnsupportedError(
            f"bitcast-convert from {src.name} to {dst.name} changes the width; use "
            "bitcast_convert_split / bitcast_convert_join")
    return _from_bits(dst, _to_bits(src, x))


def bitcast_convert_split(et_from: ElementType | str, et_to: ElementType | str, x: str,
                          part: str) -> str:
    """Element ``part`` (a C expression; 0 = least significant, XLA's little-endian order)
    of the narrower ``et_to`` elements that wide ``x`` splits into."""
    src, dst = cl_type(et_from), cl_type(et_to)
    shifted = f"({_to_bits(src, x)} >> (({part}) * {dst.bits}))"
    return _from_bits(dst, f"(({dst.unsigned}){shifted})")


def bitcast_convert_join(et_from: ElementType | str, et_to: ElementType | str,
                         parts: Sequence[str]) -> str:
    """The wide ``et_to`` value made of narrow ``parts`` (least significant first)."""
    src, dst = cl_type(et_from), cl_type(et_to)
    if len(parts) * src.bits != dst.bits:
        raise HloUnsupportedError(f"bitcast-convert from {src.name} to {dst.name} takes "
                                  f"{dst.bits // src.bits} parts, got {len(parts)}")
    pieces = [f"((({dst.unsigned}){_to_bits(src, p)}) << {i * src.bits})"
              for i, p in enumerate(parts)]
    return _from_bits(dst, "(" + " | ".join(pieces) + ")")


# (bits, exponent bits, mantissa bits) of each float format's own encoding
_FLOAT_FORMATS = {"f16": (16, 5, 10), "bf16": (16, 8, 7), "f32": (32, 8, 23),
                  "f64": (64, 11, 52)}


def reduce_precision(et: ElementType | str, x: str, exponent_bits: int,
                     mantissa_bits: int) -> str:
    """XLA's ``reduce-precision`` of ``x`` to ``exponent_bits``/``mantissa_bits``."""
    row = cl_type(et)
    if row.name not in _FLOAT_FORMATS:
        raise _unsupported("reduce-precision", et)
    if exponent_bits < 1 or mantissa_bits < 0:
        raise HloUnsupportedError(f"reduce-precision needs exponent_bits >= 1 and "
                                  f"mantissa_bits >= 0, got {exponent_bits}, {mantissa_bits}")
    nbits, src_e, src_m = _FLOAT_FORMATS[row.name]
    reduced = (f"xla_reduce_precision_bits((ulong){_to_bits(row, x)}, {nbits}, {src_e}, "
               f"{src_m}, {exponent_bits}, {mantissa_bits})")
    # XLA computes bf16's in f32: the convert back makes a NaN the canonical one, its sign kept
    value = _from_bits(row, reduced)
    return round_to_storage(row, value) if row.name == "bf16" else value


__all__ = [
    "HELPERS", "FP_CONTRACT_OFF", "VECTOR_WIDTHS", "vector_lanes", "rounds", "unary",
    "unary_result_type", "binary",
    "compare",
    "select", "clamp", "convert", "bitcast_convert", "bitcast_convert_split", "bitcast_convert_join", "reduce_precision",
]
