"""XLA's numeric edge cases, end to end through HLO text (values verified on XLA's CPU backend
as hlo-reference.md section 7 records them)."""

import numpy as np
import pytest

import runtime


def run(text, *args):
    return runtime.compile(text)(*args)


def test_integer_division_and_remainder_by_zero_and_overflow():
    text = """HloModule div
    ENTRY e {
      a = s32[5] parameter(0)
      b = s32[5] parameter(1)
      q = s32[5] divide(a, b)
      r = s32[5] remainder(a, b)
      ROOT t = (s32[5], s32[5]) tuple(q, r)
    }"""
    imin = np.iinfo(np.int32).min
    a = np.array([7, -7, 5, imin, imin], np.int32)
    b = np.array([-2, 2, 0, -1, 0], np.int32)
    q, r = run(text, a, b)
    np.testing.assert_array_equal(q, [-3, -3, -1, imin, -1])
    np.testing.assert_array_equal(r, [1, -1, 5, 0, imin])


def test_unsigned_division_by_zero_is_all_ones():
    text = """HloModule udiv
    ENTRY e {
      a = u32[2] parameter(0)
      b = u32[2] parameter(1)
      ROOT q = u32[2] divide(a, b)
    }"""
    q = run(text, np.array([9, 9], np.uint32), np.array([0, 2], np.uint32))
    np.testing.assert_array_equal(q, [0xFFFFFFFF, 4])


def test_shifts_by_the_bit_width_or_more():
    text = """HloModule sh
    ENTRY e {
      a = s32[4] parameter(0)
      n = s32[4] parameter(1)
      l = s32[4] shift-left(a, n)
      rl = s32[4] shift-right-logical(a, n)
      ra = s32[4] shift-right-arithmetic(a, n)
      ROOT t = (s32[4], s32[4], s32[4]) tuple(l, rl, ra)
    }"""
    a = np.array([1, -8, -8, 5], np.int32)
    n = np.array([32, 40, -1, 1], np.int32)
    l, rl, ra = run(text, a, n)
    np.testing.assert_array_equal(l, [0, 0, 0, 10])
    np.testing.assert_array_equal(rl, [0, 0, 0, 2])
    np.testing.assert_array_equal(ra, [0, -1, -1, 2])


def test_saturating_float_to_int_with_nan_to_zero():
    text = """HloModule cvt
    ENTRY e {
      x = f32[7] parameter(0)
      i = s32[7] convert(x)
      u = u8[7] convert(x)
      ROOT t = (s32[7], u8[7]) tuple(i, u)
    }"""
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -2.7, 300.0, -1.0], np.float32)
    i, u = run(text, x)
    np.testing.assert_array_equal(i, [0, 2**31 - 1, -2**31, 2**31 - 1, -2, 300, -1])
    np.testing.assert_array_equal(u, [0, 255, 0, 255, 0, 255, 0])


def test_maximum_and_minimum_propagate_nan():
    text = """HloModule mm
    ENTRY e {
      a = f32[3] parameter(0)
      b = f32[3] parameter(1)
      mx = f32[3] maximum(a, b)
      mn = f32[3] minimum(a, b)
      ROOT t = (f32[3], f32[3]) tuple(mx, mn)
    }"""
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([1.0, np.nan, 3.0], np.float32)
    mx, mn = run(text, a, b)
    assert np.isnan(mx[0]) and np.isnan(mx[1]) and mx[2] == 3.0
    assert np.isnan(mn[0]) and np.isnan(mn[1]) and mn[2] == 2.0


def test_dynamic_slice_and_update_clamp_their_start():
    text = """HloModule dyn
    ENTRY e {
      x = f32[8] parameter(0)
      i = s32[] parameter(1)
      s = f32[3] dynamic-slice(x, i), dynamic_slice_sizes={3}
      u = f32[2] constant({-1, -2})
      d = f32[8] dynamic-update-slice(x, u, i)
      ROOT t = (f32[3], f32[8]) tuple(s, d)
    }"""
    x = np.arange(8, dtype=np.float32)
    s, d = run(text, x, np.int32(7))
    np.testing.assert_array_equal(s, [5, 6, 7])            # start 7 clamped to 8 - 3
    np.testing.assert_array_equal(d, [0, 1, 2, 3, 4, 5, -1, -2])
    s, d = run(text, x, np.int32(-3))
    np.testing.assert_array_equal(s, [0, 1, 2])            # negative start clamped to 0
    np.testing.assert_array_equal(d, [-1, -2, 2, 3, 4, 5, 6, 7])


def test_gather_clamps_out_of_range_indices():
    text = """HloModule g
    ENTRY e {
      x = f32[5,2] parameter(0)
      i = s32[3,1] parameter(1)
      ROOT g = f32[3,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={0},
          start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}
    }"""
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    got = run(text, x, np.array([[4], [7], [-3]], np.int32))
    np.testing.assert_array_equal(got, x[[4, 4, 0]])


def test_scatter_skips_out_of_bounds_and_combines_duplicates():
    text = """HloModule sc
    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }
    ENTRY e {
      x = f32[6] parameter(0)
      i = s32[4,1] parameter(1)
      u = f32[4] parameter(2)
      ROOT s = f32[6] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0},
          scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
    }"""
    x = np.zeros(6, np.float32)
    i = np.array([[1], [7], [1], [-1]], np.int32)
    u = np.array([10, 20, 30, 40], np.float32)
    np.testing.assert_array_equal(run(text, x, i, u), [0, 40, 0, 0, 0, 0])


def test_out_of_range_conditional_index_runs_the_last_branch():
    text = """HloModule c
    b0 {
      p = f32[] parameter(0)
      ROOT r = f32[] negate(p)
    }
    b1 {
      p = f32[] parameter(0)
      ROOT r = f32[] add(p, p)
    }
    ENTRY e {
      k = s32[] parameter(0)
      x = f32[] parameter(1)
      ROOT c = f32[] conditional(k, x, x), branch_computations={b0, b1}
    }"""
    exe = runtime.compile(text)
    assert exe(np.int32(0), np.float32(3)) == -3
    assert exe(np.int32(1), np.float32(3)) == 6
    assert exe(np.int32(5), np.float32(3)) == 6
    assert exe(np.int32(-1), np.float32(3)) == 6


@pytest.mark.parametrize("stable_input", [[3, 1, 3, 2, 1, 3, 0], list(range(40, 0, -1))])
def test_stable_sort_keeps_equal_keys_in_order(stable_input):
    text = """HloModule s
    lt {
      a = s32[] parameter(0)
      b = s32[] parameter(1)
      c = s32[] parameter(2)
      d = s32[] parameter(3)
      ROOT l = pred[] compare(a, b), direction=LT
    }
    ENTRY e {
      k = s32[LEN] parameter(0)
      i = s32[LEN] iota(), iota_dimension=0
      ROOT s = (s32[LEN], s32[LEN]) sort(k, i), dimensions={0}, is_stable=true, to_apply=lt
    }""".replace("LEN", str(len(stable_input)))
    keys = np.array(stable_input, np.int32)
    got_k, got_i = run(text, keys)
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(got_k, keys[order])
    np.testing.assert_array_equal(got_i, order)


@pytest.mark.parametrize("body,reason", [
    ("x = c64[8] parameter(0)\n  ROOT y = c64[8] atan(x)", "atan on complex values"),
    ("x = f16[3,3] parameter(0)\n  ROOT y = f16[3,3] cholesky(x), lower=true",
     "cholesky y of f16 values is not supported"),
    ("a = f32[] parameter(0)\n  b = f32[] constant(1)\n"
     "  ROOT y = f32[4] rng(a, b), distribution=rng_uniform", "use rng-bit-generator"),
])
def test_unsupported_constructs_are_named_errors(body, reason):
    with pytest.raises(runtime.HloUnsupportedError, match=reason):
        runtime.compile("HloModule u\nENTRY e {\n  " + body + "\n}")
