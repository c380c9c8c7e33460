"""The elementwise templates run on the default OpenCL device against XLA CPU's own results.

``data/xla_golden.npz`` holds inputs and XLA's outputs (see make_xla_golden.py); everything
compared against it must match bit for bit (any NaN matches any NaN). Transcendental functions
are compared with the exact value (numpy in f64) within per-op ulp bounds instead, since XLA's
own approximations are not correctly rounded either.
"""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import scipy.special

from runtime.codegen import templates as ew
from runtime.errors import HloUnsupportedError
from tests.clharness import run_cases
from tests.codegen.golden_cases import (BITCAST_PAIRS, COMPARE_DIRECTIONS, CONVERT_TYPES,
                                        FLOAT_BINARY, FLOAT_TYPES, FLOAT_UNARY, INT_BINARY,
                                        INT_TYPES, INT_UNARY, REDUCE_PRECISION, SHIFTS,
                                        numpy_type, raw_bits)

GOLDEN = np.load(Path(__file__).parent / "data" / "xla_golden.npz")
_UNSIGNED_OF_WIDTH = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}


def _float_view(et: str, bits: np.ndarray) -> np.ndarray:
    return np.asarray(bits).view(numpy_type(et))


def assert_same_bits(et: str, got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal bits, except that any NaN matches any NaN."""
    got, want = raw_bits(got), raw_bits(want)
    differ = got != want
    if et in FLOAT_TYPES:
        with np.errstate(invalid="ignore"):
            both_nan = (np.isnan(_float_view(et, got).astype(np.float64))
                        & np.isnan(_float_view(et, want).astype(np.float64)))
        differ &= ~both_nan
    if differ.any():
        first = np.flatnonzero(differ)[:5]
        pytest.fail(f"{what}: {differ.sum()} of {differ.size} differ; first at {first.tolist()}:"
                    f" got {got[first].tolist()} want {want[first].tolist()}")


@pytest.mark.parametrize("et", INT_TYPES)
def test_integer_arithmetic_bitwise_and_unary_match_xla(et):
    a, b = GOLDEN[f"in/int/{et}/a"], GOLDEN[f"in/int/{et}/b"]
    cases = {op: ew.binary(op, et, "x0", "x1") for op in INT_BINARY}
    cases.update({op: ew.unary(op, et, et, "x0") for op in INT_UNARY
                  if f"int/{et}/{op}" in GOLDEN})
    got = run_cases([et, et], et, cases, [a, b])
    for op in cases:
        assert_same_bits(et, got[op], GOLDEN[f"int/{et}/{op}"], f"{op} on {et}")


@pytest.mark.parametrize("et", INT_TYPES)
def test_shifts_by_every_amount_from_minus_2_to_70_match_xla(et):
    a, b = GOLDEN[f"in/shift/{et}/a"], GOLDEN[f"in/shift/{et}/b"]
    got = run_cases([et, et], et, {op: ew.binary(op, et, "x0", "x1") for op in SHIFTS}, [a, b])
    for op in SHIFTS:
        assert_same_bits(et, got[op], GOLDEN[f"shift/{et}/{op}"], f"{op} on {et}")


@pytest.mark.parametrize("et", INT_TYPES)
def test_integer_compare_matches_xla(et):
    a, b = GOLDEN[f"in/int/{et}/a"], GOLDEN[f"in/int/{et}/b"]
    cases = {d: ew.compare(d, None, et, "x0", "x1") for d in COMPARE_DIRECTIONS}
    got = run_cases([et, et], "pred", cases, [a, b])
    for d in COMPARE_DIRECTIONS:
        np.testing.assert_array_equal(got[d].astype(bool), GOLDEN[f"int/{et}/compare-{d}"],
                                      err_msg=f"compare {d} on {et}")


def test_hand_checked_integer_edge_cases():
    """A few of XLA's answers spelled out (verified with jax 0.10.2 on CPU)."""
    a = np.array([7, -7, -7, 5, -2147483648, -2147483648, 3, 3, 3, -1, -1, 2, 0, 1],
                 np.int32)
    b = np.array([-2, 2, 0, 0, -1, -1, 100, 64, 36, -3, -4, -1, -1, -5], np.int32)
    ops = ["divide", "remainder", "divide", "remainder", "divide", "remainder", "power",
           "power", "power", "power", "power", "power", "power", "power"]
    got = run_cases(["s32", "s32"], "s32", {op: ew.binary(op, "s32", "x0", "x1")
                                           for op in set(ops)}, [a, b])
    result = [int(got[op][k]) for k, op in enumerate(ops)]
    assert result == [-3, -1, -1, 5, -2147483648, 0, -1953380655, 1, -1953380655, -1, 1, 0,
                      0, 1]


@pytest.mark.parametrize("et", FLOAT_TYPES)
def test_float_arithmetic_rounding_minmax_and_clamp_match_xla(et):
    a, b, c = (GOLDEN[f"in/float/{et}/{k}"] for k in "abc")
    cases = {op: ew.binary(op, et, "x0", "x1") for op in FLOAT_BINARY}
    cases.update({op: ew.unary(op, et, et, "x0") for op in FLOAT_UNARY})
    cases["clamp"] = ew.clamp(et, "x2", "x0", "x1")
    got = run_cases([et, et, et], et, cases, [a, b, c])
    for op in cases:
        assert_same_bits(et, got[op], GOLDEN[f"float/{et}/{op}"], f"{op} on {et}")


@pytest.mark.parametrize("et", FLOAT_TYPES)
def test_float_compare_float_and_totalorder_match_xla(et):
    a, b = GOLDEN[f"in/float/{et}/a"], GOLDEN[f"in/float/{et}/b"]
    cases = {f"{d}-{kind}": ew.compare(d, kind, et, "x0", "x1")
             for d in COMPARE_DIRECTIONS for kind in ("FLOAT", "TOTALORDER")}
    cases["is-finite"] = ew.unary("is-finite", et, "pred", "x0")
    got = run_cases([et, et], "pred", cases, [a, b])
    for name in cases:
        key = f"float/{et}/compare-{name}" if name != "is-finite" else f"float/{et}/is-finite"
        want = GOLDEN[key] if key in GOLDEN else np.isfinite(
            _float_view(et, a).astype(np.float64))
        np.testing.assert_array_equal(got[name].astype(bool), want, err_msg=f"{name} on {et}")


@pytest.mark.parametrize("et", FLOAT_TYPES)
def test_reduce_precision_matches_xla(et):
    values = GOLDEN[f"in/reduce-precision/{et}"]
    cases = {f"{e}-{m}": ew.reduce_precision(et, "x0", e, m) for e, m in REDUCE_PRECISION}
    got = run_cases([et], et, cases, [values])
    for name in cases:
        assert_same_bits(et, got[name], GOLDEN[f"reduce-precision/{et}/{name}"],
                         f"reduce-precision {name} on {et}")


def _as_u64_bits(et: str, expr: str) -> str:
    """``expr`` (a value of ``et``) as its storage bits widened to u64."""
    if et == "pred":
        return ew.convert("pred", "u64", expr)
    unsigned = _UNSIGNED_OF_WIDTH[numpy_type(et).itemsize]
    return ew.convert(unsigned, "u64", ew.bitcast_convert(et, unsigned, expr))


@pytest.mark.parametrize("src", CONVERT_TYPES)
def test_convert_to_every_type_matches_xla(src):
    values = GOLDEN[f"in/convert/{src}"]
    cases = {dst: _as_u64_bits(dst, ew.convert(src, dst, "x0")) for dst in CONVERT_TYPES}
    got = run_cases([src], "u64", cases, [values])
    for dst in CONVERT_TYPES:
        want = GOLDEN[f"convert/{src}/{dst}"]
        assert_same_bits(dst, got[dst].astype(want.dtype), want, f"convert {src} -> {dst}")


def test_bitcast_convert_moves_bits_unchanged():
    for src, dst in BITCAST_PAIRS:
        values = GOLDEN[f"in/bitcast/{src}"]
        got = run_cases([src], dst, {"b": ew.bitcast_convert(src, dst, "x0")}, [values])["b"]
        np.testing.assert_array_equal(got.view(GOLDEN[f"bitcast/{src}/{dst}"].dtype),
                                      GOLDEN[f"bitcast/{src}/{dst}"],
                                      err_msg=f"bitcast-convert {src} -> {dst}")


def test_bitcast_convert_split_and_join_are_little_endian():
    words = np.array([0x0123456789ABCDEF, 0xFFFFFFFF00000001], np.uint64)
    parts = {f"part{k}": ew.bitcast_convert_split("u64", "u16", "x0", str(k)) for k in range(4)}
    got = run_cases(["u64"], "u16", parts, [words])
    assert [int(got[f"part{k}"][0]) for k in range(4)] == [0xCDEF, 0x89AB, 0x4567, 0x0123]
    halves = np.array([0x3F800000, 0x40000000], np.uint32)
    joined = ew.bitcast_convert_join("u32", "f64", ["x0", "x0"])
    got = run_cases(["u32"], "f64", {"j": joined}, [halves])["j"]
    assert got.view(np.uint64).tolist() == [0x3F8000003F800000, 0x4000000040000000]


# --- transcendental functions: per-op ulp bounds against the exact value ----------------

_EXACT = {
    "exponential": np.exp, "exponential-minus-one": np.expm1, "log": np.log,
    "log-plus-one": np.log1p, "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt,
    "sine": np.sin, "cosine": np.cos, "tan": np.tan, "tanh": np.tanh,
    "logistic": scipy.special.expit, "erf": scipy.special.erf, "sinh": np.sinh,
    "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
}
# ulp bounds (of the result type), a little above what PoCL measured; OpenCL's own bounds are
# 2-16 ulp for these functions. tanh is XLA's rational approximation (5.2 ulp at worst over 4M
# samples; XLA's own measured 4.5).
_ULPS = {"exponential": 2, "exponential-minus-one": 3, "log": 2, "log-plus-one": 2,
         "rsqrt": 2, "cbrt": 2, "sine": 2, "cosine": 2, "tan": 3, "tanh": 6, "logistic": 3,
         "erf": 3, "sinh": 3, "cosh": 3, "asin": 2, "acos": 2, "atan": 2, "asinh": 3,
         "acosh": 3, "atanh": 3, "power": 3, "atan2": 3}
_DOMAIN = {"log": (1e-30, 1e30), "log-plus-one": (-0.999, 1e30), "rsqrt": (1e-30, 1e30),
           "asin": (-1, 1), "acos": (-1, 1), "acosh": (1, 1e30), "atanh": (-0.999, 0.999),
           "exponential": (-80, 80), "exponential-minus-one": (-80, 80), "sinh": (-80, 80),
           "cosh": (-80, 80)}
_SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, np.inf, -np.inf, np.nan])


def _sample(op: str, et: str) -> np.ndarray:
    rng = np.random.default_rng(20)
    lo, hi = _DOMAIN.get(op, (-1e4, 1e4))
    magnitude = np.exp(rng.uniform(-12, np.log(max(abs(lo), abs(hi))), 400))
    values = np.concatenate([_SPECIALS, np.clip(magnitude * rng.choice([-1, 1], 400), lo, hi),
                             rng.uniform(lo, hi, 200)])
    with np.errstate(over="ignore"):
        return values.astype(numpy_type(et))


def _ulp_error(et: str, got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the result type's spacing at ``exact`` (inf where the two
    disagree on NaN or infinity)."""
    got64 = got.astype(np.float64)
    info = ml_dtypes.finfo(numpy_type(et))
    with np.errstate(all="ignore"):
        exponent = np.floor(np.log2(np.maximum(np.abs(exact), float(info.tiny))))
        spacing = np.exp2(exponent - info.nmant)
        error = np.abs(got64 - exact) / spacing
    special = ~np.isfinite(exact) | ~np.isfinite(got64)
    same_special = (np.isnan(exact) & np.isnan(got64)) | (exact == got64)
    return np.where(special, np.where(same_special, 0.0, np.inf), error)


def _check_ulps(op: str, et: str, got: np.ndarray, exact: np.ndarray, inputs) -> None:
    tiny = float(ml_dtypes.finfo(numpy_type(et)).tiny)
    relevant = np.ones(len(exact), bool)
    for x in inputs:  # denormals are flushed, XLA's CPU backend agrees with no libm there
        relevant &= ~((np.abs(x) < tiny) & (x != 0))
    relevant &= ~((np.abs(exact) < tiny) & (exact != 0))
    error = _ulp_error(et, got.astype(np.float64), exact)[relevant]
    worst = int(np.argmax(error))
    assert error[worst] <= _ULPS[op], (
        f"{op} on {et}: {error[worst]:.3g} ulp at input "
        f"{[np.asarray(x)[relevant][worst] for x in inputs]}")


@pytest.mark.parametrize("et", FLOAT_TYPES)
def test_transcendental_functions_within_ulp_bounds(et):
    for op, exact_fn in _EXACT.items():
        values = _sample(op, et)
        got = run_cases([et], et, {op: ew.unary(op, et, et, "x0")},
                        [_storage(et, values)])[op]
        with np.errstate(all="ignore"):
            exact = exact_fn(values.astype(np.float64))
            if et != "f64":
                exact = exact.astype(numpy_type(et)).astype(np.float64)
        _check_ulps(op, et, _float_view(et, got), exact, [values.astype(np.float64)])


@pytest.mark.parametrize("et", FLOAT_TYPES)
def test_power_and_atan2_follow_c_edge_cases_within_ulp_bounds(et):
    special = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -3.0, np.inf, -np.inf, np.nan,
                        1e30, -1e30])
    with np.errstate(over="ignore"):
        a = np.repeat(special, len(special)).astype(numpy_type(et))
        b = np.tile(special, len(special)).astype(numpy_type(et))
    got = run_cases([et, et], et, {op: ew.binary(op, et, "x0", "x1")
                                   for op in ("power", "atan2")}, [_storage(et, a),
                                                                   _storage(et, b)])
    with np.errstate(all="ignore"):
        exact = {"power": np.power(a.astype(np.float64), b.astype(np.float64)),
                 "atan2": np.arctan2(a.astype(np.float64), b.astype(np.float64))}
    for op in ("power", "atan2"):
        with np.errstate(all="ignore"):
            want = exact[op] if et == "f64" else exact[op].astype(numpy_type(et)).astype(
                np.float64)
        _check_ulps(op, et, _float_view(et, got[op]), want,
                    [a.astype(np.float64), b.astype(np.float64)])


def _storage(et: str, values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, numpy_type(et))
    return values.view(np.uint16) if et in ("f16", "bf16") else values


# --- the tables themselves ----------------------------------------------------------------

def _templates() -> list[str]:
    tables = [ew._UNARY, ew._BINARY, ew._COMPARE_OPERAND, ew._CLAMP]
    return [t for table in tables for t in table.values()] + list(ew._CLZ.values())


def test_every_template_uses_each_operand_at_most_once():
    """Operands may be whole expressions; evaluating one twice would grow fused code."""
    for template in _templates():
        for name in ("x", "a", "b", "lo", "hi"):
            uses = len(re.findall(rf"\${name}\b", template))
            assert uses <= 1, f"{template!r} uses ${name} {uses} times"


def test_unsupported_combinations_name_the_opcode_and_type():
    with pytest.raises(HloUnsupportedError, match="shift-left.*f32"):
        ew.binary("shift-left", "f32", "a", "b")
    with pytest.raises(HloUnsupportedError, match="exponential.*s32"):
        ew.unary("exponential", "s32", "s32", "x")
    with pytest.raises(HloUnsupportedError, match="UNSIGNED.*s32"):
        ew.compare("LT", "UNSIGNED", "s32", "a", "b")
    with pytest.raises(HloUnsupportedError, match="c64"):
        ew.unary("abs", "c64", "f32", "x")
    with pytest.raises(HloUnsupportedError, match="changes the width"):
        ew.bitcast_convert("f32", "f64", "x")


def test_f16_and_bf16_results_are_rounded_after_each_op_but_exact_ops_are_not():
    """Exact ops are not rounded in f16, which XLA computes them in; in bf16, which XLA
    computes them in f32 and converts back, they are (only a NaN changes: it becomes the
    canonical one with its sign), but for a copy."""
    assert ew.binary("add", "bf16", "a", "b") == "xla_round_bf16(($a + $b))".replace("$", "")
    assert ew.binary("add", "f32", "a", "b") == "(a + b)"
    assert ew.unary("negate", "f16", "f16", "x") == "(-x)"
    assert ew.binary("maximum", "f16", "a", "b") == "xla_nan_maximum_f16_float(a, b)"
    assert ew.binary("maximum", "bf16", "a", "b") == "xla_round_bf16(xla_fmax_float(a, b))"
    assert ew.unary("copy", "bf16", "bf16", "x") == "x"


@pytest.mark.parametrize("et", INT_TYPES)
def test_mulhi_is_the_high_half_of_the_full_product(et):
    """jax 0.10.2 cannot emit mulhi, so the reference is the definition itself."""
    a, b = GOLDEN[f"in/int/{et}/a"], GOLDEN[f"in/int/{et}/b"]
    got = run_cases([et, et], et, {"mulhi": ew.binary("mulhi", et, "x0", "x1")}, [a, b])
    bits = numpy_type(et).itemsize * 8
    want = [(int(x) * int(y)) >> bits for x, y in zip(a, b)]
    wrapped = np.array([w & ((1 << bits) - 1) for w in want], np.uint64).astype(numpy_type(et))
    np.testing.assert_array_equal(got["mulhi"], wrapped)
