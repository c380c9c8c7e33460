"""How a module before partitioning splits its parameters and outputs between devices, in
words and bytes per device: what the reports list for a sharded module.

Each entry parameter's and output's annotation is read from Shardy's ``xla.sdy.sharding``
frontend attribute when the module defines its mesh (it names the mesh axes), else from
XLA's ``sharding=`` attribute; the outputs' is the root's (a tuple sharding gives one per
output). An annotation this cannot read is described as such, never an error: the module
still runs on one device, where no annotation changes a value. In a partitioned module
(``num_partitions`` or ``replica_count`` above 1) the shapes are already one device's tile.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hlo.attributes import RawText
from ..hlo.ir import HloInstruction, HloModule
from ..hlo.sdy import Mesh, frontend_attributes, meshes, parse_sdy_shardings
from ..hlo.sharding import HloSharding, ShardingSyntaxError, parse_sharding
from ..hlo.shape import ArrayShape


@dataclass(frozen=True)
class ValueSharding:
    """One parameter's or output's array: ``what`` ("parameter 0 (x)", "output {1}"),
    ``parameter`` (its number; None for an output), ``index`` (the leaf in its tuple),
    ``sharding`` (None: not annotated, or not readable: ``words`` says which), ``words`` and
    the bytes one device holds of it."""

    what: str
    parameter: int | None
    index: tuple[int, ...]
    shape: ArrayShape
    sharding: HloSharding | None
    words: str
    bytes_per_device: int


def parameter_shardings(module: HloModule) -> list[ValueSharding]:
    known = _meshes(module)
    local = _partitioned(module)
    out = []
    for param in module.entry_computation.parameters:
        for (index, shape), sharding in zip(param.shape.leaves(), _read(param, known)):
            suffix = f" {{{','.join(map(str, index))}}}" if index else ""
            out.append(_value(f"parameter {param.param_number} ({param.name}){suffix}",
                              param.param_number, index, shape, sharding, local))
    return out


def output_shardings(module: HloModule) -> list[ValueSharding]:
    root = module.entry_computation.root_instruction
    known = _meshes(module)
    local = _partitioned(module)
    return [_value(f"output {{{','.join(map(str, index))}}}", None, index, shape, sharding, local)
            for (index, shape), sharding in zip(root.shape.leaves(), _read(root, known))]


def _meshes(module: HloModule) -> dict[str, Mesh]:
    """The module's Shardy meshes (none when unreadable: XLA's annotations are read then)."""
    try:
        return meshes(_raw(module.header_attrs.get("frontend_attributes")))
    except ShardingSyntaxError:
        return {}


def _partitioned(module: HloModule) -> bool:
    counts = [module.header_attrs.get(k) for k in ("num_partitions", "replica_count")]
    return any(isinstance(n, int) and n > 1 for n in counts)


def is_sharded(values: list[ValueSharding]) -> bool:
    """Whether any value carries an annotation (the reports add their columns only then)."""
    return any(v.sharding is not None or v.words != UNANNOTATED for v in values)


UNANNOTATED = "not annotated"


def _read(inst: HloInstruction, known: dict[str, Mesh]
          ) -> list[HloSharding | str | None]:
    """One entry per leaf of ``inst``'s shape: its sharding, None (not annotated) or the
    text that could not be read."""
    leaves = len(list(inst.shape.leaves()))
    sdy = frontend_attributes(_raw(inst.attrs.get("frontend_attributes")) or "{}") \
        .get("xla.sdy.sharding")
    text = _raw(inst.attrs.get("sharding"))
    if sdy is not None and known:
        try:
            found: list[HloSharding] = parse_sdy_shardings(sdy, known)
            if len(found) == leaves:
                return list(found)
        except ShardingSyntaxError:
            pass
    if text is None:
        return [None] * leaves
    try:
        sharding = parse_sharding(text)
    except ShardingSyntaxError:
        return [text] * leaves
    if sharding.kind == "tuple":
        if len(sharding.elements) != leaves:
            return [text] * leaves
        return list(sharding.elements)
    return [sharding] * leaves


def _value(what: str, parameter: int | None, index: tuple[int, ...], shape: ArrayShape,
           sharding: HloSharding | str | None, local: bool) -> ValueSharding:
    if sharding is None:
        return ValueSharding(what, parameter, index, shape, None, UNANNOTATED, shape.byte_size)
    if isinstance(sharding, str):
        return ValueSharding(what, parameter, index, shape, None,
                             f"unreadable sharding {sharding}", shape.byte_size)
    tile = sharding.tile_shape(shape.dims) if len(sharding.tile) == len(shape.dims) \
        and not local else shape.dims
    return ValueSharding(what, parameter, index, shape, sharding,
                         describe(sharding, shape, tile),
                         ArrayShape(shape.element_type, tile).byte_size)


def describe(sharding: HloSharding, shape: ArrayShape, tile: tuple[int, ...]) -> str:
    """``sharding`` of ``shape`` in words: mesh axes, tile per device, replication."""
    whole = shape.to_text(False)
    if sharding.kind == "replicated":
        where = f" on all {sharding.device_count} devices" if sharding.device_count else \
            " on every device"
        return f"replicated: the whole {whole}{where}"
    if sharding.kind == "maximal":
        return f"on device {sharding.device} only (the whole {whole})"
    if sharding.kind == "manual":
        return "manual: each device's own value, written for one device"
    if sharding.kind != "tiled":
        return f"{sharding.kind} sharding"
    split = []
    for d, count in enumerate(sharding.tile):
        if count > 1:
            axes = sharding.axes[d] if d < len(sharding.axes) and sharding.axes[d] else ()
            over = f" over mesh axis {' x '.join(repr(a) for a in axes)}" if axes else ""
            split.append(f"dim {d} in {count}{over}")
    tile_text = ArrayShape(shape.element_type, tile).to_text(False)
    text = (f"{', '.join(split) or 'not split'}: {tile_text} per device "
            f"({sharding.device_count} devices)")
    if sharding.replication > 1:
        text += f", each tile on {sharding.replication} devices"
    return text


def _raw(value: object) -> str | None:
    return value.text if isinstance(value, RawText) else None
