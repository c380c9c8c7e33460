"""Building an analysed module's kernels: code generation (or the program cache), the OpenCL
build, and the warm-up that makes PoCL compile every kernel before the first run.

PoCL compiles each kernel at its first launch, for that launch's geometry, so the warm-up
launches every kernel once at its real geometry (on PoCL: the narrowest grid of the same
compiled variant) with its work bound set to 0 (it exits at once and touches no memory):
after the build, runs pay no compilation, and the progress callback can say how many of the
kernels are built. A cold build shares those launches with worker processes on the other
cores (``build_workers``); PoCL's on-disk kernel cache and the saved program binary
(``runtime.opencl.binary_cache``) make all of it nearly free the second time, in any
process. Nothing the OpenCL compiler prints reaches the user (``runtime.opencl.quiet``).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np

from ..errors import DeviceError, internal_errors
from ..gc_pause import gc_paused
from ..hlo.runnable import check_runnable
from ..opencl.quiet import silenced_fds

ProgressCallback = Callable[[str, int, int], None]   # (stage, done, total)


class KernelBuild:
    """An analysed module's program and built kernels, made on first need (``compile``, or the
    first run of a lazily compiled executable) and shared by the cache-hit copies. A program
    generated before, in any process, is loaded instead (``runtime.execution.program_cache``).

    ``times`` holds the seconds per stage: the analysis' ("parse", "verify", "passes",
    "assignment", "other"), then "codegen", "opencl-build", "warm-up" and "binary-save".

    ``generic``: tier 0. The program launches the device's generic kernels for the entry's
    elementwise steps (``codegen.tier0``) and holds only the other kernels; ``generic()``
    gives the generic ones (``generic_kernels``), which ``kernels`` adds to the program's."""

    def __init__(self, analysis, dev, generic: Callable[[], dict] | None = None) -> None:
        self.analysis = analysis
        self.device = dev
        self.generic = generic
        self.times: dict[str, float] = dict(analysis.times)
        self._lock = threading.RLock()
        self._program = None
        self._kernels: dict | None = None
        self._thread: threading.Thread | None = None

    @property
    def built(self) -> bool:
        return self._kernels is not None

    @property
    def program(self):
        """The plan and OpenCL C source (generated on first use; nothing is built)."""
        with self._lock:
            if self._program is None:
                from . import program_cache
                from ..codegen.lower import lower
                from ..codegen.tier0.lowering import Tier0
                check_runnable(self.analysis.source)
                mark = time.perf_counter()
                # each instruction's lowering names it (``LoweringContext.lower_instruction``)
                with gc_paused(), internal_errors("code generation"):
                    key = program_cache.program_key(self.analysis, self.device,
                                                    tier=0 if self.generic else 1)
                    self._program = program_cache.load(key)
                    if self._program is None:
                        tier0 = Tier0(self.device.has_fp64) if self.generic else None
                        self._program = lower(self.analysis.buffer_assignment,
                                              self.analysis.target, self.analysis.alignment,
                                              self.analysis.python_callbacks, tier0)
                        program_cache.save(key, self._program)
                self.times["codegen"] = time.perf_counter() - mark
            return self._program

    def build_in_background(self) -> None:
        """Start ``kernels`` on a thread, once (tier "auto" builds tier 1 so)."""
        with self._lock:
            if self._thread is None and self._kernels is None:
                self._thread = threading.Thread(target=self._build_quietly, daemon=True,
                                                name="hlo-magic tier-1 build")
                self._thread.start()

    def _build_quietly(self) -> None:
        """A background build's failure leaves tier 0 running; a later ``kernels`` call
        builds again and raises it."""
        try:
            self.kernels()
        except Exception:
            return

    def kernels(self, progress: ProgressCallback | None = None) -> dict:
        """The kernels by name, built (and warmed up) on the first call."""
        with self._lock:
            if self._kernels is None:
                report = progress or (lambda stage, done, total: None)
                report("codegen", 0, 1)
                program = self.program
                with internal_errors("the kernel build"):
                    kernels = build_kernels(self.device, program, report, self.times)
                    prepare_host_calls(self.device, program)
                    if self.generic is not None:
                        mark = time.perf_counter()
                        kernels = {**self.generic(), **kernels}
                        self.times["generic-kernels"] = time.perf_counter() - mark
                self._kernels = kernels
                report("done", len(kernels), len(kernels))
            return self._kernels


# A worker process costs about half a second to start (Python, pyopencl, the OpenCL platform),
# a kernel variant 0.1-0.7 s to compile: below this many variants per process, or for saving
# the binary of a program with fewer, the compiling process does the work itself.
VARIANTS_PER_WORKER = 8

# PoCL specialises a kernel for grids narrower than this in every dimension ("smallgrid")
# and compiles one variant for all wider ones (measured: 65472 work-items small, 65536 not).
POCL_SMALL_GRID = 65536


def warm_up_size(dev, global_size: tuple[int, ...], local_size: tuple[int, ...]) -> tuple[int, ...]:
    """The narrowest grid PoCL compiles the same variant for: empty work-groups still cost
    about a microsecond each, so warming a 4M-item kernel at full size took 58 ms."""
    if not dev.is_pocl:
        return global_size
    return tuple(g if g < POCL_SMALL_GRID else -(-POCL_SMALL_GRID // l) * l
                 for g, l in zip(global_size, local_size))


def warm_up_variants(dev, program) -> list:
    """One zero-work launch per distinct (kernel, warm-up grid, local size) of the plan."""
    from .build_workers import Variant
    from ..codegen.plan import iter_launches
    sizes = {name: len(text) for name, text in program.kernel_texts.items()}
    seen: dict[tuple, Variant] = {}
    for launch in iter_launches(program.plan):
        size = warm_up_size(dev, launch.global_size, launch.local_size)
        key = (launch.kernel, size, launch.local_size)
        if key not in seen:
            seen[key] = Variant(launch.kernel, size, launch.local_size, len(launch.buffers),
                                tuple(np.asarray(s).dtype.name for s in launch.scalars),
                                sizes.get(launch.kernel, 0))
    return list(seen.values())


def compiled_variants(dev, variants: list) -> list:
    """The variants PoCL compiles separately: one per kernel, local size and whether the grid
    is narrower than ``POCL_SMALL_GRID`` in every dimension."""
    distinct: dict[tuple, object] = {}
    for v in variants:
        small = all(g < POCL_SMALL_GRID for g in v.size)
        distinct.setdefault((v.kernel, v.local_size, small), v)
    return list(distinct.values())


def build_kernels(dev, program, report: ProgressCallback,
                  times: dict[str, float] | None = None) -> dict:
    """Build the program, then launch each kernel once with a zero work bound (see module doc).

    On a cold PoCL build the launches that make PoCL compile are shared with worker processes
    (``runtime.execution.build_workers``). Everything the OpenCL compiler prints is discarded
    (``runtime.opencl.quiet``); seconds go to ``times["opencl-build"]`` (clBuildProgram),
    ``times["warm-up"]`` (the launches, where PoCL compiles each kernel) and
    ``times["binary-save"]``."""
    from ..opencl import binary_cache
    from .build_workers import (
        Workers, jobs_setting, save_in_background, save_pending, shares,
    )
    from ..opencl.device import build_program, opencl
    times = {} if times is None else times
    cl = opencl()
    total = len(program.kernel_names)
    report("build", 0, total)
    if not total:
        return {}
    variants = warm_up_variants(dev, program)
    options = (*dev.build_options, *program.options)
    saved = binary_cache.binary_path(dev, program.source, options)
    pending = saved is not None and save_pending(saved)
    cold = saved is not None and not saved.is_file() and not pending
    compiling = compiled_variants(dev, variants) if cold else []
    extra = min(jobs_setting() - 1, len(compiling) // VARIANTS_PER_WORKER)
    workers = Workers(extra) if extra > 0 else None
    built: set[str] = set()

    def warmed(kernel: str) -> None:
        if kernel in built or kernel not in kernels:
            return
        built.add(kernel)
        report("build", len(built), total)

    try:
        mark = time.perf_counter()
        with silenced_fds():
            cl_program = build_program(dev, program.source, program.options)
            kernels = {name: cl.Kernel(cl_program, name) for name in program.kernel_names}
        times["opencl-build"] = time.perf_counter() - mark
        mark = time.perf_counter()
        scratch = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, 1)
        done: set = set()
        if workers is not None and workers.processes:
            parts = shares(compiling, len(workers.processes) + 1)
            workers.start(dev.identity, program.source, program.options, parts[1:])
            for variant in parts[0]:
                _warm(cl, dev, kernels[variant.kernel], scratch, variant, program)
                done.add(variant)
                warmed(variant.kernel)
                workers.poll(warmed)
            workers.finish(warmed)
        for variant in variants:
            if variant not in done:
                _warm(cl, dev, kernels[variant.kernel], scratch, variant, program)
                warmed(variant.kernel)
        times["warm-up"] = time.perf_counter() - mark
    finally:
        if workers is not None:
            workers.stop()
    mark = time.perf_counter()
    if len(compiling) >= VARIANTS_PER_WORKER and saved is not None:   # compiling: cold, saved
        save_in_background(dev.identity, program.source, program.options, variants, saved)
    elif not pending:
        binary_cache.save(cl, dev, program.source, options, cl_program)
    times["binary-save"] = time.perf_counter() - mark
    return kernels


def _warm(cl, dev, kernel, scratch, variant, program) -> None:
    from .build_workers import launch_zero_work
    try:
        with silenced_fds():
            launch_zero_work(cl, dev.queue, kernel, scratch, variant)
    except cl.Error as e:
        instruction = ", ".join(program.kernel_instructions.get(variant.kernel, ())[:1])
        raise DeviceError(f"kernel {variant.kernel} (for {instruction}) failed to build or "
                          f"launch on {dev}: {e}") from None


def prepare_host_calls(dev, program) -> None:
    """Let host steps that need the device get ready (OpenCL custom calls build their source)."""
    from ..codegen.plan import HostCall, iter_steps
    for step in iter_steps(program.plan):
        if isinstance(step, HostCall) and step.prepare is not None:
            step.prepare(dev)
