"""Cumulative reduce-windows as running scans (``families.scan``): JAX's cumsum, cumprod,
cummax in both directions, over any dimension, with fused producers. Each case runs with the
scan kernel and with the element-by-element window it replaces: they agree bit for bit, and
with numpy; windows that are not scans, float sums over suffixes and non-identity inits keep
the element form."""

import ml_dtypes
import numpy as np
import pytest

from runtime.codegen.families import scan
from tests.codegen.rule_toggle import compile_with

RNG = np.random.default_rng(5)


def window_text(shape: str, dims: list[int], dim: int, *, et: str = "f32",
                reducer: str = "add", init: str = "0", reverse: bool = False,
                size: int | None = None, producer: bool = False) -> str:
    """A module whose root reduce-windows ``p`` (times a mask when ``producer``) over
    dimension ``dim``: a whole-dimension prefix window, or suffix with ``reverse``."""
    n = dims[dim]
    size = size or n
    pad = f"0_{size - 1}" if reverse else f"{size - 1}_0"
    window = "x".join(str(size) if d == dim else "1" for d in range(len(dims)))
    pads = "x".join(pad if d == dim else "0_0" for d in range(len(dims)))
    source = "p"
    extra = ""
    if producer:
        extra = (f"  io = s32[{shape}] iota(), iota_dimension={dim}\n"
                 f"  lim = s32[] constant({n // 2})\n"
                 f"  lb = s32[{shape}] broadcast(lim), dimensions={{}}\n"
                 f"  m = pred[{shape}] compare(io, lb), direction=LT\n"
                 f"  mf = {et}[{shape}] convert(m)\n"
                 f"  q = {et}[{shape}] multiply(p, mf)\n")
        source = "q"
    return f"""HloModule cumulative
r {{
  a = {et}[] parameter(0)
  b = {et}[] parameter(1)
  ROOT c = {et}[] {reducer}(a, b)
}}
ENTRY e {{
  p = {et}[{shape}] parameter(0)
{extra}  z = {et}[] constant({init})
  ROOT w = {et}[{shape}] reduce-window({source}, z), window={{size={window} pad={pads}}}, to_apply=r
}}"""


def check(text: str, x: np.ndarray, monkeypatch, *, taken: bool = True) -> np.ndarray:
    fast, took = compile_with(text, scan.lower_scan, True, monkeypatch)
    assert bool(took) is taken, fast.program.source
    element, _ = compile_with(text, scan.lower_scan, False, monkeypatch)
    got, want = np.asarray(fast(x)), np.asarray(element(x))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    return got


@pytest.mark.parametrize("dims, dim", [([4, 9], 1), ([4, 9], 0), ([3, 37, 5], 1), ([129], 0)])
def test_a_prefix_sum_over_any_dimension_is_a_running_scan(dims, dim, monkeypatch):
    x = RNG.standard_normal(dims).astype(np.float32)
    text = window_text(",".join(map(str, dims)), dims, dim)
    got = check(text, x, monkeypatch)
    np.testing.assert_allclose(got, np.cumsum(x, axis=dim), rtol=1e-5, atol=1e-5)


def test_fused_producers_are_computed_once_per_element(monkeypatch):
    dims = [2, 16, 8]
    x = RNG.standard_normal(dims).astype(np.float32)
    got = check(window_text("2,16,8", dims, 1, producer=True), x, monkeypatch)
    mask = (np.arange(16) < 8)[None, :, None]
    np.testing.assert_allclose(got, np.cumsum(x * mask, axis=1), rtol=1e-5, atol=1e-5)


def test_bf16_cumsum_rounds_each_prefix_as_the_window_does(monkeypatch):
    x = RNG.standard_normal((3, 40)).astype(ml_dtypes.bfloat16)
    check(window_text("3,40", [3, 40], 1, et="bf16"), x, monkeypatch)


@pytest.mark.parametrize("reducer, init, et, reverse, want", [
    ("multiply", "1", "f32", False, lambda x: np.cumprod(x, axis=1)),
    ("maximum", "-inf", "f32", True,
     lambda x: np.flip(np.maximum.accumulate(np.flip(x, 1), axis=1), 1)),
    ("minimum", "inf", "f32", False, lambda x: np.minimum.accumulate(x, axis=1)),
    ("add", "0", "s32", True, lambda x: np.flip(np.cumsum(np.flip(x, 1), axis=1), 1)),
])
def test_other_reducers_and_exact_suffix_scans(reducer, init, et, reverse, want, monkeypatch):
    x = RNG.standard_normal((5, 24)).astype(np.float32) * 2
    if et == "s32":
        x = (x * 10).astype(np.int32)
    got = check(window_text("5,24", [5, 24], 1, et=et, reducer=reducer, init=init,
                            reverse=reverse), x, monkeypatch)
    np.testing.assert_allclose(got, want(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("options", [
    dict(reverse=True),           # a float sum over suffixes folds in another order
    dict(init="1"),               # not the reducer's identity
    dict(size=3),                 # a sliding window, not the whole dimension
])
def test_windows_that_are_not_order_preserving_scans_keep_the_element_form(options,
                                                                           monkeypatch):
    x = RNG.standard_normal((4, 12)).astype(np.float32)
    check(window_text("4,12", [4, 12], 1, **options), x, monkeypatch, taken=False)
