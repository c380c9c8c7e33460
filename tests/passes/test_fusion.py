"""The fusion pass: which instructions end up in which kernel, and that the fused module is
valid HLO computing the same values."""

import numpy as np
import pytest

import runtime
from runtime.hlo.verifier import verify
from runtime.passes.fusion import fuse
from runtime.target import CPU, Target
from runtime.pipeline import optimise

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def fused(text: str, target: Target = CPU):
    out = fuse(runtime.parse(text), target)
    printed = out.to_text()
    again = runtime.parse(printed)           # re-parses and verifies
    assert again.to_text() == printed
    return out


def fusions(module) -> list:
    return [i for i in module.entry.instructions if i.opcode == "fusion"]


def members(fusion) -> list[str]:
    return [i.opcode for i in fusion.attrs["calls"].instructions if i.opcode != "parameter"]


CHAIN = """
HloModule chain
ENTRY e {
  x = f32[1000] parameter(0)
  y = f32[1000] parameter(1)
  one = f32[] constant(1)
  ones = f32[1000] broadcast(one), dimensions={}
  t = f32[1000] tanh(x)
  m = f32[1000] multiply(t, y)
  ROOT r = f32[1000] add(m, ones)
}
"""


def test_elementwise_chain_with_broadcast_becomes_one_loop_fusion():
    out = fused(CHAIN)
    [f] = fusions(out)
    assert out.entry.root is f and str(f.attrs["kind"]) == "kLoop"
    assert sorted(members(f)) == ["add", "broadcast", "constant", "multiply", "tanh"]
    assert [i.opcode for i in out.entry.instructions] == ["parameter", "parameter", "fusion"]
    x, y = np.linspace(-2, 2, 1000, dtype=np.float32), np.full(1000, 3, np.float32)
    np.testing.assert_allclose(runtime.compile(CHAIN)(x, y), np.tanh(x) * y + 1, rtol=1e-6, atol=1e-6)


def test_the_input_module_is_untouched_and_fusing_twice_prints_the_same():
    module = runtime.parse(CHAIN)
    before = module.to_text()
    assert fuse(module).to_text() == fuse(module).to_text()
    assert module.to_text() == before


def test_expensive_producer_with_two_consumers_is_computed_once():
    out = fused("""
HloModule shared
ENTRY e {
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  e = f32[64] exponential(x)
  a = f32[64] add(e, y)
  b = f32[64] multiply(e, y)
  ROOT t = (f32[64], f32[64]) tuple(a, b)
}
""")
    assert sum(i.opcode == "exponential" for i in out.instructions()) == 1
    assert any(i.opcode == "exponential" for i in out.entry.instructions)


def test_cheap_producer_is_duplicated_into_each_consumer():
    out = fused("""
HloModule dup
ENTRY e {
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  s = f32[] parameter(2)
  b = f32[64] broadcast(s), dimensions={}
  a = f32[64] add(b, x)
  m = f32[64] multiply(b, y)
  ROOT t = (f32[64], f32[64]) tuple(a, m)
}
""")
    fs = fusions(out)
    assert len(fs) == 2 and all("broadcast" in members(f) for f in fs)
    assert not any(i.opcode == "broadcast" for i in out.entry.instructions), "dead original"


def test_expensive_scalar_read_by_a_broadcast_is_not_recomputed_per_element():
    out = fused("""
HloModule reuse
ENTRY e {
  s = f32[] parameter(0)
  y = f32[4096] parameter(1)
  e = f32[] exponential(s)
  b = f32[4096] broadcast(e), dimensions={}
  ROOT a = f32[4096] add(b, y)
}
""")
    [f] = fusions(out)
    assert "exponential" not in members(f)
    assert any(i.opcode == "exponential" for i in out.entry.instructions)


GATHER_BUCKETS = """
HloModule buckets
ENTRY e {
  table = f32[32,SLICE]{1,0} parameter(0)
  d = f32[128,128]{1,0} parameter(1)
  l = f32[128,128]{1,0} log(d)
  b = s32[128,128]{1,0} convert(l)
  i = s32[128,128,1]{2,1,0} reshape(b)
  ROOT g = f32[128,128,SLICE]{2,1,0} gather(table, i), offset_dims={2}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=2, slice_sizes={1,SLICE}
}
"""


@pytest.mark.parametrize("slice_size, fused_log", [(4, False), (1, True)])
def test_an_expensive_index_is_not_recomputed_for_each_element_of_its_gathered_slice(
        slice_size, fused_log):
    """T5's relative-position buckets (a ``log`` per query-key pair) index a table row per
    head: fused into the gather, each bucket was computed once per head (and the whole kernel
    is a scalar one): 0.83 ms of a 20 ms encoder. With a one-element slice the index is read
    once per output element, and fusing it costs nothing."""
    out = fused(GATHER_BUCKETS.replace("SLICE", str(slice_size)))
    [g] = [i for i in out.entry.instructions if i.opcode == "fusion" and "gather" in members(i)]
    assert ("log" in members(g)) == fused_log
    table = np.random.default_rng(0).standard_normal((32, slice_size)).astype(np.float32)
    d = np.random.default_rng(1).uniform(1, 1e13, (128, 128)).astype(np.float32)
    got = runtime.compile(GATHER_BUCKETS.replace("SLICE", str(slice_size)))(table, d)
    rows = np.clip(np.log(d).astype(np.int32), 0, 31)
    np.testing.assert_array_equal(got, table[rows])


def test_reduction_fuses_its_elementwise_producers_as_an_input_fusion():
    text = f"""
HloModule red
{ADD}
ENTRY e {{
  x = f32[32,100] parameter(0)
  sq = f32[32,100] multiply(x, x)
  z = f32[] constant(0)
  ROOT r = f32[32] reduce(sq, z), dimensions={{1}}, to_apply=add
}}
"""
    [f] = fusions(fused(text))
    assert str(f.attrs["kind"]) == "kInput" and f.attrs["calls"].root.opcode == "reduce"
    assert "multiply" in members(f)
    x = np.random.default_rng(0).standard_normal((32, 100)).astype(np.float32)
    np.testing.assert_allclose(runtime.compile(text)(x), (x * x).sum(1), rtol=1e-5)


LAYERNORM = f"""
HloModule ln
{ADD}
ENTRY e {{
  x = f32[64,48]{{1,0}} parameter(0)
  g = f32[48]{{0}} parameter(1)
  z = f32[] constant(0)
  n = f32[] constant(48)
  s = f32[64]{{0}} reduce(x, z), dimensions={{1}}, to_apply=add
  s1 = f32[64,1]{{1,0}} reshape(s)
  nb = f32[64,1]{{1,0}} broadcast(n), dimensions={{}}
  mean = f32[64,1]{{1,0}} divide(s1, nb)
  mean2 = f32[64]{{0}} reshape(mean)
  mb = f32[64,48]{{1,0}} broadcast(mean2), dimensions={{0}}
  c = f32[64,48]{{1,0}} subtract(x, mb)
  c2 = f32[64,48]{{1,0}} multiply(c, c)
  v = f32[64]{{0}} reduce(c2, z), dimensions={{1}}, to_apply=add
  eps = f32[] constant(1e-5)
  ve = f32[64]{{0}} broadcast(eps), dimensions={{}}
  nv = f32[64]{{0}} broadcast(n), dimensions={{}}
  var = f32[64]{{0}} divide(v, nv)
  ve2 = f32[64]{{0}} add(var, ve)
  r = f32[64]{{0}} rsqrt(ve2)
  rb = f32[64,48]{{1,0}} broadcast(r), dimensions={{0}}
  y = f32[64,48]{{1,0}} multiply(c, rb)
  gb = f32[64,48]{{1,0}} broadcast(g), dimensions={{1}}
  ROOT out = f32[64,48]{{1,0}} multiply(y, gb)
}}
"""


def _layernorm(x, g):
    c = x - x.mean(1, keepdims=True)
    return c / np.sqrt((c * c).mean(1, keepdims=True) + 1e-5) * g


def test_layernorm_becomes_one_row_fusion_and_matches_numpy():
    [f] = fusions(fused(LAYERNORM))
    assert members(f).count("reduce") == 2 and str(f.attrs["kind"]) == "kLoop"
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    g = rng.standard_normal(48).astype(np.float32)
    np.testing.assert_allclose(runtime.compile(LAYERNORM)(x, g), _layernorm(x, g),
                               rtol=1e-4, atol=1e-5)


def test_row_fusion_can_be_switched_off_per_target():
    import dataclasses
    target = dataclasses.replace(CPU, fusion=dataclasses.replace(CPU.fusion, row_fusion=False))
    out = fused(LAYERNORM, target)
    assert all(members(f).count("reduce") <= 1 for f in fusions(out))


def test_in_place_update_keeps_its_buffer_operand_a_parameter():
    text = """
HloModule dus
ENTRY e {
  buf = f32[16,8] parameter(0)
  u = f32[2,8] parameter(1)
  i = s32[] parameter(2)
  one = f32[] constant(1)
  ob = f32[2,8] broadcast(one), dimensions={}
  upd = f32[2,8] add(u, ob)
  z = s32[] constant(0)
  ROOT r = f32[16,8] dynamic-update-slice(buf, upd, i, z)
}
"""
    [f] = fusions(fused(text))
    comp = f.attrs["calls"]
    assert comp.root.opcode == "dynamic-update-slice"
    base = comp.root.operands[0]
    assert base.opcode == "parameter" and f.operands[base.parameter_number].name == "buf"
    assert "add" in members(f)
    buf = np.zeros((16, 8), np.float32)
    u = np.arange(16, dtype=np.float32).reshape(2, 8)
    want = buf.copy()
    want[5:7] = u + 1
    np.testing.assert_array_equal(runtime.compile(text)(buf, u, np.int32(5)), want)


def test_dot_with_elementwise_consumers_is_an_output_fusion():
    text = """
HloModule mlp
ENTRY e {
  a = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  b = f32[4] parameter(2)
  d = f32[8,4] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[8,4] broadcast(b), dimensions={1}
  ROOT s = f32[8,4] add(d, bb)
}
"""
    out = fused(text)
    [f] = fusions(out)
    assert str(f.attrs["kind"]) == "kOutput" and sorted(members(f)) == ["add", "broadcast", "dot"]
    assert [o.name for o in f.operands] == ["a", "w", "b"], "the dot's operands are not fused"
    rng = np.random.default_rng(2)
    a, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 4), (4,)))
    np.testing.assert_allclose(runtime.compile(text)(a, w, b), a @ w + b, rtol=1e-5, atol=1e-5)
    assignment = runtime.compile(text).buffer_assignment
    assert assignment.memory_stats.temp == 0, "no temp for the dot's result"


def test_dot_read_through_a_broadcast_is_not_fused():
    out = fused("""
HloModule dotb
ENTRY e {
  a = f32[8,16] parameter(0)
  w = f32[16] parameter(1)
  d = f32[8] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  db = f32[8,5] broadcast(d), dimensions={0}
  ROOT s = f32[8,5] negate(db)
}
""")
    assert any(i.opcode == "dot" for i in out.entry.instructions)


@pytest.mark.parametrize("opcode_line", [
    'c = f32[64] custom-call(x), custom_call_target="f"',
    'c = f32[64] sort(x), dimensions={0}, to_apply=lt',
])
def test_custom_calls_and_sorts_stay_outside(opcode_line):
    out = fused(f"""
HloModule opaque
lt {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}}
ENTRY e {{
  x = f32[64] parameter(0)
  {opcode_line}
  n = f32[64] negate(c)
  ROOT a = f32[64] abs(n)
}}
""")
    [f] = fusions(out)
    assert sorted(members(f)) == ["abs", "negate"]
    assert f.operands[0].opcode in ("custom-call", "sort")


def test_control_dependencies_are_respected():
    out = fused("""
HloModule ctl
ENTRY e {
  x = f32[64] parameter(0)
  a = f32[64] negate(x)
  b = f32[64] abs(a)
  ROOT c = f32[64] exponential(b), control-predecessors={a}
}
""")
    assert {i.name for i in out.entry.instructions} >= {"a", "c"}


def test_loop_bodies_are_fused_too():
    text = """
HloModule loop
cond {
  p = (s32[], f32[32]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[32]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[32] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  h = f32[] constant(0.5)
  hb = f32[32] broadcast(h), dimensions={}
  m = f32[32] multiply(v, hb)
  ROOT t = (s32[], f32[32]) tuple(i2, m)
}
ENTRY e {
  x = f32[32] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[32]) tuple(z, x)
  w = (s32[], f32[32]) while(t), condition=cond, body=body
  ROOT r = f32[32] get-tuple-element(w), index=1
}
"""
    out = fused(text)
    body = out.computation("body")
    assert any(i.opcode == "fusion" for i in body.instructions)
    x = np.arange(32, dtype=np.float32)
    np.testing.assert_allclose(runtime.compile(text)(x), x / 8)


def test_optimise_without_fusion_leaves_the_module_alone():
    module = runtime.parse(CHAIN)
    assert optimise(module, fusion=False).to_text() == module.to_text()
    assert fusions(optimise(module)) != []


def test_a_long_chain_fuses_and_stays_valid():
    lines = ["  x = f32[16] parameter(0)", "  v0 = f32[16] negate(x)"]
    lines += [f"  v{k} = f32[16] {'add' if k % 2 else 'multiply'}(v{k - 1}, x)"
              for k in range(1, 2000)]
    text = "HloModule long\nENTRY e {\n" + "\n".join(lines) + "\n  ROOT r = f32[16] abs(v1999)\n}\n"
    out = fused(text)
    verify(out)
    assert len(out.entry.instructions) < 40


def _prefix_sum(n: int, levels: int) -> str:
    """Hillis and Steele's scan: each level adds the running sums shifted by 2^k (a slice
    padded back to length), so level k reads level k-1 at two indices."""
    lines = [f"  x0 = f32[{n}] parameter(0)", "  zero = f32[] constant(0)"]
    for k in range(levels):
        shift = 1 << k
        lines += [f"  s{k} = f32[{n - shift}] slice(x{k}), slice={{[0:{n - shift}]}}",
                  f"  p{k} = f32[{n}] pad(s{k}, zero), padding={shift}_0",
                  f"  x{k + 1} = f32[{n}] add(x{k}, p{k})"]
    lines[-1] = lines[-1].replace(f"  x{levels} =", f"  ROOT x{levels} =")
    return "HloModule scan\nENTRY e {\n" + "\n".join(lines) + "\n}"


def test_fusion_stops_where_a_member_would_be_computed_at_too_many_indices():
    """Every level doubles the indices the kernel computes the levels below it at: one kernel
    for all eight levels would compute the input at 256 indices (code for each)."""
    from runtime.passes.fusion import MAX_INDEXINGS
    text = _prefix_sum(256, 8)
    fused = optimise(runtime.parse(text))
    kernels = [i for i in fused.entry.instructions if i.opcode == "fusion"]
    assert len(kernels) >= 2
    assert 2 ** 8 > MAX_INDEXINGS
    x = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    np.testing.assert_allclose(runtime.compile(text)(x), np.cumsum(x.astype(np.float64)),
                               rtol=1e-4, atol=1e-4)
    assert len(optimise(runtime.parse(_prefix_sum(256, 3))).entry.instructions) == 2
