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
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .errors import DeviceError, HloError
from .hlo.ir import HloModule
from .target import Target

ProgressCallback = Callable[[str, int, int], None]   # (stage, done, total)


@dataclass(frozen=True)
class CompileOptions:
    alignment: int | None = None      # None: the device's base-address alignment
    fusion: bool = True

    def key(self) -> tuple:
        return (self.alignment, self.fusion)


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
    from .custom_calls import cache_token
    from .version import __version__
    digest = hashlib.sha256(normalise(text).encode()).hexdigest()
    return (digest, device.identity, options.key(), __version__, cache_token(text))


def compile(module_or_text: str | HloModule, device=None, *, alignment: int | None = None,
            fusion: bool = True, progress: ProgressCallback | None = None,
            force: bool = False):
    """Compile HLO for ``device`` (None: ``HLO_DEVICE`` or the default, PoCL on the CPU)."""
    from .execution.device import get_device
    start = time.perf_counter()
    dev = get_device(device)
    options = CompileOptions(alignment, fusion)
    if isinstance(module_or_text, HloModule):
        text = module_or_text.to_text()
        module = module_or_text
    elif isinstance(module_or_text, str):
        text = module_or_text
        module = None
    else:
        raise TypeError(f"compile() takes HLO text or an HloModule, not {type(module_or_text).__name__}")
    key = _cache_key(text, dev, options)
    if not force and key in _CACHE:
        exe = _CACHE[key]
        return exe._cache_hit_copy()  # type: ignore[attr-defined]
    from .hlo.parser import parse
    from .hlo.verifier import verify
    if module is None:
        module = parse(text)
    verify(module)
    exe = _build(module, dev, options, progress, start)
    _CACHE[key] = exe
    return exe


def _build(module: HloModule, dev, options: CompileOptions, progress, start: float):
    from .codegen.lower import lower
    from .execution.executable import Executable
    from .hlo.runnable import check_runnable
    from .passes.pipeline import run
    check_runnable(module)
    report = progress or (lambda stage, done, total: None)
    report("passes", 0, 1)
    target = Target.for_device(dev)
    alignment = options.alignment or dev.mem_base_addr_align
    assignment = run(module, target, fusion=options.fusion, alignment=alignment)
    report("codegen", 0, 1)
    program = lower(assignment, target, alignment)
    kernels = build_kernels(dev, program, report)
    prepare_host_calls(dev, program)
    return Executable(module, assignment, program, dev, kernels,
                      compile_seconds=time.perf_counter() - start)


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


def build_kernels(dev, program, report: ProgressCallback) -> dict:
    """Build the program, then launch each kernel once with a zero work bound (see module doc)."""
    from .execution import binary_cache
    from .codegen.plan import iter_launches
    from .execution.device import build_program, opencl
    cl = opencl()
    total = len(program.kernel_names)
    report("build", 0, total)
    if not total:
        return {}
    cl_program = build_program(dev, program.source, program.options)
    kernels = {name: cl.Kernel(cl_program, name) for name in program.kernel_names}
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
            kernel.set_args(*args)
            cl.enqueue_nd_range_kernel(dev.queue, kernel, size, launch.local_size)
            dev.queue.finish()
        except cl.Error as e:
            raise DeviceError(f"kernel {launch.kernel} (for {launch.instruction}) failed to "
                              f"build or launch on {dev}: {e}") from None
        if launch.kernel not in built:
            built.add(launch.kernel)
            report("build", len(built), total)
    binary_cache.save(cl, dev, program.source, (*dev.build_options, *program.options), cl_program)
    return kernels


def prepare_host_calls(dev, program) -> None:
    """Let host steps that need the device get ready (OpenCL custom calls build their source)."""
    from .codegen.plan import HostCall, iter_steps
    for step in iter_steps(program.plan):
        if isinstance(step, HostCall) and step.prepare is not None:
            step.prepare(dev)


def clear_cache() -> None:
    _CACHE.clear()


__all__ = ["compile", "clear_cache", "CompileOptions", "HloError"]
