"""Kernel families with dedicated lowerings; importing this package registers them.

Loop kernel variants are tried in import order: the blocked transposition before the vector
loop (which could also move a layout-changing copy, with strided gathers).
"""

from .. import loop  # noqa: F401  (fusion and the one-element-per-work-item loop kernel)
from . import transpose  # noqa: F401
from .. import vector_loop  # noqa: F401
from . import convolution, custom_call, dot, reduction, rng, scatter, sort  # noqa: F401
