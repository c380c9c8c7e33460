"""The host side of a multi-device module's collectives (``passes.spmd_collectives``).

A collective step maps its operands and result, hands its operands to the run's
``Communicator`` (``exchange(key, value)`` returns every device's value, in device order,
once all have given theirs), and writes the result XLA's semantics give this device:
``collective_result``, plain numpy over the devices' arrays. Each device computes only its
own result from what all devices sent, so nothing but the exchange needs to agree between
them. ``partition-id`` and ``replica-id`` exchange nothing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..errors import HloUnsupportedError
from ..hlo.opcode_enum import Opcode
from ..passes.spmd_collectives import Collective
from .call_site import CallSite
from .mapping import MappedLeaves

REDUCTIONS: dict[Opcode, Callable] = {
    Opcode.ADD: np.add, Opcode.MULTIPLY: np.multiply, Opcode.MAXIMUM: np.maximum,
    Opcode.MINIMUM: np.minimum, Opcode.AND: np.bitwise_and, Opcode.OR: np.bitwise_or,
    Opcode.XOR: np.bitwise_xor,
}


class Communicator(Protocol):
    """What a partition's run exchanges collective data through: ``rank`` (the device this
    run is) of ``size`` devices; ``exchange`` blocks until every device has given its value
    for ``key`` and returns them all, in device order."""

    rank: int
    size: int

    def exchange(self, key: str, value: Any) -> list[Any]: ...


@dataclass
class CollectiveRunner:
    """The ``run`` of a collective's ``HostCall`` step: ``runner(executor, bindings)``."""

    site: CallSite
    spec: Collective

    def __call__(self, executor, bindings: list[Any]) -> None:
        spec = self.spec
        communicator: Communicator | None = getattr(executor, "communicator", None)
        if communicator is None or communicator.size != spec.devices:
            got = "one device" if communicator is None else f"{communicator.size} devices"
            raise HloUnsupportedError(
                f"{spec.kind} {spec.instruction}: the module runs on {spec.devices} devices, "
                f"but this run is {got}", instruction=spec.instruction,
                location=self.site.location, hint="run every partition with exe.run_spmd(args)")
        with MappedLeaves(executor.device, bindings, self.site.all_leaves()) as mapped:
            ins = [np.array(mapped.view(leaf)) for leaf in self.site.operand_leaves()]
            if spec.kind in (Opcode.PARTITION_ID, Opcode.REPLICA_ID):
                everyone: list = []
            else:
                everyone = communicator.exchange(spec.instruction, ins)
            results = collective_result(spec, communicator.rank, everyone)
            for leaf, value in zip(self.site.result_leaves(), results):
                mapped.view(leaf)[...] = value


def collective_result(spec: Collective, device: int,
                      values: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """Device ``device``'s result arrays of ``spec``, ``values[d]`` being device ``d``'s
    operands (XLA's semantics; group members in their group's order)."""
    kind = spec.kind
    if kind == Opcode.PARTITION_ID:
        return [np.array(device % spec.num_partitions, np.uint32)]
    if kind == Opcode.REPLICA_ID:
        return [np.array(device // spec.num_partitions, np.uint32)]
    if kind == Opcode.COLLECTIVE_PERMUTE:
        source = spec.sources[device]
        if source is None:
            return [np.zeros_like(a) for a in values[device]]
        return list(values[source])
    group = spec.group_of(device)
    members = [values[d] for d in group]
    me = group.index(device)
    size = len(group)
    count = len(values[device])
    if kind == Opcode.ALL_TO_ALL and spec.dimension is None:
        return [members[j][me] for j in range(size)]
    per_operand = [[m[k] for m in members] for k in range(count)]
    if kind == Opcode.ALL_REDUCE:
        return [_reduce(spec, arrays) for arrays in per_operand]
    if kind == Opcode.COLLECTIVE_BROADCAST:
        return [arrays[0] for arrays in per_operand]
    d = spec.dimension
    assert d is not None, spec
    if kind == Opcode.REDUCE_SCATTER:
        return [np.split(_reduce(spec, arrays), size, axis=d)[me] for arrays in per_operand]
    if kind == Opcode.ALL_GATHER:
        return [np.concatenate(arrays, axis=d) for arrays in per_operand]
    assert kind == Opcode.ALL_TO_ALL, kind
    return [np.concatenate([np.split(a, size, axis=d)[me] for a in arrays], axis=d)
            for arrays in per_operand]


def _reduce(spec: Collective, arrays: list[np.ndarray]) -> np.ndarray:
    assert spec.reducer is not None
    return functools.reduce(REDUCTIONS[Opcode(spec.reducer)], arrays)


__all__ = ["Communicator", "CollectiveRunner", "collective_result", "REDUCTIONS"]
