"""Entry outputs with dynamic dimensions against XLA's CPU backend: each run returns such an
output at its runtime shape, holding XLA's compact array (its first ``product(sizes)``
elements in row-major order), in a tuple beside static outputs, fused or not, from a
donated input too; the analysis keeps describing its buffer at the bound."""

from __future__ import annotations

import numpy as np
import pytest

import runtime

from .test_dynamic_padding import _compact, _ours, _xla

# ranks 1 to 3, one to all dimensions dynamic, beside a static array and a scalar
OUTPUTS = """HloModule outputs
ENTRY e {
  v = f32[8] parameter(0)
  m = f32[3,5] parameter(1)
  c = f32[2,4,3] parameter(2)
  s = s32[] parameter(3)
  t = s32[] parameter(4)
  dv = f32[<=8] set-dimension-size(v, s), dimensions={0}
  nv = f32[<=8] negate(dv)
  dm = f32[<=3,5] set-dimension-size(m, t), dimensions={0}
  dm2 = f32[<=3,<=5] set-dimension-size(dm, s), dimensions={1}
  em = f32[<=3,<=5] multiply(dm2, dm2)
  dc = f32[2,<=4,3] set-dimension-size(c, t), dimensions={1}
  dc2 = f32[2,<=4,<=3] set-dimension-size(dc, t), dimensions={2}
  ac = f32[2,<=4,<=3] add(dc2, dc2)
  ROOT r = (f32[<=8], f32[3,5], f32[<=3,<=5], f32[2,<=4,<=3], s32[]) tuple(nv, m, em, ac, s)
}
"""

# one output, its minor dimension dynamic, aliasing its input
ALIASED = """HloModule aliased, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  p = f32[3,8] parameter(0)
  s = s32[] parameter(1)
  d = f32[3,<=8] set-dimension-size(p, s), dimensions={1}
  ROOT n = f32[3,<=8] negate(d)
}
"""


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("s,t", [(0, 0), (2, 1), (3, 2), (5, 3)])
def test_outputs_of_several_ranks_are_xlas_at_their_runtime_shapes(s, t, fusion):
    rng = np.random.default_rng(s * 10 + t)
    args = [rng.standard_normal(d).astype(np.float32) for d in ((8,), (3, 5), (2, 4, 3))]
    args += [np.int32(s), np.int32(t)]
    got, want = _ours(OUTPUTS, *args, fusion=fusion), _xla(OUTPUTS, *args)
    runtime_shapes = [(s,), None, (t, s), (2, t, t), None]
    for g, w, shape in zip(got, want, runtime_shapes, strict=True):
        np.testing.assert_array_equal(g, w if shape is None else _compact(w, shape),
                                      strict=True)


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("size", [0, 5, 8])
def test_a_donated_input_holds_the_compact_output(size, fusion):
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    (want,) = _xla(ALIASED, x, np.int32(size))
    exe = runtime.compile(ALIASED, fusion=fusion)
    got = exe.run(runtime.device_put(x, exe.device), np.int32(size), donate=0)
    assert exe.last_run is not None and exe.last_run.donated == (0,)
    np.testing.assert_array_equal(np.asarray(got), _compact(want, (3, size)), strict=True)
    assert exe.signature() == "(p: f32[3,8], s: s32[]) -> f32[3,<=8]"


def test_sizes_past_the_bound_or_negative_are_clamped():
    """XLA's CPU backend reads past its buffers for such sizes: ours clamp them."""
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    (high,), (low,) = (_ours(ALIASED, x, np.int32(n)) for n in (9, -1))
    np.testing.assert_array_equal(high, -x, strict=True)
    assert low.shape == (3, 0)


def test_the_analysis_describes_the_output_at_its_bound():
    analysis = runtime.analyze(ALIASED)
    output = analysis.buffer_assignment.output_slices()[(0,)]
    assert output.size == 3 * 8 * 4
