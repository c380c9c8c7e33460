"""DCE removes dead instructions and computations, never side effects or parameters."""

import runtime
from runtime.passes.dce import dce

TEXT = """
HloModule m

unused {
  ROOT u = f32[] parameter(0)
}

noisy {
  p = f32[] parameter(0)
  ROOT o = f32[] custom-call(p), custom_call_target="log", custom_call_has_side_effect=true
}

ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  dead = f32[4] negate(x)
  deader = f32[4] abs(dead)
  s = f32[] constant(1)
  logged = f32[] call(s), to_apply=noisy
  r = f32[4] rng(s, s), distribution=rng_uniform
  pure = f32[4] custom-call(x), custom_call_target="pure"
  ROOT out = f32[4] add(x, x), control-predecessors={dead}
}
"""


def test_dce_keeps_side_effects_parameters_and_drops_the_rest():
    module = runtime.parse(TEXT)
    out = dce(module)
    names = [i.name for i in out.entry.instructions]
    assert names == ["x", "y", "dead", "s", "logged", "r", "out"]
    assert [c.name for c in out.computations] == ["noisy", "e"]
    assert len(module.entry.instructions) == 9, "the input module is untouched"
    runtime.parse(out.to_text())


def test_dce_prunes_control_edges_to_removed_instructions():
    module = runtime.parse("""
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  dead = f32[4] negate(x)
  ROOT out = f32[4] abs(x), control-predecessors={dead}
}
""")
    module.entry.root.attrs["control-predecessors"] = ()
    out = dce(module)
    assert [i.name for i in out.entry.instructions] == ["x", "out"]
