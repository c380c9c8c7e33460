"""Kernel families with dedicated lowerings; importing this package registers them."""

from .. import loop  # noqa: F401  (fusion and the generic loop kernel)
from . import custom_call, reduction, rng, scatter, sort  # noqa: F401
