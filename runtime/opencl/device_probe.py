"""Which OpenCL device runs a module by default, and why the others do not.

The rule (docs/devices.md, "The default device"):

1. Only devices that compile a trivial kernel are candidates (PoCL 3.0 from pip cannot compile
   on CPUs its LLVM 14 does not know).
2. CPU devices come before GPUs and accelerators (a GPU is used when asked for: ``HLO_DEVICE``,
   ``device=``, ``--device``).
3. Among CPU devices, one whose compiler targets the host's vector ISA (AVX-512, else AVX2,
   as numpy's CPU detection reports them) comes first; then the one targeting the widest ISA;
   devices whose target cannot be told come last.
4. Ties go to the implementation that measured faster here (``benchmarks/run.py --device``):
   PoCL, then Intel's OpenCL CPU runtime, then any other; and to the newer PoCL.

What each device targets: PoCL 3.1 and later name the LLVM CPU in the device name
(``pthread-skylake-avx512-...``, ``pthread-haswell-...``), looked up in ``_LLVM_CPU_ISA``;
PoCL 3.0 does not say (``pthread-AMD EPYC``): its ISA is "unknown". Intel's runtime compiles
for the CPU it runs on.

Intel's runtime ships as pip wheels (``intel-opencl-rt``, ``intel-cmplr-lib-rt``; dependencies
of hlo-magic on x86-64 Linux) without registering itself with the ICD loader; ``register_vendor_icds``
does that before pyopencl loads: an ICD directory in the project's cache naming the wheel's
``libintelocl.so`` by absolute path next to the system's ICD files, set as
``OCL_ICD_VENDORS`` (``HLO_INTEL_OPENCL=0`` turns this off).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .device import Device

ISA_LEVELS = {"baseline": 0, "avx2": 1, "avx512": 2}

# LLVM CPU names (as PoCL puts them in device names) by the widest vector ISA they enable.
_LLVM_CPU_ISA = {
    **dict.fromkeys(("skylake-avx512", "cascadelake", "cooperlake", "cannonlake",
                     "icelake-client", "icelake-server", "tigerlake", "rocketlake",
                     "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d",
                     "diamondrapids", "znver4", "znver5", "knl", "knm", "x86-64-v4"), "avx512"),
    **dict.fromkeys(("haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake",
                     "arrowlake", "arrowlake-s", "lunarlake", "pantherlake", "gracemont",
                     "sierraforest", "grandridge", "clearwaterforest", "znver1", "znver2",
                     "znver3", "bdver4", "x86-64-v3"), "avx2"),
    **dict.fromkeys(("generic", "x86-64", "x86-64-v2", "nehalem", "westmere", "sandybridge",
                     "ivybridge", "core2", "penryn", "btver1", "btver2", "bdver1", "bdver2",
                     "bdver3", "silvermont", "goldmont", "goldmont-plus", "tremont"),
                    "baseline"),
}

_IMPLEMENTATION_ORDER = ("pocl", "intel")

_INTEL_WHEEL = "intel-opencl-rt"
_INTEL_LIBRARY = "libintelocl.so"
_SYSTEM_VENDORS = Path("/etc/OpenCL/vendors")


# --- the host and the devices' targets -----------------------------------------------------

def host_isa() -> str:
    """The widest vector ISA this CPU runs: "avx512" (AVX-512 F), "avx2" or "baseline"."""
    try:
        umath = importlib.import_module("numpy._core._multiarray_umath")
    except ImportError:  # numpy < 2
        umath = importlib.import_module("numpy.core._multiarray_umath")
    features: dict[str, bool] = umath.__cpu_features__
    if features.get("AVX512F"):
        return "avx512"
    if features.get("AVX2") and features.get("FMA3"):
        return "avx2"
    return "baseline"


def llvm_cpu(device: Device) -> str | None:
    """The LLVM CPU a PoCL CPU device compiles for, when its name says (PoCL >= 3.1)."""
    match = re.match(r"pthread-(.+?)-(?:[A-Z]|$)", device.name + "-")
    if not (device.is_pocl and device.kind == "cpu" and match):
        return None
    name = match.group(1)
    return name if name in _LLVM_CPU_ISA else None


# LLVM CPUs with AVX-512 F but not BW (Xeon Phi): no 512-bit operations on 16-bit integers
_AVX512_WITHOUT_BW = frozenset({"knl", "knm"})


def pair_multiply_add(device: Device) -> bool:
    """Whether kernels for ``device`` may call x86's ``vpmaddwd`` as clang's target builtins
    (``TileShape.pair_madd``): PoCL compiling for an LLVM CPU with AVX2, or AVX-512 with BW
    for the 512-bit form. Intel's runtime compiles through SPIR, without them."""
    cpu = llvm_cpu(device)
    return cpu is not None and _LLVM_CPU_ISA[cpu] in ("avx2", "avx512") \
        and cpu not in _AVX512_WITHOUT_BW


def target_isa(device: Device) -> str:
    """The vector ISA ``device`` compiles kernels for: an ``ISA_LEVELS`` key or "unknown"."""
    if device.kind != "cpu":
        return "unknown"
    if device.platform_short == "intel":
        return host_isa()
    cpu = llvm_cpu(device)
    return _LLVM_CPU_ISA[cpu] if cpu else "unknown"


# --- choosing --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Assessment:
    """One device as the default-device rule sees it."""

    device: Device
    problem: str | None   # why it cannot compile, or None
    isa: str              # target_isa(device)

    @property
    def usable(self) -> bool:
        return self.problem is None

    def describe_target(self) -> str:
        if self.device.kind != "cpu":
            return f"a {self.device.kind}"
        if self.device.platform_short == "intel":
            return f"compiles for this CPU ({self.isa})"
        cpu = llvm_cpu(self.device)
        if cpu:
            return f"compiles for {cpu} ({self.isa})"
        return "does not say which CPU it compiles for"


def _rank_key(a: Assessment, host: str) -> tuple:
    d = a.device
    implementation = (_IMPLEMENTATION_ORDER.index(d.platform_short)
                      if d.platform_short in _IMPLEMENTATION_ORDER else len(_IMPLEMENTATION_ORDER))
    level = ISA_LEVELS.get(a.isa, -1)
    return (not a.usable, d.kind != "cpu", a.isa != host, -level, implementation,
            [-int(n) for n in re.findall(r"\d+", d.driver_version)[:3]])


def assess(found: list[Device]) -> list[Assessment]:
    """Every device, best first by the rule in the module docstring."""
    host = host_isa()
    assessed = [Assessment(d, d.probe_build(), target_isa(d)) for d in found]
    return sorted(assessed, key=lambda a: _rank_key(a, host))


def choose(found: list[Device]) -> Device | None:
    """The default device, or None when no device can compile: devices are tried best first
    by the rule (every other criterion is known without compiling), and the first that
    compiles is used, so the compilers of devices that cannot win are never loaded into the
    process (PoCL 3.0's LLVM 14 and Intel's runtime's LLVM in one process crashed LLVM
    here)."""
    for d in ranked(found):
        if d.probe_build() is None:
            return d
    return None


def ranked(found: list[Device]) -> list[Device]:
    """The devices in the order ``choose`` tries them (every criterion but compiling)."""
    host = host_isa()
    return [a.device for a in sorted((Assessment(d, None, target_isa(d)) for d in found),
                                     key=lambda a: _rank_key(a, host))]


def reasons(found: list[Device], used: Device, chosen_by: str | None = None) -> dict[str, str]:
    """Per device spec, a line saying why it is (or is not) the one used."""
    host = host_isa()
    ranked = assess(found)
    best = next((a for a in ranked if a.usable), None)
    out: dict[str, str] = {}
    for a in ranked:
        d = a.device
        if d is used:
            why = (f"chosen by {chosen_by}" if chosen_by
                   else f"default: the best usable device; {a.describe_target()}")
            if not chosen_by and d.kind == "cpu" and a.isa != host:
                why += (f"; no device here compiles for this CPU's {host}: install Debian's "
                        f"PoCL (pocl-opencl-icd) or Intel's runtime (pip intel-opencl-rt "
                        f"intel-cmplr-lib-rt)")
            out[d.spec] = f"used ({why})"
        elif not a.usable:
            problem = (a.problem or "no reason given").splitlines()[-1][:160]
            out[d.spec] = f"not used: cannot compile ({problem})"
        elif chosen_by:
            out[d.spec] = f"not used: {chosen_by} picks {used.spec}"
        elif d.kind != "cpu":
            out[d.spec] = f"not used: {d.kind}s are used only when asked for (--device {d.spec})"
        elif a.isa != host and best is not None and best.isa == host:
            out[d.spec] = (f"not used: {a.describe_target()}, not this CPU's {host}; "
                           f"{best.device.spec} does")
        elif best is not None and ISA_LEVELS.get(a.isa, -1) < ISA_LEVELS.get(best.isa, -1):
            out[d.spec] = f"not used: {a.describe_target()}; {best.device.spec} targets {best.isa}"
        else:
            out[d.spec] = (f"not used: {a.describe_target()} too, but {d.platform_short} ranks "
                           f"after {used.platform_short} (measured slower here)"
                           if d.platform_short != used.platform_short
                           else f"not used: {a.describe_target()} too; {used.spec} is newer")
    return out


# --- registering vendor ICDs pip installed --------------------------------------------------

def intel_library() -> Path | None:
    """``libintelocl.so`` of the ``intel-opencl-rt`` wheel, if installed."""
    try:
        files = metadata.distribution(_INTEL_WHEEL).files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == _INTEL_LIBRARY:
            path = Path(f.locate()).resolve()
            if path.is_file():
                return path
    return None


def register_vendor_icds(icd_root: Path) -> Path | None:
    """Make pip-installed OpenCL drivers visible to the ICD loader; call before pyopencl loads.

    Writes ``icd_root/vendors-<digest>`` with one ``.icd`` file per driver: those
    ``OCL_ICD_VENDORS`` named (or the system's ``/etc/OpenCL/vendors``), plus Intel's CPU
    runtime from its wheel, and points ``OCL_ICD_VENDORS`` there. Returns that directory, or None when there is nothing
    to add (no wheel, or it is already listed).
    """
    library = intel_library() if os.environ.get("HLO_INTEL_OPENCL", "1") != "0" else None
    if library is None:
        return None
    existing = _vendor_files(os.environ.get("OCL_ICD_VENDORS"))
    if any(_icd_target(f) == str(library) for f in existing):
        return None
    wanted = {f"{i:02d}-{f.name}": _icd_target(f) for i, f in enumerate(existing)}
    wanted["99-hlo-magic-intel-cpu.icd"] = str(library)
    # one directory per set of drivers: processes started with other vendor lists (another
    # OCL_ICD_VENDORS) share the cache but must never rewrite each other's directory
    digest = hashlib.sha256(repr(sorted(wanted.items())).encode()).hexdigest()[:16]
    vendors = icd_root / f"vendors-{digest}"
    vendors.mkdir(parents=True, exist_ok=True)
    for name, target in wanted.items():
        path = vendors / name
        if not path.is_file() or path.read_text().strip() != target:
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(target + "\n")
            tmp.replace(path)
    os.environ["OCL_ICD_VENDORS"] = str(vendors)
    return vendors


def _vendor_files(setting: str | None) -> list[Path]:
    if setting:
        path = Path(setting)
        return sorted(path.glob("*.icd")) if path.is_dir() else [path] if path.is_file() else []
    return sorted(_SYSTEM_VENDORS.glob("*.icd")) if _SYSTEM_VENDORS.is_dir() else []


def _icd_target(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


__all__ = ["Assessment", "assess", "choose", "host_isa", "intel_library", "llvm_cpu",
           "reasons", "register_vendor_icds", "target_isa"]
