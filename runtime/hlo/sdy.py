"""Shardy's annotations in HLO text: the frontend attributes JAX prints when Shardy
partitions (``xla.sdy.meshes`` on the module, ``xla.sdy.sharding`` on instructions,
``xla.sdy.in_shardings``/``out_shardings`` on a shard_map's boundary custom calls), read as
``HloSharding`` values with the mesh axes named.

A mesh ``#sdy.mesh<["a"=2, "b"=2], device_ids=[0,2,1,3]>`` lays its devices out row-major
over the axes (ids 0..N-1 without ``device_ids``); a sharding ``#sdy.sharding<@mesh, [{"a"},
{}]>`` splits each data dimension over the listed axes, major first, and replicates over
the axes it does not list. ``?`` (open: the partitioner may shard more) and priorities
(``p0``) change no tile of a value that is given; sub-axes (``"a":(1)2``) are refused.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from .sharding import HloSharding, ShardingSyntaxError

_MESH = re.compile(r"#sdy\.mesh<\s*\[(.*?)\]\s*(?:,\s*device_ids=\[([\d,\s]*)\])?\s*>", re.S)
_AXIS = re.compile(r'"([^"]+)"\s*=\s*(\d+)')
_SHARDING = re.compile(r"<\s*@([\w.$-]+)\s*,\s*\[(.*?)\]\s*(?:,\s*replicated=\{[^}]*\})?"
                       r"\s*(?:,\s*unreduced=\{[^}]*\})?\s*>", re.S)
_DIM = re.compile(r"\{([^}]*)\}(?:p\d+)?")


@dataclass(frozen=True)
class Mesh:
    """A named mesh: its axes (name, size), major first, and its device ids row-major."""

    axes: tuple[tuple[str, int], ...]
    devices: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.devices)


def frontend_attributes(text: str) -> dict[str, str]:
    """``{k=v, k2="quoted"}`` as a dict of unquoted values (balanced ``{}`` values kept)."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    out: dict[str, str] = {}
    i = 0
    while i < len(body):
        eq = body.find("=", i)
        if eq < 0:
            break
        key = body[i:eq].strip().lstrip(",").strip()
        value, i = _value(body, eq + 1)
        out[key] = value
    return out


def _value(text: str, i: int) -> tuple[str, int]:
    """The value starting at ``text[i]`` (a quoted string, a braced blob or a bare word) and
    the index after it and its comma."""
    while i < len(text) and text[i] == " ":
        i += 1
    if i < len(text) and text[i] == '"':
        j, chars = i + 1, []
        while j < len(text) and text[j] != '"':
            if text[j] == "\\" and j + 1 < len(text):
                j += 1
            chars.append(text[j])
            j += 1
        return "".join(chars), text.find(",", j) + 1 or len(text)
    depth, j = 0, i
    while j < len(text) and not (depth == 0 and text[j] == ","):
        depth += {"{": 1, "}": -1, "<": 1, ">": -1, "[": 1, "]": -1}.get(text[j], 0)
        j += 1
    return text[i:j].strip(), j + 1


def meshes(module_attributes: str | None) -> dict[str, Mesh]:
    """The meshes of a module's ``frontend_attributes`` text (``xla.sdy.meshes``)."""
    if not module_attributes:
        return {}
    text = frontend_attributes(module_attributes).get("xla.sdy.meshes", "").strip()
    out = {}
    for m in re.finditer(r"([\w.$-]+)\s*=\s*#sdy\.mesh<", text):
        depth, end = 0, m.end() - 1
        for end in range(m.end() - 1, len(text)):
            depth += {"<": 1, ">": -1}.get(text[end], 0)
            if depth == 0:
                break
        out[m.group(1)] = parse_mesh(text[m.start(0) + len(m.group(0)) - len("#sdy.mesh<"):end + 1])
    return out


def parse_mesh(text: str) -> Mesh:
    m = _MESH.fullmatch(text.strip())
    if not m:
        raise ShardingSyntaxError(f"unknown Shardy mesh {text!r}")
    axes = tuple((name, int(size)) for name, size in _AXIS.findall(m.group(1)))
    count = math.prod(n for _, n in axes)
    ids = tuple(int(d) for d in m.group(2).replace(" ", "").split(",") if d) \
        if m.group(2) is not None else tuple(range(count))
    if len(ids) != count or len(set(ids)) != len(ids):
        raise ShardingSyntaxError(f"the mesh {text!r} lists {len(ids)} devices for {count}")
    return Mesh(axes, ids)


def parse_sdy_shardings(text: str, known: dict[str, Mesh]) -> list[HloSharding]:
    """Every ``<@mesh, [...]>`` of a ``#sdy.sharding`` or ``#sdy.sharding_per_value``."""
    text = text.strip()
    if not text.startswith(("#sdy.sharding<", "#sdy.sharding_per_value<")):
        raise ShardingSyntaxError(f"unknown Shardy sharding {text!r}")
    body = text[len("#sdy.sharding"):]
    if body.startswith("_per_value<"):
        body = body[len("_per_value<"):-1]
    found = list(_SHARDING.finditer(body))
    if not found:
        raise ShardingSyntaxError(f"unknown Shardy sharding {text!r}")
    return [_sharding(m.group(1), m.group(2), known, text) for m in found]


def _sharding(mesh_name: str, dims_text: str, known: dict[str, Mesh], text: str
              ) -> HloSharding:
    mesh = known.get(mesh_name)
    if mesh is None:
        raise ShardingSyntaxError(f"{text!r} names mesh @{mesh_name}, which the module's "
                                  "xla.sdy.meshes does not define")
    if not mesh.axes:
        return HloSharding("maximal", device=mesh.devices[0])
    sizes = dict(mesh.axes)
    order = [name for name, _ in mesh.axes]
    per_dim: list[tuple[str, ...]] = []
    for dim in _DIM.findall(dims_text):
        names = []
        for word in (w.strip() for w in dim.split(",")):
            if word in ("", "?"):
                continue
            m = re.fullmatch(r'"([^"]+)"', word)
            if not m or m.group(1) not in sizes:
                raise ShardingSyntaxError(f"{text!r}: {word} is not an axis of @{mesh_name} "
                                          "(sub-axes are not supported)")
            names.append(m.group(1))
        per_dim.append(tuple(names))
    used = [a for names in per_dim for a in names]
    if len(set(used)) != len(used):
        raise ShardingSyntaxError(f"{text!r} uses a mesh axis twice")
    rest = [a for a in order if a not in used]
    grid = np.array(mesh.devices).reshape([sizes[a] for a in order])
    grid = grid.transpose([order.index(a) for a in used + rest])
    tile = tuple(math.prod(sizes[a] for a in names) for names in per_dim)
    replicated = math.prod(sizes[a] for a in rest)
    if not used:
        return HloSharding("replicated", devices=mesh.devices, axes=tuple(per_dim))
    return HloSharding("tiled", tile=tile,
                       subgroups=(("replicated", replicated),) if rest else (),
                       devices=tuple(int(d) for d in grid.reshape(-1)), axes=tuple(per_dim))
