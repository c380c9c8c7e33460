"""Run random layout modules on XLA's CPU backend and on ours (fused and unfused) and name
the cases whose outputs differ. Kept free of pytest so ``benchmarks/fuzz_layouts.py``
imports it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import runtime
from runtime.errors import HloError
from runtime.execution import binary_cache

from .layout_programs import Case, arguments, module_text, output_counts

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import xla_cpu  # noqa: E402

# f32 results are compared relative to each output's largest magnitude: XLA sums a dot or a
# reduction in another order (and differently on AVX2 and AVX-512); a layout bug moves
# whole elements, which is an error of the order of the values themselves
RELATIVE = 1e-4


@dataclass
class Failure:
    case: Case
    how: str          # "fused" or "unfused" (a wrong value), "xla" or "compile" (a failure)
    detail: str

    def report(self) -> str:
        return f"{self.how}: {self.detail}\n{self.case.module_text()}"


def xla_outputs(text: str, args: list[np.ndarray]) -> list[np.ndarray]:
    program = xla_cpu.compile_hlo(text)
    import jax
    return [np.asarray(o) for o in program.executable.execute([jax.device_put(a) for a in args])]


def _no_saved_binary(device, source: str, options: tuple[str, ...]) -> None:
    """Each random module is built once: saving its binary would make PoCL compile every
    kernel a second time for nothing."""
    return None


def ours(text: str, args: list[np.ndarray], fusion: bool) -> list[np.ndarray]:
    saved, binary_cache.binary_path = binary_cache.binary_path, _no_saved_binary
    try:
        result = runtime.compile(text, fusion=fusion)(*args)
    finally:
        binary_cache.binary_path = saved
    return [np.asarray(r) for r in (result if isinstance(result, tuple) else (result,))]


def difference(got: np.ndarray, want: np.ndarray) -> str | None:
    """Why ``got`` is not XLA's ``want`` (None when it is)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{list(got.shape)} against {want.dtype}{list(want.shape)}"
    if want.dtype.kind != "f":
        bad = np.argwhere(got != want)
        return None if not len(bad) else \
            f"{len(bad)} of {want.size} differ, first at {tuple(bad[0])}: {got[tuple(bad[0])]} " \
            f"against {want[tuple(bad[0])]}"
    g, w = got.astype(np.float64), want.astype(np.float64)
    if (np.isnan(g) != np.isnan(w)).any() or (np.isinf(g) != np.isinf(w)).any() \
            or (np.isinf(w) & (g != w)).any():
        return "NaN or infinity where XLA has none (or the reverse)"
    finite = np.isfinite(w)
    scale = float(np.max(np.abs(w[finite]), initial=0.0))
    err = np.abs(np.where(finite, g - w, 0.0))
    if err.size and err.max() > RELATIVE * max(scale, 1e-6):
        k = tuple(np.unravel_index(int(np.argmax(err)), err.shape))
        return (f"largest error {err.max():.3g} at {k} ({g[k]} against {w[k]}), largest "
                f"magnitude {scale:.3g}; {int((err > RELATIVE * scale).sum())} of {w.size} off")
    return None


def check(cases: list[Case]) -> list[Failure]:
    """Every case of one module that XLA and ours (fused, then unfused) disagree on; a module
    that fails as a whole is re-checked a case at a time so the failure names its case."""
    text, args = module_text(cases), arguments(cases)
    try:
        want = xla_outputs(text, args)
        runs = {how: ours(text, args, how == "fused") for how in ("fused", "unfused")}
    except Exception as error:  # noqa: BLE001 - any failure is narrowed to its case below
        if len(cases) == 1:
            how = "xla" if "want" not in locals() else "compile"
            kind = "" if isinstance(error, HloError) else f"{type(error).__name__}: "
            return [Failure(cases[0], how, f"{kind}{error}")]
        return [f for c in cases for f in check([c])]
    failures = []
    start = 0
    for case, n in zip(cases, output_counts(cases)):
        for how, got in runs.items():
            for k in range(start, start + n):
                why = difference(got[k], want[k])
                if why:
                    failures.append(Failure(case, how, f"output {k - start}: {why}"))
                    break
        start += n
    return failures
