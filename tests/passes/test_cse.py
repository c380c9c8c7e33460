"""Common-subexpression elimination: one instruction per value, never at the cost of memory or
of an instruction whose identity matters."""

import numpy as np
import ml_dtypes
import pytest

import runtime
from runtime.passes.cse import cse
from runtime import pipeline
from runtime.pipeline import OPTIMISATION

REDUCERS = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

add_again {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT t = f32[] add(p, q)
}

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""


def merged(text: str):
    out = cse(runtime.parse(text))
    assert runtime.parse(out.to_text()).to_text() == out.to_text()
    return out


def count(module, opcode: str) -> int:
    return sum(i.opcode == opcode for i in module.entry.instructions)


def test_duplicated_chains_collapse_and_equal_reducers_match():
    """JAX's variance and normalisation each subtract the mean (two broadcasts, two
    subtracts), and each reduce has its own reducer with the same body."""
    out = merged("HloModule ln\n" + REDUCERS + """
ENTRY e {
  x = f32[8,16]{1,0} parameter(0)
  zero = f32[] constant(0)
  s1 = f32[8]{0} reduce(x, zero), dimensions={1}, to_apply=add, metadata={op_name="a"}
  s2 = f32[8]{0} reduce(x, zero), dimensions={1}, to_apply=add_again, metadata={op_name="b"}
  b1 = f32[8,16]{1,0} broadcast(s1), dimensions={0}
  b2 = f32[8,16]{1,0} broadcast(s2), dimensions={0}
  c1 = f32[8,16]{1,0} subtract(x, b1)
  c2 = f32[8,16]{1,0} subtract(x, b2)
  ROOT r = f32[8,16]{1,0} multiply(c1, c2)
}
""")
    assert [count(out, op) for op in ("reduce", "broadcast", "subtract")] == [1, 1, 1]
    root = out.entry.root
    assert root.operands[0] is root.operands[1]


def test_different_reducers_attributes_layouts_and_constants_stay_apart():
    out = merged("HloModule apart\n" + REDUCERS + """
ENTRY e {
  x = f32[8,16]{1,0} parameter(0)
  zero = f32[] constant(0)
  negzero = f32[] constant(-0)
  s = f32[8]{0} reduce(x, zero), dimensions={1}, to_apply=add
  m = f32[8]{0} reduce(x, zero), dimensions={1}, to_apply=max
  n = f32[8]{0} reduce(x, negzero), dimensions={1}, to_apply=add
  c = f32[16]{0} reduce(x, zero), dimensions={0}, to_apply=add
  t1 = f32[16,8]{1,0} transpose(x), dimensions={1,0}
  t2 = f32[16,8]{0,1} transpose(x), dimensions={1,0}
  ROOT r = (f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[16]{0}, f32[16,8]{1,0}, f32[16,8]{0,1}) tuple(s, m, n, c, t1, t2)
}
""")
    assert count(out, "reduce") == 4 and count(out, "transpose") == 2
    assert count(out, "constant") == 2


@pytest.mark.parametrize("twice", [
    "rng(lo, hi), distribution=rng_uniform",
    'custom-call(x), custom_call_target="io_callback", custom_call_has_side_effect=true',
    "opt-barrier(x)",
    "constant({...})",
])
def test_instructions_whose_identity_matters_are_never_merged(twice):
    out = merged(f"""
HloModule kept
ENTRY e {{
  x = f32[4]{{0}} parameter(0)
  y = f32[4]{{0}} parameter(1)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  a = f32[4]{{0}} {twice}
  b = f32[4]{{0}} {twice}
  ROOT r = f32[4]{{0}} add(a, b)
}}
""")
    root = out.entry.root
    assert root.operands[0] is not root.operands[1]


def test_control_dependencies_keep_both():
    out = merged("""
HloModule ordered
ENTRY e {
  x = f32[4]{0} parameter(0)
  a = f32[4]{0} exponential(x)
  b = f32[4]{0} exponential(x), control-predecessors={a}
  ROOT r = f32[4]{0} add(a, b)
}
""")
    assert count(out, "exponential") == 2


LIVENESS = """
HloModule live
ENTRY e {{
  w = bf16[64,64]{{1,0}} parameter(0)
  x = f32[8,64]{{1,0}} parameter(1)
  g = f32[8,64]{{1,0}} parameter(2)
  wf = f32[64,64]{{1,0}} {first}
  y = f32[8,64]{{1,0}} dot(x, wf), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  t = f32[8,64]{{1,0}} tanh(y)
  u = f32[8,64]{{1,0}} multiply(t, g)
  wf2 = f32[64,64]{{1,0}} {second}
  dx = f32[8,64]{{1,0}} dot(u, wf2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}
  ROOT r = ({live_shape}, f32[8,64]{{1,0}}) tuple({live_first}, dx)
}}
"""


def test_a_cheap_duplicate_whose_first_copy_is_dead_is_recomputed():
    """The bf16 weight converted for the forward and again for the backward product: holding
    the f32 copy in between would keep twice the weight's bytes live."""
    out = merged(LIVENESS.format(first="convert(w)", second="convert(w)", live_first="t",
                                 live_shape="f32[8,64]{1,0}"))
    assert count(out, "convert") == 2


def test_a_cheap_duplicate_is_merged_while_the_first_copy_is_live():
    out = merged(LIVENESS.format(first="convert(w)", second="convert(w)", live_first="wf",
                                 live_shape="f32[64,64]{1,0}"))
    assert count(out, "convert") == 1


def test_an_expensive_duplicate_is_merged_even_when_the_first_copy_is_dead():
    product = "dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}"
    text = LIVENESS.replace("  x = f32[8,64]", "  x = f32[64,64]").replace(
        "dot(x, wf)", "dot(g, wf)")
    out = merged(text.format(first=product, second=product, live_first="t",
                             live_shape="f32[8,64]{1,0}"))
    assert count(out, "dot") == 3


def test_cse_runs_after_fusion_on_materialised_values():
    """Before fusion, merging the duplicated GELU chain of a forward and a backward pass would
    make the fusion pass materialise what each kernel now recomputes from one input; after
    fusion, only values that are in memory anyway are merged."""
    names = [name for name, _, _ in OPTIMISATION]
    assert names.index("fusion") < names.index("cse") < names.index("multi-output-fusion")


LAYER_NORM_BACKWARD = "HloModule ln_saved\n" + REDUCERS + """
ENTRY e {
  x = f32[32,64]{1,0} parameter(0)
  w = f32[64,64]{1,0} parameter(1)
  dy = f32[32,64]{1,0} parameter(2)
  zero = f32[] constant(0)
  n = f32[] constant(64)
  s = f32[32]{0} reduce(x, zero), dimensions={1}, to_apply=add
  nb = f32[32]{0} broadcast(n), dimensions={}
  mean = f32[32]{0} divide(s, nb)
  mb1 = f32[32,64]{1,0} broadcast(mean), dimensions={0}
  c1 = f32[32,64]{1,0} subtract(x, mb1)
  sq = f32[32,64]{1,0} multiply(c1, c1)
  v = f32[32]{0} reduce(sq, zero), dimensions={1}, to_apply=add_again
  var = f32[32]{0} divide(v, nb)
  rs = f32[32]{0} rsqrt(var)
  mb2 = f32[32,64]{1,0} broadcast(mean), dimensions={0}
  c2 = f32[32,64]{1,0} subtract(x, mb2)
  rb = f32[32,64]{1,0} broadcast(rs), dimensions={0}
  xn = f32[32,64]{1,0} multiply(c2, rb)
  y = f32[32,64]{1,0} dot(xn, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  gc1 = f32[64,64]{1,0} dot(c1, dy), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  gc2 = f32[64,64]{1,0} dot(c2, dy), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  g = f32[64,64]{1,0} add(gc1, gc2)
  ROOT r = (f32[32,64]{1,0}, f32[64,64]{1,0}) tuple(y, g)
}
"""


def test_saved_centred_activations_share_one_buffer(monkeypatch):
    """Both copies of ``x - mean`` are read by products of the backward pass, so each was in
    memory: one buffer and one kernel fewer, same values."""
    with_cse = runtime.analyze(LAYER_NORM_BACKWARD)
    monkeypatch.setattr(pipeline, "OPTIMISATION", [p for p in OPTIMISATION if p[0] != "cse"])
    without = runtime.analyze(LAYER_NORM_BACKWARD)
    assert count(with_cse.module, "fusion") == count(without.module, "fusion") - 1
    assert with_cse.memory_stats.temp == without.memory_stats.temp - 32 * 64 * 4
    rng = np.random.default_rng(0)
    x, w, dy = (rng.standard_normal(s).astype(np.float32) for s in ((32, 64), (64, 64), (32, 64)))
    y, g = runtime.compile(LAYER_NORM_BACKWARD)(x, w, dy)
    c = x - x.mean(axis=1, keepdims=True)
    xn = c / np.sqrt((c * c).mean(axis=1, keepdims=True))
    np.testing.assert_allclose(y, xn @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(g, 2 * c.T @ dy, rtol=1e-4, atol=1e-4)


def test_merged_outputs_get_their_own_buffers_and_donation_still_holds():
    """The two results become one value: the entry still returns two buffers, one of them
    the donated parameter's."""
    text = """
HloModule twice, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  a = f32[256]{0} parameter(0)
  b = f32[256]{0} parameter(1)
  e1 = f32[256]{0} exponential(b)
  e2 = f32[256]{0} exponential(b)
  s1 = f32[256]{0} add(a, e1)
  s2 = f32[256]{0} add(a, e2)
  ROOT r = (f32[256]{0}, f32[256]{0}) tuple(s1, s2)
}
"""
    analysis = runtime.analyze(text)
    assert count(analysis.module, "fusion") + count(analysis.module, "add") == 1
    slices = analysis.buffer_assignment.output_slices()
    assert slices[(0,)] != slices[(1,)]
    assert slices[(0,)] == analysis.buffer_assignment.parameter_slice(0)
    a = np.linspace(-1, 1, 256, dtype=np.float32)
    b = np.linspace(0, 2, 256, dtype=np.float32)
    first, second = runtime.compile(text)(a, b)
    np.testing.assert_allclose(first, a + np.exp(b), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(first, second)


def test_identical_loops_run_once_with_the_same_results():
    text = """
HloModule loops
cond {
  s = (s32[], f32[64]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[64]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[64]{0} get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = f32[64]{0} multiply(v, v)
  ROOT t = (s32[], f32[64]{0}) tuple(j, w)
}
ENTRY e {
  x = f32[64]{0} parameter(0)
  zero = s32[] constant(0)
  init1 = (s32[], f32[64]{0}) tuple(zero, x)
  init2 = (s32[], f32[64]{0}) tuple(zero, x)
  l1 = (s32[], f32[64]{0}) while(init1), condition=cond, body=body
  l2 = (s32[], f32[64]{0}) while(init2), condition=cond, body=body
  r1 = f32[64]{0} get-tuple-element(l1), index=1
  r2 = f32[64]{0} get-tuple-element(l2), index=1
  ROOT r = f32[64]{0} add(r1, r2)
}
"""
    assert count(merged(text), "while") == 1
    x = np.linspace(0.5, 1.0, 64, dtype=np.float32)
    np.testing.assert_allclose(runtime.compile(text)(x), 2 * x ** 32, rtol=1e-5)


def test_a_bf16_weight_converted_for_two_products_gives_the_right_values():
    """The whole-model case behind the liveness rule (a bf16 weight read by a forward and a
    backward product), run: the two converts stay apart and both products are right."""
    text = LIVENESS.format(first="convert(w)", second="convert(w)", live_first="t",
                           live_shape="f32[8,64]{1,0}")
    w = (np.random.default_rng(1).standard_normal((64, 64)) / 8).astype(ml_dtypes.bfloat16)
    x, g = (np.full((8, 64), 0.25, np.float32), np.ones((8, 64), np.float32))
    t, dx = runtime.compile(text)(w, x, g)
    wf = w.astype(np.float32)
    np.testing.assert_allclose(t, np.tanh(x @ wf), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx, (np.tanh(x @ wf) * g) @ wf.T, rtol=1e-4, atol=1e-4)
