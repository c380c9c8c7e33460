"""Index arithmetic of the elemental emitter: a division by a size that is a kernel argument
is a multiply and a shift by the size's magic numbers, exact for every 32-bit index; a
reshape maps its index group by group of dimensions with equal products. Values are checked
against numpy on reshapes of many kinds, and the kernels are checked to divide only where a
group needs it."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings, strategies as st

import runtime
from runtime.codegen.elemental import common_factors, division_magic


@given(st.integers(1, 2 ** 31 - 1), st.integers(0, 2 ** 31 - 1))
@settings(max_examples=2000)
def test_division_magic_is_exact_for_every_32_bit_index(divisor, x):
    m, s = division_magic(divisor)
    assert m * (2 ** 31 - 1) < 2 ** 64
    for n in (x, x - x % divisor, x - x % divisor - 1, 2 ** 31 - 1, divisor - 1, divisor):
        if 0 <= n < 2 ** 31:
            assert (n * m) >> s == n // divisor


def test_division_magic_at_the_edges():
    for divisor in [1, 2, 3, 7, 64, 641, 2 ** 16 + 1, 2 ** 30, 2 ** 30 + 1, 2 ** 31 - 1]:
        m, s = division_magic(divisor)
        for n in [0, 1, divisor - 1, divisor, 2 ** 31 - 1, (2 ** 31 - 1) // divisor * divisor - 1]:
            if n >= 0:
                assert (n * m) >> s == n // divisor


def test_common_factors_pair_dimension_groups():
    assert common_factors((2, 32, 2, 32, 64), (2, 64, 32, 64)) == [
        ((0,), (0,)), ((1, 2), (1,)), ((3,), (2,)), ((4,), (3,))]
    assert common_factors((6,), (2, 3)) == [((0,), (0, 1))]
    assert common_factors((1, 4, 1), (2, 2)) == [((1,), (0, 1))]
    assert common_factors((2, 3, 4), (4, 3, 2)) == [((0, 1, 2), (0, 1, 2))]
    assert common_factors((1,), (1, 1)) == []


_DIMS = st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=0, max_size=4)


@given(_DIMS, st.data())
@settings(max_examples=25, deadline=None)
def test_reshapes_read_through_a_transpose_match_numpy(dims, data):
    """The transpose above the reshape hands it an index, not the kernel's linear offset, so
    the group-by-group mapping is what runs."""
    count = int(np.prod(dims)) if dims else 1
    out = []
    rest = count
    while rest > 1:
        f = data.draw(st.sampled_from([f for f in (2, 3, 4, 6) if rest % f == 0] or [rest]))
        out.append(f)
        rest //= f
    out = data.draw(st.permutations(out + [1] * data.draw(st.integers(0, 1))))
    rev = list(reversed(range(len(out))))
    text = f"""HloModule r
ENTRY e {{
  x = f32[{",".join(map(str, dims))}] parameter(0)
  r = f32[{",".join(map(str, out))}] reshape(x)
  ROOT t = f32[{",".join(str(out[d]) for d in rev)}] transpose(r), dimensions={{{",".join(map(str, rev))}}}
}}"""
    x = np.arange(count, dtype=np.float32).reshape(dims)
    np.testing.assert_array_equal(runtime.compile(text)(x), x.reshape(out).transpose(rev))


UPSAMPLE = """
HloModule upsample
ENTRY e {
  x = f32[2,3,5,4] parameter(0)
  y = f32[2,6,10,3] parameter(1)
  b = f32[2,3,2,5,4] broadcast(x), dimensions={0,1,3,4}
  r = f32[2,6,5,4] reshape(b)
  b2 = f32[2,6,5,2,4] broadcast(r), dimensions={0,1,2,4}
  r2 = f32[2,6,10,4] reshape(b2)
  ROOT c = f32[2,6,10,7] concatenate(r2, y), dimensions={3}
}
"""


def test_nearest_upsampling_divides_once_per_doubled_dimension():
    """JAX's ``repeat`` twice and a skip connection (a UNet's decoder input): the reshapes
    split only the doubled dimensions, where one linear offset split into all five
    dimensions took four divisions for each of the two reshapes."""
    exe = runtime.compile(UPSAMPLE)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    y = rng.standard_normal((2, 6, 10, 3)).astype(np.float32)
    want = np.concatenate([x.repeat(2, 1).repeat(2, 2), y], axis=3)
    np.testing.assert_array_equal(exe(x, y), want)
    source = exe.program.source
    kernel = source[source.index("__kernel"):]
    assert " / " not in kernel
    assert len(re.findall(r">> n\d+", kernel)) == 3 + 2     # the output's index, then 1 + 1
