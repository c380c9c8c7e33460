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
    text = path.read_text()
    module = runtime.parse(text)
    shapes = [p.shape for p in module.entry.parameters]
    return BenchProgram(path.stem, path, text, lambda: [_random(s, k) for k, s in enumerate(shapes)])


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
