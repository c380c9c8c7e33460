"""From a compiled module to the ``HloResult`` a report shows: the plan for the donation
asked for, the run (if there are inputs) and the outputs on the host.

``%%hlo``, ``%hlo_jax`` and ``from_jax`` differ only in where the module and its inputs come
from; this is the part they share, so their reports cannot drift apart.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from runtime import Executable, reassign

from .donation import ParameterInfo, describe_parameters
from .result import HloResult


def make_result(exe: Executable, donated: frozenset[int], args: Sequence | None, *,
                named: frozenset[int] = frozenset(), named_by: str = "--donate",
                bound_as: str | None = None,
                show: tuple[str, ...] = ("assignment",), max_table_rows: int = 25,
                timeline_max_buffers: int = 40, explain_terms: bool = False) -> HloResult:
    """Plan ``exe`` with ``donated`` (and its must-alias parameters) donated, run it on
    ``args`` unless they are None (a multi-device module: ``args[p]`` device ``p``'s, and the
    outputs a list of each device's), and wrap what came back for display. A parameter in
    ``named`` (the ones ``named_by`` asked for one by one) that no output can live in is
    a warning in the report."""
    parameters = describe_parameters(exe.buffer_assignment)
    forced = frozenset(p.number for p in parameters if p.must_alias)
    plan = reassign(exe.buffer_assignment, donated | forced)
    outputs = None
    if args is not None and exe.device_count > 1:
        outputs = [host(o) for o in exe.run_spmd(args, donate=tuple(sorted(donated)))]
    elif args is not None:
        outputs = host(exe.run(*args, donate=tuple(sorted(donated))))
    return HloResult(exe, plan, parameters, donated | forced, outputs, exe.last_run, bound_as,
                     show, max_table_rows, timeline_max_buffers, explain_terms=explain_terms,
                     warnings=donation_warnings(named, parameters, named_by))


def donation_warnings(named: frozenset[int], parameters: Sequence[ParameterInfo],
                      named_by: str) -> tuple[str, ...]:
    """A sentence for each parameter in ``named`` that no output can live in: the run keeps
    its buffer, so the donation asked for does nothing."""
    return tuple(f"{named_by}: parameter {p.number} ({p.name}) cannot be donated, so its "
                 f"buffer is kept: {p.blocked}" for p in parameters
                 if p.number in named and p.blocked)


def host(outputs):
    """Device results as numpy arrays (a nested tuple for a tuple result)."""
    if isinstance(outputs, tuple):
        return tuple(host(o) for o in outputs)
    return np.asarray(outputs)
