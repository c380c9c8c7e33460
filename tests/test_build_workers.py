"""Cold builds share PoCL's kernel compilation with worker processes; the binary is saved by a
detached worker; the result is the same as a build in one process."""

from __future__ import annotations

import os

import numpy as np

import runtime
from runtime import compiler
from runtime.execution import binary_cache, build_workers
from runtime.execution.build_workers import Variant, shares

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


def test_a_cold_build_with_workers_runs_like_one_without(tmp_path, monkeypatch):
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path))       # no binary: a cold build
    monkeypatch.setenv("HLO_BUILD_JOBS", "2")
    monkeypatch.setattr(compiler, "VARIANTS_PER_WORKER", 1)
    from_workers: list[str] = []
    original = build_workers.Workers.finish

    def spy(self, warmed):
        def record(kernel: str) -> None:
            from_workers.append(kernel)
            warmed(kernel)
        return original(self, record)
    monkeypatch.setattr(build_workers.Workers, "finish", spy)
    progress: list[tuple] = []
    exe = runtime.compile(CHAIN, fusion=False, force=True,
                          progress=lambda *report: progress.append(report))
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    a = x + x
    np.testing.assert_allclose(exe(x), np.exp(-(a * x)) - a, rtol=1e-6)
    names = exe.program.kernel_names
    assert len(names) == 5 and from_workers and set(from_workers) <= set(names)
    builds = [r for r in progress if r[0] == "build"]
    assert builds[-1] == ("build", 5, 5) and progress[-1] == ("done", 5, 5)
    saved = binary_cache.binary_path(exe.device, exe.program.source,
                                     (*exe.device.build_options, *exe.program.options))
    # the detached saver writes the binary; it runs at low priority beside the rest of the
    # suite (and any savers earlier tests started), so wait for the process itself
    saver = build_workers._savers[-1]
    assert saver.wait(timeout=900) == 0
    assert saved.is_file()


def test_the_number_of_jobs_is_configurable(monkeypatch):
    monkeypatch.setenv("HLO_BUILD_JOBS", "3")
    assert build_workers.jobs_setting() == 3
    monkeypatch.setenv("HLO_BUILD_JOBS", "")
    assert 1 <= build_workers.jobs_setting() <= (os.cpu_count() or 1)
