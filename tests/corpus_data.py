"""Corpus and whole-model programs as test and benchmark data: inputs (stored or regenerated
from their recipe) and the comparison with XLA's reference outputs (arrays, or the index's
``expected_summary``) under the index's per-output tolerances.

Kept free of pytest so ``benchmarks/`` can import it too.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("HLO_CORPUS", REPO.parent / "shared" / "corpus"))
MODELS = Path(os.environ.get("HLO_MODELS", REPO.parent / "shared" / "models"))

_NP = {"pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
       "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
       "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}


def load_index(root: Path = CORPUS) -> list[dict]:
    return json.loads((root / "index.json").read_text())


@dataclass
class Program:
    entry: dict
    root: Path = CORPUS

    @property
    def name(self) -> str:
        return self.entry["name"]

    def text(self, kind: str) -> str:
        return (self.root / self.entry["files"][kind]).read_text()

    def inputs(self) -> list[np.ndarray]:
        e = self.entry
        if e["files"]["npz"]:
            data = np.load(self.root / e["files"]["npz"])
            return [_typed(data[f"arg_{i}"], p["dtype"]) for i, p in enumerate(e["params"])]
        return [make_input(r) for r in e["inputs"]]

    def expected(self) -> list[np.ndarray] | None:
        e = self.entry
        if not e["files"]["npz"]:
            return None
        data = np.load(self.root / e["files"]["npz"])
        return [_typed(data[f"out_{i}"], r["dtype"]) for i, r in enumerate(e["results"])]


def programs() -> list[Program]:
    return [Program(e) for e in load_index()]


def model_programs() -> list[Program]:
    """The whole models of ``MODELS`` (``$HLO_MODELS``); [] when the folder is missing."""
    if not (MODELS / "index.json").is_file():
        return []
    return [Program(e, MODELS) for e in load_index(MODELS)]


def _typed(a: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return a.view(ml_dtypes.bfloat16)
    return a.astype(_NP[dtype], copy=False)


def make_input(recipe: dict) -> np.ndarray:
    rng = np.random.default_rng(recipe["seed"])
    shape = tuple(recipe["shape"])
    dtype = _NP[recipe["dtype"]]
    if recipe["dist"] == "normal":
        a = rng.standard_normal(size=shape) * recipe.get("scale", 1.0) + recipe.get("loc", 0.0)
    elif recipe["dist"] == "uniform":
        a = rng.uniform(recipe["low"], recipe["high"], size=shape)
    elif recipe["dist"] == "integers":
        a = rng.integers(recipe["low"], recipe["high"], size=shape, dtype=np.int64)
    else:
        raise ValueError(f"unknown input distribution {recipe['dist']}")
    return a.astype(dtype)


def flatten(result) -> list[np.ndarray]:
    if isinstance(result, tuple):
        out = []
        for r in result:
            out.extend(flatten(r))
        return out
    return [np.asarray(result)]


def mismatches(program: Program, got: list[np.ndarray]) -> list[str]:
    """Human-readable differences from XLA's reference ([] when everything matches)."""
    e = program.entry
    problems = []
    if len(got) != len(e["results"]):
        return [f"{len(got)} outputs, expected {len(e['results'])}"]
    expected = program.expected()
    for i, g in enumerate(got):
        tol = e["out_tolerance"][i]
        want_meta = e["results"][i]
        if list(g.shape) != list(want_meta["shape"]):
            problems.append(f"out_{i}: shape {g.shape}, expected {want_meta['shape']}")
            continue
        if expected is not None:
            problems.extend(compare_scaled(f"out_{i}", g, expected[i], tol))
        else:
            problems.extend(_compare_summary(f"out_{i}", g, e["expected_summary"][i], tol))
    return problems


def _as_float(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    if a.dtype == ml_dtypes.bfloat16 or a.dtype.kind == "f":
        return a.astype(np.float64)
    return a


def output_differences(got: list[np.ndarray], want: list[np.ndarray], rtol: float,
                       atol: float = 0.0) -> list[str]:
    """Human-readable differences of ``got`` from XLA's outputs ``want`` ([] when they match):
    each output compared by :func:`compare_scaled`."""
    if len(got) != len(want):
        return [f"{len(got)} outputs, expected {len(want)}"]
    problems = []
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape:
            problems.append(f"out_{i}: shape {g.shape}, expected {w.shape}")
            continue
        problems.extend(compare_scaled(f"out_{i}", g, w, {"rtol": rtol, "atol": atol}))
    return problems


def compare_scaled(name: str, got: np.ndarray, want: np.ndarray, tol: dict) -> list[str]:
    """Integers and booleans exactly; floating outputs with the reference's NaNs and
    infinities, and finite elements within ``atol + rtol * s``, where ``s`` is the output's
    largest finite magnitude. Scaled by the whole output, not by each element: XLA's CPU code
    sums in the order of the host's vector width, so an element that cancels to near zero
    differs from machine to machine (and from ours) by the rounding of its larger terms, not
    of its own value (0.25777316 against 0.25776899 in a gradient whose values reach 37.8)."""
    if got.dtype != want.dtype:
        return [f"{name}: dtype {got.dtype}, expected {want.dtype}"]
    g, w = _as_float(got), _as_float(want)
    if g.dtype.kind not in "fc":
        bad = np.argwhere(g != w)
        if len(bad):
            k = tuple(bad[0])
            return [f"{name}: {len(bad)} elements differ, first at {k}: got {g[k]}, want {w[k]}"]
        return []
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    problems = []
    if (nan_g != nan_w).any():
        k = tuple(np.argwhere(nan_g != nan_w)[0])
        problems.append(f"{name}: NaN mismatch at {k}: got {g[k]}, want {w[k]}")
    inf_mismatch = (np.isinf(w) | np.isinf(g)) & ~(nan_g | nan_w) & (g != w)
    if inf_mismatch.any():
        k = tuple(np.argwhere(inf_mismatch)[0])
        problems.append(f"{name}: inf mismatch at {k}: got {g[k]}, want {w[k]}")
    finite = np.isfinite(w) & np.isfinite(g)
    scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0))
    with np.errstate(invalid="ignore"):
        err = np.abs(g - w)
    limit = tol["atol"] + tol["rtol"] * scale
    bad = finite & (err > limit)
    if bad.any():
        k = tuple(np.argwhere(bad)[0])
        problems.append(f"{name}: {int(bad.sum())} elements off by up to "
                        f"{float(err[bad].max()):.3g} where values reach {scale:.3g} "
                        f"(rtol={tol['rtol']} atol={tol['atol']}), first at {k}: "
                        f"got {g[k]!r}, want {w[k]!r}")
    return problems


def _compare_summary(name: str, got: np.ndarray, s: dict, tol: dict) -> list[str]:
    a = _as_float(got).astype(np.float64).reshape(-1)
    rtol, atol = tol["rtol"], tol["atol"]
    problems = []

    def close(what, g, w, limit):
        if not abs(g - w) <= limit:
            problems.append(f"{name}: {what} {g!r}, expected {w!r} (limit {limit:.3g})")

    abs_sum = float(np.abs(a).sum())
    for idx, want in s["samples"]:
        close(f"sample[{idx}]", float(a[idx]), want, atol + rtol * abs(want))
    for what in ("min", "max", "mean"):
        want = s[what]
        got_v = float(getattr(np, what)(a))
        close(what, got_v, want, atol + rtol * abs(want))
    size = a.size
    close("sum", float(a.sum()), s["sum"], atol * size + rtol * s["abs_sum"])
    close("abs_sum", abs_sum, s["abs_sum"], atol * size + rtol * s["abs_sum"])
    w = (np.arange(size) % 17 - 8).astype(np.float64)
    close("wsum17", float((a * w).sum()), s["wsum17"], 8 * (atol * size + rtol * s["abs_sum"]))
    close("sq_sum", float((a * a).sum()), s["sq_sum"], 2 * (atol * s["abs_sum"] + rtol * s["sq_sum"]))
    return problems
