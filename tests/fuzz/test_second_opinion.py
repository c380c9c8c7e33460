"""The fuzzer's second opinion (``differential.second_opinion``): a disagreement with XLA's
optimised output is settled only when XLA disagrees with itself or the program amplifies
rounding, never when ours is wrong."""

import numpy as np
import pytest

from . import differential
from .differential import examine, no_less_accurate
from .layout_programs import Case, Param, Value

# Found by the long run on seeds 9010-13038 (8 cases): XLA's algebraic simplifier merges a
# dynamic-slice of a dynamic-slice into one and clamps the summed start against the outer
# operand, so rows 21.. of a 24-row operand become row 23; HLO clamps each slice on its own
_CHAINED_SLICES = ["a = f32[3,10]{1,0} dynamic-slice(x, i, j), dynamic_slice_sizes={3,10}",
                   "b = f32[1,6]{1,0} dynamic-slice(a, k, l), dynamic_slice_sizes={1,6}"]


def _chained_slices_case() -> Case:
    x = np.arange(24 * 16, dtype=np.float32).reshape(24, 16)
    starts = {"i": 100, "j": 2, "k": 1, "l": 1}
    params = [Param(Value("x", (24, 16)), (1, 0), x)] + [
        Param(Value(name, (), "s32"), (), np.array(v, np.int32)) for name, v in starts.items()]
    return Case(params, list(_CHAINED_SLICES), [(Value("b", (1, 6)), (1, 0))])


def test_chained_dynamic_slices_clamp_each_slice():
    case = _chained_slices_case()
    want = np.arange(24 * 16, dtype=np.float32).reshape(24, 16)[21:24, 2:12][1:2, 1:7]
    text, args = case.module_text(), [p.data for p in case.params]
    for fusion in (True, False):
        np.testing.assert_array_equal(differential.ours(text, args, fusion)[0], want)
    np.testing.assert_array_equal(differential.xla_outputs(text, args, "algsimp")[0], want)


def test_xla_simplifier_disagreement_is_settled():
    findings = examine([_chained_slices_case()])
    assert findings and {f.settled for f in findings} == {"xla-simplifier"}


def test_a_wrong_value_is_never_settled(monkeypatch):
    right = differential.ours
    monkeypatch.setattr(differential, "ours",
                        lambda text, args, fusion: [o + 1 for o in right(text, args, fusion)])
    failures = differential.check([_chained_slices_case()])
    assert [f.how for f in failures] == ["fused", "unfused"]


@pytest.mark.parametrize("got, ok", [(0.2946, True), (0.2950, True), (0.31, False)])
def test_no_less_accurate_than_xla_against_f64(got, ok):
    exact, xla = np.float64(0.29465), np.float32(0.2944)  # XLA's f32 is 2.5e-4 off
    assert no_less_accurate(np.float32(got), xla, exact) is ok


def test_integers_no_farther_from_the_f64_result_than_xla():
    """An s32 convert of saturating tanhs, summed (seed 5143): XLA -4, ours -3, f64 -1."""
    exact, xla = np.array([0, 1, 2, -1], np.int32), np.array([1, 1, 2, -4], np.int32)
    assert no_less_accurate(np.array([0, 1, 2, -3], np.int32), xla, exact)
    assert no_less_accurate(np.array([1, 1, 2, -4], np.int32), xla, exact)
    assert not no_less_accurate(np.array([0, 0, 2, -1], np.int32), xla, exact)
    assert not no_less_accurate(np.array([0, 1, 2, -5], np.int32), xla, exact)


def test_negative_padding_before_a_reduce_window():
    """The long run's other simplifier disagreement (seed 20012, shrunk): XLA's simplifier
    folds a pad with a negative edge and interior padding into the reduce-window after it and
    sums an element too many; each element here counts the windows that see the one value."""
    text = """HloModule negative_pad
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY main {
  g = f32[1,1,1]{1,0,2} parameter(0)
  b = f32[1,1,1,3]{3,2,1,0} broadcast(g), dimensions={0,1,2}
  z = f32[] constant(0)
  p = f32[4,4,2,2]{3,2,1,0} pad(b, z), padding=2_1x1_2_1x1_0x-1_0
  ROOT w = f32[3,4,3,3]{3,1,2,0} reduce-window(p, z), window={size=2x3x2x2 pad=0_0x1_1x1_1x1_1}, to_apply=add_f32
}
"""
    g = np.array([[[-1.0]]], np.float32)
    padded = np.zeros((4, 4, 2, 2), np.float32)
    padded[2, 1, 1, :] = -1.0  # the broadcast value after the low pads; its first copy cut
    padded = np.pad(padded, [(0, 0), (1, 1), (1, 1), (1, 1)])
    want = np.array([[[[padded[i:i + 2, j:j + 3, k:k + 2, m:m + 2].sum() for m in range(3)]
                       for k in range(3)] for j in range(4)] for i in range(3)], np.float32)
    for fusion in (True, False):
        np.testing.assert_array_equal(differential.ours(text, [g], fusion)[0], want)
    np.testing.assert_array_equal(differential.xla_outputs(text, [g], "algsimp")[0], want)


_UNIT_REDUCE = """HloModule unit_reduce
mul_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] multiply(a, b)
}
ENTRY main {
  p = f32[1]{0} parameter(0)
  c = f32[] constant(0.1)
  ROOT r = f32[] reduce(p, c), dimensions={0}, to_apply=mul_f32
}
"""


def test_a_reduce_over_a_size_1_dimension_reads_its_initial_value():
    """Found by the widened fuzzer (seed 0): XLA's simplifier makes a reduce over size-1
    dimensions a reshape of its operand and drops a non-identity initial value (3, not
    0.1 * 3); ours and XLA without the simplifier compute the reduce, and the second opinion
    settles such a case as XLA's."""
    args = [np.array([3.0], np.float32)]
    for fusion in (True, False):
        np.testing.assert_allclose(differential.ours(_UNIT_REDUCE, args, fusion)[0], 0.3,
                                   rtol=1e-6)
    np.testing.assert_allclose(differential.xla_outputs(_UNIT_REDUCE, args, "algsimp")[0], 0.3,
                               rtol=1e-6)
    assert differential.SIMPLIFIER_WRONG[
        "a reduce over size-1 dimensions from a non-identity initial value"](_UNIT_REDUCE)
