"""XLA's partitioned modules run on every device with run_spmd and match XLA's per-device
outputs: the shared 2-device examples and the generated ones (``make_programs.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from tests.spmd.spmd_data import GENERATED, SHARED, device_arguments, mismatches, names


def _check(root, name: str, donate=()) -> None:
    exe = runtime.compile((root / f"{name}.opt.hlo").read_text())
    data = np.load(root / f"{name}.npz")
    devices = exe.device_count
    assert devices > 1
    outs = exe.run_spmd(device_arguments(data, devices), donate=donate)
    assert len(outs) == devices
    assert not mismatches(outs, data, devices)
    if name.endswith("_donated"):       # jit's donated parameters were updated in place
        assert exe.last_run is not None and exe.last_run.donated


@pytest.mark.parametrize("name", ["dp2_mlp_sgd", "tp2_mlp_forward", "shardmap2_swap_ppermute"])
def test_shared_example_matches_xla_on_every_device(name):
    assert name in names(SHARED)
    _check(SHARED, name)


@pytest.mark.parametrize("name", names(GENERATED) if GENERATED.is_dir() else ["(none)"])
def test_generated_example_matches_xla_on_every_device(name):
    assert name in names(GENERATED)
    _check(GENERATED, name, donate="all")
