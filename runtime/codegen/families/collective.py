"""A multi-device module's collective (a custom-call to ``COLLECTIVE_TARGET`` made by
``passes.spmd_collectives``) as a host step: the data leaves the device to be exchanged
between partitions, so there is no kernel (``custom_calls.collectives`` does the work)."""

from __future__ import annotations

from ...custom_calls.call_site import call_site
from ...custom_calls.collectives import CollectiveRunner
from ...hlo.ir import HloInstruction
from ...passes.spmd_collectives import Collective
from ..context import LoweringContext
from ..plan import HostCall, Step


def lower_collective(ctx: LoweringContext, inst: HloInstruction) -> list[Step]:
    spec = inst.attrs["collective"]
    assert isinstance(spec, Collective)
    site = call_site(inst, ctx.ref)
    return [HostCall(run=CollectiveRunner(site, spec), buffers=site.buffer_refs(),
                     instruction=inst.name)]
