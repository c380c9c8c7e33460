"""custom-call: the runtime's own targets, JAX's Python callbacks, then the registry.

XLA prints a few of its own targets in optimised modules (``TopK`` on CPU); they lower to
ordinary kernel families. JAX's Python callbacks run the lowering's own function where the
executable was compiled from a ``jax.stages.Lowered`` (``custom_calls.jax_callbacks``). Every
other target is resolved through ``runtime.custom_calls`` (a user registration first, then
the built-in LAPACK host targets) and becomes a ``HostCall`` step: a host function over
mapped buffers, or the host side of an OpenCL call that enqueues the user's kernel. A target
nothing implements becomes a step that raises when reached (``custom_calls.unimplemented``):
such calls often sit in branches that valid input never takes. ``resolve`` is the one
decision, shared by the lowering and by ``unimplemented_calls`` (what ``runtime.analyze`` and
the reports list).
"""

from __future__ import annotations

from typing import Callable, Union

import numpy as np

from ...custom_calls import lookup
from ...custom_calls.call_site import CallSite, call_site
from ...custom_calls.host import HostCallRunner
from ...custom_calls.jax_callbacks import FFI_TARGET, JaxCallback, api_of, is_python_callback
from ...custom_calls.lapack import LAPACK_TARGETS
from ...custom_calls.mlir_attributes import parse_attributes
from ...custom_calls.opencl import OpenCLCallRunner
from ...custom_calls.registry import CustomCallTarget, unknown_target_message
from ...custom_calls.unimplemented import UnimplementedCall
from ...errors import CustomCallError, HloError
from ...hlo.attributes import BackendConfig, Metadata
from ...hlo.ir import HloInstruction, HloModule
from ...hlo.opcode_enum import Opcode
from ...passes.manual_regions import REGION_TARGET
from ...passes.spmd_collectives import COLLECTIVE_TARGET
from ..context import LoweringContext
from ..registry import register
from ..plan import HostCall, Step
from .collective import lower_collective
from .manual_region import lower_manual_region
from .sort import lower_topk_custom_call

Lowering = Callable[[LoweringContext, HloInstruction], list[Step]]

BUILTIN_TARGETS: dict[str, Lowering] = {
    "TopK": lower_topk_custom_call,
    COLLECTIVE_TARGET: lower_collective,
    REGION_TARGET: lower_manual_region,
}

Resolution = Union[CustomCallTarget, UnimplementedCall, Lowering]


def resolve(inst: HloInstruction, python_callbacks: tuple[Callable, ...]) -> Resolution:
    """What runs ``inst``: a registration, a built-in lowering, or nothing (an
    ``UnimplementedCall``). A JAX callback given its lowering's functions becomes a host
    target of its own."""
    name = str(inst.custom_call_target)
    if is_python_callback(name):
        return _python_callback(inst, name, python_callbacks)
    target = lookup(name)
    if (target is None or target.builtin) and name in BUILTIN_TARGETS:
        return BUILTIN_TARGETS[name]
    if target is None:
        return UnimplementedCall(
            name, inst.name, inst.location,
            why=f"no implementation is registered for it; {unknown_target_message()}; "
                f"built-in: {', '.join(sorted(BUILTIN_TARGETS))} and {len(LAPACK_TARGETS)} "
                "LAPACK targets (runtime.registered_custom_calls(builtin=True) lists them)",
            short="no implementation registered",
            hint=f"runtime.register_custom_call({name!r}, fn) for a host function, or with "
                 "platform='opencl' for a kernel")
    return target


def _python_callback(inst: HloInstruction, name: str,
                     callbacks: tuple[Callable, ...]) -> Resolution:
    metadata = inst.attrs.get("metadata")
    api = api_of(metadata.fields if isinstance(metadata, Metadata) else {},
                 inst.attrs.get("custom_call_has_side_effect") is True,
                 any(not leaf.is_token for _, leaf in inst.shape.leaves()))
    index = _callback_index(inst) if FFI_TARGET.fullmatch(name) else None
    if index is not None and index < len(callbacks):
        return CustomCallTarget(name, "host", function=JaxCallback(callbacks[index], api))
    registered = lookup(name)
    if registered is not None:
        return registered
    where = f" (backend_config index {index})" if index is not None else ""
    if callbacks and index is not None:
        why = (f"this module calls a Python function through {api}{where}, and the JAX "
               f"lowering it was compiled with has {len(callbacks)} callback(s)")
    elif index is None:
        why = (f"this module calls a Python function through {api}, and this target's "
               "backend_config holds no index into a lowering's callbacks (older JAX "
               "printed a pointer; jax.experimental.buffer_callback passes device "
               "buffers), so it cannot be looked up")
    else:
        why = (f"this module calls a Python function through {api}{where}; that function "
               "lived in the Python process that lowered the module, and HLO text holds "
               "only its position in that lowering's callback list")
    return UnimplementedCall(
        name, inst.name, inst.location, why=why,
        short=f"a Python function through {api}, not available from HLO text",
        hint="compile the JAX lowering itself, runtime.compile(jax.jit(f).lower(...)), to "
             "run the function")


def _callback_index(inst: HloInstruction) -> int | None:
    """The ``index`` of a typed-FFI JAX callback's ``backend_config``, None if it has none."""
    config = inst.attrs.get("backend_config")
    if not isinstance(config, BackendConfig):
        return None
    try:
        index = parse_attributes(config.text, instruction=inst.name).get("index")
    except HloError:
        return None
    return int(index) if isinstance(index, (int, np.integer)) and index >= 0 else None


def unimplemented_calls(module: HloModule,
                        python_callbacks: tuple[Callable, ...] = ()) -> list[UnimplementedCall]:
    """The module's custom calls that nothing implements, in text order."""
    return [found for comp in module.computations for inst in comp.instructions
            if inst.opcode == Opcode.CUSTOM_CALL
            and isinstance(found := resolve(inst, python_callbacks), UnimplementedCall)]


def _host_step(site: CallSite, target: CustomCallTarget) -> HostCall:
    if target.function is None:   # registration gives every host target a function
        raise CustomCallError(f"host custom call target {target.name!r} has no function",
                              target=target.name)
    return HostCall(run=HostCallRunner(site, target.function), buffers=site.buffer_refs(),
                    instruction=site.instruction)


def _opencl_step(site: CallSite, target: CustomCallTarget) -> HostCall:
    runner = OpenCLCallRunner(site, target)
    return HostCall(run=runner, buffers=site.buffer_refs(), instruction=site.instruction,
                    prepare=runner.prepare)


STEP_BUILDERS = {"host": _host_step, "opencl": _opencl_step}


@register(Opcode.CUSTOM_CALL, packed=True)
def lower_custom_call(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    found = resolve(inst, ctx.python_callbacks)
    if isinstance(found, UnimplementedCall):
        return [HostCall(run=found, instruction=inst.name)]
    if isinstance(found, CustomCallTarget):
        return [STEP_BUILDERS[found.platform](call_site(inst, ctx.ref), found)]
    return found(ctx, inst)
