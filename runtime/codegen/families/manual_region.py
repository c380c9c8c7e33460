"""A shard_map region (a custom-call to ``REGION_TARGET`` made by
``passes.manual_regions``) as a host step: its body runs on every device as an executable
of its own (``custom_calls.manual_region``), so there is no kernel here."""

from __future__ import annotations

from ...custom_calls.call_site import call_site
from ...custom_calls.manual_region import ManualRegionRunner
from ...hlo.ir import HloInstruction
from ...passes.manual_regions import ManualRegion
from ..context import LoweringContext
from ..plan import HostCall, Step


def lower_manual_region(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    region = inst.attrs["region"]
    assert isinstance(region, ManualRegion)
    site = call_site(inst, ctx.ref)
    return [HostCall(run=ManualRegionRunner(site, region), buffers=site.buffer_refs(),
                     instruction=inst.name)]
