"""Where a whole model's compile time goes: analysis, cold compile by stage, warm compile.

For each module, every measurement runs in a fresh process against a new, empty cache
directory (``HLO_MAGIC_CACHE``; PoCL's kernel cache and the program binaries live under it):

* ``analyze``: ``runtime.analyze`` in a process where pyopencl cannot even be imported;
* cold: ``runtime.compile`` with empty caches, split by ``exe.compile_times`` (parse, verify,
  passes, assignment, codegen, opencl-build = clBuildProgram, warm-up = the first launches,
  where PoCL compiles each kernel variant, on all cores; binary-save = handing the binary to
  the background saver), plus the kernel and variant counts;
* warm: the best of three fresh processes once the background saver has written the binary
  (its wall and CPU seconds).

Cold compiles also report CPU seconds (this process plus the build workers it waited for):
on a shared machine the wall-clock seconds mostly say how busy the other jobs were, while the
CPU seconds are about what an idle core would take, and the kernel count, compiled variants
and OpenCL C source bytes are exact.

Importing the compiler and finding the device are not timed (XLA's figures start from a live
client too). XLA's compile times come from the models' ``index.json`` (jaxlib on the same
2-core machine) when ``--index`` is given. Nothing is asserted: the machine is shared.

    python benchmarks/compile_breakdown.py ../shared/models/*_{forward,step}.hlo \\
        --index ../shared/models/index.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAGES = ("parse", "verify", "passes", "assignment", "other", "codegen", "opencl-build",
          "warm-up", "binary-save")


def child_analyze(path: str) -> dict:
    sys.modules["pyopencl"] = None                      # type: ignore[assignment]
    import runtime
    from runtime.buffers import assignment  # noqa: F401
    from runtime.hlo import parser, verifier  # noqa: F401
    from runtime import pipeline  # noqa: F401
    text = Path(path).read_text()
    start = time.perf_counter()
    analysis = runtime.analyze(text)
    return {"seconds": time.perf_counter() - start, "times": analysis.times}


def child_compile(path: str) -> dict:
    import runtime
    from runtime.execution import kernel_builds
    from runtime.opencl import binary_cache
    from runtime.buffers import assignment  # noqa: F401
    from runtime.codegen import families, lower  # noqa: F401
    from runtime.hlo import parser, verifier  # noqa: F401
    from runtime import pipeline  # noqa: F401
    device = runtime.get_device()
    text = Path(path).read_text()
    start, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
    exe = runtime.compile(text)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu + _children_cpu() - children
    program = exe.program
    variants = kernel_builds.warm_up_variants(device, program)
    binary = binary_cache.binary_path(device, program.source,
                                      (*device.build_options, *program.options))
    return {"seconds": seconds, "cpu": cpu, "times": exe.compile_times,
            "kernels": len(program.kernel_names), "source_bytes": len(program.source),
            "variants": len(kernel_builds.compiled_variants(device, variants)),
            "binary": str(binary) if binary else None}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_child(mode: str, path: str, cache: Path) -> dict:
    env = dict(os.environ, HLO_MAGIC_CACHE=str(cache), PYTHONPATH=str(REPO))
    env.pop("POCL_CACHE_DIR", None)
    done = subprocess.run([sys.executable, __file__, f"--child-{mode}", path], env=env,
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(path: str, warm_repeats: int = 3, saver_wait_s: float = 900) -> dict:
    with tempfile.TemporaryDirectory(prefix="hlo-bench-compile-") as tmp:
        analysis = _run_child("analyze", path, Path(tmp) / "analyze")
        cache = Path(tmp) / "cache"
        cold = _run_child("compile", path, cache)
        waited = time.perf_counter()
        while cold["binary"] and not Path(cold["binary"]).is_file() \
                and time.perf_counter() - waited < saver_wait_s:
            time.sleep(0.5)
        warm = min((_run_child("compile", path, cache) for _ in range(warm_repeats)),
                   key=lambda r: r["seconds"])
    return {"analyze": analysis["seconds"], "cold": cold["seconds"], "cold_cpu": cold["cpu"],
            "stages": cold["times"], "kernels": cold["kernels"], "variants": cold["variants"],
            "source_bytes": cold["source_bytes"], "warm": warm["seconds"], "warm_cpu": warm["cpu"],
            "load": os.getloadavg()}


def xla_compile_seconds(index: Path | None) -> dict[str, float]:
    if index is None:
        return {}
    out = {}
    for line in index.read_text().splitlines():
        line = line.strip().rstrip(",")
        if line.startswith("{"):
            entry = json.loads(line)
            out[entry["name"]] = entry["xla"]["compile_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--index", type=Path, default=None, help="the models' index.json")
    parser.add_argument("--child-analyze", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-compile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_analyze or args.child_compile:
        result = (child_analyze if args.child_analyze else child_compile)(args.files[0])
        print(json.dumps(result))
        return
    xla = xla_compile_seconds(args.index)
    results = {}
    for f in args.files:
        name = Path(f).name.removesuffix(".hlo")
        r = results[name] = measure(f)
        ref = xla.get(name)
        ratio = (lambda s: f" ({s / ref:.1f}x XLA)") if ref else (lambda s: "")
        stages = ", ".join(f"{k} {r['stages'][k]:.2f}" for k in STAGES if k in r["stages"])
        print(f"{name}: XLA {ref if ref else '-'} s; analyze {r['analyze']:.2f} s"
              f"{ratio(r['analyze'])}; cold {r['cold']:.2f} s{ratio(r['cold'])}, CPU "
              f"{r['cold_cpu']:.2f} s{ratio(r['cold_cpu'])} [{stages}; {r['kernels']} kernels, "
              f"{r['variants']} variants, {r['source_bytes']:,} source bytes]; warm "
              f"{r['warm']:.2f} s{ratio(r['warm'])}, CPU {r['warm_cpu']:.2f} s; load average "
              f"{', '.join(f'{x:.1f}' for x in r['load'])}", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
