"""float-normalization: a convert of bf16 or 8-bit float elementwise arithmetic into the type
XLA's CPU backend computes it in becomes that arithmetic in the wide type; other users keep
the rounded value (XLA's results: tests/codegen/test_nan_conversions.py); so does a convert
of a narrow dot or convolution, not of a reduction."""

import numpy as np
import pytest

import runtime
from runtime.hlo.opcode_enum import Opcode
from runtime.passes.float_normalization import normalize_floats_in_place


def normalized(text: str) -> dict[str, str]:
    module = runtime.parse(text)
    normalize_floats_in_place(module)
    assert runtime.parse(module.to_text()).to_text() == module.to_text()
    return {i.name: f"{i.shape.element_type} {i.opcode}({', '.join(o.name for o in i.operands)})"
            for i in module.entry.instructions if i.opcode != Opcode.TUPLE}


def test_a_convert_to_the_compute_type_reads_the_wide_result():
    got = normalized("""HloModule n
ENTRY e {
  x = bf16[4] parameter(0)
  y = bf16[4] parameter(1)
  p = pred[4] parameter(2)
  a = bf16[4] add(x, y)
  s = bf16[4] select(p, a, x)
  wa = f32[4] convert(a)
  ws = f32[4] convert(s)
  ROOT t = (f32[4], f32[4], bf16[4]) tuple(wa, ws, a)
}
""")
    assert got["wa"] == "f32 add(x.f32.0, y.f32.0)"
    assert got["ws"] == "f32 select(p, a.f32.0, x.f32.0)"       # a's rounded value
    assert got["a"] == "bf16 add(x, y)"
    assert got["x.f32.0"] == "f32 convert(x)"


def test_other_types_and_converts_stay():
    text = """HloModule k
ENTRY e {
  h = f16[4] parameter(0)
  b = bf16[4] parameter(1)
  q = f8e5m2[4] parameter(2)
  z = f8e8m0fnu[4] parameter(3)
  e = f16[4] exponential(h)
  we = f32[4] convert(e)
  n = bf16[4] negate(b)
  wn = f64[4] convert(n)
  m = f8e5m2[4] negate(q)
  wm = f32[4] convert(m)
  c = bf16[4] convert(h)
  wc = f32[4] convert(c)
  r = f8e8m0fnu[4] sign(z)
  wr = f64[4] convert(r)
  ROOT t = (f32[4], f64[4], f32[4], f32[4], f64[4]) tuple(we, wn, wm, wc, wr)
}
"""
    got = normalized(text)
    assert [got[k].split()[1].split("(")[0] for k in ("we", "wn", "wm", "wc", "wr")] == \
        ["convert"] * 5


def test_f8e8m0fnu_is_widened_with_xlas_folded_code_0():
    """Its code 0 widens to the f32 denormal 2^-127: floor's result there is f32's (flushed),
    sign's XLA folds at compile time to 1 (``folds_exponent_float_tiny``), selected there."""
    got = normalized("""HloModule z
ENTRY e {
  z = f8e8m0fnu[4] parameter(0)
  f = f8e8m0fnu[4] floor(z)
  wf = f32[4] convert(f)
  s = f8e8m0fnu[4] sign(z)
  ws = f32[4] convert(s)
  ROOT t = (f32[4], f32[4]) tuple(wf, ws)
}
""")
    assert got["wf"] == "f32 floor(z.f32.0)"
    assert got["ws"].startswith("f32 select(ws.compare")
    assert got["ws.wide.0"] == "f32 sign(z.f32.0)"


ADD = """add {
  a = TYPE[] parameter(0)
  b = TYPE[] parameter(1)
  ROOT c = TYPE[] add(a, b)
}
"""

# each contraction and reduction of narrow floats, converted to a wider type
NARROW = {
    "dot bf16 -> f32": ("""HloModule d
ENTRY e {
  p = bf16[4,64] parameter(0)
  q = bf16[64,3] parameter(1)
  d = bf16[4,3] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT c = f32[4,3] convert(d)
}
""", ((4, 64), (64, 3))),
    "convolution bf16 -> f32": ("""HloModule cv
ENTRY e {
  p = bf16[1,16,8] parameter(0)
  k = bf16[3,8,4] parameter(1)
  d = bf16[1,14,4] convolution(p, k), window={size=3}, dim_labels=b0f_0io->b0f
  ROOT c = f32[1,14,4] convert(d)
}
""", ((1, 16, 8), (3, 8, 4))),
    "dot f8e4m3fn -> f16": ("""HloModule d8
ENTRY e {
  p = f8e4m3fn[4,8] parameter(0)
  q = f8e4m3fn[8,3] parameter(1)
  d = f8e4m3fn[4,3] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT c = f16[4,3] convert(d)
}
""", ((4, 8), (8, 3))),
    "convolution f8e5m2 -> f16": ("""HloModule c8
ENTRY e {
  p = f8e5m2[1,16,8] parameter(0)
  k = f8e5m2[3,8,4] parameter(1)
  d = f8e5m2[1,14,4] convolution(p, k), window={size=3}, dim_labels=b0f_0io->b0f
  ROOT c = f16[1,14,4] convert(d)
}
""", ((1, 16, 8), (3, 8, 4))),
    "dot f8e4m3fn -> f32 (rounded)": ("""HloModule d8r
ENTRY e {
  p = f8e4m3fn[4,8] parameter(0)
  q = f8e4m3fn[8,3] parameter(1)
  d = f8e4m3fn[4,3] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT c = f32[4,3] convert(d)
}
""", ((4, 8), (8, 3))),
    "reduce bf16 -> f32 (rounded)": ("HloModule r\n" + ADD.replace("TYPE", "bf16") + """ENTRY e {
  p = bf16[64] parameter(0)
  z = bf16[] constant(0)
  s = bf16[] reduce(p, z), dimensions={0}, to_apply=add
  ROOT c = f32[] convert(s)
}
""", ((64,),)),
    "reduce f16 -> f32 (rounded)": ("HloModule h\n" + ADD.replace("TYPE", "f16") + """
ENTRY e {
  p = f16[101] parameter(0)
  z = f16[] constant(0)
  s = f16[] reduce(p, z), dimensions={0}, to_apply=add
  ROOT c = f32[] convert(s)
}
""", ((101,),)),
    "row and column sums bf16 -> f32 (rounded)": ("HloModule rc\n" + ADD.replace("TYPE", "bf16")
                                                  + """
ENTRY e {
  p = bf16[70,100] parameter(0)
  z = bf16[] constant(0)
  r = bf16[70] reduce(p, z), dimensions={1}, to_apply=add
  c = bf16[100] reduce(p, z), dimensions={0}, to_apply=add
  wr = f32[70] convert(r)
  wc = f32[100] convert(c)
  ROOT t = (f32[70], f32[100]) tuple(wr, wc)
}
""", ((70, 100),)),
    "reduce f8e4m3fn -> f16 (rounded)": ("HloModule r8\n" + ADD.replace("TYPE", "f8e4m3fn") + """
ENTRY e {
  p = f8e4m3fn[40] parameter(0)
  z = f8e4m3fn[] constant(0)
  s = f8e4m3fn[] reduce(p, z), dimensions={0}, to_apply=add
  ROOT c = f16[] convert(s)
}
""", ((40,),)),
    "reduce-window bf16 -> f32 (rounded)": ("HloModule w\n" + ADD.replace("TYPE", "bf16") + """
ENTRY e {
  p = bf16[64] parameter(0)
  z = bf16[] constant(0)
  d = bf16[8] reduce-window(p, z), window={size=8 stride=8}, to_apply=add
  ROOT c = f32[8] convert(d)
}
""", ((64,),)),
}


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("case", sorted(NARROW))
def test_narrow_contractions_and_reductions_converted_wider_as_xla(case, fusion):
    """XLA computes a narrow dot or convolution in f32 and rounds it once (to f16 first for
    the 8-bit floats), so converted to the arithmetic type it is the unrounded result;
    converted past it (f8 -> f32) and for reductions, whose running value XLA rounds at
    every step in its tree order (``passes/tree_reductions``), it stays rounded. The inputs'
    sums are not narrow values, and their order changes the reductions' rounded results."""
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    text, shapes = NARROW[case]
    module = runtime.parse(text)
    rng = np.random.default_rng(len(case))
    args = [(1 + rng.random(shape) * 0.1).astype(p.shape.element_type.numpy)
            for shape, p in zip(shapes, module.entry.parameters)]
    want = xla_cpu.compile_hlo(text).executable.execute([jax.device_put(a) for a in args])
    got = runtime.compile(text, fusion=fusion)(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=2e-7, atol=0)


def test_a_convert_of_a_contraction_to_the_compute_type_is_the_wide_contraction():
    got = normalized("""HloModule c
ENTRY e {
  p = bf16[4,8] parameter(0)
  q = bf16[8,3] parameter(1)
  d = bf16[4,3] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  w = f32[4,3] convert(d)
  ROOT t = (f32[4,3], bf16[4,3]) tuple(w, d)
}
""")
    assert got["w"] == "f32 dot(p, q)"
    assert got["d"] == "bf16 dot(p, q)"
