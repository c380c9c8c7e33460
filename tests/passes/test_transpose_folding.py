"""Transpose folding: a dot reads a transposed operand in place (no transposed copy), with the
same values; a transpose that would reorder the dot's output dimensions stays."""

import numpy as np

import runtime
from runtime.pipeline import optimise
from runtime.passes.transpose_folding import fold_transposes_in_place

LOGITS = """
HloModule logits
ENTRY e {
  h = f32[16,64] parameter(0)
  w = f32[100,64] parameter(1)
  t = f32[64,100] transpose(w), dimensions={1,0}
  ROOT d = f32[16,100] dot(h, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""

# attention scores with K stored [batch, dim, keys] and transposed to [batch, keys, dim]
SCORES = """
HloModule scores
ENTRY e {
  q = f32[3,8,16] parameter(0)
  k = f32[3,16,8] parameter(1)
  kt = f32[3,8,16] transpose(k), dimensions={0,2,1}
  ROOT s = f32[3,8,8] dot(q, kt), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
}
"""

# the transpose swaps the lhs free dimensions: folding would swap the output's too
SWAPPED_FREE = """
HloModule swapped
ENTRY e {
  x = f32[5,4,6] parameter(0)
  y = f32[6,3] parameter(1)
  xt = f32[4,5,6] transpose(x), dimensions={1,0,2}
  ROOT d = f32[4,5,3] dot(xt, y), lhs_contracting_dims={2}, rhs_contracting_dims={0}
}
"""


def _folded(text: str):
    module = runtime.parse(text)
    fold_transposes_in_place(module)
    runtime.parse(module.to_text())          # still valid HLO
    return module


def _rng(*shapes):
    rng = np.random.default_rng(1)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def test_logits_read_the_embedding_in_place():
    module = _folded(LOGITS)
    dot = module.entry.root
    assert [o.name for o in dot.operands] == ["h", "w"]
    assert tuple(dot.attrs["rhs_contracting_dims"]) == (1,)
    assert "transpose" not in {i.opcode for i in module.entry.instructions}
    h, w = _rng((16, 64), (100, 64))
    exe = runtime.compile(LOGITS)
    np.testing.assert_allclose(exe(h, w), h @ w.T, rtol=1e-5, atol=1e-5)
    assert exe.memory_stats.temp == 0


def test_batched_scores_fold_the_keys_transpose():
    module = _folded(SCORES)
    dot = module.entry.root
    assert [o.name for o in dot.operands] == ["q", "k"]
    assert tuple(dot.attrs["rhs_batch_dims"]) == (0,)
    assert tuple(dot.attrs["rhs_contracting_dims"]) == (1,)
    q, k = _rng((3, 8, 16), (3, 16, 8))
    np.testing.assert_allclose(runtime.compile(SCORES)(q, k), np.einsum("bqd,bdk->bqk", q, k),
                               rtol=1e-5, atol=1e-5)


def test_a_transpose_reordering_free_dimensions_stays():
    module = _folded(SWAPPED_FREE)
    assert module.entry.root.operands[0].opcode == "transpose"
    assert any(i.opcode == "transpose" for i in optimise(runtime.parse(SWAPPED_FREE)).instructions())
    x, y = _rng((5, 4, 6), (6, 3))
    np.testing.assert_allclose(runtime.compile(SWAPPED_FREE)(x, y),
                               np.einsum("abk,kc->bac", x, y), rtol=1e-5, atol=1e-5)


# a loop's weight gradient: the dot's result is transposed into the accumulator's order
GRADIENT = """
HloModule gradient
ENTRY e {
  dz = f32[2,32,24] parameter(0)
  h = f32[2,32,16] parameter(1)
  acc = f32[2,16,24] parameter(2)
  d = f32[2,24,16] dot(dz, h), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={HIGHEST, DEFAULT}
  t = f32[2,16,24]{1,2,0} transpose(d), dimensions={0,2,1}
  ROOT r = f32[2,16,24] add(acc, t)
}
"""

# the same transpose of a dot that has another reader stays
SHARED_DOT = GRADIENT.replace("ROOT r = f32[2,16,24] add(acc, t)",
                              "r = f32[2,16,24] add(acc, t)\n  ROOT out = (f32[2,16,24], f32[2,24,16]) tuple(r, d)")


def test_a_transposed_dot_result_becomes_the_dot_with_swapped_operands():
    module = _folded(GRADIENT)
    dot = module.entry.root.operands[1]
    assert dot.opcode == "dot" and [o.name for o in dot.operands] == ["h", "dz"]
    assert [k for k in dot.attrs if k.endswith("_dims")] == [
        "lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims"]
    assert dot.attrs["operand_precision"].names == ("DEFAULT", "HIGHEST")
    assert dot.shape.minor_to_major == (2, 1, 0)       # row-major, not the printed {1,2,0}
    assert "transpose" not in {i.opcode for i in module.entry.instructions}
    fused = optimise(runtime.parse(GRADIENT)).entry.root
    assert fused.opcode == "fusion" and str(fused.attrs["kind"]) == "kOutput"
    dz, h, acc = _rng((2, 32, 24), (2, 32, 16), (2, 16, 24))
    np.testing.assert_allclose(runtime.compile(GRADIENT)(dz, h, acc),
                               acc + np.einsum("bkn,bkm->bmn", dz, h), rtol=1e-5, atol=1e-5)


def test_a_transposed_dot_with_another_reader_stays_a_transpose():
    module = _folded(SHARED_DOT)
    assert module.entry.root.operands[0].operands[1].opcode == "transpose"


# the transposed dot result is an output in the transpose's printed layout: the swapped dot
# keeps that layout, since the tuple (and the entry's result) take its bytes as laid out
TUPLE_OUTPUT = """
HloModule m, entry_computation_layout={(f32[3,4]{1,0}, f32[3,6]{1,0})->(f32[6,4]{0,1}, f32[3,6]{1,0})}
ENTRY main {
  g = f32[3,4]{1,0} parameter(0)
  x = f32[3,6]{1,0} parameter(1)
  d = f32[4,6]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  t = f32[6,4]{0,1} transpose(d), dimensions={1,0}
  ROOT tuple = (f32[6,4]{0,1}, f32[3,6]{1,0}) tuple(t, x)
}
"""


def test_a_swapped_dot_read_as_laid_out_keeps_the_printed_layout():
    module = _folded(TUPLE_OUTPUT)
    dot = module.entry.root.operands[0]
    assert dot.opcode == "dot" and dot.shape.minor_to_major == (0, 1)
    g = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = np.arange(18, dtype=np.float32).reshape(3, 6) * 0.5
    got, same = runtime.compile(TUPLE_OUTPUT)(g, x)
    np.testing.assert_array_equal(got, (g.T @ x).T)
    np.testing.assert_array_equal(same, x)
