"""Kernel families with dedicated lowerings; importing this package registers them."""

from .. import loop, vector_loop  # noqa: F401  (fusion and the loop kernels)
from . import convolution, custom_call, dot, rng, scatter, sort, transpose  # noqa: F401
