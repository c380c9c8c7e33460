"""The MLIR dictionary parser for typed-FFI attributes."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import HloParseError
from runtime.custom_calls.mlir_attributes import SCALAR_TYPES, parse_attributes
from runtime.errors import SourceLocation
from runtime.hlo.attributes import quote_string

JAX_EXAMPLE = ('{alpha = 2.000000e+00 : f64, arr = dense<[1, 2]> : tensor<2xi32>, n = 3 : i64, '
               'name = "abc", flag = true, i8 = 3 : i8, u = 7 : ui32}')


def test_what_jax_emits():
    got = parse_attributes(JAX_EXAMPLE)
    assert list(got) == ["alpha", "arr", "n", "name", "flag", "i8", "u"]
    assert type(got["alpha"]) is np.float64 and got["alpha"] == 2.0
    assert got["arr"].dtype == np.int32 and got["arr"].tolist() == [1, 2]
    assert type(got["n"]) is np.int64 and type(got["i8"]) is np.int8
    assert type(got["u"]) is np.uint32 and got["u"] == 7
    assert got["name"] == "abc" and got["flag"] is True


def test_every_value_form():
    got = parse_attributes(
        '{a = array<i64: 1, -2>, e = array<f32>, d = {x = 1.5 : f32, "q r" = "s\\"t"}, '
        'm = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>, s = dense<7> : tensor<3xi8>, '
        'nan = 0x7FC00000 : f32, inf = 0x7FF0000000000000 : f64, unit_key, w = unit, '
        'l = [1, "a", false], b = dense<[true, false]> : tensor<2xi1>, h = 1.5 : bf16, '
        'z = dense<> : tensor<0xf32>, plain_int = 5, plain_float = 2.5, hex = 0x10 : ui8}')
    assert got["a"].dtype == np.int64 and got["a"].tolist() == [1, -2]
    assert got["e"].dtype == np.float32 and got["e"].size == 0
    assert got["d"] == {"x": np.float32(1.5), "q r": 's"t'}
    assert got["m"].dtype == np.float32 and got["m"].tolist() == [[1, 2], [3, 4]]
    assert got["s"].tolist() == [7, 7, 7] and got["s"].dtype == np.int8
    assert np.isnan(got["nan"]) and type(got["nan"]) is np.float32
    assert got["inf"] == np.inf
    assert got["unit_key"] is True and got["w"] is True
    assert got["l"] == [1, "a", False]
    assert got["b"].dtype == np.bool_ and got["b"].tolist() == [True, False]
    assert got["h"].dtype == ml_dtypes.bfloat16 and float(got["h"]) == 1.5
    assert got["z"].shape == (0,)
    assert type(got["plain_int"]) is np.int64 and type(got["plain_float"]) is np.float64
    assert got["hex"] == 16 and type(got["hex"]) is np.uint8
    assert parse_attributes("") == {} and parse_attributes("{}") == {}


@pytest.mark.parametrize("text, message, column", [
    ("{a = }", "expects an attribute value", 6),
    ("{a = 300 : ui8}", "300 is not a valid ui8 value", 6),
    ("{a = 1 : q8}", "expects an element type", 10),
    ("{a = dense<[1, 2]> : tensor<3xi32>}", "has 2 values but its type tensor<3xi32> holds 3", 12),
    ("{a = 1", "expects '}' to close the attribute dictionary but sees the end", 7),
    ("{a = #foo}", "unexpected character '#'", 6),
    ("{a = 1, a = 2}", "attribute 'a' is given twice", 9),
    ("{a = 1.5 : i32}", "1.5 is not a valid i32 value", 6),
    ("{a = 1} x", "expects the end of the attribute dictionary", 9),
    ("{a = dense<[1]> : vector<1xi32>}", "expects a tensor type", 19),
    ("{a = dense<[true]> : tensor<1xf32>}", "true is not a valid f32 value", 13),
    ("{a = foo}", "expects an attribute value", 6),
])
def test_errors_point_at_the_problem(text, message, column):
    line = "  c = f32[] custom-call(), backend_config=" + text
    start = SourceLocation(7, line.index(text) + 1, line)
    with pytest.raises(HloParseError, match=message) as info:
        parse_attributes(text, location=start, instruction="c")
    assert info.value.line == 7 and info.value.instruction == "c"
    assert info.value.column - start.column + 1 == column


_INT_TYPES = [name for name, d in SCALAR_TYPES.items() if d.kind in "iu" and name != "index"]
_FLOAT_TYPES = ["f16", "f32", "f64"]


@st.composite
def typed_scalars(draw):
    if draw(st.booleans()):
        name = draw(st.sampled_from(_INT_TYPES))
        info = np.iinfo(SCALAR_TYPES[name])
        value = SCALAR_TYPES[name].type(draw(st.integers(int(info.min), int(info.max))))
        return f"{int(value)} : {name}", value
    name = draw(st.sampled_from(_FLOAT_TYPES))
    dtype = SCALAR_TYPES[name]
    value = dtype.type(draw(st.floats(allow_nan=False, allow_infinity=False, width=dtype.itemsize * 8)))
    return f"{float(value)!r} : {name}", value


values = st.recursive(
    st.one_of(
        typed_scalars(),
        st.booleans().map(lambda b: (str(b).lower(), b)),
        st.text(max_size=8).map(lambda s: (quote_string(s), s)),
        st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), max_size=4).map(
            lambda xs: (f"array<i32{': ' if xs else ''}{', '.join(map(str, xs))}>",
                        np.array(xs, np.int32))),
        st.lists(st.integers(-100, 100), min_size=1, max_size=4).map(
            lambda xs: (f"dense<[{', '.join(map(str, xs))}]> : tensor<{len(xs)}xi16>",
                        np.array(xs, np.int16))),
    ),
    lambda children: st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True),
                                     children, max_size=3).map(
        lambda d: ("{" + ", ".join(f"{k} = {v[0]}" for k, v in d.items()) + "}",
                   {k: v[1] for k, v in d.items()})),
    max_leaves=6)


def _same(a, b) -> bool:
    if isinstance(b, dict):
        return isinstance(a, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in b)
    if isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True), values,
                       max_size=4))
def test_printed_attributes_parse_back_to_the_same_values(entries):
    text = "{" + ", ".join(f"{k} = {v[0]}" for k, v in entries.items()) + "}"
    assert _same(parse_attributes(text), {k: v[1] for k, v in entries.items()})
