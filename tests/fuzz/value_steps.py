"""The value half of the fuzzer: element types, constants, special values, every elementwise
opcode the project lowers, reductions from any initial value, and narrow contractions.

The layout steps (``layout_programs``) move values around; these compute them, in every
element type XLA's CPU backend and ours both run (f16, bf16, f32, f64, s8..s64, u8..u64,
pred), with constants (scalars, arrays, broadcast scalars) as operands of every binary
opcode, and with special values (NaN with payloads and both signs, infinities, signed zeros,
denormals, values up to 3e38) mixed into the random inputs. The bug classes they were
written to find: a float division by a constant that XLA computes as a product, f16/bf16
sums rounded at every step, a reduction or reduce-window from a non-identity initial value,
PoCL's vector sines of a huge lane, a narrow dot converted to f32.

Each value records how its result may be compared (``Value.ulps``): 0 is bit for bit
(integers, data movement and the correctly rounded float operations on bit-exact operands),
a number is an elementwise budget in units in the last place of its type (``ULPS``: the
transcendentals, whose C functions are not XLA's), and infinity is the order-dependent
comparison of ``differential`` (sums, dots, chains after a transcendental). ``Value.product``
marks a float product: XLA's LLVM contracts a product and a sum into one fused
multiply-add, ours does not (``FP_CONTRACT OFF``), so a sum of a product is not bit exact.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

if TYPE_CHECKING:
    from .layout_programs import Value, _Builder

FLOATS = ("f16", "bf16", "f32", "f64")
SIGNED = ("s8", "s16", "s32", "s64")
UNSIGNED = ("u8", "u16", "u32", "u64")
INTEGERS = SIGNED + UNSIGNED
NUMPY = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
         "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64, "u8": np.uint8,
         "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "pred": np.bool_}
# the element type a chain starts in: f32 most often, as the layout steps expect
START_TYPES = ("f32",) * 6 + FLOATS + INTEGERS + ("f64",)

# elementwise budget in ulps of the result type for opcodes whose C function is not XLA's
# (measured on the fuzzer's inputs; f16 and bf16 compute in f32 and round once: 1 ulp)
ULPS = {"exponential": 2, "exponential-minus-one": 2, "log": 2, "log-plus-one": 2,
        "rsqrt": 2, "cbrt": 2, "sine": 2, "cosine": 2, "tan": 4, "tanh": 4,
        "logistic": 4, "erf": 4, "power": 4, "atan2": 4}
NARROW_ULPS = 1
# a narrow contraction converted to f32: its f32 sum in another order
CONTRACTION_ULPS = 64
# the float unary opcodes XLA's and ours compute exactly (the same bits)
_EXACT_UNARY = ("abs", "negate", "sign", "floor", "ceil", "round-nearest-afz",
                "round-nearest-even", "sqrt", "copy")
FLOAT_UNARY = _EXACT_UNARY + tuple(ULPS.keys() - {"power", "atan2"})
INT_UNARY = ("abs", "negate", "sign", "not", "popcnt", "count-leading-zeros", "copy")
FLOAT_BINARY = ("add", "subtract", "multiply", "divide", "divide", "remainder", "power",
                "maximum", "minimum", "atan2")
INT_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "power", "maximum",
              "minimum", "and", "or", "xor", "shift-left", "shift-right-logical",
              "shift-right-arithmetic")
PRED_BINARY = ("and", "or", "xor")
DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
# reducer computations by name: (opcode, element types); module_text writes those a case uses
REDUCERS = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum",
            "and": "and", "or": "or"}

_SPECIAL_BITS = {
    "f32": [0x7fc00000, 0xffc00000, 0x7fc01234, 0xffc00321, 0x7f800000, 0xff800000, 0,
            0x80000000, 0x00000123, 0x80400000, 0x49742400, 0x7f7fffff, 0xff000000, 0x5f000000],
    # (no f64 denormal, open: glibc's pow of one under flush-to-zero is not yet ours)
    "f64": [0x7ff8000000000000, 0xfff8000000000000, 0x7ff8000000001234, 0x7ff0000000000000,
            0xfff0000000000000, 0, 0x8000000000000000, 0x412e848000000000,
            0x47efffffe0000000],
    "f16": [0x7e00, 0xfe00, 0x7e12, 0x7c00, 0xfc00, 0, 0x8000, 0x0003, 0x7bff, 0xfbff],
    "bf16": [0x7fc0, 0xffc0, 0x7fd2, 0x7f80, 0xff80, 0, 0x8000, 0x0003, 0x7f7f, 0x4974,
             0xff00],
}


def is_float(etype: str) -> bool:
    return etype in FLOATS


def data(rng: np.random.Generator, etype: str, dims: tuple[int, ...],
         special: float, huge: bool = True) -> np.ndarray:
    """Random values of ``etype``; floats normal, with a fraction ``special`` of NaNs
    (payloads, both signs), infinities, signed zeros, denormals and huge values (1e6 to
    3e38: PoCL's vector sine was wrong on every lane beside one); integers small, or over
    the whole range (overflow, shifts and divisions by zero) in one case of four. Without
    ``huge``, no special value above 1e6."""
    np_type = NUMPY[etype]
    if etype == "pred":
        return np.asarray(rng.random(dims) < 0.5).reshape(dims)
    if etype in FLOATS:
        out = np.asarray(rng.standard_normal(dims) * float(rng.choice((1.0, 1.0, 4.0, 100.0))),
                         np.float32).astype(np_type).reshape(dims)
        if special and out.size:
            bits = np.array(_SPECIAL_BITS[etype], f"u{np.dtype(np_type).itemsize}")
            if not huge:
                with np.errstate(invalid="ignore"):
                    bits = bits[~(np.abs(bits.view(np_type).astype(np.float64)) > 1e6)
                                | np.isinf(bits.view(np_type).astype(np.float64))]
            pick = rng.random(out.shape) < special
            out[pick] = bits.view(np_type)[rng.integers(0, bits.size, size=int(pick.sum()))]
        return out
    info = np.iinfo(np_type)
    if rng.random() < 0.25:
        return np.asarray(rng.integers(info.min, info.max, size=dims, endpoint=True,
                                       dtype=np_type)).reshape(dims)
    return np.asarray(rng.integers(max(info.min, -40), 40, size=dims)).astype(np_type) \
        .reshape(dims)


def constant_text(rng: np.random.Generator, etype: str, dims: tuple[int, ...]) -> str:
    """A constant literal: a scalar or a small array (special values included)."""
    values = data(rng, etype, dims, 0.2)
    if etype in FLOATS and rng.random() < 0.5:   # also round divisors: 3, 0.1, 255
        values = np.full(dims, float(rng.choice((3.0, 0.1, 255.0, 7.0, -0.5))), np.float32) \
            .astype(NUMPY[etype])

    def item(v) -> str:
        if etype == "pred":
            return "true" if v else "false"
        if etype not in FLOATS:
            return str(int(v))
        f = float(v)
        if math.isnan(f):
            return "nan" if not np.signbit(f) else "-nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return repr(f)

    def nest(a: np.ndarray) -> str:
        return item(a[()]) if a.ndim == 0 else "{" + ", ".join(nest(x) for x in a) + "}"
    return f"constant({nest(np.asarray(values))})"


def combine(*operands: Value) -> float:
    """The comparison class of an exact operation on ``operands``: exact when all are."""
    return 0.0 if all(v.ulps == 0 for v in operands) else math.inf


def _operand(b: _Builder, x: Value) -> Value:
    """A second operand of ``x``'s shape and type: a parameter, a broadcast parameter, a
    broadcast scalar constant or an array constant."""
    r = b.rng.random()
    if r < 0.5:
        return b.same_shape(x)
    if r < 0.8 or not x.dims or int(np.prod(x.dims)) > 64:
        c = b.emit((), constant_text(b.rng, x.etype, ()), x.etype, ulps=0)
        v = b.emit(x.dims, f"broadcast({c.name}), dimensions={{}}", x.etype, ulps=0)
        v.constant = True
        return v
    return b.emit(x.dims, constant_text(b.rng, x.etype, x.dims), x.etype, ulps=0)


def typed_unary(b: _Builder, x: Value) -> Value:
    if x.etype == "pred":
        return b.emit(x.dims, f"not({x.name})", "pred", ulps=x.ulps)
    if x.etype not in FLOATS:   # (abs and sign of unsigned integers XLA does not take)
        ops = [o for o in INT_UNARY if x.etype not in UNSIGNED or o not in ("abs", "sign")]
        op = str(b.rng.choice(ops))
        return b.emit(x.dims, f"{op}({x.name})", x.etype, ulps=x.ulps)
    op = str(b.rng.choice(FLOAT_UNARY))
    if op in _EXACT_UNARY:
        keeps = op in ("negate", "copy")
        return b.emit(x.dims, f"{op}({x.name})", x.etype, ulps=x.ulps,
                      product=x.product and keeps)
    budget = (NARROW_ULPS if x.etype in ("f16", "bf16") else ULPS[op]) if x.ulps == 0 \
        else math.inf
    return b.emit(x.dims, f"{op}({x.name})", x.etype, ulps=budget)


def typed_binary(b: _Builder, x: Value) -> Value:
    """Every binary opcode of ``x``'s type, with a parameter or constant as the other side."""
    y = _operand(b, x)
    ops = FLOAT_BINARY if x.etype in FLOATS else PRED_BINARY if x.etype == "pred" \
        else INT_BINARY
    op = str(b.rng.choice(ops))
    a, c = (x, y) if b.rng.random() < 0.6 else (y, x)
    if y.constant and x.etype in FLOATS and b.rng.random() < 0.4:
        op, a, c = "divide", x, y       # XLA multiplies by the reciprocal
    ulps, product = combine(a, c), False
    if x.etype in FLOATS:
        if op in ("power", "atan2"):
            ulps = (NARROW_ULPS if x.etype in ("f16", "bf16") else ULPS[op]) if ulps == 0 \
                else math.inf
        if op in ("add", "subtract") and (a.product or c.product):
            ulps = math.inf        # XLA's fused multiply-add
        product = op == "multiply" or (op == "divide" and c.constant)
    return b.emit(x.dims, f"{op}({a.name}, {c.name})", x.etype, ulps=ulps, product=product)


def compare_select(b: _Builder, x: Value) -> Value:
    """A compare in any direction (NaN operands included), then a select or the pred."""
    y = _operand(b, x)
    direction = str(b.rng.choice(DIRECTIONS))
    pred = b.emit(x.dims, f"compare({x.name}, {y.name}), direction={direction}", "pred",
                  ulps=combine(x, y))
    if b.rng.random() < 0.25:
        return pred
    return b.emit(x.dims, f"select({pred.name}, {x.name}, {y.name})", x.etype,
                  ulps=combine(pred, x, y))


def clamp(b: _Builder, x: Value) -> Value:
    if x.etype == "pred":
        return typed_unary(b, x)
    lo = b.emit((), constant_text(b.rng, x.etype, ()), x.etype, ulps=0)
    hi = b.param(x.dims, x.etype) if b.rng.random() < 0.3 else \
        b.emit((), constant_text(b.rng, x.etype, ()), x.etype, ulps=0)
    return b.emit(x.dims, f"clamp({lo.name}, {x.name}, {hi.name})", x.etype,
                  ulps=combine(x, lo, hi))


def convert(b: _Builder, x: Value) -> Value:
    """A convert to any type, or a bitcast-convert to one of the same width. A convert of
    an inexact float to an integer or pred is inexact (the rounding may cross a step)."""
    to = str(b.rng.choice(FLOATS + INTEGERS + ("pred",)))
    width = {"f16": 2, "bf16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4,
             "f64": 8, "s64": 8, "u64": 8, "s8": 1, "u8": 1}
    if b.rng.random() < 0.3 and x.etype in width and x.ulps == 0:   # (the bits of a sum's
        # NaN are whichever NaN its order met first)
        same = [t for t, w in width.items() if w == width[x.etype] and t != x.etype]
        to = str(b.rng.choice(same))
        return b.emit(x.dims, f"bitcast-convert({x.name})", to, ulps=combine(x))
    ulps = x.ulps if to in FLOATS else combine(x)
    if x.ulps and to in FLOATS and x.etype in FLOATS and math.isfinite(x.ulps):
        ulps = x.ulps * max(1.0, _eps(x.etype) / _eps(to))
    return b.emit(x.dims, f"convert({x.name})", to, ulps=ulps)


def _eps(etype: str) -> float:
    return float(ml_dtypes.finfo(NUMPY[etype]).eps)


def reduce_any(b: _Builder, x: Value) -> Value:
    """A reduce by add, multiply, maximum, minimum, and or or over some dimensions, from the
    reducer's identity or from another value (XLA reads that once per window of its tree)."""
    if not x.dims:
        return typed_unary(b, x)
    if x.etype in ("f32", "f64") and x.ulps == 0 and b.rng.random() < 0.3:
        # a narrow sum, which XLA rounds at every step of its tree (windows of 32)
        x = b.emit(x.dims, f"convert({x.name})", str(b.rng.choice(("f16", "bf16"))), ulps=0)
    kinds = ("and", "or") if x.etype == "pred" else ("add", "mul", "max", "min") + \
        (("and", "or") if x.etype in INTEGERS else ())
    kind = str(b.rng.choice(kinds))
    count = int(b.rng.integers(1, len(x.dims) + 1))
    reduced = sorted(int(d) for d in b.rng.choice(len(x.dims), size=count, replace=False))
    init = b.emit((), _init(b, kind, x.etype), x.etype, ulps=0)
    dims = tuple(d for i, d in enumerate(x.dims) if i not in reduced)
    b.case.reducers.add((kind, x.etype))
    exact = x.etype not in ("f32", "f64") or kind in ("max", "min")
    ulps = combine(x) if exact else math.inf
    if kind == "mul" and x.etype in ("f16", "bf16"):
        ulps = math.inf     # products of many terms overflow or vanish at different steps
    return b.emit(dims, f"reduce({x.name}, {init.name}), dimensions={{{_csv(reduced)}}}, "
                  f"to_apply={kind}_{x.etype}", x.etype, ulps=ulps)


def _init(b: _Builder, kind: str, etype: str) -> str:
    identity = {"add": "0", "mul": "1", "or": "false" if etype == "pred" else "0",
                "and": "true" if etype == "pred" else "-1" if etype in SIGNED else
                str(np.iinfo(NUMPY[etype]).max) if etype in UNSIGNED else "0",
                "max": "-inf" if etype in FLOATS else "false" if etype == "pred" else
                str(np.iinfo(NUMPY[etype]).min) if etype != "pred" else "0",
                "min": "inf" if etype in FLOATS else "true" if etype == "pred" else
                str(np.iinfo(NUMPY[etype]).max) if etype != "pred" else "1"}[kind]
    if b.rng.random() < 0.5:
        return f"constant({identity})"
    return constant_text(b.rng, etype, ()).replace("constant(nan)", "constant(1)") \
        .replace("constant(-nan)", "constant(-1)")


def reduce_window_any(b: _Builder, x: Value) -> Value:
    """A reduce-window with padding, strides and a reducer from an identity or not."""
    if not x.dims or x.etype == "pred":
        return typed_unary(b, x)
    kind = str(b.rng.choice(("add", "max", "min", "mul")))
    sizes, strides, pads, dims = [], [], [], []
    for d in x.dims:
        size = int(b.rng.integers(1, min(d, 3) + 1))
        stride = int(b.rng.choice((1, 1, 2)))
        lo, hi = int(b.rng.integers(0, 3)), int(b.rng.integers(0, 3))
        sizes.append(size)
        strides.append(stride)
        pads.append(f"{lo}_{hi}")
        dims.append((d + lo + hi - size) // stride + 1)
    init = b.emit((), _init(b, kind, x.etype), x.etype, ulps=0)
    b.case.reducers.add((kind, x.etype))
    exact = x.etype in INTEGERS or kind in ("max", "min")
    return b.emit(tuple(dims), f"reduce-window({x.name}, {init.name}), window={{size="
                  f"{'x'.join(map(str, sizes))} stride={'x'.join(map(str, strides))} "
                  f"pad={'x'.join(pads)}}}, to_apply={kind}_{x.etype}", x.etype,
                  ulps=combine(x) if exact else math.inf)


def narrow_contraction(b: _Builder, x: Value) -> Value:
    """A bf16 or f16 dot or convolution (XLA computes it in f32 and rounds once), often
    converted to f32 at once, which XLA computes as an f32 contraction (not rounded). Its
    elements are compared within one ulp of the narrow type, most of them bit for bit, or
    within ``CONTRACTION_ULPS`` of f32 (``mostly``: of the largest element over 64 where the
    sum cancels): a rounded f32 result is thousands of ulps off."""
    t = str(b.rng.choice(("bf16", "f16")))
    m, k, n = (int(b.rng.choice((1, 3, 8, 16))) for _ in range(3))
    # (no huge inputs, open: ours sums a narrow contraction's products exactly, so a product
    # past f32's range is not the -inf XLA's rounded one is, and an inf summed beside it
    # stays inf where XLA's sum is NaN)
    lhs, rhs = b.param((m, k), t, huge=False), b.param((k, n), t, huge=False)
    if b.rng.random() < 0.5:
        v = b.emit((m, n), f"dot({lhs.name}, {rhs.name}), lhs_contracting_dims={{1}}, "
                   "rhs_contracting_dims={0}", t, ulps=NARROW_ULPS, mostly=True)
    else:
        lhs4 = b.emit((1, m, k, 1), f"reshape({lhs.name})", t, ulps=0)
        rhs4 = b.emit((k, n, 1, 1), f"reshape({rhs.name})", t, ulps=0)
        v = b.emit((1, m, n, 1), f"convolution({lhs4.name}, {rhs4.name}), window={{size=1x1}}, "
                   "dim_labels=b0f1_io01->b0f1", t, ulps=NARROW_ULPS, mostly=True)
        v = b.emit((m, n), f"reshape({v.name})", t, ulps=NARROW_ULPS, mostly=True)
    if b.rng.random() < 0.6:    # XLA's convert reads the f32 sum (70.992, not bf16's 71)
        v = b.emit(v.dims, f"convert({v.name})", "f32", ulps=CONTRACTION_ULPS, mostly=True)
    return v


def _csv(xs) -> str:
    return ",".join(str(int(x)) for x in xs)


def reducer_text(kind: str, etype: str) -> list[str]:
    return [f"{kind}_{etype} {{", f"  a = {etype}[] parameter(0)",
            f"  b = {etype}[] parameter(1)", f"  ROOT r = {etype}[] {REDUCERS[kind]}(a, b)",
            "}", ""]
