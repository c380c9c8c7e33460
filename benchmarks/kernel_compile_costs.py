"""What PoCL's compilation of one module costs, kernel variant by kernel variant.

In a fresh process with an empty PoCL cache: generate the module's program, build it once
(clBuildProgram: clang's front end over the whole source), then launch each compiled variant
(kernel, local size, small grid or not) once with no work, which is where PoCL compiles it,
and record the process CPU seconds and wall seconds of each. CPU seconds are the figure to
compare on a shared machine; wall seconds say how busy it was. Also measured: clBuildProgram
of the first kernel alone, the fixed cost a program per kernel would pay once per kernel.

Prints the totals, seconds by the instruction kind the kernels were generated for, the
largest variants with their source bytes, and how CPU seconds follow source bytes (Pearson r).
Nothing is asserted (timings on shared machines are noisy).

    python benchmarks/kernel_compile_costs.py ../shared/models/gpt2_small_forward.hlo [--top 15]
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def _measure(path: str, top: int) -> None:
    os.environ["POCL_CACHE_DIR"] = tempfile.mkdtemp(prefix="hlo-bench-kernels-")
    sys.path.insert(0, str(REPO))
    import runtime
    from runtime.execution import kernel_builds
    from runtime.codegen.lower import lower
    from runtime.execution.build_workers import launch_zero_work
    from runtime.opencl.device import opencl
    from runtime.opencl.quiet import silenced_fds
    analysis = runtime.analyze(Path(path).read_text())
    program = lower(analysis.buffer_assignment, analysis.target, analysis.alignment)
    dev = runtime.get_device()
    cl = opencl()
    options = [*dev.build_options, *program.options]
    scratch = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, 1)

    def timed(action):
        wall, cpu = time.perf_counter(), time.process_time()
        with silenced_fds():
            result = action()
        return result, time.process_time() - cpu, time.perf_counter() - wall

    built, build_cpu, build_wall = timed(
        lambda: cl.Program(dev.context, program.source).build(options=options))
    first = program.kernel_names[0]
    prelude = program.source[:program.source.index(program.kernel_texts[first])]
    _, one_cpu, one_wall = timed(lambda: cl.Program(
        dev.context, prelude + program.kernel_texts[first] + "\n// alone\n").build(options=options))
    variants = kernel_builds.compiled_variants(dev, kernel_builds.warm_up_variants(dev, program))
    kernels: dict[str, object] = {}
    rows = []
    for v in variants:
        kernel = kernels.setdefault(v.kernel, cl.Kernel(built, v.kernel))
        _, cpu, wall = timed(lambda: launch_zero_work(cl, dev.queue, kernel, scratch, v))
        kind = program.kernel_instructions[v.kernel][0].rsplit(".", 1)[0]
        rows.append((cpu, wall, len(program.kernel_texts[v.kernel]), v.kernel, v.local_size, kind))
    cpu_total = sum(r[0] for r in rows)
    print(f"{Path(path).name}: {len(program.kernel_names)} kernels, {len(rows)} compiled variants, "
          f"{len(program.source):,} source bytes; clBuildProgram CPU {build_cpu:.2f} s "
          f"(wall {build_wall:.2f}); variants CPU {cpu_total:.2f} s (wall "
          f"{sum(r[1] for r in rows):.2f}), {cpu_total / max(len(rows), 1):.3f} s each; "
          f"one kernel's program alone: CPU {one_cpu:.2f} s (wall {one_wall:.2f}); "
          f"load average {os.getloadavg()[0]:.1f}")
    by_kind: collections.Counter = collections.Counter()
    for r in rows:
        by_kind[r[5]] += r[0]
    print("CPU s by kind: " + ", ".join(f"{k} {s:.2f}" for k, s in by_kind.most_common()))
    if len(rows) > 2:
        r = np.corrcoef([row[2] for row in rows], [row[0] for row in rows])[0, 1]
        print(f"CPU s against source bytes: Pearson r {r:.2f}")
    for cpu, wall, size, name, local, _ in sorted(rows, reverse=True)[:top]:
        print(f"  {cpu:6.3f} s CPU {wall:6.3f} s wall {size:7,d} B  {name} local {local}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _measure(args.files[0], args.top)
        return
    for f in args.files:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        subprocess.run([sys.executable, __file__, "--child", "--top", str(args.top), f],
                       env=env, check=True)


if __name__ == "__main__":
    main()
