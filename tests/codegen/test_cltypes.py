"""Element types in OpenCL C: the type table, literals, f16/bf16 storage, the prelude."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from runtime.codegen import cltypes as ct
from runtime.codegen import templates as ew
from runtime.errors import HloUnsupportedError
from runtime.hlo.dtypes import BYTE_FLOATS, SMALL_FLOATS
from tests.clharness import run_cases
from tests.codegen.golden_cases import numpy_type


def test_storage_and_compute_types():
    table = {et: (ct.storage_type(et), ct.compute_type(et)) for et in ct.CL_TYPES}
    assert table == {
        "pred": ("uchar", "uchar"), "s8": ("char", "char"), "s16": ("short", "short"),
        "s32": ("int", "int"), "s64": ("long", "long"), "u8": ("uchar", "uchar"),
        "u16": ("ushort", "ushort"), "u32": ("uint", "uint"), "u64": ("ulong", "ulong"),
        "f16": ("ushort", "float"), "bf16": ("ushort", "float"), "f32": ("float", "float"),
        "f64": ("double", "double"),
        **{name: ("uchar", "float") for name in BYTE_FLOATS + SMALL_FLOATS},
        "s2": ("uchar", "char"), "s4": ("uchar", "char"), "u2": ("uchar", "uchar"),
        "u4": ("uchar", "uchar"),
    }
    assert ct.needs_fp64("f64") and not ct.needs_fp64("f32")


def test_load_store_round_text():
    assert ct.load("f32", "p", "i") == "p[i]"
    assert ct.load("f16", "p", "i + 1") == "xla_f16_to_float(p[i + 1])"
    assert ct.store("pred", "q", "i", "a < b") == "q[i] = (uchar)((a < b) != 0);"
    assert ct.store("bf16", "q", "i", "v") == "q[i] = xla_float_to_bf16(v);"
    assert ct.round_to_storage("f32", "x") == "x"
    assert ct.round_to_storage("f16", "x") == "xla_round_f16(x)"
    assert ct.load("f8e5m2", "p", "i") == "xla_f8e5m2_to_float(p[i])"
    assert ct.round_to_storage("f8e4m3fn", "x") == "xla_round_f8e4m3fn(xla_round_f16(x))"


@pytest.mark.parametrize("name, reason", [
    ("s1", "2 bits and more"), ("u1", "2 bits and more"), ("c64", "complex"),
    ("token", "not an array element type"), ("f99", "not an HLO element type"),
])
def test_unsupported_element_types_raise_naming_the_type(name, reason):
    with pytest.raises(HloUnsupportedError, match=rf"{name}.*{reason}"):
        ct.storage_type(name)


@pytest.mark.parametrize("et, value, text", [
    ("pred", True, "((uchar)1)"),
    ("s8", -128, "((char)-128)"),
    ("u16", 65535, "((ushort)65535)"),
    ("s32", -2147483648, "(-2147483647 - 1)"),
    ("s32", -5, "(-5)"),
    ("u32", 4294967295, "4294967295u"),
    ("s64", -9223372036854775808, "(-9223372036854775807L - 1L)"),
    ("u64", 18446744073709551615, "18446744073709551615UL"),
    ("f32", 1.0, "1.0f"),
    ("f32", -0.0, "(-0.0f)"),
    ("f32", 0.1, "0x1.99999ap-4f"),
    ("f32", -3.0, "(-3.0f)"),
    ("f32", np.inf, "INFINITY"),
    ("f32", -np.inf, "(-INFINITY)"),
    ("f32", np.float32(1e-45), "0x1p-149f"),
    ("f32", np.uint32(0xFFC00001).view(np.float32), "as_float(0xffc00001u)"),
    ("f64", np.uint64(0x7FF0000000000001).view(np.float64), "as_double(0x7ff0000000000001UL)"),
    ("f64", 0.1, "0x1.999999999999ap-4"),
    ("f64", -np.inf, "(-((double)INFINITY))"),
    ("bf16", 1.0078125, "0x1.02p+0f"),
    ("f16", 65504.0, "65504.0f"),
])
def test_literals_are_exact_deterministic_text(et, value, text):
    assert ct.literal(et, value) == text


def test_literals_compile_to_the_same_bits():
    cases = {
        "f32": [0.1, -0.0, 1e-45, 3.4028235e38, np.inf, -np.inf,
                np.uint32(0x7FC00001).view(np.float32), np.uint32(0xFF800001).view(np.float32)],
        "f64": [0.1, -2.5, 5e-324, np.uint64(0x7FF0000000000001).view(np.float64)],
        "s64": [-9223372036854775808, 9223372036854775807, -1],
        "u64": [18446744073709551615, 0],
        "s8": [-128, 127],
        "bf16": [1.0078125, -np.inf],
        "f16": [65504.0, 6e-8],
    }
    for et, values in cases.items():
        values = np.array([np.asarray(v).astype(numpy_type(et)) for v in values])
        exprs = {str(k): ct.literal(et, v) for k, v in enumerate(values)}
        got = run_cases([et], et, exprs, [np.zeros(1, np.uint16 if et in ("f16", "bf16")
                                                   else numpy_type(et))])
        bits = values.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[
            values.itemsize])
        for k in range(len(values)):
            assert got[str(k)].view(bits.dtype)[0] == bits[k], f"{et} literal {values[k]!r}"


def test_negative_literals_are_safe_operands():
    """A negative literal is parenthesised, so templates like (-$x) cannot form "--"."""
    values = np.zeros(1, np.float32)
    exprs = {k: ew.unary("negate", "f32", "f32", ct.literal("f32", v))
             for k, v in (("zero", -0.0), ("three", -3.0), ("inf", -np.inf))}
    got = run_cases(["f32"], "f32", exprs, [values])
    assert [got[k][0] for k in exprs] == [0.0, 3.0, np.inf]
    assert not np.signbit(got["zero"][0])


def _all_16_bit_patterns() -> np.ndarray:
    return np.arange(65536, dtype=np.uint32).astype(np.uint16)


@pytest.mark.parametrize("et", ["f16", "bf16"])
def test_all_16_bit_patterns_survive_load_and_store(et):
    patterns = _all_16_bit_patterns()
    got = run_cases([et], et, {"copy": ew.unary("copy", et, et, "x0")}, [patterns])["copy"]
    np.testing.assert_array_equal(got, patterns)


@pytest.mark.parametrize("et", ["f16", "bf16"])
def test_all_16_bit_patterns_convert_to_f32_exactly(et):
    patterns = _all_16_bit_patterns()
    got = run_cases([et], "f32", {"up": ew.convert(et, "f32", "x0")}, [patterns])["up"]
    want = patterns.view(numpy_type(et)).astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    assert np.isnan(got[nan]).all()


def _f32_samples() -> np.ndarray:
    rng = np.random.default_rng(30)
    random_bits = rng.integers(0, 2 ** 32 - 1, 200_000, dtype=np.uint32, endpoint=True)
    halves = _all_16_bit_patterns().view(np.float16).astype(np.float32)
    ties = (np.arange(65536, dtype=np.uint32) << 16) | 0x8000  # exactly between two bf16
    return np.concatenate([random_bits.view(np.float32), halves, ties.view(np.float32)])


@pytest.mark.parametrize("et, reference", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_f32_to_half_types_rounds_to_nearest_even(et, reference):
    values = _f32_samples()
    got = run_cases(["f32"], et, {"down": ew.convert("f32", et, "x0")}, [values])["down"]
    with np.errstate(over="ignore", invalid="ignore"):
        want = values.astype(reference).view(np.uint16)
    nan = np.isnan(values)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    exponent_all_ones = 0x7C00 if et == "f16" else 0x7F80
    quiet_bit = 0x0200 if et == "f16" else 0x0040
    assert ((got[nan] & exponent_all_ones) == exponent_all_ones).all()
    assert ((got[nan] & quiet_bit) == quiet_bit).all(), "a converted NaN is quiet"


def test_arithmetic_on_f16_rounds_after_every_operation():
    a = np.array([2049.0, 0.1, 65504.0], np.float16)
    b = np.array([1.0, 0.2, 65504.0], np.float16)
    expr = ew.binary("add", "f16", ew.binary("add", "f16", "x0", "x1"), "x1")
    got = run_cases(["f16", "f16"], "f16", {"chain": expr},
                    [a.view(np.uint16), b.view(np.uint16)])["chain"].view(np.float16)
    with np.errstate(over="ignore"):
        want = (a + b) + b
    np.testing.assert_array_equal(got, want)


def test_prelude_contains_what_is_used_and_its_dependencies_in_library_order():
    code = "y = xla_round_bf16(x) + xla_pow_int(a, b);"
    names = ct.helpers_used(code)
    assert names == ["xla_round_bf16", "xla_pow_int"]
    prelude = ct.prelude_for(names)
    order = [prelude.index(f" {n}(") for n in
             ("xla_bf16_to_float", "xla_float_to_bf16", "xla_round_bf16", "xla_pow_int")]
    assert order == sorted(order)
    assert "xla_pow_long" not in prelude
    assert ct.prelude_for(reversed(names)) == prelude


def test_every_helper_needs_only_helpers_defined_before_it():
    library = ct.helper_library()
    seen: set[str] = set()
    for name, helper in library.items():
        assert set(helper.needs) <= seen, name
        seen.add(name)
        calls = set(ct.helpers_used(helper.code)) - {name}
        assert calls <= set(helper.needs), f"{name} calls {calls - set(helper.needs)}"


def test_unknown_helper_is_refused():
    with pytest.raises(KeyError, match="xla_nonexistent"):
        ct.prelude_for(["xla_nonexistent"])
