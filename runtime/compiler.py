"""``runtime.compile``: HLO text (or a module) to an ``Executable`` on an OpenCL device.

parse -> verify -> passes -> buffer assignment (``runtime.analyze``, no device needed) ->
lowering to one OpenCL program -> build -> warm-up (``runtime.execution.kernel_builds``).
``compile(lazy=True)`` stops after the analysis: the kernels are built at the first run.

Executables are cached in-process by (normalised text, device identity, options, version), so
re-running a notebook cell does no work at all.
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .analyzer import analyze_verified, jax_input
from .errors import DeviceError, HloError, internal_errors
from .gc_pause import with_gc_paused
from .hlo.ir import HloModule
from .execution.kernel_builds import KernelBuild, ProgressCallback
from .hlo.runnable import ELIDED_FILLS, fill_elided_constants, has_elided_constants
from .target import Target



@dataclass(frozen=True)
class CompileOptions:
    alignment: int | None = None      # None: the device's base-address alignment
    fusion: bool = True
    elided_constants: str | None = None
    tier: int | str = 1

    def key(self) -> tuple:
        return (self.alignment, self.fusion, self.elided_constants, self.tier)


if TYPE_CHECKING:   # imported where it is made: importing runtime stays light
    from .execution.executable import Executable

_CACHE: dict[tuple, Executable] = {}
TIERS = (0, 1, "auto")
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


def _cache_key(text: str, device, options: CompileOptions,
               python_callbacks: tuple[Callable, ...]) -> tuple:
    """Also keyed by the registrations of the custom-call targets the text names, so that
    re-registering a target (re-running a notebook cell) recompiles what calls it, and by
    the identity of the JAX callbacks (a cached executable holds them, so no other object
    takes their ids): two lowerings print the same text for different functions."""
    from .version import __version__
    from .custom_calls import cache_token
    digest = hashlib.sha256(normalise(text).encode()).hexdigest()
    return (digest, device.identity, options.key(), __version__, cache_token(text),
            tuple(map(id, python_callbacks)))


def compile(module_or_text: str | HloModule | Any, device=None, *, alignment: int | None = None,
            fusion: bool = True, progress: ProgressCallback | None = None,
            force: bool = False, elided_constants: str | None = None, lazy: bool = False,
            python_callbacks: Sequence[Callable] | None = None, tier: int | str = 1):
    """Compile HLO for ``device`` (None: ``HLO_DEVICE`` or the default device,
    the best CPU device by ``opencl.device_probe``'s rule).

    ``module_or_text`` may be a ``jax.stages.Lowered`` (``jax.jit(f).lower(x)``): its HLO
    text is compiled, and its ``jax.pure_callback``, ``io_callback`` and ``debug.callback``
    calls run the lowering's own Python functions. ``python_callbacks`` gives those functions
    for HLO text printed by such a lowering, in the lowering's order. A custom call nothing
    implements compiles to a step that raises ``CustomCallError`` when a run reaches it
    (``exe.analysis.unimplemented_custom_calls`` lists them).

    The analysis (``runtime.analyze``: parse, verify, passes, buffer assignment) happens here;
    with ``lazy=True`` the kernels are generated and built at the first run instead (showing
    ``progress`` then), so the memory plan is available at once. Constants printed elided as
    ``{...}`` make the module unrunnable (``HloUnsupportedError`` when the kernels are
    generated) unless ``elided_constants`` is "zeros" or "random": then they get such
    values, and the executable's outputs are not the model's (``exe.elided_constants`` says
    so). ``exe.compile_times`` has the seconds per stage.

    ``tier``: 1 (the default) builds a specialised kernel for every step; 0 runs the entry's
    elementwise steps on generic kernels built once per device (``codegen.tier0``), building
    only the other steps' kernels, with the same results; "auto" runs tier 0 at once and
    builds tier 1 in the background, switching to it at the first run after it is built
    (``exe.tier`` says which runs).
    """
    from .opencl.device import likely_device
    dev, confirm = likely_device(device)
    start = time.perf_counter()
    if tier not in TIERS:
        raise ValueError(f"tier={tier!r}: expected one of {TIERS}")
    options = CompileOptions(alignment, fusion, elided_constants, tier)
    try:
        module_or_text, callbacks = jax_input(module_or_text, python_callbacks)
        if isinstance(module_or_text, HloModule):
            text = module_or_text.to_text()
        elif isinstance(module_or_text, str):
            text = module_or_text
        else:
            raise TypeError(f"compile() takes HLO text, an HloModule or a jax.stages.Lowered, "
                            f"not {type(module_or_text).__name__}")
        if elided_constants is not None and elided_constants not in ELIDED_FILLS:
            raise ValueError(f"elided_constants={elided_constants!r}: expected None or one of "
                             f"{ELIDED_FILLS}")
        exe, hit = _front_end(module_or_text, text, dev, options, callbacks, force, progress,
                              start)
    except BaseException:
        # the probe silences descriptors 1 and 2 while it builds: it ends before the error shows
        with suppress(DeviceError):
            confirm()
        raise
    confirmed = confirm()
    if confirmed is not dev:        # the best-ranked device cannot compile: another is used
        exe, hit = _front_end(module_or_text, text, confirmed, options, callbacks, force,
                              progress, start)
    if hit:
        return exe if lazy else exe.build(progress)
    if not lazy:
        exe.build(progress)
    _CACHE[_cache_key(text, exe.device, options, callbacks)] = exe
    return exe


def _front_end(module_or_text: str | HloModule, text: str, dev, options: CompileOptions,
               callbacks: tuple[Callable, ...], force: bool,
               progress: ProgressCallback | None, start: float):
    """(the executable for ``dev``, not built, whether it came from the cache): the cached
    one's copy, or a new analysis."""
    key = _cache_key(text, dev, options, callbacks)
    if not force and key in _CACHE:
        exe = _CACHE[key]._cache_hit_copy()
        exe.progress = progress
        return exe, True
    module = module_or_text if isinstance(module_or_text, HloModule) else None
    module, analysis, filled = _analyse(text, module, dev, options.alignment, options.fusion,
                                        options.elided_constants, progress, callbacks)
    times = analysis.times
    from .execution.executable import Executable
    times["other"] = time.perf_counter() - start - sum(times.values())
    tier1 = KernelBuild(analysis, dev)
    if options.tier == 1:
        build, upgrade = tier1, None
    else:
        from .execution.generic_kernels import generic_kernels, warm_in_background
        warm_in_background(dev)
        build = KernelBuild(analysis, dev, generic=functools.partial(generic_kernels, dev))
        upgrade = tier1 if options.tier == "auto" else None
    exe = Executable(module, analysis, dev, build, upgrade=upgrade,
                     elided_constants=options.elided_constants if filled else None,
                     progress=progress)
    return exe, False


@with_gc_paused
def _analyse(text: str, module: HloModule | None, dev, alignment: int | None, fusion: bool,
             elided_constants: str | None, progress: ProgressCallback | None,
             python_callbacks: tuple[Callable, ...] = ()):
    """``compile``'s front end and analysis: (the module as given, its ``Analysis``, whether
    elided constants were filled). The collector is paused here only, not during the build."""
    times: dict[str, float] = {}
    if module is None:
        from .hlo.parser import parse
        mark = time.perf_counter()
        with internal_errors("parsing"):
            module = parse(text)
        times["parse"] = time.perf_counter() - mark
    from .hlo.verifier import verify
    mark = time.perf_counter()
    with internal_errors("verification"):
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
                                Target.for_device(dev), times, python_callbacks)
    return module, analysis, filled


def clear_cache() -> None:
    _CACHE.clear()


__all__ = ["compile", "clear_cache", "CompileOptions", "KernelBuild", "HloError"]
