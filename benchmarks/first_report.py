"""The first ``%%hlo`` report of a whole model against XLA's compile, and the first run's
kernel builds; every figure from a fresh process. Nothing is asserted: the machine is shared.

Report (a cell without ``--run``, through IPython's ``run_cell_magic`` and the display
formatter, as a notebook shows it): the imports a user's first cell pays (``import
hlo_magic`` and ``%load_ext hlo_magic``), choosing the device, then parse, verify, passes
and buffer assignment (``exe.compile_times``), the result (``make_result``: the plan for
the cell's donation), and the display bundle (text and HTML); also, apart, what ``--show
timeline`` adds: the timeline widget's data and the matplotlib PNG. "cold" is a process on
empty caches (``HLO_MAGIC_CACHE`` and ``POCL_CACHE_DIR`` in fresh temporary folders),
"warm" the same caches again. XLA: ``import jax`` and its CPU client, then the module's
first and second compile (``benchmarks/xla_cpu.compile_hlo``) in that process.

First run (``--run``): ``%%hlo --run zeros`` on empty caches: the kernel build's stages,
how many build processes shared the warm-up, and the progress lines the notebook showed.

    python benchmarks/first_report.py notebooks/modules/vit_tiny_train_step.hlo \\
        ../shared/models/*_{forward,step}.hlo [--repeats 3] [--run]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _timed(table: dict[str, float], key: str, owner, attribute: str) -> None:
    """Replace ``owner.attribute`` with a wrapper adding its seconds to ``table[key]``."""
    original = getattr(owner, attribute)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            table[key] = table.get(key, 0.0) + time.perf_counter() - start
    setattr(owner, attribute, wrapper)


def child_report(path: str) -> dict:
    text = Path(path).read_text()
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    times: dict[str, float] = {}
    start = time.perf_counter()
    import hlo_magic  # noqa: F401
    shell.run_line_magic("load_ext", "hlo_magic")
    times["imports"] = time.perf_counter() - start
    import runtime
    from hlo_magic import magics
    from runtime.opencl import device as device_module
    if hasattr(device_module, "likely_device"):        # the probe runs beside the analysis
        likely = device_module.likely_device

        def timed_likely(*args, **kwargs):
            start = time.perf_counter()
            dev, confirm = likely(*args, **kwargs)
            times["device"] = time.perf_counter() - start

            def timed_confirm():
                mark = time.perf_counter()
                try:
                    return confirm()
                finally:
                    times["device-wait"] = (times.get("device-wait", 0.0)
                                            + time.perf_counter() - mark)
            return dev, timed_confirm
        device_module.likely_device = timed_likely
    else:
        _timed(times, "device", device_module, "get_device")
    _timed(times, "compile", runtime, "compile")
    _timed(times, "result", magics, "make_result")
    mark = time.perf_counter()
    result = shell.run_cell_magic("hlo", "", text)
    times["cell"] = time.perf_counter() - mark
    mark = time.perf_counter()
    bundle, _ = shell.display_formatter.format(result)
    times["display"] = time.perf_counter() - mark
    stages = dict(result.executable.compile_times)
    times["total"] = times["imports"] + times["cell"] + times["display"]
    mark = time.perf_counter()
    result.timeline()
    times["timeline-data"] = time.perf_counter() - mark
    mark = time.perf_counter()
    result.timeline_png()
    times["timeline-png"] = time.perf_counter() - mark
    return {"times": times, "stages": stages,
            "bytes": {k: len(v) for k, v in bundle.items()},
            "instructions": sum(len(c.instructions) for c in result.executable.module.computations)}


def child_xla(path: str) -> dict:
    text = Path(path).read_text()
    start = time.perf_counter()
    import jax
    jax.devices("cpu")
    from benchmarks.xla_cpu import compile_hlo
    imports = time.perf_counter() - start
    first = compile_hlo(text).compile_seconds
    second = compile_hlo(text).compile_seconds
    return {"imports": imports, "first": first, "second": second}


def child_run(path: str) -> dict:
    text = Path(path).read_text()
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "hlo_magic")
    from hlo_magic import progress
    from runtime.execution import build_workers
    shown: list[str] = []

    class Handle:
        def update(self, line) -> None:
            shown.append(repr(line))

    def display(line, display_id=False):
        shown.append(repr(line))
        return Handle()
    progress.display = display
    workers: list[int] = []
    original = build_workers.Workers.__init__

    def counting(self, count: int) -> None:
        original(self, count)
        workers.append(len(self.processes))
    build_workers.Workers.__init__ = counting
    mark = time.perf_counter()
    result = shell.run_cell_magic("hlo", "--run zeros", text)
    seconds = time.perf_counter() - mark
    program = result.executable.program
    return {"seconds": seconds, "stages": dict(result.executable.compile_times),
            "kernels": len(program.kernel_names), "processes": 1 + sum(workers),
            "jobs": build_workers.jobs_setting(), "progress": shown,
            "load": os.getloadavg()[0]}


def _child(mode: str, path: str, cache: Path) -> dict:
    env = dict(os.environ, HLO_MAGIC_CACHE=str(cache / "hlo"), POCL_CACHE_DIR=str(cache / "pocl"),
               PYTHONPATH=str(REPO))
    env.pop("PYTHONDONTWRITEBYTECODE", None)      # an installed package has its .pyc files
    done = subprocess.run([sys.executable, __file__, f"--child-{mode}", path], env=env,
                          check=True, capture_output=True, text=True, cwd=REPO)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _best(runs: list[dict]) -> dict:
    """The run of the least total time, with every time the median of the runs beside it."""
    best = min(runs, key=lambda r: r["times"]["total"])
    medians = {k: statistics.median(r["times"][k] for r in runs) for k in best["times"]}
    return {**best, "median": medians}


def measure(path: str, repeats: int) -> dict:
    """Ours cold and warm, then XLA's, ``repeats`` times in turn (the load changes alike)."""
    cold, warm, xla = [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="hlo-first-report-") as tmp:
            cold.append(_child("report", path, Path(tmp)))
            warm.append(_child("report", path, Path(tmp)))
            xla.append(_child("xla", path, Path(tmp)))
    return {"cold": _best(cold), "warm": _best(warm),
            "xla": {k: min(r[k] for r in xla) for k in xla[0]}}


def first_run(path: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="hlo-first-run-") as tmp:
        return _child("run", path, Path(tmp))


def _print_report(name: str, r: dict) -> None:
    xla = r["xla"]
    for kind in ("cold", "warm"):
        t, s = r[kind]["times"], r[kind]["stages"]
        cell = t["cell"] + t["display"]
        print(f"{name} {kind}: total {t['total']:.2f} s = imports {t['imports']:.2f} + cell "
              f"{t['cell']:.2f} + display {t['display']:.2f}; device {t.get('device', 0):.2f} "
              f"(+{t.get('device-wait', 0):.2f} waiting for its probe after the analysis), "
              + ", ".join(f"{k} {v:.2f}" for k, v in s.items())
              + f", result {t['result']:.2f}; (--show timeline: data {t['timeline-data']:.2f}, "
              f"png {t['timeline-png']:.2f}); HTML {r[kind]['bytes'].get('text/html', 0):,} B")
        print(f"    cell+display {cell:.2f} s = {cell / xla['first']:.2f}x XLA's first compile "
              f"{xla['first']:.2f} s ({cell / xla['second']:.2f}x its second, "
              f"{xla['second']:.2f} s); with imports {t['total']:.2f} s = "
              f"{t['total'] / (xla['imports'] + xla['first']):.2f}x XLA's import + first "
              f"compile {xla['imports'] + xla['first']:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--run", action="store_true", help="also the first run (cold)")
    parser.add_argument("--no-report", action="store_true", help="only the first run")
    for mode in ("report", "xla", "run"):
        parser.add_argument(f"--child-{mode}", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for mode, child in (("report", child_report), ("xla", child_xla), ("run", child_run)):
        if getattr(args, f"child_{mode}"):
            print(json.dumps(child(args.files[0])))
            return
    # an installed package has its .pyc files: the first child should not write them
    subprocess.run([sys.executable, "-m", "compileall", "-q", "runtime", "hlo_magic",
                    "benchmarks"], cwd=REPO, check=True, capture_output=True,
                   env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    for f in args.files:
        name = Path(f).name.removesuffix(".hlo")
        if not args.no_report:
            _print_report(name, measure(f, args.repeats))
        if args.run or args.no_report:
            r = first_run(f)
            s = r["stages"]
            print(f"{name} first run: {r['seconds']:.2f} s, {r['kernels']} kernels, "
                  f"{r['processes']} build processes (jobs {r['jobs']}, load {r['load']:.2f}); "
                  + ", ".join(f"{k} {v:.2f}" for k, v in s.items()))
            lines = r["progress"]
            print(f"    progress: {len(lines)} lines" + (f": {lines[0]!r} ... {lines[-2:]!r}"
                                                        if lines else ""))
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
