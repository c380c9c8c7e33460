"""Tier 0 against tier 1 (``runtime.compile(tier=...)``, docs/architecture.md "Tiered
execution"): how many steps tier 0's generic kernels take, the first run cold, the run time.

- ``fractions FILE...``: of each module's launches in a tier-0 plan, how many are generic,
  and whether the module builds no program of its own (lowering only, nothing is built).
- ``first-run FILE...``: seconds from ``runtime.compile`` to the first run's outputs in a
  fresh process with empty HLO_MAGIC_CACHE and POCL_CACHE_DIR, except the generic kernels'
  saved binary (copied into the new POCL_CACHE_DIR, where binaries are kept: they are built
  once per device), for tier 0 and tier 1.
- ``run-time FILE...``: median seconds of a warm run (tier 0, tier 1, same process) and the
  number of launches each plan makes, so the cost per step can be compared.
- ``cold-build``: seconds to build the generic kernels themselves in a fresh process with
  empty HLO_MAGIC_CACHE and POCL_CACHE_DIR (what a device pays once).
Usage: python benchmarks/tiers.py {fractions,first-run,run-time,cold-build} [FILE...];
prints JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _runtime():
    sys.path.insert(0, str(REPO))
    import runtime
    return runtime


def fractions(files: list[str]) -> None:
    runtime = _runtime()
    from runtime.codegen.lower import lower
    from runtime.codegen.plan import GenericLaunch, iter_launches, iter_steps
    from runtime.codegen.tier0.lowering import Tier0
    dev = runtime.get_device()
    for f in files:
        analysis = runtime.analyze(Path(f).read_text(), device=dev)
        program = lower(analysis.buffer_assignment, analysis.target, analysis.alignment,
                        analysis.python_callbacks, Tier0(dev.has_fp64))
        tier1 = lower(analysis.buffer_assignment, analysis.target, analysis.alignment,
                      analysis.python_callbacks)
        generic = sum(isinstance(s, GenericLaunch) for s in iter_steps(program.plan))
        print(json.dumps({"file": Path(f).name, "generic": generic,
                          "launches": generic + len(list(iter_launches(program.plan))),
                          "own_kernels": len(program.kernel_names),
                          "tier1_launches": len(list(iter_launches(tier1.plan))),
                          "tier1_kernels": len(tier1.kernel_names)}), flush=True)


def _first_run_child(path: str, tier: str) -> None:
    runtime = _runtime()
    from runtime.execution import executable  # noqa: F401
    from runtime.codegen import families, lower  # noqa: F401
    runtime.get_device()
    text = Path(path).read_text()
    start = time.perf_counter()
    exe = runtime.compile(text, tier=int(tier))
    compiled = time.perf_counter() - start
    args = exe.random_arguments()          # not timed: a model's weights take seconds
    start = time.perf_counter()
    exe(*args)
    print(json.dumps({"compile": compiled, "first_run": compiled + time.perf_counter() - start,
                      "own_kernels": len(exe.program.kernel_names)}))


def _generic_binary(dev) -> Path:
    from runtime.codegen.tier0 import kernels
    from runtime.opencl import binary_cache
    path = binary_cache.binary_path(dev, kernels.source(dev.has_fp64), tuple(dev.build_options))
    assert path is not None
    return path


def first_run(files: list[str]) -> None:
    runtime = _runtime()
    from runtime.execution.generic_kernels import generic_kernels
    dev = runtime.get_device()
    generic_kernels(dev)                  # built (or loaded) here, saved in the user's cache
    saved = _generic_binary(dev)
    from runtime.opencl.cache import configure_pocl_cache
    for f in files:
        for tier in ("0", "1"):
            with tempfile.TemporaryDirectory(prefix="hlo-tiers-") as tmp:
                cache, pocl = Path(tmp) / "cache", Path(tmp) / "pocl"
                target = pocl / saved.relative_to(configure_pocl_cache())
                target.parent.mkdir(parents=True)
                cache.mkdir()
                shutil.copy(saved, target)
                env = dict(os.environ, HLO_MAGIC_CACHE=str(cache), POCL_CACHE_DIR=str(pocl))
                out = subprocess.run([sys.executable, __file__, "--child", f, tier], env=env,
                                     check=True, capture_output=True, text=True)
                row = json.loads(out.stdout.strip().splitlines()[-1])
            print(json.dumps({"file": Path(f).name, "tier": int(tier), **row,
                              "load": os.getloadavg()[0]}), flush=True)


def run_time(files: list[str], repeats: int = 15) -> None:
    runtime = _runtime()
    from runtime.codegen.plan import GenericLaunch, iter_launches, iter_steps
    for f in files:
        text = Path(f).read_text()
        row: dict = {"file": Path(f).name}
        for tier in (0, 1):
            exe = runtime.compile(text, tier=tier)
            args = exe.random_arguments()
            exe(*args)
            seconds = []
            for _ in range(repeats):
                start = time.perf_counter()
                exe(*args)
                seconds.append(time.perf_counter() - start)
            row[f"tier{tier}_s"] = statistics.median(seconds)
            plan = exe.program.plan
            row[f"tier{tier}_launches"] = len(list(iter_launches(plan))) + sum(
                isinstance(s, GenericLaunch) for s in iter_steps(plan))
        row["ratio"] = row["tier0_s"] / row["tier1_s"]
        row["load"] = os.getloadavg()[0]
        print(json.dumps(row), flush=True)


def _cold_build_child() -> None:
    runtime = _runtime()
    from runtime.execution.generic_kernels import generic_kernels
    dev = runtime.get_device()
    start = time.perf_counter()
    kernels = generic_kernels(dev)
    print(json.dumps({"cold_build_s": time.perf_counter() - start, "kernels": len(kernels)}))


def cold_build(files: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="hlo-tiers-") as tmp:
        env = dict(os.environ, HLO_MAGIC_CACHE=str(Path(tmp) / "cache"),
                   POCL_CACHE_DIR=str(Path(tmp) / "pocl"))
        out = subprocess.run([sys.executable, __file__, "--cold-build-child"], env=env,
                             check=True, capture_output=True, text=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps({**row, "load": os.getloadavg()[0]}), flush=True)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _first_run_child(sys.argv[2], sys.argv[3])
        return
    if sys.argv[1:2] == ["--cold-build-child"]:
        _cold_build_child()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("fractions", "first-run", "run-time", "cold-build"))
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    {"fractions": fractions, "first-run": first_run, "run-time": run_time,
     "cold-build": cold_build}[args.what](args.files)


if __name__ == "__main__":
    main()
