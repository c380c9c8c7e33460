"""JAX's Python callbacks: ``jax.pure_callback``, ``io_callback`` and ``jax.debug.callback``.

JAX lowers each of them to a typed-FFI custom call (``xla_ffi_python_cpu_callback``, on GPUs
``xla_ffi_python_gpu_callback``, ``xla_ffi_partitioned_...`` for sharded ones; JAX before the
FFI printed ``xla_python_cpu_callback``) whose ``backend_config`` holds only ``index``: the
position of the Python function in the host-callback list of the lowering that printed the
module (``ModuleContext.host_callbacks`` in ``jax/_src/interpreters/mlir.py``, filled by
``emit_python_callback`` in ``jax/_src/callback.py``, the same in jax 0.10 and 0.12). No global
registry maps an index to a function: the list lives on the ``jax.stages.Lowered`` object
(``lowered._lowering.compile_args["host_callbacks"]``), so a module's callbacks can be run
only when that lowering is at hand, which ``runtime.compile(lowered)`` or
``python_callbacks=`` provide. Text alone names a function that no longer exists.

Each list entry is JAX's own wrapper, ``fn(*operands) -> tuple of results``, which checks the
results' shapes and dtypes. XLA's handler passes a token operand as ``None`` and skips token
results; the wrapper's results line up with the call's result elements, tokens included.
Equinox's ``error_if`` and Diffrax's ``throw=True`` put such calls in a branch taken only on
invalid input; where the lowering is not at hand, that branch compiles to a step that raises
(``codegen.families.custom_call``), so the module runs on valid input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import CustomCallError

#: the targets JAX's ``emit_python_callback`` prints, typed FFI (index in backend_config)
FFI_TARGET = re.compile(r"xla_ffi(?:_partitioned)?_python_(?:cpu|gpu)_callback")
#: older or other Python-callback targets: the backend_config is a pointer, or the callback
#: takes device buffers (``jax.experimental.buffer_callback``); they never run here
OTHER_TARGET = re.compile(r"xla_(?:python|buffer_python)_(?:cpu|gpu)_callback")

#: what JAX names each callback's op (metadata ``op_type``, or the last part of ``op_name``)
APIS = {"pure_callback": "jax.pure_callback", "io_callback": "jax.experimental.io_callback",
        "debug_callback": "jax.debug.callback"}


def is_python_callback(target: str) -> bool:
    return bool(FFI_TARGET.fullmatch(target) or OTHER_TARGET.fullmatch(target))


def api_of(metadata_fields: dict[str, str], side_effect: bool, array_results: bool) -> str:
    """The JAX function that made the call: its metadata says so where JAX printed it
    (optimised text); else only ``pure_callback`` lowers without a side effect, and only
    ``debug.callback`` returns no arrays."""
    op = metadata_fields.get("op_type") or metadata_fields.get("op_name", "").rsplit("/", 1)[-1]
    if op in APIS:
        return APIS[op]
    if not side_effect:
        return APIS["pure_callback"]
    return APIS["io_callback"] if array_results else APIS["debug_callback"]


def lowered_callbacks(lowered: Any) -> tuple[Callable, ...]:
    """The host callbacks of a ``jax.stages.Lowered``, in ``index`` order."""
    try:
        found = lowered._lowering.compile_args["host_callbacks"]
    except (AttributeError, KeyError, TypeError):
        raise CustomCallError(
            f"cannot find the Python callbacks of this {type(lowered).__name__}: JAX keeps them "
            "in lowered._lowering.compile_args['host_callbacks'] (jax 0.10 to 0.12), which this "
            "object lacks", hint="pass python_callbacks=[...] in the lowering's order") from None
    return checked_callbacks(found)


def checked_callbacks(callbacks: Sequence[Callable]) -> tuple[Callable, ...]:
    found = tuple(callbacks)
    for k, fn in enumerate(found):
        if not callable(fn):
            raise CustomCallError(f"python_callbacks[{k}] is a {type(fn).__name__}, not a "
                                  "function")
    return found


def is_lowered(value: object) -> bool:
    """A ``jax.stages.Lowered`` (recognised without importing jax)."""
    return type(value).__name__ == "Lowered" and hasattr(value, "as_text") and \
        hasattr(value, "_lowering")


@dataclass
class JaxCallback:
    """A host function (typed-FFI convention) that runs one of a lowering's callbacks.

    Operands are copied out of the mapped buffers first: a callback may keep them (a
    ``debug.callback`` that appends to a list), and the views die with the call."""

    function: Callable
    api: str

    def __call__(self, out, ins: list, **_attrs) -> None:
        args = [None if a is None else _copy(a) for a in ins]
        results = self.function(*args)
        targets = out if isinstance(out, tuple) else (out,)
        if results is None and not targets:
            return                        # nothing to return, said the Python way
        if not isinstance(results, (tuple, list)) or len(results) != len(targets):
            got = f"{len(results)} value(s)" if isinstance(results, (tuple, list)) \
                else f"a {type(results).__name__}"
            raise CustomCallError(f"the {self.api} function returned {got} for "
                                  f"{len(targets)} result(s)")
        for k, (target, value) in enumerate(zip(targets, results)):
            if target is None:
                continue                  # a token
            array = np.asarray(value)
            if array.shape != target.shape or array.dtype != target.dtype:
                raise CustomCallError(f"the {self.api} function returned {array.dtype}"
                                      f"{list(array.shape)} for result {k}, which is "
                                      f"{target.dtype}{list(target.shape)}")
            target[...] = array


def _copy(value):
    if isinstance(value, tuple):
        return tuple(None if v is None else _copy(v) for v in value)
    return np.array(value, copy=True)


__all__ = ["is_python_callback", "api_of", "lowered_callbacks", "checked_callbacks",
           "is_lowered", "JaxCallback", "FFI_TARGET"]
