"""Kernel families; importing this package registers every lowering rule.

Which rule wins is decided by the registry's (target, priority), never by the order of these
imports.
"""

from . import loop, row_vector_loop, vector_loop  # noqa: F401  (the loop kernel and its vector shapes)
from . import (  # noqa: F401
    control, convolution, custom_call, dot, reduction, rng, scan, scatter, select_and_scatter,
    sort, transpose, workgroup_dot, workgroup_rows,
)
