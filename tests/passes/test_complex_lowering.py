"""Complex values as pairs of reals (``passes/complex_lowering``): each operation's rule
against numpy, the entry's complex interface, custom calls on complex buffers, and the
operations that get a named error."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import runtime
from runtime.errors import HloUnsupportedError
from runtime.hlo.shape import ArrayShape
from runtime.passes.complex_lowering import lower_complex_in_place

RNG = np.random.default_rng(11)
N = 24


def _values(n: int = N, dtype=np.complex64) -> np.ndarray:
    """Mixed magnitudes and signs, with zero, real and imaginary entries."""
    z = RNG.standard_normal(n) * 1.5 + 1j * RNG.standard_normal(n) * 1.5
    z[:4] = [0, 2.0, -1.5j, -0.75 + 0j]
    return z.astype(dtype)


def _module(params: str, body: str, root: str, root_shape: str) -> str:
    return (f"HloModule m\nENTRY e {{\n{params}{body}  ROOT r = {root_shape} {root}\n}}\n")


def _close(got, want, tolerance=2e-6):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    scale = max(float(np.max(np.abs(want))), 1e-30)
    assert float(np.max(np.abs(got.astype(np.complex128) - want))) <= tolerance * scale


UNARY = {
    "negate": np.negative, "exponential": np.exp, "sqrt": np.sqrt, "sine": np.sin,
    "cosine": np.cos, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "tan": np.tan, "exponential-minus-one": np.expm1,
    "sign": lambda z: np.where(z == 0, 0, z / np.where(z == 0, 1, np.abs(z))),
}
# defined away from zero
UNARY_NONZERO = {"log": np.log, "rsqrt": lambda z: 1 / np.sqrt(z), "log-plus-one": np.log1p}


@pytest.mark.parametrize("opcode", sorted(UNARY) + sorted(UNARY_NONZERO))
def test_unary_complex_operations(opcode):
    z = _values()
    if opcode in UNARY_NONZERO:
        z[0] = 0.5 + 0.25j
    text = _module(f"  x = c64[{N}] parameter(0)\n", "", f"{opcode}(x)", f"c64[{N}]")
    want = (UNARY.get(opcode) or UNARY_NONZERO[opcode])(z.astype(np.complex128))
    _close(runtime.compile(text)(z), want.astype(np.complex64), 4e-6)


@pytest.mark.parametrize("opcode,fn", [("abs", np.abs), ("real", np.real), ("imag", np.imag)])
def test_complex_to_real(opcode, fn):
    z = _values()
    z[4:6] = [3e30 + 4e30j, 1e-30 - 1e-30j]          # abs neither overflows nor underflows
    text = _module(f"  x = c64[{N}] parameter(0)\n", "", f"{opcode}(x)", f"f32[{N}]")
    _close(runtime.compile(text)(z), fn(z.astype(np.complex128)).astype(np.float32))


BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
          "divide": np.divide, "power": np.power}


@pytest.mark.parametrize("opcode", sorted(BINARY))
def test_binary_complex_operations(opcode):
    a, b = _values(), _values()
    b[0] = 1e-3 - 4j                 # no division by zero
    if opcode == "power":
        a[0], b[0] = 0, 0            # 0^0 is 1
        a[1], b[1] = 0, 1.5          # 0^b is 0 for a positive real b
        a[2:], b[2:] = a[2:] * 0.5, b[2:] * 0.5
    b[3] = 1e30 + 1e29j              # Smith's division keeps this quotient finite
    text = _module(f"  a = c64[{N}] parameter(0)\n  b = c64[{N}] parameter(1)\n", "",
                   f"{opcode}(a, b)", f"c64[{N}]")
    want = BINARY[opcode](a.astype(np.complex128), b.astype(np.complex128))
    _close(runtime.compile(text)(a, b), want.astype(np.complex64), 4e-6)


def _parts_equal(got, want):
    """Equal part by part, NaN matching NaN (the special values are exact)."""
    got, want = np.asarray(got), np.asarray(want)
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        assert np.array_equal(g, w, equal_nan=True), (got, want)


INF, NAN = np.inf, np.nan
# XLA's CPU backend's results (jaxlib 0.10): x^0 and 1^y are 1 whatever the other operand,
# 0^y is NaN unless y is real and positive, inf^y for a real y is inf or 0, and an
# overflowed e^re inside power leaves NaN where sin 0 multiplies it.
POWER_SPECIAL_VALUES = [
    (complex(INF, 0), 0, 1), (complex(NAN, 0), 0, 1), (complex(2, NAN), 0, 1),
    (1, complex(0, INF), 1), (1, complex(NAN, 0), 1), (0, 2, 0), (0, 0, 1),
    (0, -1, complex(NAN, NAN)), (0, 1j, complex(NAN, NAN)), (0, 1.5 + 1j, complex(NAN, NAN)),
    (complex(INF, 0), 2, complex(INF, 0)), (complex(INF, 0), complex(INF, 0), complex(INF, 0)),
    (complex(INF, 0), -1, 0), (complex(INF, 0), 1 + 1j, complex(NAN, NAN)),
    (1e30, 2, complex(INF, NAN)), (2, complex(NAN, 0), complex(NAN, NAN)),
]


def test_power_special_values_follow_xla():
    n = len(POWER_SPECIAL_VALUES)
    a, b, want = (np.array([case[i] for case in POWER_SPECIAL_VALUES], np.complex64)
                  for i in range(3))
    text = _module(f"  a = c64[{n}] parameter(0)\n  b = c64[{n}] parameter(1)\n", "",
                   "power(a, b)", f"c64[{n}]")
    for fusion in (True, False):
        _parts_equal(runtime.compile(text, fusion=fusion)(a, b), want)


@pytest.mark.parametrize("opcode", ["exponential", "exponential-minus-one"])
def test_exponentials_keep_a_zero_imaginary_part(opcode):
    """``exp(100+0j)`` is ``inf+0j`` in XLA: the overflowed ``e^100`` never meets ``sin 0``."""
    z = np.array([100, complex(INF, 0), complex(NAN, 0), complex(-INF, 0)], np.complex64)
    low = 0 if opcode == "exponential" else -1
    want = np.array([complex(INF, 0), complex(INF, 0), complex(NAN, 0), low], np.complex64)
    text = _module("  x = c64[4] parameter(0)\n", "", f"{opcode}(x)", "c64[4]")
    _parts_equal(runtime.compile(text)(z), want)


def test_compare_complex_and_convert():
    a = _values()
    b = a.copy()
    b[::3] += 1j
    b[1::3] += 1
    text = _module(
        f"  a = c64[{N}] parameter(0)\n  b = c64[{N}] parameter(1)\n  i = s32[{N}] parameter(2)\n",
        f"  eq = pred[{N}] compare(a, b), direction=EQ\n"
        f"  ne = pred[{N}] compare(a, b), direction=NE\n"
        f"  sel = c64[{N}] select(eq, a, b)\n"
        f"  ci = c64[{N}] convert(i)\n"
        f"  wide = c128[{N}] convert(a)\n"
        f"  re = f32[{N}] real(b)\n  im = f32[{N}] imag(a)\n"
        f"  built = c64[{N}] complex(re, im)\n",
        "tuple(eq, ne, sel, ci, wide, built)",
        f"(pred[{N}], pred[{N}], c64[{N}], c64[{N}], c128[{N}], c64[{N}])")
    i = RNG.integers(-100, 100, N).astype(np.int32)
    eq, ne, sel, ci, wide, built = runtime.compile(text)(a, b, i)
    np.testing.assert_array_equal(eq, a == b)
    np.testing.assert_array_equal(ne, a != b)
    np.testing.assert_array_equal(sel, np.where(a == b, a, b))
    np.testing.assert_array_equal(ci, i.astype(np.complex64))
    np.testing.assert_array_equal(wide, a.astype(np.complex128))
    np.testing.assert_array_equal(built, b.real + 1j * a.imag)


def test_data_movement_of_complex_arrays():
    x = (RNG.standard_normal((4, 6)) + 1j * RNG.standard_normal((4, 6))).astype(np.complex64)
    text = _module(
        "  x = c64[4,6] parameter(0)\n  i = s32[] parameter(1)\n",
        "  k = c64[] constant((1, -2))\n"
        "  table = c64[2] constant({(0.5, 0.25), (-3, 4)})\n"
        "  b = c64[3,4,6] broadcast(x), dimensions={1,2}\n"
        "  t = c64[6,4] transpose(x), dimensions={1,0}\n"
        "  s = c64[2,3] slice(x), slice={[1:3], [0:6:2]}\n"
        "  c = c64[8,6] concatenate(x, x), dimensions={0}\n"
        "  p = c64[5,8] pad(x, k), padding=0_1x1_1\n"
        "  v = c64[4,6] reverse(x), dimensions={1}\n"
        "  z = s32[] constant(0)\n"
        "  ds = c64[2,6] dynamic-slice(x, i, z), dynamic_slice_sizes={2,6}\n"
        "  u = c64[4,6] dynamic-update-slice(x, ds, z, z)\n"
        "  rs = c64[24] reshape(x)\n"
        "  kb = c64[2,2] broadcast(table), dimensions={1}\n",
        "tuple(b, t, s, c, p, v, ds, u, rs, kb)",
        "(c64[3,4,6], c64[6,4], c64[2,3], c64[8,6], c64[5,8], c64[4,6], c64[2,6], c64[4,6], "
        "c64[24], c64[2,2])")
    got = runtime.compile(text)(x, np.int32(1))
    k = np.complex64(1 - 2j)
    want = (np.broadcast_to(x, (3, 4, 6)), x.T, x[1:3, 0:6:2], np.concatenate([x, x]),
            np.pad(x, ((0, 1), (1, 1)), constant_values=k), x[:, ::-1], x[1:3],
            np.concatenate([x[1:3], x[2:]]), x.reshape(24),
            np.broadcast_to(np.array([0.5 + 0.25j, -3 + 4j], np.complex64), (2, 2)))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


ADD = "add {\n  a = c64[] parameter(0)\n  b = c64[] parameter(1)\n  ROOT s = c64[] add(a, b)\n}\n"
MUL = ("mul {\n  a = c64[] parameter(0)\n  b = c64[] parameter(1)\n"
       "  ROOT s = c64[] multiply(a, b)\n}\n")


def test_sums_products_and_cumulative_sums():
    x = (RNG.standard_normal((5, 7)) + 1j * RNG.standard_normal((5, 7))).astype(np.complex64)
    text = ("HloModule m\n" + ADD + MUL + "ENTRY e {\n  x = c64[5,7] parameter(0)\n"
            "  zero = c64[] constant((0, 0))\n  one = c64[] constant((1, 0))\n"
            "  init = c64[] constant((1, -1))\n"
            "  s = c64[5] reduce(x, zero), dimensions={1}, to_apply=add\n"
            "  si = c64[7] reduce(x, init), dimensions={0}, to_apply=add\n"
            "  half = c64[5,7] broadcast(c64[] constant((0.5, 0))), dimensions={}\n"
            "  xs = c64[5,7] multiply(x, half)\n"
            "  p = c64[5] reduce(xs, one), dimensions={1}, to_apply=mul\n"
            "  c = c64[5,7] reduce-window(x, zero), window={size=1x7 pad=0_0x6_0}, to_apply=add\n"
            "  ROOT r = (c64[5], c64[7], c64[5], c64[5,7]) tuple(s, si, p, c)\n}\n")
    s, si, p, c = runtime.compile(text)(x)
    _close(s, x.sum(1))
    _close(si, (x.astype(np.complex128).sum(0) + (1 - 1j)).astype(np.complex64))
    _close(p, np.prod(x.astype(np.complex128) * 0.5, axis=1).astype(np.complex64))
    _close(c, np.cumsum(x, axis=1))


ASSIGN = ("assign {\n  a = c64[] parameter(0)\n  ROOT b = c64[] parameter(1)\n}\n")


def test_gathers_and_scatters_of_complex_rows():
    x = (RNG.standard_normal((4, 6)) + 1j * RNG.standard_normal((4, 6))).astype(np.complex64)
    u = (RNG.standard_normal((3, 6)) + 1j * RNG.standard_normal((3, 6))).astype(np.complex64)
    idx = np.array([[2], [0], [2]], np.int32)
    dims = "index_vector_dim=1"
    text = ("HloModule m\n" + ADD + ASSIGN + "ENTRY e {\n  x = c64[4,6] parameter(0)\n"
            "  i = s32[3,1] parameter(1)\n  u = c64[3,6] parameter(2)\n"
            f"  g = c64[3,6] gather(x, i), offset_dims={{1}}, collapsed_slice_dims={{0}}, "
            f"start_index_map={{0}}, {dims}, slice_sizes={{1,6}}\n"
            f"  s = c64[4,6] scatter(x, i, u), update_window_dims={{1}}, "
            f"inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, {dims}, to_apply=add\n"
            f"  o = c64[4,6] scatter(x, i, u), update_window_dims={{1}}, "
            f"inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, {dims}, "
            f"to_apply=assign\n"
            "  ROOT r = (c64[3,6], c64[4,6], c64[4,6]) tuple(g, s, o)\n}\n")
    g, s, o = runtime.compile(text)(x, idx, u)
    np.testing.assert_array_equal(g, x[idx[:, 0]])
    added = x.astype(np.complex128)
    np.add.at(added, idx[:, 0], u)
    _close(s, added.astype(np.complex64))
    overwritten = x.copy()
    overwritten[0] = u[1]
    np.testing.assert_array_equal(o[[0, 1, 3]], overwritten[[0, 1, 3]])
    assert any(np.array_equal(o[2], u[k]) for k in (0, 2))   # either write to row 2 wins


def test_complex_dots():
    a = (RNG.standard_normal((3, 8, 5)) + 1j * RNG.standard_normal((3, 8, 5))).astype(np.complex64)
    b = (RNG.standard_normal((3, 5, 4)) + 1j * RNG.standard_normal((3, 5, 4))).astype(np.complex64)
    text = _module("  a = c64[3,8,5] parameter(0)\n  b = c64[3,5,4] parameter(1)\n", "",
                   "dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                   "rhs_batch_dims={0}, rhs_contracting_dims={1}", "c64[3,8,4]")
    _close(runtime.compile(text)(a, b), np.einsum("bij,bjk->bik", a, b))


def test_complex_convolutions():
    """XLA's ConvolutionHloTest.ConvolveC64Forward shape of problem: four real convolutions,
    grouped ones too (each group's features convolved alone)."""
    x = (RNG.standard_normal((2, 7, 4)) + 1j * RNG.standard_normal((2, 7, 4))).astype(np.complex64)
    k = (RNG.standard_normal((3, 2, 6)) + 1j * RNG.standard_normal((3, 2, 6))).astype(np.complex64)
    text = ("HloModule m\nENTRY e {\n  x = c64[2,7,4] parameter(0)\n  k = c64[3,2,6] parameter(1)\n"
            "  ROOT c = c64[2,5,6] convolution(x, k), window={size=3}, dim_labels=b0f_0io->b0f, "
            "feature_group_count=2\n}\n")
    xs, ks = x.astype(np.complex128), k.astype(np.complex128)
    want = np.zeros((2, 5, 6), np.complex128)
    for g in range(2):
        for t in range(3):
            want[:, :, 3 * g:3 * g + 3] += xs[:, t:t + 5, 2 * g:2 * g + 2] @ ks[t, :, 3 * g:3 * g + 3]
    for fusion in (True, False):
        _close(runtime.compile(text, fusion=fusion)(x, k), want.astype(np.complex64), 4e-6)


def test_a_loop_carrying_complex_state():
    text = """HloModule loop
cond {
  s = (s32[], c64[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], c64[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  z = c64[6] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = c64[] constant((0, 1))
  wb = c64[6] broadcast(w), dimensions={}
  z2 = c64[6] multiply(z, wb)
  ROOT t = (s32[], c64[6]) tuple(j, z2)
}
ENTRY e {
  z = c64[6] parameter(0)
  i = s32[] constant(0)
  init = (s32[], c64[6]) tuple(i, z)
  loop = (s32[], c64[6]) while(init), condition=cond, body=body
  ROOT r = c64[6] get-tuple-element(loop), index=1
}
"""
    z = _values(6)
    _close(runtime.compile(text)(z), z * 1j ** 5)


def test_the_interface_stays_complex_and_donation_works():
    x = (RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))).astype(np.complex64)
    text = ("HloModule m, input_output_alias={ {}: (0, {}, may-alias) }\nENTRY e {\n"
            "  x = c64[3,4]{0,1} parameter(0)\n  ROOT y = c64[3,4]{0,1} multiply(x, x)\n}\n")
    exe = runtime.compile(text)
    assert [str(s) for s in exe.parameter_shapes] == ["c64[3,4]{0,1}"]
    assert exe.result_shape.element_type.name == "c64"
    donated = runtime.device_put(x)
    out = exe.run(donated, donate=0)
    assert donated.is_deleted()
    assert out.dtype == np.complex64
    _close(np.asarray(out), x * x)


def test_without_fusion():
    a, b = _values(), _values()
    text = _module(f"  a = c64[{N}] parameter(0)\n  b = c64[{N}] parameter(1)\n",
                   f"  m = c64[{N}] multiply(a, b)\n", "abs(m)", f"f32[{N}]")
    _close(runtime.compile(text, fusion=False)(a, b), np.abs(a * b))


LU_AFTER_ARITHMETIC = """HloModule lu
ENTRY e {
  a = c64[2,3,3] parameter(0)
  sq = c64[2,3,3] multiply(a, a)
  lu = (c64[2,3,3]{1,2,0}, s32[2,3], s32[2]) custom-call(sq), custom_call_target="lapack_cgetrf_ffi", operand_layout_constraints={c64[2,3,3]{1,2,0}}, output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI
  f = c64[2,3,3]{1,2,0} get-tuple-element(lu), index=0
  two = c64[] constant((2, 0))
  twos = c64[2,3,3]{1,2,0} broadcast(two), dimensions={}
  ROOT r = c64[2,3,3]{1,2,0} multiply(f, twos)
}
"""


def test_custom_calls_read_and_write_complex_buffers():
    a = (RNG.standard_normal((2, 3, 3)) + 1j * RNG.standard_normal((2, 3, 3))).astype(np.complex64)
    got = runtime.compile(LU_AFTER_ARITHMETIC)(a)
    for k in range(2):
        lu, _ = scipy.linalg.lu_factor(a[k] * a[k])
        np.testing.assert_allclose(got[k], 2 * lu, atol=2e-5)


def test_a_module_whose_complex_values_only_pass_through_is_unchanged():
    text = ("HloModule m\nENTRY e {\n  a = c64[2,3,3] parameter(0)\n"
            "  ROOT lu = (c64[2,3,3]{1,2,0}, s32[2,3], s32[2]) custom-call(a), "
            "custom_call_target=\"lapack_cgetrf_ffi\", api_version=API_VERSION_TYPED_FFI\n}\n")
    module = runtime.parse(text)
    before = module.to_text()
    lower_complex_in_place(module)
    assert module.to_text() == before


def test_only_bitcasts_and_parameters_keep_complex_types():
    text = _module(f"  a = c64[{N}] parameter(0)\n", f"  m = c64[{N}] multiply(a, a)\n",
                   "tuple(m, a)", f"(c64[{N}], c64[{N}])")
    module = runtime.parse(text)
    lower_complex_in_place(module)
    complex_ops = {i.opcode for i in module.instructions() for _, leaf in i.shape.leaves()
                   if isinstance(leaf, ArrayShape) and leaf.element_type.is_complex}
    assert complex_ops == {"parameter", "bitcast", "tuple"}


SORT = """HloModule s
less {
  a = c64[] parameter(0)
  b = c64[] parameter(1)
  ra = f32[] real(a)
  rb = f32[] real(b)
  ROOT lt = pred[] compare(ra, rb), direction=LT
}
ENTRY e {
  x = c64[8] parameter(0)
  ROOT s = c64[8] sort(x), dimensions={0}, to_apply=less
}
"""


@pytest.mark.parametrize("text,message", [
    (SORT, "sort on complex values is not supported"),
    (_module("  a = c64[4] parameter(0)\n", "", "compare(a, a), direction=LT", "pred[4]"),
     "compare direction LT is not defined for complex values"),
    ("HloModule m\nsub {\n  a = c64[] parameter(0)\n  b = c64[] parameter(1)\n"
     "  ROOT s = c64[] subtract(a, b)\n}\nENTRY e {\n  x = c64[4] parameter(0)\n"
     "  z = c64[] constant((0, 0))\n  ROOT r = c64[] reduce(x, z), dimensions={0}, to_apply=sub\n}\n",
     "must be a single sum or product"),
])
def test_unsupported_complex_operations_are_named(text, message):
    with pytest.raises(HloUnsupportedError, match=message) as info:
        runtime.compile(text)
    assert info.value.instruction is not None
