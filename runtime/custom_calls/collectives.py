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


Values = Sequence[Sequence[np.ndarray]]
#: device ``device``'s results of ``spec`` from ``values[d]``, device ``d``'s operands
ResultRule = Callable[[Collective, int, Values], list[np.ndarray]]


def collective_result(spec: Collective, device: int, values: Values) -> list[np.ndarray]:
    """Device ``device``'s result arrays of ``spec``, ``values[d]`` being device ``d``'s
    operands (XLA's semantics; group members in their group's order): ``RESULT_RULES``'s
    rule for its kind."""
    rule = RESULT_RULES.get(spec.kind)
    if rule is None:
        raise HloUnsupportedError(f"{spec.kind} {spec.instruction}: no host rule computes this "
                                  "collective's result", instruction=spec.instruction)
    return rule(spec, device, values)


def _partition_id(spec: Collective, device: int, values: Values) -> list[np.ndarray]:
    return [np.array(device % spec.num_partitions, np.uint32)]


def _replica_id(spec: Collective, device: int, values: Values) -> list[np.ndarray]:
    return [np.array(device // spec.num_partitions, np.uint32)]


def _collective_permute(spec: Collective, device: int, values: Values) -> list[np.ndarray]:
    """The source's operands, or zeros where no pair targets this device."""
    source = spec.sources[device]
    if source is None:
        return [np.zeros_like(a) for a in values[device]]
    return list(values[source])


def _all_reduce(spec: Collective, device: int, values: Values) -> list[np.ndarray]:
    return [_reduce(spec, arrays) for arrays in _per_operand(spec, device, values)]


def _collective_broadcast(spec: Collective, device: int, values: Values) -> list[np.ndarray]:
    """The first member of the group's operands."""
    return [arrays[0] for arrays in _per_operand(spec, device, values)]


def _reduce_scatter(spec: Collective, device: int, values: Values) -> list[np.ndarray]:
    """This device's piece, by its place in its group, of the group's reduction."""
    group = spec.group_of(device)
    return [np.split(_reduce(spec, arrays), len(group), axis=_dimension(spec))[group.index(device)]
            for arrays in _per_operand(spec, device, values)]


def _all_gather(spec: Collective, device: int, values: Values) -> list[np.ndarray]:
    return [np.concatenate(arrays, axis=_dimension(spec))
            for arrays in _per_operand(spec, device, values)]


def _all_to_all(spec: Collective, device: int, values: Values) -> list[np.ndarray]:
    """The array form: piece ``me`` of each member's operand, concatenated in group order;
    the tuple form (no dimension): operand ``me`` of each member."""
    group = spec.group_of(device)
    me = group.index(device)
    if spec.dimension is None:
        return [values[d][me] for d in group]
    d = spec.dimension
    return [np.concatenate([np.split(a, len(group), axis=d)[me] for a in arrays], axis=d)
            for arrays in _per_operand(spec, device, values)]


RESULT_RULES: dict[Opcode, ResultRule] = {
    Opcode.PARTITION_ID: _partition_id, Opcode.REPLICA_ID: _replica_id,
    Opcode.COLLECTIVE_PERMUTE: _collective_permute, Opcode.ALL_REDUCE: _all_reduce,
    Opcode.COLLECTIVE_BROADCAST: _collective_broadcast, Opcode.REDUCE_SCATTER: _reduce_scatter,
    Opcode.ALL_GATHER: _all_gather, Opcode.ALL_TO_ALL: _all_to_all,
}


def _per_operand(spec: Collective, device: int, values: Values) -> list[list[np.ndarray]]:
    """For each operand, the arrays the members of ``device``'s group gave, in group order."""
    members = [values[d] for d in spec.group_of(device)]
    return [[m[k] for m in members] for k in range(len(values[device]))]


def _dimension(spec: Collective) -> int:
    assert spec.dimension is not None, spec        # spmd_collectives sets it for these kinds
    return spec.dimension


def _reduce(spec: Collective, arrays: list[np.ndarray]) -> np.ndarray:
    assert spec.reducer is not None
    return functools.reduce(REDUCTIONS[Opcode(spec.reducer)], arrays)


__all__ = ["Communicator", "CollectiveRunner", "collective_result", "REDUCTIONS", "RESULT_RULES"]
