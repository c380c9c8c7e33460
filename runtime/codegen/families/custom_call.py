"""custom-call: targets the runtime implements itself, looked up by name.

XLA prints a few of its own targets in optimised modules (``TopK`` on CPU); they lower to
ordinary kernel families. User targets (host functions, OpenCL kernels) are resolved through
the custom-call registry.
"""

from __future__ import annotations

from ...errors import CustomCallError
from ...hlo.ir import HloInstruction
from ..lower import LoweringContext, register
from ..plan import Step
from .sort import lower_topk_custom_call

BUILTIN_TARGETS = {
    "TopK": lower_topk_custom_call,
}


@register("custom-call")
def lower_custom_call(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    target = str(inst.attrs["custom_call_target"])
    rule = BUILTIN_TARGETS.get(target)
    if rule is None:
        raise CustomCallError(f"no implementation registered for custom call target "
                              f"{target!r} (instruction {inst.name}); built-in targets: "
                              f"{', '.join(sorted(BUILTIN_TARGETS))}", target=target,
                              instruction=inst.name, location=inst.location)
    return rule(ctx, inst)
