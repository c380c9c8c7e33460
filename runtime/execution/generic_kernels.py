"""Tier 0's generic kernels on a device: built once per device and process, warmed at both
geometries PoCL compiles them for, their binary kept on disk for every later process.

The build is ``kernel_builds.build_kernels`` on a program of its own (``codegen.tier0``'s
source; a plan of one zero-work launch per kernel and variant), so it shares its worker
processes on a cold build and the binary cache afterwards. ``warm_in_background`` starts it
on a thread at the first tier-0 or "auto" compile: the module's own analysis and any
kernels it keeps run meanwhile, and ``generic_kernels`` waits for it.
"""

from __future__ import annotations

import threading

import numpy as np

from ..buffers.slices import BufferRef
from ..codegen.plan import Launch
from ..codegen.program import Program
from ..codegen.tier0 import kernels as tier0
from .kernel_builds import POCL_SMALL_GRID, build_kernels

_lock = threading.Lock()
_built: dict[str, dict] = {}
_threads: dict[str, threading.Thread] = {}
_failures: dict[str, BaseException] = {}


def generic_program(has_fp64: bool) -> Program:
    """The generic kernels as a program whose plan launches each at both PoCL variants (a
    grid narrower than ``POCL_SMALL_GRID`` and a wider one)."""
    names = tier0.kernel_names(has_fp64)
    scratch = BufferRef(0, 0)
    plan = [Launch(name, (scratch,) * (tier0.MAX_BUFFERS + 1), (np.int64(0),), (size,),
                   (tier0.LOCAL_SIZE,), name)
            for name in names for size in (tier0.LOCAL_SIZE, POCL_SMALL_GRID)]
    source = tier0.source(has_fp64)
    return Program(source=source, kernel_names=names, embedded=b"", plan=list(plan),
                   options=(), kernel_instructions={n: [n] for n in names},
                   kernel_texts={n: source for n in names})


def generic_kernels(dev) -> dict:
    """The device's generic kernels by name, built (or loaded) on the first call."""
    thread = _threads.get(dev.identity)
    if thread is not None and thread is not threading.current_thread():
        thread.join()
    with _lock:
        if dev.identity in _failures:
            raise _failures[dev.identity]
        if dev.identity not in _built:
            _built[dev.identity] = build_kernels(dev, generic_program(dev.has_fp64),
                                                 lambda stage, done, total: None)
        return _built[dev.identity]


def warm_in_background(dev) -> None:
    """Start building the device's generic kernels on a thread, once."""
    with _lock:
        if dev.identity in _built or dev.identity in _threads:
            return

        def run() -> None:
            try:
                generic_kernels(dev)
            except BaseException as error:      # reported to whoever waits for the kernels
                _failures[dev.identity] = error

        thread = threading.Thread(target=run, name="hlo-magic tier-0 kernels", daemon=True)
        _threads[dev.identity] = thread
        thread.start()
