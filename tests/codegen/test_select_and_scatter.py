"""select-and-scatter by planes on CPUs (``families.select_and_scatter``): max-pool gradients
with overlapping, padded and disjoint windows, ties and bf16 have the element form's bits and
numpy's values; too few planes keep the element form."""

import ml_dtypes
import numpy as np
import pytest

from runtime.codegen.families import select_and_scatter
from tests.codegen.rule_toggle import compile_with

RNG = np.random.default_rng(9)


def pool_gradient(n: int, hw: int, c: int, size: int, stride: int, pad: int, *,
                  et: str = "f32", direction: str = "GE") -> tuple[str, int]:
    """A max pool's gradient over NHWC ``[n, hw, hw, c]`` (select: ``direction``), and the
    pooled extent."""
    out = (hw + 2 * pad - size) // stride + 1
    return f"""HloModule pool_gradient
ge {{
  a = {et}[] parameter(0)
  b = {et}[] parameter(1)
  ROOT c = pred[] compare(a, b), direction={direction}
}}
add {{
  a = {et}[] parameter(0)
  b = {et}[] parameter(1)
  ROOT c = {et}[] add(a, b)
}}
ENTRY e {{
  x = {et}[{n},{hw},{hw},{c}] parameter(0)
  g = {et}[{n},{out},{out},{c}] parameter(1)
  z = {et}[] constant(0)
  ROOT s = {et}[{n},{hw},{hw},{c}] select-and-scatter(x, g, z), window={{size=1x{size}x{size}x1 stride=1x{stride}x{stride}x1 pad=0_0x{pad}_{pad}x{pad}_{pad}x0_0}}, select=ge, scatter=add
}}""", out


def reference(x, g, size, stride, pad, direction="GE"):
    """XLA's sequential algorithm: windows in row-major order, the first element the
    comparison keeps."""
    x64, out = x.astype(np.float64), np.zeros(x.shape)
    n, hw, _, c = x.shape
    for b in range(n):
        for f in range(c):
            for i in range(g.shape[1]):
                for j in range(g.shape[2]):
                    best = None
                    for di in range(size):
                        for dj in range(size):
                            p, q = i * stride - pad + di, j * stride - pad + dj
                            if 0 <= p < hw and 0 <= q < hw:
                                v = x64[b, p, q, f]
                                keep = best is not None and (
                                    best[0] >= v if direction == "GE" else best[0] > v)
                                if not keep:
                                    best = (v, p, q)
                    out[b, best[1], best[2], f] += g[b, i, j, f]
    return out


def check(text: str, x, g, monkeypatch, *, taken: bool = True) -> np.ndarray:
    rule = select_and_scatter.lower_by_planes
    planes, took = compile_with(text, rule, True, monkeypatch)
    assert bool(took) is taken
    element, _ = compile_with(text, rule, False, monkeypatch)
    got, want = np.asarray(planes(x, g)), np.asarray(element(x, g))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    return got


@pytest.mark.parametrize("size, stride, pad", [(3, 2, 1), (2, 2, 0), (3, 1, 1), (3, 2, 0)])
def test_max_pool_gradients_by_planes(size, stride, pad, monkeypatch):
    text, out = pool_gradient(2, 9, 16, size, stride, pad)
    x = RNG.standard_normal((2, 9, 9, 16)).astype(np.float32)
    g = RNG.standard_normal((2, out, out, 16)).astype(np.float32)
    got = check(text, x, g, monkeypatch)
    np.testing.assert_allclose(got, reference(x, g, size, stride, pad), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("direction", ["GE", "GT"])
def test_ties_pick_the_first_or_last_element_as_the_comparison_says(direction, monkeypatch):
    text, out = pool_gradient(1, 6, 16, 3, 2, 1, direction=direction)
    x = np.round(RNG.standard_normal((1, 6, 6, 16))).astype(np.float32)   # many ties
    g = RNG.standard_normal((1, out, out, 16)).astype(np.float32)
    got = check(text, x, g, monkeypatch)
    np.testing.assert_allclose(got, reference(x, g, 3, 2, 1, direction), rtol=1e-5, atol=1e-5)


def test_bf16_gradients_combine_as_the_element_form_does(monkeypatch):
    text, out = pool_gradient(2, 8, 16, 3, 2, 1, et="bf16")
    x = RNG.standard_normal((2, 8, 8, 16)).astype(ml_dtypes.bfloat16)
    g = RNG.standard_normal((2, out, out, 16)).astype(ml_dtypes.bfloat16)
    check(text, x, g, monkeypatch)


def test_few_planes_keep_the_element_form(monkeypatch):
    text, out = pool_gradient(1, 9, 4, 3, 2, 1)
    x = RNG.standard_normal((1, 9, 9, 4)).astype(np.float32)
    g = RNG.standard_normal((1, out, out, 4)).astype(np.float32)
    check(text, x, g, monkeypatch, taken=False)
