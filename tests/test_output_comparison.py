"""The comparison with XLA's outputs (``corpus_data.compare_scaled``): scaled by the output's
largest magnitude, exact for integers, NaNs and infinities where the reference has them."""

import numpy as np

from .corpus_data import compare_scaled, output_differences

TOL = {"rtol": 1e-5, "atol": 0.0}


def test_a_small_element_is_judged_by_the_output_s_scale():
    # an AVX2 host's XLA against an AVX-512 host's: the last bits of a sum of large terms
    want = np.array([0.25776899, 37.8, -3.0], np.float32)
    got = np.array([0.25777316, 37.8, -3.0], np.float32)
    assert compare_scaled("g", got, want, TOL) == []
    got[0] = 0.27
    assert compare_scaled("g", got, want, TOL)


def test_integers_exact_and_non_finite_values_matched():
    assert compare_scaled("i", np.array([1, 2], np.int32), np.array([1, 3], np.int32), TOL)
    nan = np.array([np.nan, 1.0], np.float32)
    assert compare_scaled("n", np.array([0.0, 1.0], np.float32), nan, TOL)
    inf = np.array([np.inf, 1.0], np.float32)
    assert compare_scaled("n", np.array([3e38, 1.0], np.float32), inf, TOL)
    assert compare_scaled("n", inf.copy(), inf, TOL) == []


def test_complex_outputs_compare_their_imaginary_parts():
    want = np.array([1 + 1j, 2 - 1j], np.complex64)
    assert compare_scaled("c", want.conj(), want, TOL)


def test_output_counts_and_shapes_must_match():
    one = [np.zeros(2, np.float32)]
    assert output_differences(one, one * 2, 1e-5)
    assert output_differences([np.zeros(3, np.float32)], one, 1e-5)
