"""custom-call: the runtime's own targets, then whatever the custom-call registry holds.

XLA prints a few of its own targets in optimised modules (``TopK`` on CPU); they lower to
ordinary kernel families. Every other target is resolved through ``runtime.custom_calls``
(a user registration first, then the built-in LAPACK host targets) and becomes a
``HostCall`` step: a host function over mapped buffers, or the host side of an OpenCL call
that enqueues the user's kernel.
"""

from __future__ import annotations

from ...custom_calls import lookup
from ...custom_calls.call_site import CallSite, call_site
from ...custom_calls.host import HostCallRunner
from ...custom_calls.lapack import LAPACK_TARGETS
from ...custom_calls.opencl import OpenCLCallRunner
from ...custom_calls.registry import CustomCallTarget, unknown_target_message
from ...errors import CustomCallError
from ...hlo.ir import HloInstruction
from ..context import LoweringContext
from ..registry import register
from ..plan import HostCall, Step
from .sort import lower_topk_custom_call

BUILTIN_TARGETS = {
    "TopK": lower_topk_custom_call,
}


def _host_step(site: CallSite, target: CustomCallTarget) -> HostCall:
    return HostCall(run=HostCallRunner(site, target.function), buffers=site.buffer_refs(),
                    instruction=site.instruction)


def _opencl_step(site: CallSite, target: CustomCallTarget) -> HostCall:
    runner = OpenCLCallRunner(site, target)
    return HostCall(run=runner, buffers=site.buffer_refs(), instruction=site.instruction,
                    prepare=runner.prepare)


STEP_BUILDERS = {"host": _host_step, "opencl": _opencl_step}


@register("custom-call", packed=True)
def lower_custom_call(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    name = str(inst.custom_call_target)
    target = lookup(name)
    if (target is None or target.builtin) and name in BUILTIN_TARGETS:
        return BUILTIN_TARGETS[name](ctx, inst)
    if target is None:
        raise CustomCallError(
            f"no implementation registered for custom call target {name!r} (instruction "
            f"{inst.name}); {unknown_target_message()}; built-in: "
            f"{', '.join(sorted(BUILTIN_TARGETS))} and {len(LAPACK_TARGETS)} LAPACK targets "
            "(runtime.registered_custom_calls(builtin=True) lists them)",
            target=name, instruction=inst.name, location=inst.location,
            hint=f"runtime.register_custom_call({name!r}, fn) for a host function, or with "
                 "platform='opencl' for a kernel")
    return [STEP_BUILDERS[target.platform](call_site(inst, ctx.ref), target)]
