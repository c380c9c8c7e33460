"""Kernel families with dedicated lowerings; importing this package registers them."""

from .. import loop  # noqa: F401  (fusion and the generic loop kernel)
from . import convolution, custom_call, dot, rng, scatter, sort  # noqa: F401
