"""The host side of a shard_map region (``passes.manual_regions``): each device's shard of
the global operands, the body run on every device, the global results put back together.

Device ``d`` gets, of each operand, the tile its in-sharding assigns it (the whole array
when the sharding is replicated); the body runs on all devices at once through the
executor's ``run_region`` (``Executable.run_spmd`` of the body's executable, so the body's
collectives exchange between them); each result tile is taken from the first device holding
it in tile-assignment order, the mesh's order, which is the copy JAX reads of a replicated
array. The operands are read and the results written in two separate mappings, so no
buffer stays mapped while the body runs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..hlo.sharding import HloSharding
from ..passes.manual_regions import ManualRegion
from .call_site import CallSite
from .mapping import MappedLeaves


def shard(value: np.ndarray, sharding: HloSharding, device: int) -> np.ndarray:
    """Device ``device``'s tile of ``value`` (the shapes divide: the pass checked)."""
    if sharding.kind != "tiled":
        return value
    index = sharding.tile_index(device)
    sizes = [d // t for d, t in zip(value.shape, sharding.tile)]
    return value[tuple(slice(i * n, (i + 1) * n) for i, n in zip(index, sizes))]


def assemble(parts: Sequence[np.ndarray], sharding: HloSharding) -> np.ndarray:
    """The global array whose tiles are ``parts[d]`` (device ``d``'s local result)."""
    if sharding.kind != "tiled":
        return parts[sharding.devices[0] if sharding.devices else 0]
    holders: dict[tuple[int, ...], int] = {}
    for d in sharding.devices:                  # the first in tile-assignment order wins
        holders.setdefault(sharding.tile_index(d), d)
    sizes = parts[0].shape
    out = np.empty(tuple(n * t for n, t in zip(sizes, sharding.tile)), parts[0].dtype)
    for index in itertools.product(*(range(t) for t in sharding.tile)):
        out[tuple(slice(i * n, (i + 1) * n) for i, n in zip(index, sizes))] = \
            parts[holders[index]]
    return out


@dataclass
class ManualRegionRunner:
    """The ``run`` of a region's ``HostCall`` step: ``runner(executor, bindings)``."""

    site: CallSite
    region: ManualRegion

    def __call__(self, executor: Any, bindings: list[Any]) -> None:
        region = self.region
        operands = list(self.site.operand_leaves())
        with MappedLeaves(executor.device, bindings, operands) as mapped:
            ins = [np.array(mapped.view(leaf)) for leaf in operands]
        args = [[shard(x, s, d) for x, s in zip(ins, region.in_shardings)]
                for d in range(region.devices)]
        outs = executor.run_region(region.instruction, args)
        per_device = [o if isinstance(o, tuple) else (o,) for o in outs]
        results = [assemble([np.asarray(per_device[d][k]) for d in range(region.devices)], s)
                   for k, s in enumerate(region.out_shardings)]
        leaves = list(self.site.result_leaves())
        with MappedLeaves(executor.device, bindings, leaves) as mapped:
            for leaf, value in zip(leaves, results):
                mapped.view(leaf)[...] = value


__all__ = ["ManualRegionRunner", "shard", "assemble"]
