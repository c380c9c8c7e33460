"""Collectives of a multi-device module (``num_partitions`` or ``replica_count`` above 1) as
host steps that exchange data between the partitions an ``Executable.run_spmd`` runs.

Each collective becomes a ``custom-call`` to ``COLLECTIVE_TARGET`` carrying a ``Collective``:
what it computes, with its device groups (``analysis.device_groups``: replica groups,
``channel_id`` and ``use_global_device_ids`` resolved to device ids and checked), its
reduction and its dimension worked out and verified here, once, at compile time. The
custom-call's lowering (``codegen.families.collective``) makes it a host step that reads the
operands, trades them through the run's ``Communicator`` and writes the result. A custom
call is something every later pass, buffer assignment and the plan already handle: none of
them learns about collectives. ``partition-id`` and ``replica-id`` become such calls too
(each partition writes its own id). The async forms keep XLA's shapes: an ``-start`` is the
tuple of its operands, the exchanged result and zeroed context scalars (all-reduce-start is
its result alone), and its ``-done`` forwards the result, so the exchange happens at the
start, and the buffers a start keeps in flight stay live until its done.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ..analysis.device_groups import DeviceGrid, device_groups, permute_sources
from ..analysis.reducers import reducer_opcode
from ..errors import HloUnsupportedError, HloVerifyError
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ArrayShape, Shape, TupleShape
from ..target import CPU, Target
from .names import FreshNames
from .part_builder import PartBuilder, expand_in_place

COLLECTIVE_TARGET = "hlo_magic.collective"
# reducers XLA's collectives apply elementwise; bitwise ones only to integers and pred
REDUCERS = (Opcode.ADD, Opcode.MULTIPLY, Opcode.MAXIMUM, Opcode.MINIMUM, Opcode.AND, Opcode.OR,
            Opcode.XOR)
_BITWISE = (Opcode.AND, Opcode.OR, Opcode.XOR)
# collectives whose groups must all have one size (their result shape depends on it)
_UNIFORM = (Opcode.ALL_GATHER, Opcode.REDUCE_SCATTER, Opcode.ALL_TO_ALL)


@dataclass(frozen=True)
class Collective:
    """What one collective computes on every device (the ``collective`` attribute of its
    custom-call). ``groups``: the device groups; ``sources``: collective-permute's source
    device for each device (None: zeros); ``dimension``: the gather/scatter/split
    dimension (None for all-to-all's tuple form)."""

    kind: Opcode                  # the collective's opcode (an async start's without -start)
    instruction: str
    num_partitions: int
    devices: int
    groups: tuple[tuple[int, ...], ...] = ()
    sources: tuple[int | None, ...] = ()
    reducer: str | None = None
    dimension: int | None = None

    def group_of(self, device: int) -> tuple[int, ...]:
        for group in self.groups:
            if device in group:
                return group
        raise ValueError(f"device {device} is in no group of {self.instruction}")

    def to_text(self) -> str:
        """How the attribute prints: enough to tell two collectives apart in a dump."""
        groups = ",".join("{" + ",".join(map(str, g)) + "}" for g in self.groups)
        sources = ",".join("-" if s is None else str(s) for s in self.sources)
        return (f"{{kind={self.kind}, of={self.instruction}, groups={{{groups}}}, "
                f"sources={{{sources}}}, reducer={self.reducer}, dimension={self.dimension}}}")

    @property
    def reads_operands_first(self) -> bool:
        """The host step (``custom_calls.collectives``) copies every operand out before it
        writes the result, so buffer assignment may put the result in a dying operand's
        bytes (``analysis.in_place.may_hand_off``), as XLA runs collectives in place."""
        return True


def rewrite_spmd_collectives_in_place(module: HloModule, target: Target = CPU) -> None:
    grid = DeviceGrid.of(module)
    if grid.size == 1:
        return
    names = FreshNames(module)
    # callers first: an async-start must see the collective its computation wraps as written
    for comp in reversed(module.computations):
        if any(OPCODES[i.opcode].one_device is not None or i.opcode == Opcode.ASYNC_START
               for i in comp.instructions):
            expand_in_place(comp, names, functools.partial(_expand, grid))


def is_multi_device(module: HloModule) -> bool:
    return DeviceGrid.of(module).size > 1


def _expand(grid: DeviceGrid, build: PartBuilder, inst: HloInstruction) -> HloInstruction | None:
    if inst.opcode in (Opcode.ASYNC_START, Opcode.ASYNC_UPDATE, Opcode.ASYNC_DONE):
        return _async(grid, build, inst)
    kind = OPCODES[inst.opcode].one_device
    if kind is None:
        return None
    if kind == "value":                       # all-reduce-done: the start is its result
        return inst.operands[0]
    if kind == "done":
        return done_value(inst, _unsupported)
    base = Opcode(inst.opcode.removesuffix("-start"))
    if not kind.endswith("-start"):
        return _call(grid, build, inst, base, inst.shape, inst.operands)
    if not isinstance(inst.shape, TupleShape) or len(inst.shape.elements) < 2:
        raise _unsupported(inst, "an async start's shape is a tuple of its operands, its result "
                                 "and context scalars")
    operands = inst.operands[0] if len(inst.operands) == 1 else build.add(
        Opcode.TUPLE, TupleShape(tuple(op.shape for op in inst.operands)), list(inst.operands))
    result = _call(grid, build, inst, base, inst.shape.elements[1], inst.operands)
    return _start_tuple(build, inst, operands, result)


def _async(grid: DeviceGrid, build: PartBuilder, inst: HloInstruction) -> HloInstruction | None:
    """XLA's generic async wrapper around a collective: ``async-start`` calls a computation
    whose root is the collective over its parameters; ``async-update`` and ``async-done``
    forward the start's tuple and result. Other wrapped work is left alone (refused later)."""
    if inst.opcode != Opcode.ASYNC_START:
        start = inst.operands[0]
        if start.opcode != Opcode.TUPLE or len(start.operands) < 2:
            return None                       # a start this pass left alone
        return start if inst.opcode == Opcode.ASYNC_UPDATE else start.operands[1]
    called = inst.attrs.get("calls")
    root = getattr(called, "root", None)
    if root is None or OPCODES[root.opcode].one_device in (None, "value", "done") \
            or root.opcode.endswith("-start"):
        return None
    params = [op.parameter_number for op in root.operands]
    if any(op.opcode != Opcode.PARAMETER for op in root.operands) or \
            any(n is None or not 0 <= n < len(inst.operands) for n in params):
        raise _unsupported(inst, f"the collective {root.name} it wraps must read the wrapped "
                                 "computation's parameters directly")
    if not isinstance(inst.shape, TupleShape) or len(inst.shape.elements) < 2:
        raise _unsupported(inst, "an async start's shape is a tuple of its operands, its result "
                                 "and context scalars")
    operands = build.add(Opcode.TUPLE, TupleShape(tuple(op.shape for op in inst.operands)),
                         list(inst.operands))
    result = _call(grid, build, root, root.opcode, inst.shape.elements[1],
                   [inst.operands[n] for n in params])
    return _start_tuple(build, inst, operands, result)


def _start_tuple(build: PartBuilder, inst: HloInstruction, operands: HloInstruction,
                 result: HloInstruction) -> HloInstruction:
    """An async start's value: (its operands, its result, zeroed context scalars)."""
    assert isinstance(inst.shape, TupleShape)
    context = []
    for shape in inst.shape.elements[2:]:
        if not isinstance(shape, ArrayShape):
            raise _unsupported(inst, f"its context element {shape.to_text(False)} is not an array")
        context.append(build.full(0, shape.element_type, shape.dims))
    return build.add(Opcode.TUPLE, TupleShape((operands.shape, result.shape,
                                          *(c.shape for c in context))),
                     [operands, result, *context])


def _call(grid: DeviceGrid, build: PartBuilder, inst: HloInstruction, kind: Opcode,
          shape: Shape, operands: list[HloInstruction]) -> HloInstruction:
    """The custom-call computing ``inst``'s ``kind`` result of ``shape`` from ``operands``
    (``inst``'s own, or an async wrapper's) on every device."""
    spec = Collective(kind, inst.name, grid.num_partitions, grid.size)
    if kind in (Opcode.PARTITION_ID, Opcode.REPLICA_ID):
        return build.add(Opcode.CUSTOM_CALL, shape, [], custom_call_target=COLLECTIVE_TARGET,
                         collective=spec)
    ops = [s for s in (op.shape for op in operands) if isinstance(s, ArrayShape)]
    if not ops or len(ops) != len(operands):
        raise _unsupported(inst, "its operands must be one or more arrays")
    results = list(shape.elements) if isinstance(shape, TupleShape) else [shape]
    if kind == Opcode.COLLECTIVE_PERMUTE:
        if "slice_sizes" in inst.attrs:
            raise _unsupported(inst, "the in-place form of collective-permute (with start "
                                     "indices) is not supported")
        spec = replace(spec, sources=permute_sources(inst, grid))
        _check_results(inst, results, ops)
    else:
        groups = device_groups(inst, grid, uniform=kind in _UNIFORM)
        spec = replace(spec, groups=groups)
        size = len(groups[0])
        if kind in (Opcode.ALL_REDUCE, Opcode.REDUCE_SCATTER):
            spec = replace(spec, reducer=_reducer(inst, ops))
        if kind in (Opcode.ALL_GATHER, Opcode.REDUCE_SCATTER) or (kind == Opcode.ALL_TO_ALL
                                                        and "dimensions" in inst.attrs):
            spec = replace(spec, dimension=_dimension(inst, ops))
        _check_results(inst, results, _result_shapes(inst, kind, spec, ops, size))
    return build.add(Opcode.CUSTOM_CALL, shape, list(operands),
                     custom_call_target=COLLECTIVE_TARGET, collective=spec)


def _reducer(inst: HloInstruction, ops: list[ArrayShape]) -> str:
    computation = inst.attrs.get("to_apply")
    op = reducer_opcode(computation) if isinstance(computation, HloComputation) else None
    if op not in REDUCERS:
        raise _unsupported(inst, "its reduction computation is not one of "
                                 f"{', '.join(REDUCERS)} on its two parameters")
    for shape in ops:
        if op in _BITWISE and shape.element_type.is_float:
            raise _verify(inst, f"a bitwise {op} reduction of floating-point "
                                f"{shape.to_text(False)}", "integers or pred",
                          shape.element_type.name)
    return op


def _dimension(inst: HloInstruction, ops: list[ArrayShape]) -> int:
    dims = inst.attrs.get("dimensions")
    rank = min(len(s.dims) for s in ops)
    if not isinstance(dims, tuple) or len(dims) != 1 or not 0 <= int(dims[0]) < rank:
        raise _verify(inst, f"dimensions={dims} must name one dimension of its operands",
                      f"one dimension below {rank}", str(dims))
    return int(dims[0])


def _result_shapes(inst: HloInstruction, kind: Opcode, spec: Collective, ops: list[ArrayShape],
                   size: int) -> list[ArrayShape]:
    """The result shapes XLA's semantics give ``inst``'s operands with groups of ``size``."""
    if kind == Opcode.ALL_TO_ALL and spec.dimension is None:
        if len(ops) != size:
            raise _verify(inst, f"its tuple form sends one operand to each of the {size} "
                                f"members of a group, but it has {len(ops)}",
                          f"{size} operands", str(len(ops)))
        return ops
    out = []
    for shape in ops:
        dims = list(shape.dims)
        if spec.dimension is not None:
            d = spec.dimension
            if kind == Opcode.ALL_GATHER:
                dims[d] *= size
            elif dims[d] % size:
                raise _verify(inst, f"dimension {d} of {shape.to_text(False)} does not split "
                                    f"into {size} equal parts", f"a multiple of {size}",
                              str(dims[d]))
            elif kind == Opcode.REDUCE_SCATTER:
                dims[d] //= size
        out.append(ArrayShape(shape.element_type, tuple(dims), layout=shape.layout))
    return out


def _check_results(inst: HloInstruction, results: Sequence[Shape],
                   expected: Sequence[ArrayShape]) -> None:
    got = [(s.element_type, s.dims) if isinstance(s, ArrayShape) else None for s in results]
    want = [(s.element_type, s.dims) for s in expected]
    if got != want:
        text = ", ".join(s.to_text(False) for s in expected)
        raise _verify(inst, f"its result shape does not match what it computes ({text})",
                      text, ", ".join(s.to_text(False) for s in results))


def _verify(inst: HloInstruction, why: str, expected: str, got: str) -> HloVerifyError:
    return HloVerifyError(f"{inst.opcode} {inst.name}: {why}", instruction=inst.name,
                          location=inst.location, expected=expected, got=got,
                          computation=inst.parent.name if inst.parent else None)


def done_value(inst: HloInstruction,
               unsupported: Callable[[HloInstruction, str], HloUnsupportedError]
               ) -> HloInstruction:
    """An async done's value: element 1 of the start tuple it completes (XLA's ``(operands,
    result, context...)``), which every rewrite of the start leaves in place."""
    start = inst.operands[0]
    if start.opcode != Opcode.TUPLE or len(start.operands) < 2:
        raise unsupported(inst, "its operand is not the async start it completes")
    return start.operands[1]


def _unsupported(inst: HloInstruction, why: str) -> HloUnsupportedError:
    return HloUnsupportedError(
        f"{inst.opcode} {inst.name} in a multi-device module: {why}", instruction=inst.name,
        computation=inst.parent.name if inst.parent else None, location=inst.location)
