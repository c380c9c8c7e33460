"""Small steps and loops: programs from real JAX libraries whose time is the runtime's per
launch and per loop iteration, ours against XLA's CPU backend, on JAX's text and on XLA's
optimised text.

The programs are ``tests/jax12/make_programs.py``'s (an Optax L-BFGS loop: while loops with a
line search inside; a Haiku LSTM; an Equinox GRU and LSTM scanned; a Diffrax neural ODE; ...).
Two steps, in two Pythons:

``write DIR`` runs under a Python with jax 0.12 and the libraries (not this project's): it
writes ``NAME.hlo`` (JAX's text), ``NAME.opt.hlo`` (XLA's optimised text), ``NAME.npz``
(inputs ``arg_i``, XLA's outputs ``out_j``) and ``xla_times.json`` (jax 0.12's best time of
the jitted function, ms)::

    /work/venv312/bin/python benchmarks/small_steps.py write /tmp/small-steps

``time DIR`` runs under this project's Python: both texts compiled by us, checked against
the written outputs, and timed interleaved with XLA (this Python's jaxlib compiling JAX's
text), best of ``--runs``::

    python benchmarks/small_steps.py time /tmp/small-steps [--runs 20] [--only lbfgs]

``DIR`` defaults to ``tests/jax12/data`` for ``time`` (the same programs, checked in).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

# the loop-heavy programs first: what this benchmark is for
NAMES = ("optax_lbfgs", "haiku_lstm", "eqx_gru_scan", "eqx_lstm_scan", "diffrax_neural_ode",
         "optax_chain", "eqx_mlp_adam")


def write(out: Path, names: list[str], runs: int) -> None:
    """The texts, inputs, outputs and jax 0.12's timings (needs jax 0.12 and the libraries)."""
    import jax
    import numpy as np
    from tests.jax12 import make_programs as mp
    mp.OUT = out
    out.mkdir(parents=True, exist_ok=True)
    times = {}
    for name in names:
        mp.write(name)
        fn, args = mp.PROGRAMS[name]()
        jitted = jax.jit(fn, keep_unused=True)
        jax.block_until_ready(jitted(*args))
        best = math.inf
        for _ in range(runs):
            start = time.perf_counter()
            jax.block_until_ready(jitted(*args))
            best = min(best, time.perf_counter() - start)
        times[name] = 1e3 * best
        print(f"{name:20s} XLA (jax {jax.__version__}) {times[name]:8.3f} ms", flush=True)
    (out / "xla_times.json").write_text(json.dumps(times, indent=1))
    del np


def _load(path: Path):
    import numpy as np
    data = np.load(path)

    def numbered(prefix: str) -> list:
        return [data[f"{prefix}{i}"] for i in range(sum(k.startswith(prefix) for k in data.files))]
    return numbered("arg_"), numbered("out_")


def measure(folder: Path, name: str, runs: int) -> tuple[float, float, float]:
    """Best times (s) of ours on JAX's text, ours on XLA's optimised text, and XLA."""
    import jax
    import runtime
    import xla_cpu
    from tests.corpus_data import flatten, output_differences
    args, want = _load(folder / f"{name}.npz")
    text = (folder / f"{name}.hlo").read_text()
    runners = []
    for kind in ("hlo", "opt.hlo"):
        exe = runtime.compile((folder / f"{name}.{kind}").read_text())
        problems = output_differences(flatten(exe(*args)), want, 1e-4, 1e-6)
        if problems:
            raise SystemExit(f"{name}.{kind} differs from XLA:\n" + "\n".join(problems))
        device_args = [runtime.device_put(a, exe.device) for a in args]

        def ours(exe=exe, device_args=device_args) -> float:
            start = time.perf_counter()
            for leaf in jax.tree.leaves(exe.run(*device_args)):
                leaf.block_until_ready()
            return time.perf_counter() - start
        runners.append(ours)
    runners.append(xla_cpu.compile_hlo(text).runner(args))
    best = [math.inf] * len(runners)
    for run in runners:
        run()
    for _ in range(runs):
        for i, run in enumerate(runners):
            best[i] = min(best[i], run())
    return best[0], best[1], best[2]


def time_all(folder: Path, only: str, runs: int) -> None:
    from runtime.opencl.device import get_device
    written = folder / "xla_times.json"
    jax12 = json.loads(written.read_text()) if written.is_file() else {}
    print(f"device: {get_device(None)}; best of {runs} interleaved runs")
    print(f"  {'program':20s} {'ours hlo':>9s} {'ours opt':>9s} {'XLA':>9s} {'XLA 0.12':>9s}"
          f" {'hlo/XLA':>8s} {'opt/XLA':>8s}")
    for name in NAMES:
        if only in name and (folder / f"{name}.npz").is_file():
            hlo, opt, xla = measure(folder, name, runs)
            other = f"{jax12[name]:9.3f}" if name in jax12 else f"{'-':>9s}"
            print(f"  {name:20s} {1e3 * hlo:9.3f} {1e3 * opt:9.3f} {1e3 * xla:9.3f} {other}"
                  f" {hlo / xla:7.2f}x {opt / xla:7.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("write", "time"))
    parser.add_argument("folder", nargs="?", type=Path, default=REPO / "tests/jax12/data")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    if args.step == "write":
        write(args.folder, [n for n in NAMES if args.only in n], args.runs)
    else:
        time_all(args.folder, args.only, args.runs)


if __name__ == "__main__":
    main()
