"""Which devices a collective of a multi-device module exchanges data with, as XLA decides it.

A device is ``replica * num_partitions + partition``. A collective's ``replica_groups`` name
replicas, partitions or devices depending on ``channel_id`` and ``use_global_device_ids``
(XLA's ``CollectiveOpGroupMode``): no channel: groups of replicas, applied within every
partition; a channel: groups of partitions within every replica; a channel and
``use_global_device_ids=true``: groups of devices. An empty list is one group of all of them.
The groups are printed as a list (``{{0,1},{2,3}}``), as an iota (``[2,2]<=[4]``,
``[2,2]<=[2,2]T(1,0)``) or over a named mesh (``mesh['a'=2,'b'=2] {'a'}``: the devices that
differ only along the listed axes). collective-permute's ``source_target_pairs`` name
partitions with a channel, replicas without.

Everything is checked the way XLA's verifier checks it, with a located ``HloVerifyError``: a
wrong group would otherwise exchange with the wrong devices and give a wrong answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import HloVerifyError
from ..hlo.ir import HloInstruction, HloModule

_LIST = re.compile(r"\{\s*((?:\{[\d\s,]*\}\s*,?\s*)*)\}")
_GROUP = re.compile(r"\{([\d\s,]*)\}")
_IOTA = re.compile(r"\[([\d\s,]+)\]\s*<=\s*\[([\d\s,]+)\](?:\s*T\(([\d\s,]+)\))?")
_MESH = re.compile(r"mesh\[([^\]]*)\]\s*\{([^}]*)\}")
_AXIS = re.compile(r"'([^']+)'\s*=\s*(\d+)")
_PAIR = re.compile(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}")


@dataclass(frozen=True)
class DeviceGrid:
    """The module's devices: ``replica_count`` x ``num_partitions``."""

    replica_count: int
    num_partitions: int

    @property
    def size(self) -> int:
        return self.replica_count * self.num_partitions

    @classmethod
    def of(cls, module: HloModule) -> DeviceGrid:
        def count(key: str) -> int:
            value = module.header_attrs.get(key, 1)
            return value if isinstance(value, int) and value > 0 else 1
        return cls(count("replica_count"), count("num_partitions"))


def device_groups(inst: HloInstruction, grid: DeviceGrid,
                  uniform: bool) -> tuple[tuple[int, ...], ...]:
    """The groups of devices ``inst`` runs over, every device in exactly one. ``uniform``: all
    groups must have the same size (all-gather, reduce-scatter, all-to-all)."""
    mode, count = _mode(inst, grid)
    groups = _parse_groups(inst, count)
    _check_groups(inst, groups, count, mode, uniform)
    out = []
    if mode == "devices":
        out = groups
    elif mode == "replicas":
        out = [[r * grid.num_partitions + p for r in g] for p in range(grid.num_partitions)
               for g in groups]
    else:
        out = [[r * grid.num_partitions + p for p in g] for r in range(grid.replica_count)
               for g in groups]
    return tuple(tuple(g) for g in out)


def permute_sources(inst: HloInstruction, grid: DeviceGrid) -> tuple[int | None, ...]:
    """For each device, the device collective-permute ``inst`` receives from (None: it
    receives nothing and gets zeros)."""
    with_channel = inst.attrs.get("channel_id") is not None
    count = grid.num_partitions if with_channel else grid.replica_count
    what = "partition" if with_channel else "replica"
    pairs = [(int(a), int(b)) for a, b in _PAIR.findall(_raw(inst, "source_target_pairs", ""))]
    sources: dict[int, int] = {}
    seen: set[int] = set()
    for source, target in pairs:
        for role, value in (("source", source), ("target", target)):
            if value >= count:
                raise _error(inst, f"its source_target_pairs name {what} {value}, but the module "
                                   f"has {count} {what}s", f"{what} ids below {count}",
                             f"{role} {value}")
        if source in seen:
            raise _error(inst, f"{what} {source} is the source of two pairs", "each source once",
                         f"{source} twice")
        if target in sources:
            raise _error(inst, f"{what} {target} is the target of two pairs", "each target once",
                         f"{target} twice")
        seen.add(source)
        sources[target] = source
    out: list[int | None] = []
    for device in range(grid.size):
        replica, partition = divmod(device, grid.num_partitions)
        mine = partition if with_channel else replica
        sender = sources.get(mine)
        if sender is None:
            out.append(None)
        elif with_channel:
            out.append(replica * grid.num_partitions + sender)
        else:
            out.append(sender * grid.num_partitions + partition)
    return tuple(out)


def _mode(inst: HloInstruction, grid: DeviceGrid) -> tuple[str, int]:
    channel = inst.attrs.get("channel_id") is not None
    global_ids = inst.attrs.get("use_global_device_ids") is True
    if global_ids and not channel:
        raise _error(inst, "use_global_device_ids=true needs a channel_id (XLA's verifier "
                           "refuses it too)", "a channel_id", "none")
    if global_ids:
        return "devices", grid.size
    if channel:
        return "partitions", grid.num_partitions
    return "replicas", grid.replica_count


def _parse_groups(inst: HloInstruction, count: int) -> list[list[int]]:
    text = _raw(inst, "replica_groups", "{}")
    mesh = _MESH.fullmatch(text)
    if mesh:
        return _mesh_groups(inst, mesh, count)
    iota = _IOTA.fullmatch(text)
    if iota:
        shape, dims = _ints(iota.group(1)), _ints(iota.group(2))
        perm = _ints(iota.group(3)) if iota.group(3) else list(range(len(dims)))
        if len(shape) != 2 or sorted(perm) != list(range(len(dims))) or \
                int(np.prod(shape)) != int(np.prod(dims)):
            raise _error(inst, f"its replica_groups {text} are not a valid iota list",
                         "[groups,size]<=[dims]T(perm) with matching sizes", text)
        ids = np.arange(int(np.prod(dims))).reshape(dims).transpose(perm).reshape(shape)
        return _lists(ids)
    listed = _LIST.fullmatch(text)
    if listed:
        groups = [_ints(g) for g in _GROUP.findall(listed.group(1))]
        return groups or [list(range(count))]
    raise _error(inst, f"its replica_groups {text} are in no form this runtime reads",
                 "{{0,1},...}, [G,S]<=[N] or mesh[...] {...}", text)


def _mesh_groups(inst: HloInstruction, mesh: re.Match[str], count: int) -> list[list[int]]:
    axes = [(name, int(size)) for name, size in _AXIS.findall(mesh.group(1))]
    names = [a for a in (s.strip().strip("'") for s in mesh.group(2).split(",")) if a]
    known = [name for name, _ in axes]
    if not axes or any(n not in known for n in names) or len(set(names)) != len(names):
        raise _error(inst, f"its mesh replica_groups name axes {names} of the mesh {known}",
                     f"distinct axes of {known}", str(names))
    sizes = [size for _, size in axes]
    ids = np.arange(int(np.prod(sizes))).reshape(sizes)
    grouped = [known.index(n) for n in names]
    rest = [k for k in range(len(axes)) if k not in grouped]
    group_size = int(np.prod([sizes[k] for k in grouped]))
    return _lists(ids.transpose(rest + grouped).reshape(-1, group_size))


def _check_groups(inst: HloInstruction, groups: list[list[int]], count: int, mode: str,
                  uniform: bool) -> None:
    seen: set[int] = set()
    for g in groups:
        if not g:
            raise _error(inst, "it has an empty replica group", "non-empty groups", "{}")
        for i in g:
            if i >= count:
                raise _error(inst, f"its replica_groups name {mode[:-1]} {i}, but the module has "
                                   f"{count} {mode}", f"ids below {count}", str(i))
            if i in seen:
                raise _error(inst, f"{mode[:-1]} {i} is in two replica groups",
                             "disjoint groups", f"{i} twice")
            seen.add(i)
    if len(seen) != count:
        missing = sorted(set(range(count)) - seen)
        raise _error(inst, f"its replica_groups leave out {mode} {missing}; every one of the "
                           f"module's {count} {mode} must be in a group",
                     f"all {count} {mode}", f"{len(seen)}")
    if uniform and len({len(g) for g in groups}) > 1:
        raise _error(inst, "its replica groups have different sizes",
                     "groups of one size", str(sorted({len(g) for g in groups})))


def _lists(ids: np.ndarray) -> list[list[int]]:
    return [[int(i) for i in row] for row in ids]


def _raw(inst: HloInstruction, key: str, default: str) -> str:
    """An attribute kept as raw text by the parser (``RawText``), as a string."""
    value = inst.attrs.get(key, default)
    return str(getattr(value, "text", value)).strip()


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.replace(" ", "").split(",") if t]


def _error(inst: HloInstruction, why: str, expected: str, got: str) -> HloVerifyError:
    return HloVerifyError(f"{inst.opcode} {inst.name}: {why}", instruction=inst.name,
                          location=inst.location, expected=expected, got=got,
                          computation=inst.parent.name if inst.parent else None)
