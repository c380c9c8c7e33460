"""Warm-up launches: the narrowest grid PoCL compiles the same kernel variant for."""

from types import SimpleNamespace

from runtime.execution.kernel_builds import POCL_SMALL_GRID, warm_up_size

POCL = SimpleNamespace(is_pocl=True)
OTHER = SimpleNamespace(is_pocl=False)


def test_small_grids_warm_at_their_own_size():
    assert warm_up_size(POCL, (640,), (64,)) == (640,)
    assert warm_up_size(POCL, (POCL_SMALL_GRID - 64,), (64,)) == (POCL_SMALL_GRID - 64,)


def test_wide_grids_warm_at_the_first_wide_size():
    assert warm_up_size(POCL, (1 << 22,), (64,)) == (POCL_SMALL_GRID,)
    assert warm_up_size(POCL, (1 << 22, 8), (3, 8)) == (POCL_SMALL_GRID + 2, 8)
    assert all(g >= POCL_SMALL_GRID for g in warm_up_size(POCL, (1 << 20,), (24,)))


def test_other_drivers_warm_at_the_real_size():
    assert warm_up_size(OTHER, (1 << 22,), (64,)) == (1 << 22,)
