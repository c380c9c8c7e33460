"""The execution plan: what the executor does, step by step, over the assigned buffers.

A plan is data: kernel launches (kernel name, buffer references, scalar arguments, sizes),
byte copies, and host steps for control flow (a while loop reads its predicate back, a
conditional its branch index) and host custom calls. The executor binds each allocation to a
device buffer per run and walks the plan; nothing in it depends on which concrete buffers
(donated input, copy-protected copy, fresh output) are bound.

Convention every kernel family follows: the first scalar argument is the work bound, and a
launch with that argument set to 0 touches no memory. ``compile`` uses this to make PoCL build
each kernel (at its real launch geometry) without running it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union

import numpy as np

from ..hlo.ir import HloInstruction
from .kernel import BufferRef


@dataclass
class Launch:
    kernel: str
    buffers: tuple[BufferRef, ...]
    scalars: tuple[np.generic, ...]
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    instruction: str


@dataclass
class GenericLaunch:
    """A launch of one of tier 0's generic kernels (``codegen.tier0``), built once per device
    rather than in the module's program: a step of its own kind, so that the plan passes,
    which rewrite launches of the program's kernels, leave it in place as a host step."""

    kernel: str
    buffers: tuple[BufferRef, ...]
    scalars: tuple[np.generic, ...]
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    instruction: str


@dataclass
class CopyBytes:
    src: BufferRef
    dst: BufferRef
    nbytes: int
    instruction: str


@dataclass
class FillBytes:
    """Set a region to a byte pattern (zero-initialised scratch, pred outputs of iota...)."""

    dst: BufferRef
    nbytes: int
    pattern: bytes
    instruction: str


@dataclass
class HostWhile:
    condition: list["Step"]
    predicate: BufferRef
    body: list["Step"]
    instruction: str
    # the counter's value at the start of each iteration, where the loop is counted: the
    # trip count is known before the loop runs and no predicate is read
    counter_values: tuple[int, ...] | None = None
    # above 1: the body's launches check the predicate themselves (``predication``), so up to
    # this many iterations run between two reads of it
    chunk: int = 1

    @property
    def trip_count(self) -> int | None:
        return None if self.counter_values is None else len(self.counter_values)


@dataclass
class HostConditional:
    selector: BufferRef
    selector_is_pred: bool
    branches: list[list["Step"]]
    instruction: str
    # in a counted loop's body, the selector's value at each iteration, where it follows from
    # an induction variable (``analysis.trip_count.selector_values``): nothing is read back
    selected: tuple[int, ...] | None = None
    # every branch's launches check the selector themselves (``predication``): all are
    # enqueued, and nothing is read back
    predicated: bool = False


@dataclass
class HostCall:
    """Host code run between device commands: a host custom call over mapped buffers, or the
    host side of an OpenCL custom call, which enqueues the user's kernel (XLA's GPU custom
    calls are host functions too). ``run(executor, bindings)`` does the work; ``prepare``, if
    set, is called once with the device at compile time (to build user kernels)."""

    run: Callable
    buffers: tuple[BufferRef, ...] = field(default=())
    instruction: str = ""
    prepare: Callable | None = None


@dataclass
class NestedLoop:
    """A loop inside a loop being tried as a device loop (``device_loops``), not lowered
    yet: the outer loop's kernel runs it inline, or the outer loop is lowered again without
    deferring. Only such an attempt sees one; a finished plan never holds one
    (``ProgramBuilder.finish`` refuses it)."""

    instruction: HloInstruction


Step = Union[Launch, GenericLaunch, CopyBytes, FillBytes, HostWhile, HostConditional, HostCall,
             NestedLoop]


def iter_steps(steps: list[Step]):
    """Every step, inside loops and branches too, in plan order."""
    for s in steps:
        yield s
        if isinstance(s, HostWhile):
            yield from iter_steps(s.condition)
            yield from iter_steps(s.body)
        elif isinstance(s, HostConditional):
            for b in s.branches:
                yield from iter_steps(b)


def iter_launches(steps: list[Step]):
    return (s for s in iter_steps(steps) if isinstance(s, Launch))

