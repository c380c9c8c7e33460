"""Where hlo-magic keeps files between processes, and pointing PoCL's kernel cache there.

PoCL compiles each kernel at its first launch (70-100 ms each) and keeps the result in its own
on-disk cache, which is what makes a warm re-run free of compilation. Its key ignores the
environment variables that change code generation, so settings like
``POCL_FORCE_PARALLEL_OUTER_LOOP`` go into the directory name instead: a kernel built under one
setting is never reused under another. PoCL reads ``POCL_CACHE_DIR`` once, when the OpenCL
platform is first queried, so ``configure_pocl_cache`` must run before that.
"""

from __future__ import annotations

import hashlib
import os
from importlib import metadata
from pathlib import Path

# PoCL settings that change the generated machine code but not PoCL's own cache key.
POCL_CODEGEN_ENV = (
    "POCL_FORCE_PARALLEL_OUTER_LOOP",
    "POCL_WORK_GROUP_METHOD",
    "POCL_WORK_GROUP_SPECIALIZATION",
    "POCL_EXTRA_BUILD_FLAGS",
    "POCL_LLVM_CPU_NAME",
    "POCL_KERNELLIB_NAME",
    "POCL_WILOOPS_MAX_UNROLL_COUNT",
)


def cache_dir() -> Path:
    """The project's cache root: ``$HLO_MAGIC_CACHE`` or ``~/.cache/hlo-magic``."""
    configured = os.environ.get("HLO_MAGIC_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "hlo-magic"


def pocl_cache_tag() -> str:
    """``pocl-<wheel version>[-<hash of codegen settings>]``, stable for a given setup."""
    try:
        version = metadata.version("pocl-binary-distribution")
    except metadata.PackageNotFoundError:
        version = "system"
    settings = sorted(f"{name}={os.environ[name]}" for name in POCL_CODEGEN_ENV
                      if os.environ.get(name))
    if not settings:
        return f"pocl-{version}"
    digest = hashlib.sha256("\n".join(settings).encode()).hexdigest()[:12]
    return f"pocl-{version}-{digest}"


def configure_pocl_cache() -> Path:
    """Point ``POCL_CACHE_DIR`` at the project's cache (unless the user chose one) and create it."""
    chosen = os.environ.get("POCL_CACHE_DIR")
    path = Path(chosen) if chosen else cache_dir() / pocl_cache_tag()
    path.mkdir(parents=True, exist_ok=True)
    os.environ["POCL_CACHE_DIR"] = str(path)
    return path


__all__ = ["cache_dir", "pocl_cache_tag", "configure_pocl_cache", "POCL_CODEGEN_ENV"]
