"""Generated programs kept between processes, so a warm compile does no code generation.

Once PoCL's kernels and the program binary are cached, generating the OpenCL C source and the
plan is the largest part of a warm compile of a whole model (1.3 s of ViT-tiny's). The
program depends only on the analysed module, the target's code-generation settings and
the alignment, and the
compiler's own code, so it is pickled under ``cache_dir()/programs`` keyed by the text of the
module after the passes (printing it is a tenth of the cost of generating the program) and a
digest of the ``runtime`` package's source files (any change to the compiler makes a new key). Plans with host steps (custom calls hold Python callables) are not kept.
A file that fails to load is deleted and the program generated again.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from ..opencl.cache import cache_dir

SUBDIRECTORY = "programs"


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of every ``.py`` file of the ``runtime`` package (a few milliseconds, once)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def program_key(analysis, device, tier: int = 1) -> tuple:
    """What the program depends on: the analysed module (its text after the passes), the
    alignment, the target's code-generation settings (a GPU target's work-group shapes come
    from the device's limits), the device's identity, the compiler's code and the tier."""
    module = hashlib.sha256(analysis.module.to_text().encode()).hexdigest()
    return (module, analysis.alignment, analysis.target.codegen_key(), device.identity,
            code_digest(), tier)


def program_path(key: tuple) -> Path:
    digest = hashlib.sha256(repr(key).encode()).hexdigest()
    return cache_dir() / SUBDIRECTORY / f"{digest}.pickle"


def load(key: tuple):
    """The program saved under ``key``, or None."""
    path = program_path(key)
    if not path.is_file():
        return None
    try:
        with path.open("rb") as f:
            return pickle.load(f)
    except Exception:                 # a truncated or foreign file: generate the program again
        path.unlink(missing_ok=True)
        return None


def save(key: tuple, program) -> None:
    """Keep ``program`` unless its plan has host steps (they hold callables)."""
    from ..codegen.plan import HostCall, iter_steps
    if any(isinstance(step, HostCall) for step in iter_steps(program.plan)):
        return
    path = program_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(program, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        Path(tmp).unlink(missing_ok=True)


__all__ = ["load", "save", "program_key", "program_path", "code_digest"]
