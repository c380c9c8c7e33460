"""float-normalization: a convert of bf16 or 8-bit float elementwise arithmetic into the type
XLA's CPU backend computes it in becomes that arithmetic in the wide type; other users keep
the rounded value (XLA's results: tests/codegen/test_nan_conversions.py)."""

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
  wr = f32[4] convert(r)
  ROOT t = (f32[4], f64[4], f32[4], f32[4], f32[4]) tuple(we, wn, wm, wc, wr)
}
"""
    got = normalized(text)
    assert [got[k].split()[1].split("(")[0] for k in ("we", "wn", "wm", "wc", "wr")] == \
        ["convert"] * 5


def test_f8e8m0fnu_is_widened_but_where_xla_folds_its_code_0():
    """Its code 0 widens to the f32 denormal 2^-127: floor's result there is f32's (flushed),
    sign's XLA folds at compile time to 1 (``folds_exponent_float_tiny``), so it stays."""
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
    assert got["ws"] == "f32 convert(s)"
