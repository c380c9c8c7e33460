"""The custom-call registry: implementations keyed by (target name, platform), as in XLA.

Two platforms: ``"host"`` (a Python function over numpy views of the buffers, XLA's CPU
convention) and ``"opencl"`` (an OpenCL C kernel, or a Python launcher that enqueues work,
XLA's GPU convention). Registering a (name, platform) again replaces the earlier entry, so
re-running a notebook cell just works; each registration gets a new serial number, which the
compile cache folds into its key so an executable never runs a replaced implementation.

Lookup order for a call: the target's OpenCL registration (the data already lives on the
device), else its host registration, else a built-in host target (JAX's LAPACK calls).
Built-ins cannot be unregistered, but a user registration of the same name takes precedence.
"""

from __future__ import annotations

import itertools
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import CustomCallError, DeviceError
from ..opencl.device import Device, build_program, devices, opencl
from ..hlo.attributes import unquote_string

PLATFORMS = ("host", "opencl")

_SERIALS = itertools.count(1)
_lock = threading.Lock()
_registry: dict[tuple[str, str], CustomCallTarget] = {}
_builtins: dict[str, CustomCallTarget] = {}


@dataclass(eq=False)
class CustomCallTarget:
    """One registered implementation of a custom-call target on one platform.

    Host: ``function``. OpenCL: ``source`` with ``kernel_name`` (launched over
    ``global_size``, default the first output's element count), and/or a ``launcher``
    ``fn(queue, buffers, opaque, status)`` that enqueues the work itself; a launcher finds the
    registered source's kernels with ``target.kernel(queue, name)``.
    """

    name: str
    platform: str
    function: Callable | None = None
    source: str | None = None
    kernel_name: str | None = None
    global_size: tuple[int, ...] | None = None
    local_size: tuple[int, ...] | None = None
    launcher: Callable | None = None
    builtin: bool = False
    serial: int = field(default_factory=lambda: next(_SERIALS), init=False)
    _kernels: dict = field(default_factory=dict, init=False, repr=False)

    def program(self, device) -> Any:
        """The registered source built for ``device`` (once per device, like generated code)."""
        if self.source is None:
            raise CustomCallError(f"custom call target {self.name!r} was registered without "
                                  "OpenCL source, so it has no kernels", target=self.name)
        try:
            return build_program(device, self.source)
        except DeviceError as error:
            raise DeviceError(f"the OpenCL source of custom call target {self.name!r} does not "
                              f"build: {error.message}", hint=error.hint) from None

    def kernel(self, queue_or_device, name: str | None = None) -> Any:
        """A ``cl.Kernel`` of the registered source on the queue's device (cached)."""
        device = _device_of(queue_or_device)
        kernel_name = name or self.kernel_name
        if kernel_name is None:
            raise CustomCallError(f"custom call target {self.name!r}: name the kernel to get",
                                  target=self.name)
        key = (device.spec, device.identity, kernel_name)
        if key not in self._kernels:
            program = self.program(device)
            cl = opencl()
            available = program.get_info(cl.program_info.KERNEL_NAMES).split(";")
            if kernel_name not in available:
                raise CustomCallError(
                    f"the OpenCL source of custom call target {self.name!r} has no kernel "
                    f"{kernel_name!r}; it defines: {', '.join(sorted(available))}",
                    target=self.name)
            self._kernels[key] = cl.Kernel(program, kernel_name)
        return self._kernels[key]

    def describe(self) -> str:
        if self.platform == "host":
            what = getattr(self.function, "__qualname__", type(self.function).__name__)
        else:
            parts = [f"kernel {self.kernel_name}"] if self.kernel_name else []
            if self.launcher is not None:
                parts.append(f"launcher {getattr(self.launcher, '__qualname__', '?')}")
            what = ", ".join(parts)
        return f"{self.name} [{self.platform}{', built-in' if self.builtin else ''}]: {what}"

    def __repr__(self) -> str:
        return f"<CustomCallTarget {self.describe()}>"


def _device_of(queue_or_device):
    if isinstance(queue_or_device, Device):
        return queue_or_device
    cl_device = getattr(queue_or_device, "device", None)
    for device in devices():
        if device.cl_device == cl_device:
            return device
    raise CustomCallError(f"{queue_or_device!r} is neither a runtime.Device nor the command "
                          "queue of one")


def _sizes(value, what: str, name: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    sizes = (value,) if isinstance(value, int) else tuple(value)
    if not sizes or len(sizes) > 3 or not all(isinstance(s, int) and s > 0 for s in sizes):
        raise CustomCallError(f"custom call target {name!r}: {what} must be a positive int or "
                              f"a tuple of 1 to 3 positive ints, got {value!r}", target=name)
    return sizes


def register_custom_call(name: str, fn_or_source: Callable | str | None = None,
                         platform: str = "host", *, kernel: str | None = None,
                         global_size: int | tuple[int, ...] | None = None,
                         local_size: int | tuple[int, ...] | None = None,
                         launcher: Callable | None = None) -> CustomCallTarget:
    """Register (or replace) the implementation of custom-call target ``name`` on ``platform``.

    ``platform="host"``: ``fn_or_source`` is a Python function, called per the instruction's
    ``api_version`` (see ``runtime.custom_calls``). ``platform="opencl"``: ``fn_or_source`` is
    OpenCL C source and ``kernel`` the kernel to launch, or ``launcher`` a Python function
    ``fn(queue, buffers, opaque, status)`` that does the launching (with or without source).
    """
    if not isinstance(name, str) or not name:
        raise CustomCallError(f"a custom call target name must be a non-empty string, got "
                              f"{name!r}")
    key = platform.lower() if isinstance(platform, str) else platform
    if key not in PLATFORMS:
        raise CustomCallError(f"custom call target {name!r}: platform must be one of "
                              f"{', '.join(PLATFORMS)}, got {platform!r}", target=name)
    target = _host_target(name, fn_or_source) if key == "host" else _opencl_target(
        name, fn_or_source, kernel, global_size, local_size, launcher)
    with _lock:
        _registry[(name, key)] = target
    return target


def _host_target(name: str, fn: object) -> CustomCallTarget:
    if not callable(fn):
        raise CustomCallError(f"custom call target {name!r}: a host implementation must be a "
                              f"Python function fn(out, ins, ...), got {type(fn).__name__}",
                              target=name)
    return CustomCallTarget(name, "host", function=fn)


def _opencl_target(name: str, source: object, kernel: str | None, global_size, local_size,
                   launcher: Callable | None) -> CustomCallTarget:
    if source is not None and not isinstance(source, str):
        raise CustomCallError(f"custom call target {name!r}: an OpenCL implementation takes "
                              f"OpenCL C source text, got {type(source).__name__}", target=name)
    if launcher is not None and not callable(launcher):
        raise CustomCallError(f"custom call target {name!r}: launcher must be a function "
                              f"fn(queue, buffers, opaque, status)", target=name)
    if launcher is None and (source is None or kernel is None):
        raise CustomCallError(f"custom call target {name!r}: an OpenCL implementation needs "
                              "source and kernel=NAME, or a launcher", target=name)
    if kernel is not None and not re.fullmatch(r"[A-Za-z_]\w*", str(kernel)):
        raise CustomCallError(f"custom call target {name!r}: kernel must be a C identifier, got "
                              f"{kernel!r}", target=name)
    return CustomCallTarget(name, "opencl", source=source, kernel_name=kernel,
                            global_size=_sizes(global_size, "global_size", name),
                            local_size=_sizes(local_size, "local_size", name), launcher=launcher)


def unregister_custom_call(name: str, platform: str | None = None) -> None:
    """Remove ``name``'s registration on ``platform`` (None: on every platform)."""
    platforms = PLATFORMS if platform is None else (str(platform).lower(),)
    with _lock:
        removed = [_registry.pop((name, p)) for p in platforms if (name, p) in _registry]
    if not removed:
        where = "any platform" if platform is None else f"platform {platform!r}"
        builtin = " (it is built in, and built-ins stay)" if name in _builtins else ""
        raise CustomCallError(f"custom call target {name!r} is not registered on {where}"
                              f"{builtin}; registered: {_names(registered_custom_calls())}",
                              target=name)


def registered_custom_calls(platform: str | None = None, *,
                            builtin: bool = False) -> list[CustomCallTarget]:
    """The registrations (on ``platform``, or all), sorted by name; with ``builtin`` also the
    built-in host targets."""
    with _lock:
        found = list(_registry.values())
    if builtin:
        shadowed = {t.name for t in found if t.platform == "host"}
        found += [t for t in _builtins.values() if t.name not in shadowed]
    if platform is not None:
        found = [t for t in found if t.platform == str(platform).lower()]
    return sorted(found, key=lambda t: (t.name, t.platform))


def lookup(name: str) -> CustomCallTarget | None:
    """The implementation a call to ``name`` uses (see the module docstring), or None."""
    with _lock:
        return _registry.get((name, "opencl")) or _registry.get((name, "host")) \
            or _builtins.get(name)


def register_builtin(name: str, fn: Callable) -> None:
    """Make ``fn`` a built-in host target (used by the runtime's own target tables)."""
    _builtins[name] = CustomCallTarget(name, "host", function=fn, builtin=True)


_TARGET_IN_TEXT = re.compile(r'custom_call_target="((?:[^"\\]|\\.)*)"')


def cache_token(text: str) -> tuple:
    """What an executable compiled from ``text`` depends on in the registry: the serials of
    the registrations of the targets the text names."""
    names = sorted({unquote_string(n) for n in _TARGET_IN_TEXT.findall(text)})
    with _lock:
        return tuple((n, p, _registry[(n, p)].serial) for n in names for p in PLATFORMS
                     if (n, p) in _registry)


def unknown_target_message() -> str:
    """Names the registrations a user could have meant, per platform."""
    listing = "; ".join(f"{p}: {_names(registered_custom_calls(p)) or 'none'}" for p in PLATFORMS)
    return f"registered targets by platform: {listing}"


def _names(targets: list[CustomCallTarget]) -> str:
    return ", ".join(sorted({t.name for t in targets}))


__all__ = [
    "CustomCallTarget", "PLATFORMS", "register_custom_call", "unregister_custom_call",
    "registered_custom_calls", "lookup", "register_builtin", "cache_token",
    "unknown_target_message",
]
