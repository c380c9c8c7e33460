"""``runtime.analyze``: a module's memory plan without a device and without building a kernel.

Showing how a module's buffers are laid out needs the front end, the passes and buffer
assignment, which together take a fraction of a second even for whole models; building the
OpenCL kernels takes most of a cold ``compile``. So the plan is its own step: ``analyze``
returns it, ``compile`` builds on it, and an ``Executable`` keeps the ``Analysis`` it came
from. Nothing here imports pyopencl.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .errors import internal_errors
from .gc_pause import with_gc_paused
from .hlo.ir import HloModule
from .hlo.opcode_enum import Opcode
from .target import Target, TargetKind

if TYPE_CHECKING:
    from .analysis.value_shardings import ValueSharding
    from .buffers.assignment import BufferAssignment, MemoryStats
    from .custom_calls.unimplemented import UnimplementedCall

# Without a device: the base-address alignment of PoCL's CPU devices (1024 bits), which is
# also XLA's CPU alignment for large buffers.
DEFAULT_ALIGNMENT = 128


@dataclass
class Analysis:
    """The memory plan of one module.

    ``source`` is the module as parsed and verified; ``module`` is the module after the passes
    (fusion), the one whose instruction names the buffer assignment and reports use.
    ``times`` holds the seconds each stage took ("parse", "verify", "passes", "assignment").
    ``python_callbacks`` are the functions of the JAX lowering the module came from, which
    its ``jax.pure_callback``-style custom calls run (``custom_calls.jax_callbacks``).
    ``regions``: the analysis of each shard_map region's body (``passes.manual_regions``), by
    the name of the call it was, so an error in a body is found here, not mid-run.
    """

    source: HloModule
    module: HloModule
    buffer_assignment: BufferAssignment
    alignment: int
    target: Target
    times: dict[str, float] = field(default_factory=dict)
    python_callbacks: tuple[Callable, ...] = ()
    regions: dict[str, Analysis] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def unimplemented_custom_calls(self) -> list[UnimplementedCall]:
        """The custom calls nothing implements (by the registry as it is now): each compiles
        to a step that raises ``CustomCallError`` if a run reaches it, so a module whose such
        calls sit in branches valid input never takes (Equinox's ``error_if``) still runs.
        Without custom calls the lowering rules are not loaded (a report needs no kernels)."""
        if not any(inst.opcode == Opcode.CUSTOM_CALL for inst in self.module.instructions()):
            return []
        from .codegen.families.custom_call import unimplemented_calls
        return unimplemented_calls(self.module, self.python_callbacks)

    @property
    def parameter_shardings(self) -> list[ValueSharding]:
        """Each parameter leaf's sharding annotation in words, with its bytes per device."""
        from .analysis.value_shardings import parameter_shardings
        return parameter_shardings(self.source)

    @property
    def output_shardings(self) -> list[ValueSharding]:
        """Each output leaf's sharding annotation (the root's) in words and bytes."""
        from .analysis.value_shardings import output_shardings
        return output_shardings(self.source)

    @property
    def memory_stats(self) -> MemoryStats:
        return self.buffer_assignment.memory_stats

    def __repr__(self) -> str:
        s = self.memory_stats
        return (f"<Analysis {self.name}: argument {s.argument} B, output {s.output} B, "
                f"alias {s.alias} B, temp {s.temp} B, alignment {self.alignment}>")


@with_gc_paused
def analyze(module_or_text: str | HloModule | Any, *, alignment: int | None = None,
            fusion: bool = True, device=None,
            python_callbacks: Sequence[Callable] | None = None) -> Analysis:
    """Parse and verify HLO, run the passes and assign buffers; build no kernel.

    ``module_or_text`` may also be a ``jax.stages.Lowered``: its HLO text, with its Python
    callbacks as ``python_callbacks`` (see ``runtime.compile``). Needs no OpenCL device. ``alignment`` (bytes, a power of two) applies to every buffer
    offset; by default it is that of ``device`` when one is given (a ``Device`` or a spec such
    as "gpu"), else 128 bytes, the alignment of PoCL's CPU devices, so the plan is the one
    ``runtime.compile`` makes for PoCL. ``device`` also picks the target the passes
    fuse for ("cpu" without one). Constants printed elided as ``{...}`` are fine here: only
    running needs their values.
    """
    times: dict[str, float] = {}
    module_or_text, callbacks = jax_input(module_or_text, python_callbacks)
    if isinstance(module_or_text, str):
        from .hlo.parser import parse
        start = time.perf_counter()
        with internal_errors("parsing"):
            module = parse(module_or_text)
        times["parse"] = time.perf_counter() - start
    elif isinstance(module_or_text, HloModule):
        module = module_or_text
    else:
        raise TypeError(f"analyze() takes HLO text, an HloModule or a jax.stages.Lowered, not "
                        f"{type(module_or_text).__name__}")
    from .hlo.verifier import verify
    start = time.perf_counter()
    with internal_errors("verification"):
        verify(module)
    times["verify"] = time.perf_counter() - start
    if device is not None:
        from .opencl.device import get_device
        device = get_device(device)
        return analyze_verified(module, alignment or device.mem_base_addr_align, fusion,
                                Target.for_device(device), times, callbacks)
    return analyze_verified(module, alignment or DEFAULT_ALIGNMENT, fusion,
                            Target.for_kind(TargetKind.CPU), times, callbacks)


def jax_input(module_or_text: Any, python_callbacks: Sequence[Callable] | None
              ) -> tuple[Any, tuple[Callable, ...]]:
    """(the text or module, the Python callbacks): a ``jax.stages.Lowered`` gives its HLO
    text and its callbacks, unless ``python_callbacks`` names others. The text keeps JAX's
    debug information (``op_name`` and the stack-frame tables), which the annotated view and
    the timeline read for each instruction's Python line; it names the same instructions."""
    from .custom_calls.jax_callbacks import checked_callbacks, is_lowered, lowered_callbacks
    if is_lowered(module_or_text):
        callbacks = lowered_callbacks(module_or_text) if python_callbacks is None \
            else checked_callbacks(python_callbacks)
        return module_or_text.as_text("hlo", debug_info=True), callbacks
    return module_or_text, checked_callbacks(python_callbacks or ())


@with_gc_paused
def analyze_verified(module: HloModule, alignment: int, fusion: bool, target: Target,
                     times: dict[str, float] | None = None,
                     python_callbacks: tuple[Callable, ...] = ()) -> Analysis:
    """``analyze`` for a module that is already verified (``compile`` verifies first)."""
    from .pipeline import buffer_assignment, optimise
    times = {} if times is None else times
    _check_alignment(alignment)
    start = time.perf_counter()
    with internal_errors("the optimisation passes"):       # each pass names itself
        optimised = optimise(module, fusion=fusion, target=target)
    times["passes"] = time.perf_counter() - start
    start = time.perf_counter()
    with internal_errors("buffer assignment"):
        assignment = buffer_assignment(optimised, alignment=alignment)
    times["assignment"] = time.perf_counter() - start
    return Analysis(module, assignment.module, assignment, alignment, target, times,
                    python_callbacks, _regions(assignment.module, alignment, fusion, target,
                                               python_callbacks))


def _regions(module: HloModule, alignment: int, fusion: bool, target: Target,
             python_callbacks: tuple[Callable, ...]) -> dict[str, Analysis]:
    """Each shard_map region's body analysed as the multi-device module it is."""
    from .hlo.verifier import verify
    from .passes.manual_regions import ManualRegion
    out = {}
    for inst in module.instructions():
        region = inst.attrs.get("region")
        if isinstance(region, ManualRegion) and region.instruction not in out:
            with internal_errors("verification"):
                verify(region.module)
            out[region.instruction] = analyze_verified(region.module, alignment, fusion, target,
                                                       None, python_callbacks)
    return out


def _check_alignment(alignment: int) -> None:
    if not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
        raise ValueError(f"alignment={alignment!r}: expected a power of two number of bytes, "
                         "such as 128")


__all__ = ["Analysis", "analyze", "analyze_verified", "DEFAULT_ALIGNMENT"]
