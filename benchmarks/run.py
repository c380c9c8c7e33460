"""The performance benchmark: every bench program of the corpus (and any HLO file given on the
command line) and every whole model of the shared models folder, on this project and, when
jax is installed, on XLA's CPU backend in the same run, plus numpy for dots and reductions.

For each program: run time (best and median of ``--runs`` on device-resident arguments, after
warm-up; ours, XLA's and numpy's runs take turns, so the shared machine's busy moments hit all
alike; ratios to XLA are best against best, the median's ratio is printed beside it),
compile time cold (fresh process, empty PoCL cache) and warm (fresh process, the cache the
cold one left), and memory (argument + output + temp - alias bytes: our buffer assignment
against XLA's compiled memory stats), each as a ratio to XLA. Whole models (``$HLO_MODELS``,
default ``../shared/models``) are measured the same way with ``--model-runs`` turns (best and
median reported), their compile time in this process (the PoCL cache as found), their kernel
launches per run, and outputs checked against the index's summaries; an HLO file given with
its inputs and reference outputs beside it (``NAME.npz``, as ``jax_models.py`` writes them)
is measured as a whole model too, and checked. Then corpus-wide figures: warm
compile of every corpus module against XLA's compile time, memory of every module against
XLA's, the temp arena against its liveness lower bound, and the per-run overhead of a warm
executable. Prints tables, the geomeans against the issue's targets and a Markdown summary
for docs/performance.md, and writes everything to ``bench-results/results.json``.

    python benchmarks/run.py [FILE.hlo ...] [--runs N] [--no-xla] [--no-compile] [--no-corpus]
                             [--no-models | --models-only] [--model-runs N]
                             [--device SPEC ...]

``--device SPEC`` (repeatable; ``--device all-cpu`` means every CPU device) measures the bench
programs on each device in turn (compile times too, with ``HLO_DEVICE`` set for the fresh
processes) and ends with a side-by-side table of run time against XLA per device; the
corpus-wide figures are taken once, on the first device.

XLA's figures are measured here, in this process (``benchmarks/xla_cpu.py``: jaxlib's HLO
parser, StableHLO, ``Client.compile_and_load``); without jax the corpus index's figures
(also 2 cores) stand in, marked as such. Nothing is asserted: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")    # jaxlib's start-up chatter

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

import compile_times  # noqa: E402
import memory  # noqa: E402
import overhead  # noqa: E402
import xla_cpu  # noqa: E402
from numpy_baseline import baseline  # noqa: E402
from programs import (BenchProgram, corpus_bench_programs, file_program,  # noqa: E402
                      model_bench_programs)

import runtime  # noqa: E402

CORPUS = Path(os.environ.get("HLO_CORPUS", REPO.parent / "shared" / "corpus"))
TARGETS = {"run_geomean": 1.5, "run_elementwise_layernorm": 1.0, "dot_vs_numpy": 0.4,
           "memory_geomean": 1.0, "arena_vs_bound": 1.05, "warm_compile_vs_xla": 2.0,
           "overhead_us": overhead.TARGET_US}


@dataclass
class Row:
    name: str
    kernels: int = 0
    run_s: float = math.nan
    correct: bool | None = None
    problems: str = ""
    total_bytes: int = 0
    peak_bytes: int = 0
    xla_run_s: float = math.nan
    xla_compile_s: float = math.nan
    xla_total_bytes: int = 0
    xla_source: str = "none"          # "measured" | "index" | "none"
    numpy_s: float = math.nan
    flops: int = 0
    compile_cold_s: float = math.nan
    compile_warm_s: float = math.nan
    compile_s: float = math.nan        # in this process, the PoCL cache as found
    run_best_s: float = math.nan
    xla_run_best_s: float = math.nan
    launches: int = 0                  # kernel launches per run

    @property
    def run_ratio(self) -> float:
        """Best against best where XLA ran here (a shared machine's load only ever adds time);
        against the index's median, median against median."""
        if self.xla_source == "measured":
            return self.run_best_s / self.xla_run_best_s
        return self.median_ratio

    @property
    def median_ratio(self) -> float:
        return self.run_s / self.xla_run_s

    @property
    def memory_ratio(self) -> float:
        return self.total_bytes / self.xla_total_bytes if self.xla_total_bytes else math.nan


def geomean(values) -> float:
    values = [v for v in values if v == v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def _block(result) -> None:
    leaves = result if isinstance(result, tuple) else (result,)
    for leaf in leaves:
        if isinstance(leaf, tuple):
            _block(leaf)
        else:
            leaf.block_until_ready()


def ours_runner(exe, args: list[np.ndarray], donates: bool):
    """One timed run on device-resident arguments; aliased ones are donated, each run
    getting fresh ones (untimed), as XLA's runs do."""
    donate = tuple(range(len(args))) if donates else ()
    resident = [runtime.device_put(a, exe.device) for a in args]

    def run() -> float:
        nonlocal resident
        if donates:
            resident = [runtime.device_put(a, exe.device) for a in args]
        start = time.perf_counter()
        _block(exe.run(*resident, donate=donate))
        return time.perf_counter() - start
    return run


def numpy_runner(fn, args):
    def run() -> float:
        start = time.perf_counter()
        fn(args)
        return time.perf_counter() - start
    return run


def interleaved_times(runners: dict, runs: int, warmup: int = 2) -> dict[str, list[float]]:
    """Seconds of each run of each runner, taking turns run by run, so that a busy moment of
    a shared machine lands on all of them alike, in an order reversed every other round, so
    that no runner always runs right after the same one: XLA's thread pool keeps spinning
    for a while after its run, and our run right after it took 9-19% longer than after our
    own (a bidirectional GRU, a diffusion sampler; AMD EPYC, 2 cores); the fixed order had
    put every one of our runs right after XLA's."""
    times: dict[str, list[float]] = {name: [] for name in runners}
    order = list(runners.items())
    for k in range(warmup + runs):
        for name, run in (order if k % 2 == 0 else order[::-1]):
            seconds = run()
            if k >= warmup:
                times[name].append(seconds)
    return times


def _launches(steps) -> int:
    """Kernel launches of a plan, loops counted once."""
    count = 0
    for step in steps:
        kind = type(step).__name__
        if kind == "Launch":
            count += 1
        elif kind == "HostWhile":
            count += _launches(step.condition) + _launches(step.body)
        elif kind == "HostConditional":
            count += max((_launches(b) for b in step.branches), default=0)
    return count


def measure_program(p: BenchProgram, runs: int, use_xla: bool, device=None,
                    warmup: int = 2) -> Row:
    row = Row(p.name)
    args = p.inputs()
    start = time.perf_counter()
    exe = runtime.compile(p.text, device)
    row.compile_s = time.perf_counter() - start
    row.kernels = len(exe.program.kernel_names)
    row.launches = _launches(exe.program.plan)
    if p.check is not None:
        problems = p.check(exe(*args))
        row.correct, row.problems = not problems, "; ".join(problems)
    stats = exe.memory_stats
    row.total_bytes, row.peak_bytes = stats.total, stats.peak
    runners = {"ours": ours_runner(exe, args, p.donates)}
    if use_xla:
        xla = xla_cpu.compile_hlo(p.text)
        runners["xla"] = xla.runner(args, donates=p.donates)
        row.xla_compile_s, row.xla_total_bytes = xla.compile_seconds, xla.total_bytes
        row.xla_source = "measured"
    elif p.xla_index:
        row.xla_run_s = p.xla_index["run_median_s"]
        row.xla_compile_s = p.xla_index["compile_s"]
        row.xla_total_bytes = memory.xla_total(p.xla_index["memory"])
        row.xla_source = "index"
    base = baseline(runtime.parse(p.text))
    if base is not None:
        runners["numpy"] = numpy_runner(base.run, args)
        row.flops = base.flops if base.kind == "dot" else 0
    times = interleaved_times(runners, runs, warmup)
    row.run_s, row.run_best_s = statistics.median(times["ours"]), min(times["ours"])
    if "xla" in times:
        row.xla_run_s, row.xla_run_best_s = statistics.median(times["xla"]), min(times["xla"])
    row.numpy_s = statistics.median(times["numpy"]) if "numpy" in times else math.nan
    return row


def corpus_compile(use_xla: bool) -> list[dict]:
    """Warm compile of every corpus NAME.hlo (all in one fresh process) against XLA's."""
    index = json.loads((CORPUS / "index.json").read_text())
    files = [str(CORPUS / e["files"]["hlo"]) for e in index]
    cold, warm = compile_times.measure(files, per_process=False)
    out = []
    for e, f in zip(index, files):
        xla_s, source = e["xla"]["compile_s"], "index"
        if use_xla:
            xla_s, source = xla_cpu.compile_hlo(Path(f).read_text()).compile_seconds, "measured"
        out.append({"name": e["name"], "cold_s": cold[f], "warm_s": warm[f], "xla_s": xla_s,
                    "xla_source": source, "ratio": warm[f] / xla_s})
    return out


def print_programs(rows: list[Row]) -> None:
    print(f"\n{'program':28} {'ours ms':>17} {'XLA ms':>17} {'ratio':>6} {'median':>6} "
          f"{'numpy ms':>9} {'GFLOP/s':>8} {'cold s':>7} {'warm s':>7} {'XLA c s':>7} "
          f"{'mem ratio':>9} {'kern':>4}  ok")
    for r in rows:
        gflops = f"{r.flops / r.run_s / 1e9:8.2f}" if r.flops else " " * 8
        print(f"{r.name:28} {r.run_best_s * 1e3:8.3f} ({r.run_s * 1e3:6.3f}) "
              f"{r.xla_run_best_s * 1e3:8.3f} ({r.xla_run_s * 1e3:6.3f}) {r.run_ratio:6.2f} "
              f"{r.median_ratio:6.2f} {r.numpy_s * 1e3:9.3f} {gflops} {r.compile_cold_s:7.3f} "
              f"{r.compile_warm_s:7.3f} "
              f"{r.xla_compile_s:7.3f} {r.memory_ratio:9.3f} {r.kernels:4d}  "
              f"{'yes' if r.correct else ('-' if r.correct is None else 'NO: ' + r.problems)}")


def print_models(rows: list[Row], runs: int) -> None:
    print(f"\nwhole models, best (median) of {runs} interleaved runs; compile in this process "
          "(PoCL kernel cache as found):")
    print(f"{'model':28} {'ours ms':>17} {'XLA ms':>17} {'best ratio':>10} {'compile s':>9} "
          f"{'XLA c s':>7} {'bytes ours':>13} {'bytes XLA':>13} {'mem':>5} {'launch':>6}  ok")
    for r in rows:
        print(f"{r.name:28} {r.run_best_s * 1e3:8.1f} ({r.run_s * 1e3:6.1f}) "
              f"{r.xla_run_best_s * 1e3:8.1f} ({r.xla_run_s * 1e3:6.1f}) "
              f"{r.run_ratio:10.2f} {r.compile_s:9.2f} {r.xla_compile_s:7.2f} "
              f"{r.total_bytes:13,} {r.xla_total_bytes:13,} {r.memory_ratio:5.2f} {r.launches:6d}  "
              f"{'yes' if r.correct else ('-' if r.correct is None else 'NO: ' + r.problems)}")


def models_markdown(rows: list[Row], runs: int) -> str:
    lines = [f"Whole models, best (median) of {runs} interleaved runs; our compile in the "
             "benchmark process (PoCL kernel cache as found):", "",
             "| model | ours | XLA CPU | ours/XLA (best) | compile ours / XLA | "
             "device bytes ours / XLA | kernel launches |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.name} | {r.run_best_s * 1e3:.1f} ({r.run_s * 1e3:.1f}) ms | "
                     f"{r.xla_run_best_s * 1e3:.1f} ({r.xla_run_s * 1e3:.1f}) ms | "
                     f"{r.run_ratio:.2f}x | {r.compile_s:.1f} / "
                     f"{r.xla_compile_s:.1f} s | {r.total_bytes:,} / {r.xla_total_bytes:,} "
                     f"({r.memory_ratio:.2f}x) | {r.launches} |")
    return "\n".join(lines)


def targets(rows: list[Row], corpus: list[dict] | None, mem: dict | None,
            over: dict | None) -> list[dict]:
    out = []

    def add(name: str, value: float, target: float, at_most: bool = True, note: str = "") -> None:
        met = value <= target if at_most else value >= target
        out.append({"target": name, "value": value, "limit": target,
                    "met": bool(met) if value == value else None, "note": note})

    corpus_rows = [r for r in rows if r.xla_source != "none"]
    add("run time, geomean ours/XLA over bench programs", geomean(r.run_ratio for r in corpus_rows),
        TARGETS["run_geomean"],
        note=f"medians' geomean {geomean(r.median_ratio for r in corpus_rows):.3f}")
    for r in corpus_rows:
        if "ew_" in r.name or "layernorm" in r.name:
            add(f"run time ours/XLA, {r.name}", r.run_ratio, TARGETS["run_elementwise_layernorm"])
    for r in rows:
        if r.flops and r.numpy_s == r.numpy_s:
            add(f"dot GFLOP/s ours/numpy, {r.name}", r.numpy_s / r.run_s, TARGETS["dot_vs_numpy"],
                at_most=False)
    if mem is not None:
        add("memory, geomean ours/XLA over the corpus (NAME.hlo)", mem["total_vs_xla_hlo"],
            TARGETS["memory_geomean"])
        add("temp arena / liveness lower bound, geomean", mem["packing_geomean"],
            TARGETS["arena_vs_bound"], note=f"worst {mem['packing_max']:.4f}")
    if corpus is not None:
        worst = max(corpus, key=lambda c: c["ratio"])
        over_2x = sum(c["ratio"] > TARGETS["warm_compile_vs_xla"] for c in corpus)
        add("warm compile ours/XLA, worst corpus module", worst["ratio"],
            TARGETS["warm_compile_vs_xla"],
            note=f"{worst['name']}; geomean {geomean(c['ratio'] for c in corpus):.3f}; "
                 f"{over_2x} of {len(corpus)} over 2x")
    if over is not None:
        add("increment re-run overhead, device-resident, donated (us)", over["donated_us"],
            TARGETS["overhead_us"], note=f"not donated {over['not_donated_us']:.1f} us")
    return out


def markdown(rows: list[Row], checks: list[dict], device: str, xla_source: str) -> str:
    lines = [f"Measured on {device}; XLA: {xla_source}.", "",
             "| program | ours, best (median) | XLA CPU | ours/XLA, best (median) | numpy | "
             "compile cold / warm | "
             "XLA compile | memory ours / XLA | kernels |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        npy = f"{r.numpy_s * 1e3:.2f} ms" if r.numpy_s == r.numpy_s else "-"
        if r.flops:
            npy += f" ({r.flops / r.numpy_s / 1e9:.0f} vs {r.flops / r.run_s / 1e9:.1f} GFLOP/s)"
        lines.append(f"| {r.name} | {r.run_best_s * 1e3:.2f} ({r.run_s * 1e3:.2f}) ms | "
                     f"{r.xla_run_best_s * 1e3:.2f} ({r.xla_run_s * 1e3:.2f}) ms | "
                     f"{r.run_ratio:.2f}x ({r.median_ratio:.2f}x) | {npy} | "
                     f"{r.compile_cold_s:.2f} / "
                     f"{r.compile_warm_s:.3f} s | {r.xla_compile_s:.3f} s | "
                     f"{r.total_bytes:,} / {r.xla_total_bytes:,} B | {r.kernels} |")
    lines += ["", "| target | value | limit | met |", "|---|---|---|---|"]
    for c in checks:
        met = {True: "yes", False: "**no**", None: "-"}[c["met"]]
        note = f" ({c['note']})" if c["note"] else ""
        lines.append(f"| {c['target']}{note} | {c['value']:.3f} | {c['limit']} | {met} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="more HLO modules to benchmark")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-xla", action="store_true", help="use the index's XLA figures")
    parser.add_argument("--no-compile", action="store_true", help="skip compile-time runs")
    parser.add_argument("--no-corpus", action="store_true",
                        help="skip the corpus-wide compile, memory and overhead figures")
    parser.add_argument("--no-models", action="store_true",
                        help="skip the shared folder's whole models")
    parser.add_argument("--models-only", action="store_true",
                        help="only the whole models (no bench programs, no corpus figures)")
    parser.add_argument("--model-runs", type=int, default=5)
    parser.add_argument("--out", default=str(REPO / "bench-results" / "results.json"))
    parser.add_argument("--device", action="append", metavar="SPEC",
                        help="measure on this device (repeatable; 'all-cpu': every CPU device)")
    args = parser.parse_args()
    use_xla = not args.no_xla and xla_cpu.available()
    xla_source = "jaxlib " + _jax_version() + ", measured in this run" if use_xla else \
        "the corpus index's figures (jax not installed)"
    targets_ = _devices(args.device)
    files = [file_program(Path(f)) for f in args.files]
    bench = [] if args.models_only else \
        corpus_bench_programs(CORPUS) + [p for p in files if p.check is None]
    models = ([] if args.no_models else model_bench_programs()) + \
        [p for p in files if p.check is not None]
    model_rows = []
    for p in models:
        print(f"running model {p.name} on {targets_[0]} ...", flush=True)
        model_rows.append(measure_program(p, args.model_runs, use_xla, targets_[0], warmup=1))
    per_device: dict[str, list[Row]] = {}
    for dev in targets_:
        print(f"device {dev.spec}: {dev} ({dev.platform_version})", flush=True)
        per_device[str(dev)] = _measure_on(dev, bench, args, use_xla)
    device, rows = next(iter(per_device.items()))
    if targets_[0] is not runtime.get_device():
        os.environ["HLO_DEVICE"] = targets_[0].spec
    corpus = mem = over = None
    if not args.no_corpus and not args.models_only:
        print("corpus-wide memory, compile times and run overhead ...", flush=True)
        mem = memory.summary(memory.corpus_memory(CORPUS))
        if not args.no_compile:
            corpus = corpus_compile(use_xla)
        over = overhead.measure((CORPUS / "increment.hlo").read_text())
    for name, device_rows in per_device.items():
        if device_rows:
            print(f"\ndevice: {name}; XLA: {xla_source}; best (median) of {args.runs} "
                  f"interleaved runs")
            print_programs(device_rows)
    if len(per_device) > 1 and rows:
        print("\nrun time ours/XLA per device:\n")
        print(side_by_side(per_device))
    if model_rows:
        print(f"\ndevice: {device}; XLA: {xla_source}")
        print_models(model_rows, args.model_runs)
    checks = targets(rows, corpus, mem, over) if rows else []
    print("\ntargets:")
    for c in checks:
        met = {True: "met", False: "NOT MET", None: "-"}[c["met"]]
        note = f"  ({c['note']})" if c["note"] else ""
        print(f"  {c['target']:62} {c['value']:9.3f}  limit {c['limit']:<6} {met}{note}")
    parts = [markdown(rows, checks, device, xla_source)] if rows else \
        [f"Measured on {device}; XLA: {xla_source}."]
    if model_rows:
        parts.append(models_markdown(model_rows, args.model_runs))
    table = "\n\n".join(parts)
    print("\nMarkdown for docs/performance.md:\n")
    print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "device": device, "xla": xla_source, "runs": args.runs,
        "programs": [dict(asdict(r), run_ratio=r.run_ratio, memory_ratio=r.memory_ratio)
                     for r in rows],
        "models": [dict(asdict(r), run_ratio=r.run_ratio, memory_ratio=r.memory_ratio)
                   for r in model_rows], "model_runs": args.model_runs,
        "per_device": {name: [dict(asdict(r), run_ratio=r.run_ratio) for r in device_rows]
                       for name, device_rows in per_device.items()},
        "corpus_compile": corpus, "memory": mem, "overhead": over, "targets": checks,
        "markdown": table}, indent=1, default=_json_number))
    print(f"\nwrote {out}")


def _devices(specs: list[str] | None) -> list:
    if not specs:
        return [runtime.get_device()]
    found = []
    for spec in specs:
        chosen = ([d for d in runtime.devices() if d.kind == "cpu"] if spec == "all-cpu"
                  else [runtime.get_device(spec)])
        found += [d for d in chosen if d not in found]
    return found


def _measure_on(dev, bench: list[BenchProgram], args, use_xla: bool) -> list[Row]:
    rows = []
    for p in bench:
        print(f"running {p.name} ...", flush=True)
        rows.append(measure_program(p, args.runs, use_xla, dev))
    if not args.no_compile:
        print("compiling in fresh processes (cold, then warm PoCL cache) ...", flush=True)
        previous = os.environ.get("HLO_DEVICE", "")
        os.environ["HLO_DEVICE"] = dev.spec
        try:
            cold, warm = compile_times.measure([str(p.path) for p in bench])
        finally:
            os.environ["HLO_DEVICE"] = previous
        for row, p in zip(rows, bench):
            row.compile_cold_s, row.compile_warm_s = cold[str(p.path)], warm[str(p.path)]
    return rows


def side_by_side(per_device: dict[str, list[Row]]) -> str:
    """A Markdown table: one column of ours/XLA run-time ratios per device, geomean last."""
    names = list(per_device)
    lines = ["| program | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for k, row in enumerate(next(iter(per_device.values()))):
        cells = []
        for name in names:
            r = per_device[name][k]
            ok = "" if r.correct in (True, None) else " (WRONG)"
            cells.append(f"{r.run_best_s * 1e3:.2f} ms = {r.run_ratio:.2f}x{ok}")
        lines.append(f"| {row.name} | " + " | ".join(cells) + " |")
    lines.append("| geomean vs XLA | " + " | ".join(
        f"{geomean(r.run_ratio for r in per_device[name]):.2f}x" for name in names) + " |")
    # XLA is re-measured beside each device, and a shared machine's load moves it; the devices'
    # own times against the first device's are the steadier comparison
    first = per_device[names[0]]
    lines.append(f"| geomean run time vs {names[0]} | " + " | ".join(
        f"{geomean(r.run_best_s / f.run_best_s for r, f in zip(per_device[name], first)):.2f}x"
        for name in names) + " |")
    return "\n".join(lines)


def _json_number(value):
    return None if isinstance(value, float) and value != value else str(value)


def _jax_version() -> str:
    import jax
    return jax.__version__


if __name__ == "__main__":
    main()
