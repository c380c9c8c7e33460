"""Custom calls: HLO that calls code written outside it, as a Python host function or OpenCL.

``runtime.register_custom_call(name, fn)`` registers a host function (XLA's CPU convention:
``fn(out, ins)``, with a status and the opaque ``backend_config`` bytes in the later
``api_version``s, and typed-FFI attributes as keyword arguments; see ``conventions``).
``runtime.register_custom_call(name, source, platform="opencl", kernel="k")`` registers an
OpenCL kernel (XLA's GPU convention: operand leaf buffers in pre-order, then the result's),
or ``launcher=fn(queue, buffers, opaque, status)`` to enqueue the work from Python. If a
target is registered on both platforms, the OpenCL implementation is used: the buffers are
already on the device. A target nothing implements compiles to a step that raises
``CustomCallError`` (naming what is registered) only if a run reaches it
(``unimplemented``); JAX's ``pure_callback``-style targets run the functions of the lowering
the module was compiled from (``jax_callbacks``).

A failure (``status.set_failure(message)``, or an exception raised by the function) fails
the run with ``runtime.CustomCallError`` carrying the message, with the exception as its
``__cause__``; the run returns nothing and undonated inputs are untouched.
"""

from ..passes.cholesky_host_calls import CHOLESKY_TARGET
from .cholesky import xla_cholesky
from .conventions import CustomCallStatus
from .lapack import LAPACK_TARGETS
from .registry import (
    CustomCallTarget, cache_token, lookup, register_builtin, register_custom_call,
    registered_custom_calls, unregister_custom_call,
)

for _name, _target in LAPACK_TARGETS.items():
    register_builtin(_name, _target)
register_builtin(CHOLESKY_TARGET, xla_cholesky)

__all__ = [
    "CustomCallStatus", "CustomCallTarget", "register_custom_call", "unregister_custom_call",
    "registered_custom_calls", "lookup", "cache_token",
]
