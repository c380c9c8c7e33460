"""Run random layout modules on XLA's CPU backend and on ours (fused and unfused) and name
the cases whose outputs differ. Kept free of pytest so ``benchmarks/fuzz_layouts.py``
imports it.

XLA's optimised output is the first reference. A case that disagrees with it gets a second
opinion before it counts as ours to fix, because the first reference is itself wrong or
ill-conditioned in two ways the long runs met:

- XLA's algebraic simplifier changes what some programs compute (a dynamic-slice of a
  dynamic-slice whose starts are clamped, with gathers and scatters after out-of-range
  dynamic slices): the case is compiled again with ``algsimp`` disabled, and when that XLA
  disagrees with the first one, it becomes the reference (``Finding.how == "xla-simplifier"``).
- A tiny rounding difference that the program amplifies (the sine of a 600-term sum, an s32
  convert of a tanh that rounds to 1.0 on one side): the case also runs in f64 on XLA, and ours
  passes when it is, element by element, no farther from the f64 result than XLA's f32 result
  is (``"ill-conditioned"``; integers too, so an exact integer result must be exact).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import runtime
from runtime.errors import HloError
from runtime.opencl import binary_cache

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
    # a disagreement with XLA's optimised output that the second opinion settled:
    # "xla-simplifier" or "ill-conditioned" (module docstring); "" for a real failure
    settled: str = ""

    def report(self) -> str:
        return f"{self.how}: {self.detail}\n{self.case.module_text()}"


def xla_outputs(text: str, args: list[np.ndarray], disabled: str = "") -> list[np.ndarray]:
    """XLA's outputs; ``disabled``: XLA passes to leave out (``xla_disable_hlo_passes``)."""
    program = xla_cpu.compile_hlo(text, disabled_passes=disabled)
    import jax
    with jax.enable_x64(True):  # f64 arguments of the f64 reference stay f64
        inputs = [jax.device_put(a) for a in args]
    return [np.asarray(o) for o in program.executable.execute(inputs)]


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


def in_f64(text: str, args: list[np.ndarray]) -> tuple[str, list[np.ndarray]]:
    """The same program computed in f64 (every f32 value widened)."""
    return (text.replace("f32[", "f64["),
            [a.astype(np.float64) if a.dtype == np.float32 else a for a in args])


def no_less_accurate(got: np.ndarray, xla: np.ndarray, exact: np.ndarray) -> bool:
    """``got`` is, element by element, as close to the f64 result ``exact`` as XLA's f32
    result ``xla`` is (twice its error, plus the usual relative allowance)."""
    if exact.dtype.kind != "f":          # integers (an s32 convert of a tanh, summed)
        g, x, e = (np.asarray(a).astype(np.int64) for a in (got, xla, exact))
        return bool(np.all(np.abs(g - e) <= np.abs(x - e)))
    g, x, e = (a.astype(np.float64) for a in (got, xla, exact))
    if (np.isnan(g) != np.isnan(e)).any():
        return False
    finite = np.isfinite(e) & np.isfinite(g)
    scale = float(np.max(np.abs(e[finite]), initial=0.0))
    allowed = 2 * np.abs(x - e) + RELATIVE * max(scale, 1e-6)
    return bool(np.all(np.where(finite, np.abs(g - e) <= allowed, g == e)))


def second_opinion(case: Case, got: list[np.ndarray], how: str, detail: str) -> Failure:
    """A disagreement with XLA's optimised output, settled (module docstring) or not."""
    text, args = module_text([case]), arguments([case])
    try:
        plain = xla_outputs(text, args, disabled="algsimp")
        first = xla_outputs(text, args)
    except Exception:  # noqa: BLE001 - no second opinion: the disagreement stands
        return Failure(case, how, detail)
    if all(difference(g, p) is None for g, p in zip(got, plain)):
        settled = "" if all(difference(f, p) is None for f, p in zip(first, plain)) \
            else "xla-simplifier"
        return Failure(case, how, detail, settled)
    try:
        exact = xla_outputs(*in_f64(text, args), disabled="algsimp")
    except Exception:  # noqa: BLE001
        return Failure(case, how, detail)
    if all(no_less_accurate(g, p, e) for g, p, e in zip(got, plain, exact)):
        return Failure(case, how, detail, "ill-conditioned")
    return Failure(case, how, detail)


def check(cases: list[Case]) -> list[Failure]:
    """Every case of one module that XLA and ours (fused, then unfused) disagree on, after the
    second opinion (``examine`` also returns the settled ones)."""
    return [f for f in examine(cases) if not f.settled]


def examine(cases: list[Case]) -> list[Failure]:
    """Every case of one module that ours (fused, then unfused) and XLA's optimised output
    disagree on, each with its second opinion; a module that fails as a whole is re-checked
    a case at a time so the failure names its case."""
    text, args = module_text(cases), arguments(cases)
    try:
        want = xla_outputs(text, args)
        runs = {how: ours(text, args, how == "fused") for how in ("fused", "unfused")}
    except Exception as error:  # noqa: BLE001 - any failure is narrowed to its case below
        if len(cases) == 1:
            how = "xla" if "want" not in locals() else "compile"
            kind = "" if isinstance(error, HloError) else f"{type(error).__name__}: "
            return [Failure(cases[0], how, f"{kind}{error}")]
        return [f for c in cases for f in examine([c])]
    failures = []
    start = 0
    for case, n in zip(cases, output_counts(cases)):
        for how, got in runs.items():
            for k in range(start, start + n):
                why = difference(got[k], want[k])
                if why:
                    failures.append(second_opinion(case, got[start:start + n], how,
                                                   f"output {k - start}: {why}"))
                    break
        start += n
    return failures
