"""XLA's sharding annotations (``sharding={...}``) as a value: how an array of a module
written for several devices is split between them.

A module before partitioning (``jax.jit(f, in_shardings=...).lower(...).as_text('hlo')``)
has global shapes; its annotations say which device holds which tile. One device runs such
a module as it is (the annotations change no value), and the report shows each parameter's
and output's tile per device; a shard_map region (``passes.manual_regions``) runs once per
device on the tile the annotation gives it. The forms XLA prints: ``{replicated}``,
``{maximal device=0}``, ``{manual}``, ``{unknown}``, tiled ``{devices=[2,1]0,1}`` or its iota
form ``{devices=[2,2]<=[2,2]T(1,0)}``, with ``last_tile_dim_replicate`` or
``last_tile_dims={manual, replicated}`` (trailing tile-assignment dimensions that do not split
the data), ``metadata={...}`` (ignored) and tuples ``{{...}, {...}}``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal as TypingLiteral

import numpy as np

ShardingKind = TypingLiteral["replicated", "maximal", "manual", "unknown", "tiled", "tuple"]

_TILED = re.compile(r"devices=\[([\d,\s]*)\]\s*")
_IOTA = re.compile(r"<=\s*\[([\d,\s]+)\](?:\s*T\(([\d,\s]+)\))?\s*")
_IDS = re.compile(r"(\d+(?:\s*,\s*\d+)*)\s*")
_LAST_DIMS = re.compile(r"last_tile_dims=\{([^}]*)\}\s*")
_SUBGROUP_KINDS = ("replicated", "manual", "unreduced")


class ShardingSyntaxError(ValueError):
    """The text is not a sharding XLA prints (callers name the instruction and line)."""


@dataclass(frozen=True)
class HloSharding:
    """One sharding. ``tile``: the number of tiles along each data dimension (tiled only);
    ``subgroups``: the trailing tile-assignment dimensions that do not split the data, each
    (kind, size), kind one of replicated, manual, unreduced; ``devices``: the device ids in
    tile-assignment order (row-major over ``tile + subgroup sizes``); ``device``: a maximal
    sharding's device; ``elements``: a tuple's shardings; ``axes``: the mesh axes each data
    dimension is split over, when the annotation names them (Shardy's)."""

    kind: ShardingKind
    tile: tuple[int, ...] = ()
    subgroups: tuple[tuple[str, int], ...] = ()
    devices: tuple[int, ...] = ()
    device: int | None = None
    elements: tuple[HloSharding, ...] = ()
    axes: tuple[tuple[str, ...], ...] = ()

    @property
    def device_count(self) -> int:
        """The devices the tile assignment names (0 where it names none)."""
        return len(self.devices)

    @property
    def replication(self) -> int:
        """How many devices hold each tile (tiled shardings)."""
        return math.prod(n for kind, n in self.subgroups if kind == "replicated")

    def assignment(self) -> np.ndarray:
        """The device ids as an array of shape ``tile + subgroup sizes``."""
        return np.array(self.devices, dtype=np.int64).reshape(
            self.tile + tuple(n for _, n in self.subgroups))

    def tile_index(self, device: int) -> tuple[int, ...]:
        """Which tile ``device`` holds (all zeros when the array is not split)."""
        if self.kind != "tiled":
            return ()
        where = np.argwhere(self.assignment() == device)
        if len(where) != 1:
            raise ShardingSyntaxError(f"device {device} appears {len(where)} times in the tile "
                                      f"assignment {list(self.devices)}")
        return tuple(int(i) for i in where[0][:len(self.tile)])

    def tile_shape(self, dims: tuple[int, ...]) -> tuple[int, ...]:
        """Each device's tile of an array of ``dims`` (XLA rounds up; the last tiles are
        padded)."""
        if self.kind != "tiled":
            return dims
        return tuple(-(-d // t) for d, t in zip(dims, self.tile))

    def to_text(self) -> str:
        if self.kind == "tuple":
            return "{" + ", ".join(e.to_text() for e in self.elements) + "}"
        if self.kind == "maximal":
            return f"{{maximal device={self.device}}}"
        if self.kind != "tiled":
            return f"{{{self.kind}}}"
        dims = ",".join(map(str, self.tile + tuple(n for _, n in self.subgroups)))
        text = f"{{devices=[{dims}]{','.join(map(str, self.devices))}"
        if [k for k, _ in self.subgroups] == ["replicated"]:
            return text + " last_tile_dim_replicate}"
        if self.subgroups:
            text += " last_tile_dims={" + ", ".join(k for k, _ in self.subgroups) + "}"
        return text + "}"


def parse_sharding(text: str) -> HloSharding:
    """The sharding ``text`` prints (``{...}`` with its braces)."""
    body = _strip_metadata(text.strip())
    if not (body.startswith("{") and body.endswith("}")):
        raise ShardingSyntaxError(f"a sharding is written in braces, got {text!r}")
    inner = body[1:-1].strip()
    if inner.startswith("{") or inner == "":
        return HloSharding("tuple", elements=tuple(parse_sharding(p) for p in _split_top(inner)))
    words = inner.split()
    plain: dict[str, ShardingKind] = {"replicated": "replicated", "manual": "manual",
                                      "unknown": "unknown"}
    if words[0] in plain and _only_annotations(words[1:]):
        return HloSharding(plain[words[0]])
    if words[0] == "maximal":
        m = re.fullmatch(r"maximal\s+device=(\d+)(.*)", inner)
        if m and _only_annotations(m.group(2).split()):
            return HloSharding("maximal", device=int(m.group(1)))
    if words[0].startswith("devices="):
        return _tiled(inner, text)
    raise ShardingSyntaxError(f"unknown sharding {text!r}")


def _tiled(inner: str, text: str) -> HloSharding:
    m = _TILED.match(inner)
    if not m:
        raise ShardingSyntaxError(f"malformed tile assignment in {text!r}")
    dims = tuple(int(d) for d in m.group(1).replace(" ", "").split(",") if d)
    rest = inner[m.end():]
    iota = _IOTA.match(rest)
    if iota:
        shape = tuple(int(d) for d in iota.group(1).replace(" ", "").split(","))
        perm = tuple(int(d) for d in iota.group(2).replace(" ", "").split(",")) \
            if iota.group(2) else tuple(range(len(shape)))
        if sorted(perm) != list(range(len(shape))) or math.prod(shape) != math.prod(dims):
            raise ShardingSyntaxError(f"the iota tile assignment of {text!r} does not fit "
                                      f"{list(dims)}")
        devices = tuple(int(d) for d in np.arange(math.prod(shape)).reshape(shape)
                        .transpose(perm).reshape(-1))
        rest = rest[iota.end():]
    else:
        ids = _IDS.match(rest)
        if not ids:
            raise ShardingSyntaxError(f"no device ids in {text!r}")
        devices = tuple(int(d) for d in ids.group(1).replace(" ", "").split(","))
        rest = rest[ids.end():]
    if len(devices) != math.prod(dims) or len(set(devices)) != len(devices):
        raise ShardingSyntaxError(f"{text!r} names {len(devices)} devices for a "
                                  f"{'x'.join(map(str, dims))} tile assignment (each once)")
    subgroups: tuple[str, ...] = ()
    words = rest.split()
    if words[:1] == ["last_tile_dim_replicate"]:
        subgroups = ("replicated",)
        words = words[1:]
    else:
        last = _LAST_DIMS.match(rest)
        if last:
            subgroups = tuple(k.strip() for k in last.group(1).split(","))
            words = rest[last.end():].split()
    if any(k not in _SUBGROUP_KINDS for k in subgroups) or len(subgroups) > len(dims) \
            or not _only_annotations(words):
        raise ShardingSyntaxError(f"unknown sharding {text!r}")
    data = len(dims) - len(subgroups)
    return HloSharding("tiled", tile=dims[:data],
                       subgroups=tuple(zip(subgroups, dims[data:])), devices=devices)


def _only_annotations(words: list[str]) -> bool:
    """Trailing words that change no tile (``shard_as``/``shard_like`` groups)."""
    return all(w in ("shard_as", "shard_like") or w.isdigit() for w in words)


def _strip_metadata(text: str) -> str:
    """``text`` without its ``metadata={...}`` parts (balanced braces)."""
    while (start := text.find("metadata={")) >= 0:
        depth, i = 0, start + len("metadata=")
        for i in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
        text = text[:start] + text[i + 1:]
    return text


def _split_top(text: str) -> list[str]:
    """``{a}, {b}`` -> ``["{a}", "{b}"]`` at depth 0."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts
