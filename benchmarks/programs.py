"""The programs a benchmark run measures: the corpus's bench programs (inputs from the index's
recipes, results checked against its summaries) and any HLO files given on the command line
(inputs drawn from each parameter's shape and type, results unchecked)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import ml_dtypes
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import runtime  # noqa: E402
from runtime.hlo.shape import ArrayShape  # noqa: E402
from tests.corpus_data import Program, flatten, mismatches, model_programs, programs  # noqa: E402


@dataclass
class BenchProgram:
    name: str
    path: Path
    text: str
    inputs: Callable[[], list[np.ndarray]]
    check: Callable[[object], list[str]] | None = None     # result -> problems
    xla_index: dict = field(default_factory=dict)     # the corpus index's XLA figures, if any

    @property
    def donates(self) -> bool:
        """Whether XLA (and our donated runs) consume arguments aliased to outputs."""
        module = runtime.parse(self.text)
        return bool(module.input_output_alias or module.buffer_donors)


def corpus_bench_programs(corpus: Path) -> list[BenchProgram]:
    out = []
    for p in programs():
        if p.entry.get("bench"):
            out.append(_from_corpus(p, corpus / p.entry["files"]["hlo"]))
    return out


def _from_corpus(p: Program, path: Path) -> BenchProgram:
    return BenchProgram(p.name, path, path.read_text(), p.inputs,
                        lambda got, p=p: mismatches(p, flatten(got)), p.entry["xla"])


def file_program(path: Path) -> BenchProgram:
    """An HLO file; with ``NAME.npz`` beside it (``arg_i`` inputs, ``out_i`` reference outputs,
    bf16 as raw ``uint16`` bits, as ``jax_models.py`` writes them) its inputs come from there
    and its results are checked, else inputs are drawn from each parameter's shape."""
    text = path.read_text()
    module = runtime.parse(text)
    shapes = [p.shape for p in module.entry.parameters]
    saved = path.with_suffix(".npz")
    if not saved.is_file():
        return BenchProgram(path.stem, path, text,
                            lambda: [_random(s, k) for k, s in enumerate(shapes)])
    data = np.load(saved)
    args = [_typed(data[f"arg_{k}"], s) for k, s in enumerate(shapes)]
    outputs = [data[f"out_{k}"] for k in range(sum(n.startswith("out_") for n in data.files))]
    return BenchProgram(path.stem, path, text, lambda: args,
                        lambda got: _differences(flatten(got), outputs))


def _typed(a: np.ndarray, shape) -> np.ndarray:
    return a.view(ml_dtypes.bfloat16) if shape.element_type.name == "bf16" else a


def _differences(got: list[np.ndarray], want: list[np.ndarray]) -> list[str]:
    """Outputs further from the reference than a budget of their type allows, scaled by the
    output's largest finite magnitude (1e-2 in f32 and f64 and their complex types, 3e-2 in
    bf16 and f16; integers and booleans exact), or without the reference's infinities and
    NaNs where it has them. A sanity check against wrong values, not a precision figure: an
    optimiser's first step divides gradients by their own square roots: in
    ``bert_train_step`` an AdamW update of scale 3.2e-3 is 3.6e-6 from its f64 value here and
    1.0e-6 in XLA's."""
    if len(got) != len(want):
        return [f"{len(got)} outputs, expected {len(want)}"]
    problems = []
    for k, (g, w) in enumerate(zip(got, want)):
        if g.dtype == ml_dtypes.bfloat16:
            w = w.view(ml_dtypes.bfloat16)
        if g.shape != w.shape:
            problems.append(f"out_{k}: shape {g.shape}, expected {w.shape}")
            continue
        gf, wf = (a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) for a in (g, w))
        budget = 0.0 if g.dtype.kind in "biu" else 3e-2 if g.dtype.itemsize == 2 else 1e-2
        finite = np.isfinite(wf)
        if not np.array_equal(gf[~finite], wf[~finite], equal_nan=True):
            problems.append(f"out_{k}: infinities or NaNs differ")
            continue
        scale = float(np.max(np.abs(wf[finite]), initial=0.0))
        worst = float(np.max(np.abs(gf[finite] - wf[finite]), initial=0.0))
        if not worst <= budget * scale:
            problems.append(f"out_{k}: off by {worst:.3g} where values reach {scale:.3g}")
    return problems


def _random(shape, seed: int) -> np.ndarray:
    if not isinstance(shape, ArrayShape):
        raise SystemExit(f"tuple-shaped parameters are not supported by the benchmark: {shape}")
    rng = np.random.default_rng(seed)
    et = shape.element_type
    if et.is_float:
        dtype = ml_dtypes.bfloat16 if et.name == "bf16" else et.numpy
        return rng.standard_normal(shape.dims).astype(dtype)
    if et.is_pred:
        return rng.integers(0, 2, shape.dims).astype(bool)
    return rng.integers(0, 100, shape.dims).astype(et.numpy)


def model_bench_programs() -> list[BenchProgram]:
    """The whole models of the shared models folder (``$HLO_MODELS``), checked by summaries."""
    return [_from_corpus(p, p.root / p.entry["files"]["hlo"]) for p in model_programs()]
