"""Modules before partitioning (``NAME.hlo``: global shapes, ``sharding=`` annotations,
shard_map regions) run on one device and give XLA's global result (``out_J`` of the jitted
function on N devices): the shared examples and the generated ones, in Shardy's form and,
for shard_map programs, in the older GSPMD form (``NAME.gspmd.hlo``)."""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from tests.corpus_data import compare_scaled
from tests.spmd.spmd_data import GENERATED, SHARED, TOLERANCE, names, typed


def _globals(data, kind: str) -> list[np.ndarray]:
    count = len({k for k in data.files if k.startswith(kind + "_") and "_p" not in k})
    return [data[f"{kind}_{i}"] for i in range(count)]


def _check(root, name: str, form: str = "") -> None:
    text = (root / f"{name}{form}.hlo").read_text()
    data = np.load(root / f"{name}.npz")
    exe = runtime.compile(text)
    assert exe.device_count == 1
    outs = exe.run(*_globals(data, "arg"))
    outs = outs if isinstance(outs, tuple) else (outs,)
    want = _globals(data, "out")
    assert len(outs) == len(want)
    problems = []
    for j, (got, expected) in enumerate(zip(outs, want)):
        problems += compare_scaled(f"out_{j}", np.asarray(got), typed(expected, got), TOLERANCE)
    assert not problems


@pytest.mark.parametrize("name", ["dp2_mlp_sgd", "tp2_mlp_forward", "shardmap2_swap_ppermute"])
def test_shared_module_before_partitioning_matches_xla(name):
    assert name in names(SHARED)
    _check(SHARED, name)


BEFORE = sorted(p.name.removesuffix(".hlo") for p in GENERATED.glob("*.hlo")
                if not p.name.endswith((".opt.hlo", ".gspmd.hlo")))
GSPMD = sorted(p.name.removesuffix(".gspmd.hlo") for p in GENERATED.glob("*.gspmd.hlo"))


@pytest.mark.parametrize("name", BEFORE or ["(none)"])
def test_generated_module_before_partitioning_matches_xla(name):
    _check(GENERATED, name)


@pytest.mark.parametrize("name", GSPMD or ["(none)"])
def test_generated_gspmd_form_matches_xla(name):
    _check(GENERATED, name, ".gspmd")
