"""Sharded test programs: the shared 2-device examples (``../shared/spmd``, or
``$HLO_SPMD``) and the ones ``make_programs.py`` generates into ``tests/spmd/data``. Each
NAME has ``NAME.opt.hlo`` (XLA's per-device module) and ``NAME.npz`` (``arg_I_pP`` and XLA's
``out_J_pP`` for device P)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tests.corpus_data import REPO, compare_scaled

SHARED = Path(os.environ.get("HLO_SPMD", REPO.parent / "shared" / "spmd"))
GENERATED = Path(__file__).resolve().parent / "data"
TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}


def names(root: Path) -> list[str]:
    """The programs in ``root``; a missing folder is an error, never an empty list."""
    if not root.is_dir():
        raise FileNotFoundError(f"no sharded programs at {root} (set HLO_SPMD)")
    return sorted(p.name.removesuffix(".opt.hlo") for p in root.glob("*.opt.hlo"))


def device_arguments(data, devices: int) -> list[list[np.ndarray]]:
    count = len({k.split("_")[1] for k in data.files if k.startswith("arg_")})
    return [[data[f"arg_{i}_p{p}"] for i in range(count)] for p in range(devices)]


def typed(want: np.ndarray, got) -> np.ndarray:
    """XLA's output ``want`` as ``got``'s dtype where ``np.savez`` kept a type numpy lacks
    (bf16) as plain void bytes of its size."""
    dtype = np.asarray(got).dtype
    if want.dtype.type is np.void and want.dtype.names is None and \
            want.dtype.itemsize == dtype.itemsize:
        return want.view(dtype)
    return want


def mismatches(outs: list, data, devices: int) -> list[str]:
    """Every way device P's outputs differ from XLA's ``out_J_pP`` (scaled tolerance)."""
    problems = []
    for p in range(devices):
        got = outs[p] if isinstance(outs[p], tuple) else (outs[p],)
        want = sorted((k for k in data.files if k.startswith("out_") and k.endswith(f"_p{p}")),
                      key=lambda k: int(k.split("_")[1]))
        if len(got) != len(want):
            problems.append(f"device {p}: {len(got)} outputs, XLA has {len(want)}")
        for key, value in zip(want, got):
            problems += compare_scaled(key, np.asarray(value), typed(data[key], value),
                                       TOLERANCE)
    return problems
