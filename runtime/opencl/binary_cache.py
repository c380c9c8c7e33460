"""Program binaries kept between processes, so a warm compile does no OpenCL compilation.

With PoCL's kernel cache warm, ``clBuildProgram`` from source still costs about 20 ms per
program (PoCL hashes the text and reloads the bitcode), often more than the whole Python
pipeline. A PoCL program binary also carries the work-group functions compiled so far, so
the binary saved after ``compile``'s warm-up launches holds every kernel at its real launch
geometry: building from it takes 1-3 ms and the first launches compile nothing.

Binaries live in PoCL's cache directory (whose name carries the PoCL version and the codegen
settings), keyed by the source, the build options and the device identity. They are used
on PoCL only, where this was measured; other drivers build from source into their own caches.
A binary that fails to load is deleted and the program is built from source.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

from .cache import configure_pocl_cache

SUBDIRECTORY = "hlo-magic-binaries"


def binary_path(device, source: str, options: tuple[str, ...]) -> Path | None:
    if not device.is_pocl:
        return None
    key = hashlib.sha256("\0".join([device.identity, " ".join(options), source]).encode())
    return configure_pocl_cache() / SUBDIRECTORY / f"{key.hexdigest()}.bin"


def load(cl, device, source: str, options: tuple[str, ...]) -> Any | None:
    """The program built from a saved binary, or None (no binary, or it would not load)."""
    path = binary_path(device, source, options)
    if path is None or not path.is_file():
        return None
    try:
        program = cl.Program(device.context, [device.cl_device], [path.read_bytes()])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)
            program.build(options=list(options), devices=[device.cl_device])
    except (cl.Error, OSError):
        path.unlink(missing_ok=True)
        return None
    return program


def save(cl, device, source: str, options: tuple[str, ...], program: Any) -> None:
    """Keep ``program``'s binary (call after its kernels have run once), unless one exists."""
    path = binary_path(device, source, options)
    if path is None or path.is_file():
        return
    binary = program.get_info(cl.program_info.BINARIES)[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(binary)
    os.replace(tmp, path)
