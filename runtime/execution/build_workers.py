"""Compiling a cold program's kernels on every core: PoCL compiles at first launch, in workers.

PoCL compiles each kernel variant (kernel, local size, small grid or not) at its first launch,
70-700 ms each, one after another in the process that launches. Its on-disk cache is keyed
by the program's source, build options and device, so any process that builds the same
source and launches a variant leaves the compiled variant for all others. A cold ``compile``
therefore starts worker processes (``python -m runtime.execution.build_workers``) while it builds the
program itself, hands each worker a share of the variants (largest kernels first, balanced
by source size), warms its own share meanwhile, and then launches everything once more in
its own process, where each variant is now a cache hit. Workers only save time: whatever
they fail to do, the compiling process does itself, and their output goes nowhere.

``HLO_BUILD_JOBS`` sets the number of processes compiling at once (default: every core the
process may use; 1 turns workers off). The compiling process reads what the workers report
between its own launches, so the progress counts their kernels as they are built.

Saving the program binary (``binary_cache``) makes PoCL compile every kernel once more, in a
generic form, which took as long as all the warm-up launches; so after a cold build a
detached, low-priority worker saves it (``save_in_background``) and ``compile`` returns
without waiting. Until it is done, another process compiles the module from PoCL's kernel
cache (slower than from the binary, but without compiling anything).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import DeviceError

WORKER_TIMEOUT_S = 900


@dataclass(frozen=True)
class Variant:
    """One launch geometry to warm, with what its zero-work launch needs."""

    kernel: str
    size: tuple[int, ...]
    local_size: tuple[int, ...]
    buffers: int
    scalar_types: tuple[str, ...]    # numpy dtype names; the first scalar is the work bound
    cost: int = 0                    # the kernel's source length, to balance the shares


def jobs_setting() -> int:
    """``HLO_BUILD_JOBS``, else every core this process may run on. Not the cores the load
    average leaves idle: the load of the seconds before (the analysis that just ran, another
    user's work) kept a 2-core machine at one process, and a worker on a busy core still
    gets its share of it, so the build's wall clock only drops with more processes."""
    configured = os.environ.get("HLO_BUILD_JOBS", "")
    if configured.isdigit() and int(configured) >= 1:
        return int(configured)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def shares(variants: list[Variant], count: int) -> list[list[Variant]]:
    """``count`` lists of variants with about equal total cost (largest first, greedily)."""
    out: list[list[Variant]] = [[] for _ in range(count)]
    load = [0] * count
    for v in sorted(variants, key=lambda v: -v.cost):
        k = load.index(min(load))
        out[k].append(v)
        load[k] += max(v.cost, 1)
    return out


class Workers:
    """Worker processes started early (Python and OpenCL start-up overlap the program build)
    and given their shares once the program exists in PoCL's cache."""

    def __init__(self, count: int) -> None:
        env = _worker_env()
        self.processes: list[subprocess.Popen] = []
        self._pending: dict[int, bytes] = {}      # per worker: the start of a line not ended yet
        for _ in range(count):
            try:
                self.processes.append(subprocess.Popen(
                    [sys.executable, "-m", "runtime.execution.build_workers"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env))
            except OSError:
                break

    def start(self, device_identity: str, source: str, options: tuple[str, ...],
              parts: list[list[Variant]]) -> None:
        for process, part in zip(self.processes, parts):
            job = {"device": device_identity, "source": source, "options": list(options),
                   "variants": [asdict(v) for v in part]}
            try:
                assert process.stdin is not None
                process.stdin.write(json.dumps(job).encode())
                process.stdin.close()
            except OSError:
                process.kill()

    def poll(self, warmed: Callable[[str], None]) -> None:
        """Call ``warmed(kernel)`` for each variant a worker has reported so far (no wait)."""
        for process in self.processes:
            stream = process.stdout
            assert stream is not None
            while select.select([stream], [], [], 0)[0]:
                chunk = os.read(stream.fileno(), 65536)
                if not chunk:
                    break
                *lines, self._pending[process.pid] = (self._pending.get(process.pid, b"")
                                                      + chunk).split(b"\n")
                for line in lines:
                    warmed(line.decode().strip())

    def finish(self, warmed: Callable[[str], None]) -> None:
        """Wait for every worker, calling ``warmed(kernel)`` as each reports a variant done."""
        for process in self.processes:
            try:
                assert process.stdout is not None
                rest = self._pending.pop(process.pid, b"")
                while chunk := os.read(process.stdout.fileno(), 65536):
                    *lines, rest = (rest + chunk).split(b"\n")
                    for line in lines:
                        warmed(line.decode().strip())
                process.wait(timeout=WORKER_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
                process.wait()

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()


_savers: list[subprocess.Popen] = []     # kept so that Python does not warn about them


def _worker_env() -> dict[str, str]:
    package_root = str(Path(__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=package_root + (os.pathsep + path if path else ""))


PENDING_S = 900      # a saver's marker older than this is stale (the saver died)


def pending_marker(binary: Path) -> Path:
    return binary.with_suffix(".saving")


def save_pending(binary: Path) -> bool:
    """Whether a background saver is (recently) at work on ``binary``: PoCL's cache then
    holds every kernel already, so the build is not cold."""
    try:
        return time.time() - pending_marker(binary).stat().st_mtime < PENDING_S
    except OSError:
        return False


def save_in_background(device_identity: str, source: str, options: tuple[str, ...],
                       variants: list[Variant], binary: Path) -> subprocess.Popen | None:
    """Start a detached worker that warms ``variants`` (all cache hits by now) and saves the
    program binary; returns it (None if it could not start). Nobody waits for it; until it
    is done, ``save_pending(binary)`` says so."""
    marker = pending_marker(binary)
    job = {"device": device_identity, "source": source, "options": list(options),
           "variants": [asdict(v) for v in variants], "save": True, "marker": str(marker)}
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        fd, path = tempfile.mkstemp(prefix="hlo-magic-job-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(job, f)
        process = subprocess.Popen([sys.executable, "-m", "runtime.execution.build_workers", path],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, env=_worker_env(),
                                   start_new_session=True)
    except OSError:
        return None
    _savers[:] = [p for p in _savers if p.poll() is None] + [process]
    return process


def launch_zero_work(cl, queue, kernel, scratch, variant: Variant) -> None:
    """Launch ``kernel`` at the variant's geometry with its work bound 0 (touches nothing)."""
    args: list = []
    for _ in range(variant.buffers):
        args += [scratch, np.uint64(0)]
    args += [np.dtype(t).type(0) for t in variant.scalar_types]
    kernel.set_args(*args)
    cl.enqueue_nd_range_kernel(queue, kernel, variant.size, variant.local_size)
    queue.finish()


def _device_with_identity(found: list, identity: str):
    """The device the compiling process named by its identity: a spec such as "cpu:0" is a
    position in the platform order, which the ICD loader may enumerate differently in another
    process (vendor files registered at run time), and a binary saved for another device would
    be saved under another name."""
    for device in found:
        if device.identity == identity:
            return device
    raise DeviceError(f"no OpenCL device {identity!r} in this worker process")


def _warm(job: dict, report: Callable[[str], None]) -> None:
    from ..opencl import binary_cache
    from ..opencl.device import build_program, devices, opencl
    cl = opencl()
    device = _device_with_identity(devices(), job["device"])
    program = build_program(device, job["source"], tuple(job["options"]))
    scratch = cl.Buffer(device.context, cl.mem_flags.READ_WRITE, 1)
    kernels: dict[str, object] = {}
    for fields in job["variants"]:
        variant = Variant(fields["kernel"], tuple(fields["size"]), tuple(fields["local_size"]),
                          fields["buffers"], tuple(fields["scalar_types"]), fields["cost"])
        kernel = kernels.get(variant.kernel)
        if kernel is None:
            kernel = kernels[variant.kernel] = cl.Kernel(program, variant.kernel)
        launch_zero_work(cl, device.queue, kernel, scratch, variant)
        report(variant.kernel)
    if job.get("save"):
        options = (*device.build_options, *job["options"])
        binary_cache.save(cl, device, job["source"], options, program)
        Path(job["marker"]).unlink(missing_ok=True)


def main() -> None:
    """Worker entry point: a JSON job on stdin (or in the file named by the first argument,
    which is then deleted, for the background saver, which also lowers its priority); one
    line per warmed variant on stdout. The compiler's own output goes to /dev/null."""
    if len(sys.argv) > 1:
        job_file = Path(sys.argv[1])
        job = json.loads(job_file.read_text())
        job_file.unlink()
        if hasattr(os, "nice"):
            os.nice(10)
    else:
        job = json.loads(sys.stdin.buffer.read())
    progress = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)

    def report(kernel: str) -> None:
        progress.write(kernel + "\n")
        progress.flush()
    _warm(job, report)


if __name__ == "__main__":
    main()
