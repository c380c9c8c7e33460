"""sin, cos and tan of f32 are right on every lane of a vector holding a huge or infinite
lane: PoCL's vector forms reduce the whole vector's range with the huge lane's method, which
gave sin(1e-7) = 0.0131 beside 3.4e38 (``templates._trig`` runs such vectors lane by lane)."""
import numpy as np
import pytest

import runtime

_MODULE = """HloModule m
ENTRY e {
  x = f32[4,64]{1,0} parameter(0)
  ROOT s = f32[4,64]{1,0} $OP(x)
}
"""


@pytest.mark.parametrize("op,reference", [("sine", np.sin), ("cosine", np.cos), ("tan", np.tan)])
@pytest.mark.parametrize("huge", [3.4e38, np.inf, -np.inf, 1e9, 70000.0])
@pytest.mark.parametrize("fusion", [True, False])
def test_small_lanes_beside_a_huge_one(op: str, reference, huge: float, fusion: bool) -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([10.0 ** rng.uniform(-8, 0.5, (4, 32)), rng.uniform(-4, 4, (4, 32))],
                       axis=1).astype(np.float32)
    x[:, ::7] = huge
    got = np.asarray(runtime.compile(_MODULE.replace("$OP", op), fusion=fusion)(x))
    small = np.abs(x) < 10
    with np.errstate(invalid="ignore"):
        want = reference(x.astype(np.float64))
    np.testing.assert_allclose(got[small], want[small], rtol=4e-7, atol=0)
    finite_huge = np.isfinite(x) & ~small
    np.testing.assert_allclose(got[finite_huge], reference(x[finite_huge].astype(np.float64)),
                               rtol=1e-5, atol=1e-6)
    assert np.isnan(got[np.isinf(x)]).all()
