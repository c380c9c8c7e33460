"""``runtime.random_arguments`` and ``runtime.zeros_arguments``: made-up inputs for a module.

A model pasted as HLO text has its parameters' shapes and dtypes but no values; these give a
run's arguments from the entry's parameters, for whatever the caller has at hand: an
``Executable``, an ``Analysis``, an ``HloModule`` or the text itself. The values are made by
``hlo.sample_values`` (small seeded normals, small non-negative integers).
"""

from __future__ import annotations

from typing import Any

from .analysis.device_groups import DeviceGrid
from .analyzer import Analysis
from .errors import internal_errors
from .execution.executable import Executable
from .hlo import HloModule
from .hlo.ir import HloInstruction
from .hlo.parser import parse
from .hlo.sample_values import sample_arguments


def random_arguments(source: Executable | Analysis | HloModule | str, seed: int = 0) -> list:
    """One seeded random argument per entry parameter of ``source`` (a nested tuple for a
    tuple-shaped parameter): ``exe(*runtime.random_arguments(exe, seed=1))``."""
    return sample_arguments(_parameters(source), seed)


def random_device_arguments(source: Executable | Analysis | HloModule | str,
                            seed: int = 0) -> list[list]:
    """Seeded random arguments for every device of a multi-device module (``args[p]`` for
    ``Executable.run_spmd``): a parameter tiled over the partitions (``sharding={devices=
    [...]...}`` without replication) gets partition ``p``'s own values (seed ``seed + p``);
    every other parameter, replicated or of unknown sharding, the same values on every
    device, so a weight the program assumes equal everywhere is equal everywhere."""
    params = _parameters(source)
    grid = DeviceGrid.of(_module(source))
    drawn = [sample_arguments(params, seed + p) for p in range(grid.num_partitions)]
    tiled = [_tiled(param) for param in params]
    return [[drawn[d % grid.num_partitions if tiled[i] else 0][i] for i in range(len(params))]
            for d in range(grid.size)]


def _tiled(param: HloInstruction) -> bool:
    text = str(getattr(param.attrs.get("sharding"), "text", "")).replace(" ", "")
    return text.startswith("{devices=") and "last_tile_dim" not in text


def zeros_arguments(source: Executable | Analysis | HloModule | str) -> list:
    """One all-zeros argument per entry parameter of ``source``."""
    return sample_arguments(_parameters(source), None)


def _parameters(source: Any) -> list[HloInstruction]:
    return list(_module(source).entry_computation.parameters)


def _module(source: Any) -> HloModule:
    if isinstance(source, Executable):
        source = source.module
    elif isinstance(source, Analysis):
        source = source.source
    elif isinstance(source, str):
        with internal_errors("parsing"):     # the parameters are all it needs: no verifying
            source = parse(source)
    if not isinstance(source, HloModule):
        raise TypeError("expected an Executable, an Analysis, an HloModule or HLO text, not "
                        f"{type(source).__name__}")
    return source

