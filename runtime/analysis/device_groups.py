"""Which devices a collective of a multi-device module exchanges data with, as XLA decides it.

A device is ``replica * num_partitions + partition``. A collective's ``replica_groups`` name
replicas, partitions or devices depending on ``channel_id`` and ``use_global_device_ids``
(XLA's ``CollectiveOpGroupMode``): no channel: groups of replicas, applied within every
partition; a channel: groups of partitions within every replica; a channel and
``use_global_device_ids=true``: groups of devices. An empty list is one group of all of them.
The groups are printed as a list (``{{0,1},{2,3}}``), as an iota (``[2,2]<=[4]``,
``[2,2]<=[2,2]T(1,0)``) or over a named mesh (``mesh['a'=2,'b'=2] {'a'}``: the devices that
differ only along the listed axes). A mesh whose devices are not in order carries them, as an
iota (``mesh['a'=2,'b'=2], device_ids=([2,2]T(1,0)) {'a'}``) or a list (``device_ids=(0,2,1,3)``),
and an axis may be named in part, ``'a':(P)S`` being the S-sized piece of ``'a'`` after the
major P (XLA's ``MeshAxesReplicaGroupList``). collective-permute's ``source_target_pairs`` name
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
_MESH = re.compile(r"mesh\[([^\]]*)\](?:\s*,\s*device_ids\s*=\s*\((.*)\))?\s*\{([^}]*)\}")
_AXIS = re.compile(r"\s*'?([^'=,\s]+)'?\s*=\s*(\d+)\s*")
_AXIS_REF = re.compile(r"\s*'?([^':\s]+)'?(?:\s*:\s*\((\d+)\)\s*(\d+))?\s*")
_DEVICE_IOTA = re.compile(r"\s*\[([\d\s,]+)\](?:\s*T\(([\d\s,]+)\))?\s*")
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
        return _mesh_groups(inst, mesh)
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


def _mesh_groups(inst: HloInstruction, mesh: re.Match[str]) -> list[list[int]]:
    """The groups of a named mesh: its devices (in ``device_ids`` order) split into pieces, one
    per named axis or sub-axis and one per stretch of an axis left unnamed; the named pieces,
    in the order listed, vary within a group."""
    axes = _mesh_axes(inst, mesh.group(1))
    devices = _mesh_devices(inst, mesh.group(2), int(np.prod([s for _, s in axes])))
    refs = _axis_refs(inst, mesh.group(3), axes)
    pieces: list[int] = []
    grouped: dict[int, int] = {}             # listed ref -> its piece
    for axis, (_, size) in enumerate(axes):
        mine = sorted((pre, part, k) for k, (a, pre, part) in enumerate(refs) if a == axis)
        done = 1                             # the product of this axis's pieces so far
        for pre, part, k in mine:
            if pre != done:
                pieces.append(pre // done)
            grouped[k] = len(pieces)
            pieces.append(part)
            done = pre * part
        if done != size:
            pieces.append(size // done)
    order = [grouped[k] for k in range(len(refs))]
    rest = [k for k in range(len(pieces)) if k not in order]
    group_size = int(np.prod([part for _, _, part in refs]))
    return _lists(devices.reshape(pieces).transpose(rest + order).reshape(-1, group_size))


def _mesh_axes(inst: HloInstruction, text: str) -> list[tuple[str, int]]:
    axes = []
    for item in text.split(","):
        axis = _AXIS.fullmatch(item)
        if axis is None or int(axis.group(2)) < 1:
            raise _error(inst, f"its mesh replica_groups have an axis {item.strip()!r} that is "
                               "not 'name'=size", "'name'=size, size at least 1", item.strip())
        axes.append((axis.group(1), int(axis.group(2))))
    names = [name for name, _ in axes]
    if len(set(names)) != len(names):
        raise _error(inst, f"its mesh names an axis twice ({names})", "distinct axis names",
                     str(names))
    return axes


def _mesh_devices(inst: HloInstruction, text: str | None, size: int) -> np.ndarray:
    """The mesh's devices in mesh order: ``device_ids`` as an iota or a list, else in order."""
    if text is None:
        return np.arange(size)
    iota = _DEVICE_IOTA.fullmatch(text)
    if iota:
        dims = _ints(iota.group(1))
        perm = _ints(iota.group(2)) if iota.group(2) else list(range(len(dims)))
        if sorted(perm) != list(range(len(dims))) or int(np.prod(dims)) != size:
            raise _error(inst, f"its mesh device_ids ({text}) are not an iota of its {size} "
                               "devices", f"[dims]T(perm) of {size} devices", text)
        devices = np.arange(size).reshape(dims).transpose(perm).reshape(-1)
    elif re.fullmatch(r"[\d\s,]+", text):
        devices = np.array(_ints(text), dtype=np.int64)
    else:
        raise _error(inst, f"its mesh device_ids ({text}) are in no form this runtime reads",
                     "([dims]T(perm)) or (d0,d1,...)", text)
    if sorted(devices.tolist()) != list(range(size)):
        raise _error(inst, f"its mesh device_ids ({text}) are not each of the mesh's {size} "
                           "devices once", f"a permutation of 0..{size - 1}", text)
    return devices


def _axis_refs(inst: HloInstruction, text: str,
               axes: list[tuple[str, int]]) -> list[tuple[int, int, int]]:
    """The listed axes as (mesh axis, major size before the piece, piece size), each checked
    as XLA's ``AxisRef::Validate`` and ``ValidateSpanOfAxes`` do: known, dividing the axis,
    no two overlapping."""
    known = [name for name, _ in axes]
    refs: list[tuple[int, int, int]] = []
    for item in (t for t in text.split(",") if t.strip()):
        ref = _AXIS_REF.fullmatch(item)
        if ref is None or ref.group(1) not in known:
            raise _error(inst, f"its mesh replica_groups name axes the mesh lacks "
                               f"({item.strip()}; the mesh has {known})", f"axes of {known}",
                         item.strip())
        axis = known.index(ref.group(1))
        size = axes[axis][1]
        pre, part = (int(ref.group(2)), int(ref.group(3))) if ref.group(2) else (1, size)
        if ref.group(2) and (pre < 1 or part < 2 or part >= size or size % (pre * part)):
            raise _error(inst, f"its sub-axis {item.strip()} is not a piece of the axis of size "
                               f"{size}", f"(P)S with 1 < S < {size} and P*S dividing {size}",
                         item.strip())
        for other, other_pre, other_part in refs:
            if other != axis:
                continue
            apart = max(pre, other_pre) % min(pre * part, other_pre * other_part) == 0
            if not apart or (pre < other_pre * other_part and other_pre < pre * part):
                raise _error(inst, f"its mesh replica_groups name {item.strip()} over a part "
                                   f"of axis {known[axis]!r} already named", "disjoint axes",
                             item.strip())
        refs.append((axis, pre, part))
    return refs


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
