"""``runtime.compile``: HLO text (or a module) to an ``Executable`` on an OpenCL device.

parse -> verify -> passes -> buffer assignment -> lowering to one OpenCL program -> build ->
warm-up. PoCL compiles each kernel at its first launch, for that launch's geometry, so the
warm-up launches every kernel once at its real geometry (on PoCL: the narrowest grid of the
same compiled variant) with its work bound set to 0 (it exits at once and touches no
memory): after ``compile`` returns, runs pay no compilation, and the progress callback can
say how many of the kernels are built. PoCL's on-disk kernel cache
makes all of that nearly free the second time, in any process.

Executables are cached in-process by (normalised text, device identity, options, version), so
re-running a notebook cell does no work at all.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .analyzer import analyze_verified
from .errors import DeviceError, HloError
from .hlo.ir import HloModule
from .hlo.runnable import ELIDED_FILLS, check_runnable, fill_elided_constants, has_elided_constants
from .quiet import silenced_fds

ProgressCallback = Callable[[str, int, int], None]   # (stage, done, total)


@dataclass(frozen=True)
class CompileOptions:
    alignment: int | None = None      # None: the device's base-address alignment
    fusion: bool = True
    elided_constants: str | None = None

    def key(self) -> tuple:
        return (self.alignment, self.fusion, self.elided_constants)


_CACHE: dict[tuple, object] = {}
_STRING_OR_COMMENT = re.compile(r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|//[^\n]*|/\*.*?\*/""",
                                re.S)
_BLANK = re.compile(r"\s+")


def normalise(text: str) -> str:
    """The cache key's view of the text: comments and blank space outside string literals do
    not matter; strings (opaque custom-call bytes, metadata) are kept exactly."""
    pieces: list[str] = []
    code: list[str] = []          # text between strings, comments replaced by a blank
    last = 0
    for m in _STRING_OR_COMMENT.finditer(text):
        code.append(text[last:m.start()])
        if m.group(1) is None:
            code.append(" ")
        else:
            pieces.append(_BLANK.sub(" ", "".join(code)))
            pieces.append(m.group(1))
            code = []
        last = m.end()
    code.append(text[last:])
    pieces.append(_BLANK.sub(" ", "".join(code)))
    return "".join(pieces).strip()


def _cache_key(text: str, device, options: CompileOptions) -> tuple:
    """Also keyed by the registrations of the custom-call targets the text names, so that
    re-registering a target (re-running a notebook cell) recompiles what calls it."""
    from . import __version__
    from .custom_calls import cache_token
    digest = hashlib.sha256(normalise(text).encode()).hexdigest()
    return (digest, device.identity, options.key(), __version__, cache_token(text))


def compile(module_or_text: str | HloModule, device=None, *, alignment: int | None = None,
            fusion: bool = True, progress: ProgressCallback | None = None,
            force: bool = False, elided_constants: str | None = None, lazy: bool = False):
    """Compile HLO for ``device`` (None: ``HLO_DEVICE`` or the default, PoCL on the CPU).

    The analysis (``runtime.analyze``: parse, verify, passes, buffer assignment) happens here;
    with ``lazy=True`` the kernels are generated and built at the first run instead (showing
    ``progress`` then), so the memory plan is available at once. Constants printed elided as
    ``{...}`` make the module unrunnable (``HloUnsupportedError`` when the kernels are
    generated) unless ``elided_constants`` is "zeros" or "random": then they get such
    values, and the executable's outputs are not the model's (``exe.elided_constants`` says
    so). ``exe.compile_times`` has the seconds per stage.
    """
    from .device import get_device
    dev = get_device(device)
    start = time.perf_counter()
    options = CompileOptions(alignment, fusion, elided_constants)
    if isinstance(module_or_text, HloModule):
        text = module_or_text.to_text()
        module = module_or_text
    elif isinstance(module_or_text, str):
        text = module_or_text
        module = None
    else:
        raise TypeError(f"compile() takes HLO text or an HloModule, not {type(module_or_text).__name__}")
    if elided_constants is not None and elided_constants not in ELIDED_FILLS:
        raise ValueError(f"elided_constants={elided_constants!r}: expected None or one of "
                         f"{ELIDED_FILLS}")
    key = _cache_key(text, dev, options)
    if not force and key in _CACHE:
        exe = _CACHE[key]
        return exe._cache_hit_copy()  # type: ignore[attr-defined]
    times: dict[str, float] = {}
    if module is None:
        from .hlo.parser import parse
        mark = time.perf_counter()
        module = parse(text)
        times["parse"] = time.perf_counter() - mark
    from .hlo.verifier import verify
    mark = time.perf_counter()
    verify(module)
    runnable = module
    filled = False
    if elided_constants is not None and has_elided_constants(module):
        from .hlo.clone import clone_module
        runnable, _ = clone_module(module)
        filled = fill_elided_constants(runnable, elided_constants) > 0
    times["verify"] = time.perf_counter() - mark
    if progress is not None:
        progress("passes", 0, 1)
    analysis = analyze_verified(runnable, alignment or dev.mem_base_addr_align, fusion,
                                dev.strategy, times)
    from .execute import Executable
    times["other"] = time.perf_counter() - start - sum(times.values())
    exe = Executable(module, analysis, dev, KernelBuild(analysis, dev),
                     elided_constants=elided_constants if filled else None, progress=progress)
    if not lazy:
        exe.build(progress)
    _CACHE[key] = exe
    return exe


class KernelBuild:
    """An analysed module's program and built kernels, made on first need (``compile``, or the
    first run of a lazily compiled executable) and shared by the cache-hit copies.

    ``times`` holds the seconds per stage: the analysis' ("parse", "verify", "passes",
    "assignment", "other"), then "codegen", "opencl-build", "warm-up" and "binary-save"."""

    def __init__(self, analysis, dev) -> None:
        self.analysis = analysis
        self.device = dev
        self.times: dict[str, float] = dict(analysis.times)
        self._lock = threading.RLock()
        self._program = None
        self._kernels: dict | None = None

    @property
    def built(self) -> bool:
        return self._kernels is not None

    @property
    def program(self):
        """The plan and OpenCL C source (generated on first use; nothing is built)."""
        with self._lock:
            if self._program is None:
                from .codegen.lower import lower
                check_runnable(self.analysis.source)
                mark = time.perf_counter()
                self._program = lower(self.analysis.buffer_assignment, self.device.strategy,
                                      self.analysis.alignment)
                self.times["codegen"] = time.perf_counter() - mark
            return self._program

    def kernels(self, progress: ProgressCallback | None = None) -> dict:
        """The kernels by name, built (and warmed up) on the first call."""
        with self._lock:
            if self._kernels is None:
                report = progress or (lambda stage, done, total: None)
                report("codegen", 0, 1)
                program = self.program
                kernels = build_kernels(self.device, program, report, self.times)
                prepare_host_calls(self.device, program)
                self._kernels = kernels
                report("done", len(kernels), len(kernels))
            return self._kernels


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


def build_kernels(dev, program, report: ProgressCallback,
                  times: dict[str, float] | None = None) -> dict:
    """Build the program, then launch each kernel once with a zero work bound (see module doc).

    Everything the OpenCL compiler prints meanwhile is discarded (``runtime.quiet``); seconds
    go to ``times["opencl-build"]`` (clBuildProgram), ``times["warm-up"]`` (the launches, where
    PoCL compiles each kernel) and ``times["binary-save"]``."""
    from . import binary_cache
    from .codegen.plan import iter_launches
    from .device import build_program, opencl
    times = {} if times is None else times
    cl = opencl()
    total = len(program.kernel_names)
    report("build", 0, total)
    if not total:
        return {}
    mark = time.perf_counter()
    with silenced_fds():
        cl_program = build_program(dev, program.source, program.options)
        kernels = {name: cl.Kernel(cl_program, name) for name in program.kernel_names}
    times["opencl-build"] = time.perf_counter() - mark
    mark = time.perf_counter()
    scratch = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, 1)
    warmed: set[tuple] = set()
    built: set[str] = set()
    for launch in iter_launches(program.plan):
        size = warm_up_size(dev, launch.global_size, launch.local_size)
        geometry = (launch.kernel, size, launch.local_size)
        if geometry in warmed:
            continue
        warmed.add(geometry)
        kernel = kernels[launch.kernel]
        args: list = []
        for _ in launch.buffers:
            args += [scratch, np.uint64(0)]
        scalars = list(launch.scalars)
        scalars[0] = type(scalars[0])(0)
        args += scalars
        try:
            with silenced_fds():
                kernel.set_args(*args)
                cl.enqueue_nd_range_kernel(dev.queue, kernel, size, launch.local_size)
                dev.queue.finish()
        except cl.Error as e:
            raise DeviceError(f"kernel {launch.kernel} (for {launch.instruction}) failed to "
                              f"build or launch on {dev}: {e}") from None
        if launch.kernel not in built:
            built.add(launch.kernel)
            report("build", len(built), total)
    times["warm-up"] = time.perf_counter() - mark
    mark = time.perf_counter()
    binary_cache.save(cl, dev, program.source, (*dev.build_options, *program.options),
                      cl_program)
    times["binary-save"] = time.perf_counter() - mark
    return kernels


def prepare_host_calls(dev, program) -> None:
    """Let host steps that need the device get ready (OpenCL custom calls build their source)."""
    from .codegen.plan import HostCall, iter_steps
    for step in iter_steps(program.plan):
        if isinstance(step, HostCall) and step.prepare is not None:
            step.prepare(dev)


def clear_cache() -> None:
    _CACHE.clear()


__all__ = ["compile", "clear_cache", "CompileOptions", "KernelBuild", "HloError"]
