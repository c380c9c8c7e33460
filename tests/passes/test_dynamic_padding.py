"""Bounded dynamic shapes (set-dimension-size, get-dimension-size) against XLA's CPU backend:
reductions over a dynamic dimension combine the first ``size`` elements (every element for a
size past the bound, none for a negative one), elementwise operations keep the size, a
reduce keeps the sizes it does not reduce, get-dimension-size reads the size as given; an
output is XLA's compact array at its runtime shape (more in ``test_dynamic_outputs``); what
the padding cannot express is refused at its line."""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from runtime.errors import HloUnsupportedError
from runtime.hlo.parser import parse

REDUCERS = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}
"""

SUMS = REDUCERS + """ENTRY e {
  p = f32[8] parameter(0)
  s = s32[] parameter(1)
  d = f32[<=8] set-dimension-size(p, s), dimensions={0}
  z = f32[] constant(0)
  lo = f32[] constant(-inf)
  sum = f32[] reduce(d, z), dimensions={0}, to_apply=add
  n = f32[<=8] negate(d)
  e = f32[<=8] exponential(n)
  esum = f32[] reduce(e, z), dimensions={0}, to_apply=add
  m = f32[] reduce(n, lo), dimensions={0}, to_apply=mx
  g = s32[] get-dimension-size(e), dimensions={0}
  ROOT t = (f32[], f32[], f32[], s32[]) tuple(sum, esum, m, g)
}
"""

ROWS = REDUCERS + """ENTRY e {
  p = f32[3,5] parameter(0)
  s = s32[] parameter(1)
  d = f32[3,<=5] set-dimension-size(p, s), dimensions={1}
  z = f32[] constant(0)
  rows = f32[3] reduce(d, z), dimensions={1}, to_apply=add
  cols = f32[<=5] reduce(d, z), dimensions={0}, to_apply=add
  g = s32[] get-dimension-size(cols), dimensions={0}
  h = s32[] get-dimension-size(p), dimensions={1}
  ROOT t = (f32[3], s32[], s32[]) tuple(rows, g, h)
}
"""

OUTPUT = """HloModule o
ENTRY e {
  p = f32[8] parameter(0)
  s = s32[] parameter(1)
  d = f32[<=8] set-dimension-size(p, s), dimensions={0}
  n = f32[<=8] negate(d)
  ROOT t = (f32[<=8], f32[8]) tuple(n, p)
}
"""


def _xla(text: str, *args) -> list[np.ndarray]:
    jax = pytest.importorskip("jax")
    xla_cpu = pytest.importorskip("benchmarks.xla_cpu")
    outputs = xla_cpu.compile_hlo(text).executable.execute([jax.device_put(a) for a in args])
    return [np.asarray(o) for o in outputs]


def _compact(xla_output: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """XLA's dynamic output at its runtime shape: jax shows the buffer at the bound, the
    compact array in its first elements and whatever the buffer held after them."""
    return xla_output.ravel()[:int(np.prod(sizes))].reshape(sizes)


def _ours(text: str, *args, fusion: bool = True) -> list[np.ndarray]:
    out = runtime.compile(text, fusion=fusion)(*args)
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("size", [0, 1, 5, 8, 9, -1])
def test_reductions_and_sizes_as_xla(size, fusion):
    x = np.linspace(-2, 3, 8).astype(np.float32)
    got = _ours(SUMS, x, np.int32(size), fusion=fusion)
    for g, w in zip(got, _xla(SUMS, x, np.int32(size))):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("size", [0, 2, 5, 7])
def test_a_reduce_keeps_the_sizes_it_does_not_reduce(size):
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    for g, w in zip(_ours(ROWS, x, np.int32(size)), _xla(ROWS, x, np.int32(size))):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("size", [0, 3, 8])
def test_an_output_is_xlas_at_its_runtime_size(size):
    x = np.arange(1, 9, dtype=np.float32)
    (dynamic, static), (want, want_static) = _ours(OUTPUT, x, np.int32(size)), \
        _xla(OUTPUT, x, np.int32(size))
    np.testing.assert_array_equal(dynamic, want[:size], strict=True)
    np.testing.assert_array_equal(static, want_static)


def test_bounded_shapes_parse_and_print():
    module = parse(SUMS)
    assert "f32[<=8] set-dimension-size(" in module.to_text()


@pytest.mark.parametrize("body,culprit", [
    ("d = f32[<=8] set-dimension-size(p, s), dimensions={0}\n"
     "  ROOT r = f32[4] slice(d), slice={[0:4]}", "slice r"),
    ("d = f32[<=8] set-dimension-size(p, s), dimensions={0}\n"
     "  ROOT r = f32[2,4] reshape(d)", "reshape r"),
    ("d = f32[<=8] set-dimension-size(p, s), dimensions={0}\n"
     "  ROOT r = f32[<=4,2] reshape(d)", "reshape r"),
])
def test_what_the_padding_cannot_express_is_refused_at_its_line(body, culprit):
    text = (f"HloModule r\nENTRY e {{\n  p = f32[8] parameter(0)\n  s = s32[] parameter(1)\n"
            f"  {body}\n}}\n")
    with pytest.raises(HloUnsupportedError, match=culprit) as error:
        runtime.compile(text)
    assert "line" in str(error.value)


def test_a_dynamic_parameter_is_refused():
    text = "HloModule r\nENTRY e {\n  ROOT p = f32[<=8] parameter(0)\n}\n"
    with pytest.raises(HloUnsupportedError, match="parameter p"):
        runtime.compile(text)
