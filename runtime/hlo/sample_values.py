"""Arrays of a given HLO shape made up for a run: zeros, or seeded random values.

A whole model has hundreds of parameters; asking the user for one variable per parameter
stops them before the first run. ``sample_value`` makes one argument of a parameter's shape
(a nested tuple for a tuple shape) with the numpy dtype the run API takes for its element
type (ml_dtypes for bf16, f8 and sub-byte types). Random values are chosen to be harmless
rather than realistic: floats are standard normal scaled by ``FLOAT_SCALE`` (an activation
stays finite through a few layers, even in f8); integers are small and non-negative
(``INTEGER_HIGH``), so an integer parameter used as a token id, a gather index or a loop
bound stays in range for most modules; pred is a fair coin. Elided constants
(``runnable.fill_elided_constants``) are filled by the same rules. Made-up values know no
model's invariants: an Adam second moment gets negative values, and its ``sqrt`` makes NaNs
in the outputs (XLA's too, on the same inputs).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import HloArgumentError
from .dtypes import ElementType
from .ir import HloInstruction
from .shape import ArrayShape, Shape, TupleShape

FLOAT_SCALE = 0.1
INTEGER_HIGH = 16      # random integers are drawn from [0, INTEGER_HIGH), within the type's range


def sample_value(shape: Shape, rng: np.random.Generator | None,
                 where: str = "parameter") -> np.ndarray | tuple[object, ...]:
    """One value of ``shape``: zeros when ``rng`` is None, else random values drawn from it."""
    if isinstance(shape, TupleShape):
        return tuple(sample_value(s, rng, f"{where} element {k}")
                     for k, s in enumerate(shape.elements))
    assert isinstance(shape, ArrayShape)
    return sample_array(shape.element_type, shape.dims, rng, where)


def sample_array(et: ElementType, dims: tuple[int, ...], rng: np.random.Generator | None,
                 where: str = "parameter") -> np.ndarray:
    """An array of element type ``et``: zeros without ``rng``, else seeded random values."""
    if et.numpy_name is None:
        raise HloArgumentError(f"{where} has element type {et.name}, which has no array values "
                               "to make up")
    if rng is None:
        return np.zeros(dims, dtype=et.numpy)
    if et.is_pred:
        return rng.integers(0, 2, dims).astype(et.numpy)
    if et.is_integer:
        high = min(INTEGER_HIGH, 2 ** (et.bits - 1) if et.is_signed else 2 ** et.bits)
        return rng.integers(0, max(high, 1), dims).astype(et.numpy)
    values = FLOAT_SCALE * rng.standard_normal(dims)
    if et.is_complex:
        values = values + 1j * FLOAT_SCALE * rng.standard_normal(dims)
    elif et.name == "f8e8m0fnu":          # powers of two only: no sign, no zero
        values = np.abs(values)
    return values.astype(et.numpy)


def sample_arguments(parameters: Sequence[HloInstruction],
                     seed: int | None) -> list[np.ndarray | tuple[object, ...]]:
    """One value per entry parameter, in order: zeros when ``seed`` is None, else random
    values from one generator seeded with ``seed`` (the same seed gives the same arguments)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or seed < 0):
        raise HloArgumentError(f"seed={seed!r}: expected a non-negative integer")
    rng = None if seed is None else np.random.default_rng(seed)
    return [sample_value(p.shape, rng, f"parameter {p.parameter_number} ({p.name})")
            for p in parameters]
