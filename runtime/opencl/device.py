"""OpenCL platforms and devices, program builds, and device-memory errors.

pyopencl is imported lazily (``opencl()``) so that importing ``runtime`` stays fast and the
PoCL cache directory can be set before PoCL first reads it.

How devices become visible: pyopencl's wheel ships a patched ocl-icd loader that reads the
system vendor directory (``/etc/OpenCL/vendors``, or ``$OCL_ICD_VENDORS``) *and* the ``.icd``
files next to itself in ``pyopencl/.libs``, where ``pocl-binary-distribution`` installs its
``pocl.icd``. So PoCL from pip and a system ICD such as NVIDIA's are listed side by side with no
environment variable; system platforms come first.

The default device is chosen by ``device_probe`` (which also registers Intel's CPU runtime
when its pip wheels are installed): a CPU device that compiles for the host's vector ISA,
preferring PoCL; ``device_reasons`` says why each device is or is not used.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Iterator

from . import binary_cache, device_probe
from ..errors import DeviceError
from .cache import cache_dir, configure_pocl_cache
from .quiet import silenced_fds

_INSTALL_HINT = ("pip install pyopencl pocl-binary-distribution (PoCL, runs on the CPU), "
                 "or install your GPU vendor's OpenCL driver")

# (substring of the lower-cased platform name, short name used in specs and in str(device))
_PLATFORM_SHORT_NAMES = (
    ("portable computing language", "pocl"),
    ("nvidia", "nvidia"),
    ("intel", "intel"),
    ("amd", "amd"),
    ("rusticl", "rusticl"),
    ("clover", "clover"),
    ("apple", "apple"),
)

_KINDS = ("cpu", "gpu", "accelerator")

_PROBE_SOURCE = "__kernel void hlo_magic_probe(__global int* out) { out[0] = 1; }\n"

_lock = threading.RLock()
_opencl_module: ModuleType | None = None
_devices: list[Device] | None = None
_programs: dict[tuple[str, str, tuple[str, ...], str], Any] = {}


def opencl() -> ModuleType:
    """The pyopencl module, imported after ``POCL_CACHE_DIR`` has been set."""
    global _opencl_module
    with _lock:
        if _opencl_module is None:
            configure_pocl_cache()
            try:
                device_probe.register_vendor_icds(cache_dir() / "opencl")
            except OSError:
                pass    # an unwritable cache: pip-installed drivers stay unregistered
            try:
                import pyopencl
            except ImportError as error:
                raise DeviceError(f"OpenCL is not available: {error}",
                                  hint=_INSTALL_HINT) from None
            _opencl_module = pyopencl
        return _opencl_module


@dataclass(frozen=True)
class Device:
    """One OpenCL device with the facts the compiler and the runtime need.

    Instances come from ``devices()`` and are unique per process, so the lazily created
    context and in-order queue are shared by everything that runs on the device.
    """

    platform: str
    platform_version: str
    platform_short: str
    name: str
    vendor: str
    kind: str
    spec: str
    driver_version: str
    mem_base_addr_align: int
    max_alloc_bytes: int
    global_mem_bytes: int
    has_fp64: bool
    has_fp16: bool
    correctly_rounded_divide_sqrt: bool
    local_mem_bytes: int
    max_work_group_size: int
    preferred_vector_width_float: int    # 1: the compiler vectorises across work-items
    cl_device: Any = field(compare=False, repr=False)
    _lazy: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_pocl(self) -> bool:
        return self.platform_short == "pocl"

    @property
    def vector_isa(self) -> str:
        """The vector ISA kernels are compiled for: "avx512", "avx2", "baseline" or "unknown"
        (``device_probe.target_isa``)."""
        return device_probe.target_isa(self)

    @property
    def pair_multiply_add(self) -> bool:
        """Whether its kernels may multiply-add 16-bit pairs with x86's ``vpmaddwd``
        (``device_probe.pair_multiply_add``)."""
        return device_probe.pair_multiply_add(self)

    @property
    def identity(self) -> str:
        """What compiled code depends on, for cache keys."""
        return f"{self.platform} {self.platform_version} | {self.name} | {self.driver_version}"

    @property
    def driver_caches_builds(self) -> bool:
        """PoCL and NVIDIA cache compiled programs themselves, keyed by the source text."""
        return self.platform_short in ("pocl", "nvidia")

    @property
    def build_options(self) -> tuple[str, ...]:
        """Options every program for this device is built with, for XLA's float semantics.

        XLA's CPU backend runs with denormals flushed to zero (inputs and results, f32 and
        f64; f16 is computed in f32 where its denormals are normal numbers), and PoCL does the
        same under ``-cl-denorms-are-zero``. OpenCL also allows float division and sqrt to be
        off by 2.5-3 ulp unless asked otherwise; XLA's results are correctly rounded. ``-w``
        keeps the compiler's warnings out of the user's output.
        """
        options: tuple[str, ...] = ("-cl-denorms-are-zero", "-w")   # -w: runtime.opencl.quiet
        if self.correctly_rounded_divide_sqrt:
            options += ("-cl-fp32-correctly-rounded-divide-sqrt",)
        return options

    @property
    def context(self) -> Any:
        with _lock:
            if "context" not in self._lazy:
                self._lazy["context"] = opencl().Context(devices=[self.cl_device])
            return self._lazy["context"]

    @property
    def queue(self) -> Any:
        """The device's in-order command queue."""
        with _lock:
            if "queue" not in self._lazy:
                self._lazy["queue"] = opencl().CommandQueue(self.context, self.cl_device)
            return self._lazy["queue"]

    def probe_build(self) -> str | None:
        """None if the device compiles a trivial kernel, else the reason it cannot."""
        with _lock:
            if "probe" not in self._lazy:
                try:
                    build_program(self, _PROBE_SOURCE)
                    self._lazy["probe"] = None
                except DeviceError as error:
                    self._lazy["probe"] = error.message
            return self._lazy["probe"]

    def __str__(self) -> str:
        return f"{self.platform_short}:{self.kind} ({self.name})"

    def __repr__(self) -> str:
        return f"<Device {self.spec}: {self}>"


def devices() -> list[Device]:
    """Every OpenCL device of every platform, in platform order (enumerated once)."""
    global _devices
    with _lock:
        if _devices is None:
            _devices = _enumerate(opencl())
        return list(_devices)


def get_device(spec: str | Device | None = None) -> Device:
    """Resolve ``spec`` to a device.

    None means ``$HLO_DEVICE`` if set, else the default (see the module docstring). A string
    is ``TERM`` or ``TERM:N`` (the N-th match, default 0), where TERM is a kind ("cpu", "gpu",
    "accelerator"), a platform's short name ("pocl", "nvidia", ...), "pocl:cpu"-style
    platform and kind, or a substring of a platform, vendor or device name.
    """
    if isinstance(spec, Device):
        return spec
    if spec is None:
        spec = os.environ.get("HLO_DEVICE") or None
    found = devices()
    if not found:
        raise DeviceError("no OpenCL platform found", hint=_INSTALL_HINT)
    if spec is None:
        return _default_device(found)
    return _match(spec, found)


def likely_device(spec: str | Device | None = None) -> tuple[Device, Callable[[], Device]]:
    """``get_device(spec)`` at once, and a function that confirms it (returns
    ``get_device(spec)``). Which device is the default depends on whether it compiles a probe
    kernel, which took 1.2 s on PoCL's empty cache (more than GPT-2's whole analysis): for
    the default, the best-ranked device comes back at once and its probe runs in a thread
    until the confirmation, so an analysis, which needs the device's properties only, runs
    beside it; the caller redoes its work for the confirmed device where that differs."""
    found = devices()
    if spec is not None or os.environ.get("HLO_DEVICE") or not found:
        chosen = get_device(spec)       # without devices: the error saying what to install
        return chosen, lambda: chosen
    first = device_probe.ranked(found)[0]
    probe = threading.Thread(target=first.probe_build, name="hlo-magic-device-probe",
                             daemon=True)
    probe.start()

    def confirm() -> Device:
        probe.join()
        return get_device()
    return first, confirm


def _default_device(found: list[Device]) -> Device:
    chosen = device_probe.choose(found)
    if chosen is not None:
        return chosen
    problems = [f"{d.spec} {d}: {d.probe_build()}" for d in found]
    raise DeviceError("no OpenCL device can compile kernels:\n" + "\n".join(problems),
                      hint="install a PoCL built with a newer LLVM (e.g. the system package "
                           "pocl-opencl-icd) or a GPU driver, and select it with HLO_DEVICE")


def device_reasons(spec: str | Device | None = None) -> dict[str, str]:
    """Per device spec, why it is or is not the device ``get_device(spec)`` uses."""
    used = get_device(spec)
    if isinstance(spec, Device):
        chosen_by = f"device={spec.spec}"
    elif spec is not None:
        chosen_by = f"device={spec!r}"
    elif os.environ.get("HLO_DEVICE"):
        chosen_by = f"HLO_DEVICE={os.environ['HLO_DEVICE']}"
    else:
        chosen_by = None
    return device_probe.reasons(devices(), used, chosen_by)


def _match(spec: str, found: list[Device]) -> Device:
    text = spec.strip().lower()
    term, sep, index_text = text.rpartition(":")
    if not (sep and index_text.isdigit()):
        term, index_text = text, ""
    exact = [d for d in found if term in _exact_keys(d)]
    matches = exact or [d for d in found
                        if term and any(term in s.lower() for s in (d.platform, d.vendor, d.name))]
    index = int(index_text) if index_text else 0
    if index < len(matches):
        return matches[index]
    listing = "; ".join(f"{d.spec} = {d}" for d in found)
    raise DeviceError(f"no OpenCL device matches {spec!r}; devices found: {listing}",
                      hint="pass device= or set HLO_DEVICE to one of these specs")


def _exact_keys(device: Device) -> set[str]:
    return {device.kind, device.platform_short, f"{device.platform_short}:{device.kind}",
            device.spec}


def _enumerate(cl: ModuleType) -> list[Device]:
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        return []
    result: list[Device] = []
    per_kind = dict.fromkeys(_KINDS, 0)
    for platform in platforms:
        try:
            platform_devices = platform.get_devices()
        except cl.Error:
            continue
        for cl_device in platform_devices:
            kind = _kind_of(cl, cl_device.type)
            result.append(_describe(platform, cl_device, kind, f"{kind}:{per_kind[kind]}"))
            per_kind[kind] += 1
    return result


def _kind_of(cl: ModuleType, type_bits: int) -> str:
    if type_bits & cl.device_type.GPU:
        return "gpu"
    if type_bits & cl.device_type.CPU:
        return "cpu"
    return "accelerator"


def _describe(platform: Any, cl_device: Any, kind: str, spec: str) -> Device:
    cl = opencl()
    extensions = cl_device.extensions.split()
    single_fp = cl_device.single_fp_config
    return Device(
        platform=platform.name.strip(),
        platform_version=platform.version.strip(),
        platform_short=_short_name(platform.name),
        name=cl_device.name.strip(),
        vendor=cl_device.vendor.strip(),
        kind=kind,
        spec=spec,
        driver_version=cl_device.driver_version.strip(),
        mem_base_addr_align=cl_device.mem_base_addr_align // 8,
        max_alloc_bytes=cl_device.max_mem_alloc_size,
        global_mem_bytes=cl_device.global_mem_size,
        has_fp64="cl_khr_fp64" in extensions,
        has_fp16="cl_khr_fp16" in extensions,
        correctly_rounded_divide_sqrt=bool(
            single_fp & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT),
        local_mem_bytes=cl_device.local_mem_size,
        max_work_group_size=cl_device.max_work_group_size,
        preferred_vector_width_float=cl_device.preferred_vector_width_float,
        cl_device=cl_device,
    )


def _short_name(platform_name: str) -> str:
    lowered = platform_name.lower()
    for needle, short in _PLATFORM_SHORT_NAMES:
        if needle in lowered:
            return short
    words = lowered.split()
    return words[0] if words else "opencl"


def build_program(device: Device, source: str, options: tuple[str, ...] = ()) -> Any:
    """Build ``source`` for ``device`` once per process (per device, options and source).

    Builds go straight from source to the driver: PoCL and NVIDIA cache compiled kernels
    themselves, keyed by the exact source text, and pyopencl's own binary cache would hide the
    source from PoCL's cache (opencl-notes section 3). On PoCL a binary that ``compile`` saved
    after launching every kernel once is loaded instead when there is one (``binary_cache``).
    A failure raises ``DeviceError`` with the compiler's errors, each followed by
    the numbered source line it points at, and the whole log as ``error.build_log``. Nothing
    the compiler prints reaches the process's output (``runtime.opencl.quiet``).
    """
    all_options = (*device.build_options, *options)
    key = (device.spec, device.identity, all_options,
           hashlib.sha256(source.encode()).hexdigest())
    with silenced_fds() as printed, _lock:
        cached = _programs.get(key)
        if cached is not None:
            return cached
        cl = opencl()
        program = binary_cache.load(cl, device, source, all_options)
        if program is not None:
            _programs[key] = program
            return program
        program = cl.Program(device.context, source)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", cl.CompilerWarning)
                program.build(options=list(all_options), devices=[device.cl_device],
                              cache_dir=False if device.driver_caches_builds else None)
        except cl.Error as error:
            failure = error
        else:
            _programs[key] = program
            return program
    log = _build_log(cl, program, device) or printed.text.strip() or str(failure)
    raised = DeviceError(format_build_failure(device, source, log), hint=_build_hint(log))
    raised.build_log = log
    raise raised


def _build_log(cl: ModuleType, program: Any, device: Device) -> str:
    try:
        return program.get_build_info(device.cl_device, cl.program_build_info.LOG).strip()
    except (cl.Error, AttributeError):
        return ""


# Compiler error lines: clang's "FILE:LINE:COL: error: MESSAGE" and PoCL 3.1's
# "error: FILE:LINE:COL: MESSAGE".
_DIAGNOSTICS = (
    re.compile(r"^\S*?:(\d+):(\d+): (?:fatal )?error: (.*)$"),
    re.compile(r"^(?:fatal )?error: \S*?:(\d+):(\d+): (.*)$"),
)


def _diagnostics(log: str) -> list[tuple[str, str, str]]:
    found = []
    for raw in log.splitlines():
        for pattern in _DIAGNOSTICS:
            match = pattern.match(raw.strip())
            if match:
                line, column, message = match.groups()
                found.append((line, column, message))
                break
    return found


def format_build_failure(device: Device, source: str, log: str) -> str:
    """The compiler's error lines, each followed by the numbered source line it refers to."""
    source_lines = source.splitlines()
    diagnostics = _diagnostics(log)
    if not diagnostics:
        tail = "\n".join(log.splitlines()[-20:])
        return f"OpenCL build failed on {device}:\n{tail}"
    width = len(str(len(source_lines)))
    parts = [f"OpenCL build failed on {device}: {len(diagnostics)} error(s)"]
    for line_text, column, message in diagnostics:
        line = int(line_text)
        parts.append(f"  line {line}:{column}: error: {message}")
        if 1 <= line <= len(source_lines):
            parts.append(f"  {line:>{width}} | {source_lines[line - 1]}")
    return "\n".join(parts)


def _build_hint(log: str) -> str | None:
    if "unknown target CPU" in log:
        return ("this PoCL's LLVM does not know the host CPU; use a newer PoCL (system package "
                "pocl-opencl-icd; PoCL >= 3.1 also honours POCL_LLVM_CPU_NAME) or another device")
    return None


# OpenCL status codes that mean "not enough memory" (cl.h: -4, -5, -6, -61).
_OUT_OF_MEMORY_CODES = {-4: "MEM_OBJECT_ALLOCATION_FAILURE", -5: "OUT_OF_RESOURCES",
                        -6: "OUT_OF_HOST_MEMORY", -61: "INVALID_BUFFER_SIZE"}


def out_of_memory(device: Device, needed_bytes: int, what: str = "a buffer") -> DeviceError:
    """The error to raise when ``what`` (``needed_bytes``) does not fit on ``device``."""
    return DeviceError(
        f"out of device memory: needed {needed_bytes} bytes for {what}; {device} has "
        f"{device.global_mem_bytes} bytes of global memory and allows at most "
        f"{device.max_alloc_bytes} bytes in one allocation",
        hint="use smaller inputs, donate arguments, or pick a device with more memory")


@contextmanager
def translate_memory_errors(device: Device, needed_bytes: int,
                            what: str = "a buffer") -> Iterator[None]:
    """Turn OpenCL out-of-memory failures inside the block into ``out_of_memory`` errors."""
    cl = opencl()
    try:
        yield
    except cl.Error as error:
        if getattr(error, "code", None) in _OUT_OF_MEMORY_CODES:
            raise out_of_memory(device, needed_bytes, what) from error
        raise


def allocate_buffer(device: Device, nbytes: int, what: str = "a buffer") -> Any:
    """A read-write ``cl.Buffer`` of ``nbytes``, rounded up to whole 32-bit words (at least
    one: OpenCL rejects empty buffers): a packed 2- or 4-bit store updates the aligned word
    holding its byte (``cltypes``), which must lie inside the buffer."""
    if nbytes > device.max_alloc_bytes:
        raise out_of_memory(device, nbytes, what)
    cl = opencl()
    with translate_memory_errors(device, nbytes, what):
        return cl.Buffer(device.context, cl.mem_flags.READ_WRITE, size=max(-(-nbytes // 4) * 4, 4))


__all__ = [
    "Device", "devices", "get_device", "device_reasons", "build_program", "format_build_failure", "opencl",
    "out_of_memory", "translate_memory_errors", "allocate_buffer",
]
