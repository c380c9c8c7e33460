"""The folded glossary explains the notation a report really shows: each example it gives
is printed by the report (or the annotated module) of a small JAX-named module."""

from __future__ import annotations

import runtime
from hlo_magic.glossary import GLOSSARY, NOTATION
from hlo_magic.outcome import make_result

# JAX's names, layouts, a may-alias entry, a multi-output loop fusion and a reduce fusion
STEP = """HloModule jit_step, input_output_alias={ {0}: (0, {}, may-alias) }

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  flat_0_.1 = f32[4,8]{1,0} parameter(0)
  w__b__.1 = f32[4,8]{1,0} parameter(1)
  e = f32[4,8]{1,0} exponential(w__b__.1)
  t = f32[4,8]{1,0} tanh(e)
  m = f32[4,8]{1,0} multiply(t, flat_0_.1)
  zero = f32[] constant(0)
  r = f32[4]{0} reduce(e, zero), dimensions={1}, to_apply=sum
  ROOT out = (f32[4,8]{1,0}, f32[4]{0}) tuple(m, r)
}
"""

# what each notation entry's example looks like where the report prints it
SHOWN = {"f32[4,8]{1,0}": "f32[4,8]{1,0}", "output {0}, {1,2}": "output {0} (may-alias)",
         "#28, #3 +128": "#4 temp +0", "kLoop, kInput, kOutput": "kind=kInput",
         "flat_0_.1, w__b__.1": "w__b__.1", "may-alias, must-alias": "may-alias"}


def test_the_glossary_explains_what_the_report_prints():
    exe = runtime.compile(STEP, lazy=True)
    result = make_result(exe, frozenset({0}), None, show=("assignment", "annotated"),
                         explain_terms=True)
    text = result.report_text()
    for word, meaning in GLOSSARY:
        assert word in text and meaning in text, word
    for word, example in SHOWN.items():
        assert word in dict(NOTATION)
        assert text.count(example) > (1 if example == word else 0), word
    assert "kind=kLoop" in text
