"""Call inlining: bodies replace calls (nested ones too), values do not change."""

import numpy as np

import runtime
from runtime.passes.inline_calls import inline_calls

TEXT = """
HloModule calls
inner {
  a = f32[8] parameter(0)
  ROOT n = f32[8] negate(a)
}
outer {
  p = f32[8] parameter(0)
  q = f32[8] parameter(1)
  c = f32[8] call(p), to_apply=inner
  ROOT s = f32[8] add(c, q)
}
ENTRY e {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  r = f32[8] call(x, y), to_apply=outer
  ROOT m = f32[8] multiply(r, r)
}
"""


def test_nested_calls_are_inlined_and_their_computations_dropped():
    out = inline_calls(runtime.parse(TEXT))
    assert [c.name for c in out.computations] == ["e"]
    assert [i.opcode for i in out.entry.instructions] == [
        "parameter", "parameter", "negate", "add", "multiply"]
    assert runtime.parse(out.to_text()).to_text() == out.to_text()


def test_inlined_module_computes_the_same():
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    np.testing.assert_array_equal(runtime.compile(TEXT)(x, y), (y - x) ** 2)
    np.testing.assert_array_equal(runtime.compile(TEXT, fusion=False)(x, y), (y - x) ** 2)


def test_a_call_that_is_the_root_gives_its_body_root():
    out = inline_calls(runtime.parse("""
HloModule rootcall
body {
  a = f32[4] parameter(0)
  ROOT e = f32[4] exponential(a)
}
ENTRY e {
  x = f32[4] parameter(0)
  ROOT c = f32[4] call(x), to_apply=body
}
"""))
    assert out.entry.root.opcode == "exponential"


TUPLE_CALL = """
HloModule tuple_call
pair {
  p = f32[8] parameter(0)
  n = f32[8] negate(p)
  e = f32[8] exponential(p)
  ROOT t = (f32[8], f32[8]) tuple(n, e)
}
ENTRY e {
  x = f32[8] parameter(0)
  c = (f32[8], f32[8]) call(x), to_apply=pair
  a = f32[8] get-tuple-element(c), index=0
  b = f32[8] get-tuple-element(c), index=1
  ROOT s = f32[8] add(a, b)
}
"""


def test_elements_of_an_inlined_tuple_go_straight_to_their_readers():
    out = inline_calls(runtime.parse(TUPLE_CALL))
    assert [i.opcode for i in out.entry.instructions] == [
        "parameter", "negate", "exponential", "add"]
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_allclose(runtime.compile(TUPLE_CALL)(x), np.exp(x) - x, rtol=1e-6)
