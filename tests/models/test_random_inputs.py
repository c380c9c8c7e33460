"""``runtime.random_arguments`` on a whole model: the ViT-tiny training step (243 parameters)
runs on seeded random inputs and agrees with XLA's CPU backend on the same inputs.

Random normal values in an Adam state that must be non-negative (the second moment) make
``sqrt`` give NaN in many outputs; XLA gives the same NaNs, so the check is that the NaN
patterns agree and every other value agrees to rounding."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import runtime

from ..conftest import REPO
from ..corpus_data import MODELS

pytestmark = pytest.mark.slow


def test_vit_on_random_inputs_matches_xla():
    jax = pytest.importorskip("jax")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import xla_cpu
    text = (MODELS / "vit_tiny_train_step.hlo").read_text()
    exe = runtime.compile(text)
    args = exe.random_arguments(seed=1)
    assert len(args) == 243
    ours = exe(*args)
    reference = xla_cpu.compile_hlo(text).executable.execute([jax.device_put(a) for a in args])
    assert len(ours) == len(reference) == 243
    for k, (got, want) in enumerate(zip(ours, reference)):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"output {k}")
        finite = ~np.isnan(want)
        scale = max(np.abs(want[finite]).max(initial=0), 1e-6)
        np.testing.assert_allclose(got[finite], want[finite], rtol=0, atol=1e-5 * scale,
                                   err_msg=f"output {k}")
