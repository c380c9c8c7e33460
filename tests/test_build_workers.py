"""Cold builds share PoCL's kernel compilation with worker processes; the binary is saved by a
detached worker; the result is the same as a build in one process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

import runtime
from runtime.execution import kernel_builds
from runtime.execution import build_workers
from runtime.opencl import binary_cache
from runtime.execution.build_workers import Variant, shares

from .conftest import REPO

CHAIN = """HloModule chain

ENTRY main {
  x = f32[64] parameter(0)
  a = f32[64] add(x, x)
  m = f32[64] multiply(a, x)
  n = f32[64] negate(m)
  e = f32[64] exponential(n)
  ROOT s = f32[64] subtract(e, a)
}
"""


def test_shares_balance_the_source_sizes():
    variants = [Variant(f"k{i}", (8,), (8,), 1, ("int32",), cost)
                for i, cost in enumerate([100, 90, 50, 40, 10, 10])]
    parts = shares(variants, 2)
    assert sorted(v.kernel for p in parts for v in p) == sorted(v.kernel for v in variants)
    loads = [sum(v.cost for v in p) for p in parts]
    assert abs(loads[0] - loads[1]) <= 20
    assert shares(variants[:1], 3)[1:] == [[], []]


def cold_build_with_workers() -> None:
    """Run in a fresh process (PoCL reads its cache directory once per process, so a process
    that built kernels before would not build cold): a cold build shares the variants with a
    worker, gives the same values, reports every kernel, and the detached saver writes the
    program binary. Launch chaining is off: the five kernels stay five launches to share."""
    from runtime.codegen import plan_passes
    plan_passes.PLAN_PASSES = plan_passes.without("chain-launches")
    kernel_builds.VARIANTS_PER_WORKER = 1
    from_workers: list[str] = []

    def spy(original):
        def read(self, warmed):
            def record(kernel: str) -> None:
                from_workers.append(kernel)
                warmed(kernel)
            return original(self, record)
        return read
    build_workers.Workers.poll = spy(build_workers.Workers.poll)      # type: ignore
    build_workers.Workers.finish = spy(build_workers.Workers.finish)  # type: ignore
    progress: list[tuple] = []
    exe = runtime.compile(CHAIN, fusion=False, force=True,
                          progress=lambda *report: progress.append(report))
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    a = x + x
    np.testing.assert_allclose(exe(x), np.exp(-(a * x)) - a, rtol=1e-6)
    names = exe.program.kernel_names
    assert len(names) == 5 and from_workers and set(from_workers) <= set(names), from_workers
    builds = [r for r in progress if r[0] == "build"]
    assert builds[-1] == ("build", 5, 5) and progress[-1] == ("done", 5, 5), progress
    saved = binary_cache.binary_path(exe.device, exe.program.source,
                                     (*exe.device.build_options, *exe.program.options))
    assert build_workers._savers[-1].wait(timeout=900) == 0   # the detached saver, low priority
    assert saved.is_file(), saved


def test_a_cold_build_with_workers_runs_like_one_without(tmp_path):
    env = dict(os.environ, POCL_CACHE_DIR=str(tmp_path / "pocl"), HLO_BUILD_JOBS="2",
               HLO_MAGIC_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    env.pop("HLO_DEVICE", None)
    done = subprocess.run(
        [sys.executable, "-c", "from tests.test_build_workers import cold_build_with_workers\n"
                               "cold_build_with_workers()"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_workers_reports_are_read_while_the_compiling_process_works():
    """``poll`` reads what a worker reported so far without waiting for it (the progress counts
    the workers' kernels as they come, not after the compiling process's own share);
    ``finish`` reads the rest, a line split between two reads included."""
    workers = build_workers.Workers(0)
    code = ("import sys\nprint('k1', flush=True)\nsys.stdout.write('k')\nsys.stdout.flush()\n"
            "sys.stdin.read()\nprint('2')\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE)
    workers.processes.append(process)
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while not seen and time.monotonic() < deadline:
        workers.poll(seen.append)
        time.sleep(0.05)
    assert seen == ["k1"] and process.poll() is None      # the worker is still at work
    assert process.stdin is not None
    process.stdin.close()
    workers.finish(seen.append)
    assert seen == ["k1", "k2"]


def test_the_number_of_jobs_is_configurable(monkeypatch):
    monkeypatch.setenv("HLO_BUILD_JOBS", "3")
    assert build_workers.jobs_setting() == 3
    monkeypatch.setenv("HLO_BUILD_JOBS", "")
    assert build_workers.jobs_setting() == len(os.sched_getaffinity(0))


def test_every_core_builds_on_a_busy_machine(monkeypatch):
    """The load average counts the seconds before (the analysis that just ran, others' work):
    at a load of 1.5 on 2 cores the build ran in one process; a worker still gets its share."""
    monkeypatch.delenv("HLO_BUILD_JOBS", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    assert build_workers.jobs_setting() == len(os.sched_getaffinity(0))
