"""The modules the tutorials read are what ``notebooks/modules/make_modules.py`` makes, and
small enough to ship."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import runtime

from ..conftest import REPO
from ..corpus_data import output_differences

MODULES = REPO / "notebooks" / "modules"
GENERATED = ("attention", "mlp_forward", "sgd_tanh", "transformer_train_step")
# notebook 07's partitioned steps: XLA's per-device text and each device's slices
SHARDED = ("transformer_dp", "transformer_fsdp", "transformer_tp")
WHOLE_MODEL = MODULES / "vit_tiny_train_step.hlo"     # text only: its inputs are 32 MB


def test_the_shipped_files_are_small():
    files = [MODULES / f"{name}.{ext}" for name in GENERATED for ext in ("hlo", "npz", "json")]
    assert all(f.is_file() for f in files)
    assert sum(f.stat().st_size for f in files) < 1_000_000
    sharded = [MODULES / f"{name}.{ext}" for name in SHARDED for ext in ("opt.hlo", "json")]
    assert all(f.is_file() for f in sharded)
    assert sum(f.stat().st_size for f in sharded) < 1_000_000


def test_the_whole_model_is_vit_tiny_sized_and_small():
    """A ViT-tiny training step (the browser tests' whole model): about 6,000 lines and 240
    parameters (weights, two Adam moments, the step, images and labels) in a few hundred KB."""
    text = WHOLE_MODEL.read_text()
    assert WHOLE_MODEL.stat().st_size < 500_000
    assert 5_000 < text.count("\n") < 8_000
    module = runtime.parse(text)
    assert len(module.entry.parameters) == 3 * 80 + 3


def test_the_script_regenerates_the_shipped_files(tmp_path):
    """JAX prints the same text for the same program and seeded inputs (with the jaxlib the
    ``.json`` files record); a change to the script must come with regenerated files. XLA's
    outputs are equal only to rounding: its CPU code sums in the order of the host's vector
    width (an AVX-512 host and an AVX2 one differ in the last bits of a few gradients, by
    4e-6 in one whose values reach 37.8), so they are compared relative to each output's
    largest magnitude."""
    subprocess.run([sys.executable, str(MODULES / "make_modules.py"), str(tmp_path)],
                   check=True, capture_output=True, timeout=300)
    for name in GENERATED:
        for ext in ("hlo", "json"):
            assert (tmp_path / f"{name}.{ext}").read_text() == \
                (MODULES / f"{name}.{ext}").read_text(), f"{name}.{ext}"
        made, shipped = np.load(tmp_path / f"{name}.npz"), np.load(MODULES / f"{name}.npz")
        assert sorted(made.files) == sorted(shipped.files)
        for key in made.files:
            if not key.startswith("out_"):
                np.testing.assert_array_equal(made[key], shipped[key], err_msg=f"{name} {key}")
        outs = [f"out_{i}" for i in range(sum(k.startswith("out_") for k in made.files))]
        problems = output_differences([made[k] for k in outs], [shipped[k] for k in outs], 1e-5)
        assert not problems, f"{name}: " + "\n".join(problems)
    assert (tmp_path / WHOLE_MODEL.name).read_text() == WHOLE_MODEL.read_text()
    for name in SHARDED:
        check_sharded(name, tmp_path, MODULES)


def check_sharded(name: str, made: Path, shipped: Path) -> None:
    """XLA's optimised text may differ with the host (its CPU backend picks fusions and
    thread partitions for the machine), so a regenerated sharded step must agree where the
    notebook relies on it: the module's signature and device count (its first line), and
    the slice of every input and output each device holds."""
    first = [(d / f"{name}.opt.hlo").read_text().splitlines()[0] for d in (made, shipped)]
    assert first[0] == first[1], name
    infos = [json.loads((d / f"{name}.json").read_text()) for d in (made, shipped)]
    for key in ("devices", "arg_slices", "out_slices"):
        assert infos[0][key] == infos[1][key], f"{name} {key}"
