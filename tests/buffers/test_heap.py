"""Best-fit-decreasing packing in two orders."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.buffers.heap import Interval, align_up, block_alignment, pack


def test_disjoint_lifetimes_share_offset_zero():
    result = pack([Interval(0, 1, 100), Interval(2, 3, 100), Interval(4, 5, 50)], 1)
    assert result.offsets == [0, 0, 0] and result.size == 100


def test_best_fit_picks_the_smallest_gap_that_fits():
    # spatial order: A (0..1) at 0, B (0..9) at 100; C (5..9) overlaps only B and takes A's
    # old place; D (5..9) fits in the 60-byte gap between C and B rather than on top
    intervals = [Interval(0, 1, 100), Interval(0, 9, 60), Interval(5, 9, 40), Interval(5, 9, 30)]
    result = pack(intervals, 1)
    assert result.offsets == [0, 100, 0, 40]
    assert (result.size, result.order) == (160, "spatial")


def test_offsets_are_aligned_and_the_smaller_of_two_orders_wins():
    result = pack([Interval(0, 0, 4), Interval(0, 0, 4), Interval(1, 1, 200)], 128)
    assert result.offsets == [0, 128, 0] and result.size == 200
    # temporal order places the long-lived blocks first and packs tighter here
    intervals = [Interval(6, 11, 40), Interval(5, 7, 30), Interval(1, 5, 20), Interval(2, 3, 20),
                 Interval(2, 2, 30)]
    result = pack(intervals, 1)
    assert (result.size, result.order) == (70, "temporal"), "spatial order needs 90 bytes"
    assert result.offsets == [0, 40, 0, 20, 40]


def test_zero_size_blocks_take_no_space():
    assert pack([Interval(0, 5, 0), Interval(0, 5, 8)], 128).offsets == [0, 0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 6), st.integers(0, 300)),
                max_size=30), st.sampled_from([1, 8, 128]))
def test_packing_never_overlaps_live_blocks(raw, alignment):
    intervals = [Interval(s, s + d, size) for s, d, size in raw]
    result = pack(intervals, alignment)
    for i, a in enumerate(intervals):
        assert result.offsets[i] % alignment == 0
        assert result.offsets[i] + a.size <= result.size
        for j in range(i):
            b = intervals[j]
            if a.size and b.size and a.start <= b.end and b.start <= a.end:
                lo_a, lo_b = result.offsets[i], result.offsets[j]
                assert lo_a + a.size <= lo_b or lo_b + b.size <= lo_a
    assert result.size >= max((iv.size for iv in intervals), default=0)


def test_align_up():
    assert [align_up(v, 128) for v in (0, 1, 128, 129)] == [0, 128, 128, 256]


@pytest.mark.parametrize("size,alignment", [(0, 1), (1, 1), (3, 4), (4, 4), (5, 8), (40, 64),
                                            (64, 64), (65, 128), (4096, 128)])
def test_blocks_smaller_than_the_alignment_align_to_their_size(size, alignment):
    assert block_alignment(size, 128) == alignment


def test_an_interval_keeps_its_own_alignment():
    packed = pack([Interval(0, 1, 3, 4), Interval(0, 1, 4, 4), Interval(0, 1, 200)], 128)
    assert packed.offsets == [204, 200, 0] and packed.size == 207
