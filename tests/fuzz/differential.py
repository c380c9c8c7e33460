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
  Only where the case holds one of those constructs (``SIMPLIFIER_WRONG``): elsewhere a
  simplifier rewrite that changes values is one ours follows (a division by a constant is a
  product) or one to record, so the disagreement stands.
- A tiny rounding difference that the program amplifies (the sine of a 600-term sum, an s32
  convert of a tanh that rounds to 1.0 on one side): the case also runs in f64 on XLA, and ours
  passes when it is, element by element, no farther from the f64 result than XLA's f32 result
  is (``"ill-conditioned"``; integers too, so an exact integer result must be exact). Only for
  order-dependent outputs, the others matching: being nearer the exact result than XLA is how
  a narrow sum or dot that skips XLA's roundings looks, so those are compared bit for bit.

How an output is compared is the generator's ``Value.ulps`` (``value_steps``): bit for bit,
NaNs included (``NAN_BIT_EXCLUSIONS`` lists where XLA's NaN bits are not yet ours: only
NaN-ness is compared there); within a budget of ulps elementwise; or relative to the
output's largest magnitude (``RELATIVE``, or a few ulps of a narrow type).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import runtime
from runtime.errors import HloError
from runtime.opencl import binary_cache

from .layout_programs import Case, Value, arguments, module_text, output_counts

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import xla_cpu  # noqa: E402

# f32 results are compared relative to each output's largest magnitude: XLA sums a dot or a
# reduction in another order (and differently on AVX2 and AVX-512); a layout bug moves
# whole elements, which is an error of the order of the values themselves
RELATIVE = 1e-4
# a narrow type's order-dependent result: this many ulps of its type, relative to the largest
NARROW_RELATIVE_ULPS = 8
# elements of a narrow contraction (``Value.mostly``) that may differ in their bits: f32 sums
# in another order round to another neighbour now and then, an unrounded result nearly always
MOSTLY_EXACT = 0.1

# the constructs whose NaN bits are known not to be XLA's yet (tests/codegen/
# test_nan_results.py skips them too): in a case holding one, NaNs compare by NaN-ness, and an
# integer bitcast of a float compares not at all
NAN_BIT_EXCLUSIONS = {
    "a constant operand of maximum, minimum or clamp (LLVM folds XLA's NaN choice)":
        lambda text: bool(re.search(r"(maximum|minimum|clamp)\(", text)) and "constant(" in text,
    "power (glibc's pow(NaN, +-1) keeps no sign)": lambda text: "power(" in text,
    "f16 loads quiet signalling NaNs (vload_half)":
        lambda text: "f16[" in text and "bitcast-convert(" in text,
    # (XLA's bf16 pad keeps a NaN's sign only: 0x7fd2 comes out 0x7fc0; long run, seed 37)
    "bf16 select or pad": lambda text: "bf16[" in text and ("select(" in text or "pad(" in text),
    "atan2 of denormals": lambda text: "atan2(" in text,
    # (long run, seeds 14 and 15: an f16 sum meeting inf - inf, a max from 255 over a NaN
    # with a payload; XLA's bits depend on where its tree meets the NaN)
    "a float reduction's NaN (which NaN its order meets first)":
        lambda text: bool(re.search(r"to_apply=(add|mul|max|min)_(f16|bf16|f32|f64)", text)),
}


def _unit_reduce(text: str) -> bool:
    """A reduce whose reduced dimensions all have size 1: XLA's simplifier makes it a reshape
    of its operand and drops the initial value (reduce(f32[1] {3}, 0.1) by multiply is 3;
    ``test_second_opinion``)."""
    dims = {m[1]: m[2].split(",") for m in re.finditer(r"(\S+) = \w+\[([\d,]*)\]", text)}
    for m in re.finditer(r"reduce\((\S+), \S+\), dimensions=\{([\d,]*)\}", text):
        operand = dims.get(m[1], [])
        if all(int(d) < len(operand) and operand[int(d)] == "1" for d in m[2].split(",")):
            return True
    return False


# what XLA's simplifier is known to compute wrong (the module docstring): only these settle
SIMPLIFIER_WRONG = {
    "chained or out-of-range dynamic slices, gathers, scatters, negative pads": lambda text: any(
        s in text for s in ("dynamic-slice(", "gather(", "scatter(", "pad(")),
    "a reduce over size-1 dimensions from a non-identity initial value": _unit_reduce,
}


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


def _first(bad: np.ndarray, got: np.ndarray, want: np.ndarray) -> str:
    k = tuple(np.argwhere(bad)[0])
    return f"{int(bad.sum())} of {want.size} differ, first at {k}: {got[k]!r} against {want[k]!r}"


def _float_kind(a: np.ndarray) -> bool:
    return a.dtype.kind == "f" or a.dtype.name == "bfloat16"


def _eps(a: np.ndarray) -> float:
    import ml_dtypes
    return float(ml_dtypes.finfo(a.dtype).eps)


def difference(got: np.ndarray, want: np.ndarray, value: Value | None = None,
               nan_bits: bool = True) -> str | None:
    """Why ``got`` is not XLA's ``want`` (None when it is), compared as ``value`` says
    (none: order-dependent); ``nan_bits``: whether NaNs' bits (and integer bitcasts of
    floats) are compared too."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{list(got.shape)} against {want.dtype}{list(want.shape)}"
    if not _float_kind(want):
        if not nan_bits and want.dtype.kind in "iu":
            return None
        bad = got != want
        return _first(bad, got, want) if bad.any() else None
    g, w = got.astype(np.float64), want.astype(np.float64)
    if (np.isnan(g) != np.isnan(w)).any() or (np.isinf(g) != np.isinf(w)).any() \
            or (np.isinf(w) & (g != w)).any():
        return "NaN or infinity where XLA has none (or the reverse): " + \
            _first((np.isnan(g) != np.isnan(w)) | (np.isinf(g) != np.isinf(w))
                   | (np.isinf(w) & (g != w)), got, want)
    ulps = math.inf if value is None else value.ulps
    bits_g, bits_w = got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}")
    if ulps == 0:
        bad = (bits_g != bits_w) & (nan_bits | ~np.isnan(w))
        return "bit for bit: " + _first(bad, got, want) if bad.any() else None
    if math.isfinite(ulps):
        tiny = float(np.finfo(np.float32).tiny) if want.itemsize <= 4 else 2.3e-308
        finite = np.isfinite(w)
        mostly = value is not None and value.mostly
        if mostly:    # a contraction's sum may cancel: relative to its largest element too
            tiny = max(tiny, float(np.max(np.abs(w[finite]), initial=0.0)) / 64)
        allowed = ulps * _eps(want) * np.maximum(np.abs(np.where(finite, w, 0)), tiny)
        bad = finite & (np.abs(g - w) > allowed)
        if bad.any():
            return f"more than {ulps:g} ulps: " + _first(bad, got, want)
        differ = (bits_g != bits_w) & ~np.isnan(w)
        if mostly and want.itemsize == 2 and differ.sum() > MOSTLY_EXACT * want.size + 1:
            return "a narrow contraction's result not rounded as XLA's: " + \
                _first(differ, got, want)
        return None
    relative = max(RELATIVE, NARROW_RELATIVE_ULPS * _eps(want))
    finite = np.isfinite(w)
    scale = float(np.max(np.abs(w[finite]), initial=0.0))
    err = np.abs(np.where(finite, g - w, 0.0))
    if err.size and err.max() > relative * max(scale, 1e-6):
        k = tuple(np.unravel_index(int(np.argmax(err)), err.shape))
        return (f"largest error {err.max():.3g} at {k} ({g[k]} against {w[k]}), largest "
                f"magnitude {scale:.3g}; {int((err > relative * scale).sum())} of {w.size} off")
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


def nan_bits_compared(case: Case) -> bool:
    """Whether the case holds none of ``NAN_BIT_EXCLUSIONS``."""
    text = "\n".join(case.lines)
    return not any(applies(text) for applies in NAN_BIT_EXCLUSIONS.values())


def differences(case: Case, got: list[np.ndarray], want: list[np.ndarray]) -> str | None:
    """The first output of ``case`` where ``got`` is not ``want``, and why."""
    nan_bits = nan_bits_compared(case)
    for k, ((value, _), g, w) in enumerate(zip(case.outputs, got, want, strict=True)):
        with np.errstate(invalid="ignore", over="ignore"):   # inf - inf where both are inf
            why = difference(g, w, value, nan_bits)
        if why:
            return f"output {k} ({value.name}): {why}"
    return None


def second_opinion(case: Case, got: list[np.ndarray], how: str, detail: str) -> Failure:
    """A disagreement with XLA's optimised output, settled (module docstring) or not."""
    text, args = module_text([case]), arguments([case])
    try:
        plain = xla_outputs(text, args, disabled="algsimp")
        first = xla_outputs(text, args)
    except Exception:  # noqa: BLE001 - no second opinion: the disagreement stands
        return Failure(case, how, detail)
    if differences(case, got, plain) is None:
        if differences(case, first, plain) is None:
            return Failure(case, how, detail, "")
        if any(wrong(text) for wrong in SIMPLIFIER_WRONG.values()):
            return Failure(case, how, detail, "xla-simplifier")
        return Failure(case, how, detail + " (XLA without its simplifier agrees with ours: a "
                       "value-changing rewrite)")
    nan_bits = nan_bits_compared(case)
    loose = all(v.ulps == math.inf or difference(g, p, v, nan_bits) is None
                for (v, _), g, p in zip(case.outputs, got, plain))
    if not loose:
        return Failure(case, how, detail)
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
            why = differences(case, got[start:start + n], want[start:start + n])
            if why:
                failures.append(second_opinion(case, got[start:start + n], how, why))
        start += n
    return failures
