"""Small programs whose control flow depends on data, ours against XLA's CPU backend.

Written with JAX (``jax.jit(f).lower(...).as_text("hlo")``): a ``lax.cond`` and a
``lax.switch`` on data inside a ``scan``; a Newton iteration and a Collatz count in
``while_loop``s that run until their data says stop; ``jax.random`` in ``jit`` (threefry's
rounds: a counted loop whose state rotates through copies); a gamma sample (rejection loops
around counted ones). Their arithmetic is tiny, so what each measures is what a step costs
the runtime: launches, copies and reads of a predicate back to the host (every read drains
the device's queue). Ours and XLA's runs alternate, best of ``--runs``; each output is
checked against XLA's.

    python benchmarks/control_flow.py [--runs 30] [--only NAME]

Needs jax; see ``codegen/predication.py`` and ``codegen/copy_batching.py``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import runtime  # noqa: E402
import xla_cpu  # noqa: E402
from runtime.opencl.device import get_device  # noqa: E402

RNG = np.random.default_rng(11)


def cond_in_scan():
    xs = RNG.standard_normal((16, 8)).astype(np.float32)
    sel = RNG.integers(0, 3, 16).astype(np.int32)

    def f(xs, sel):
        def step(c, inp):
            x, s = inp
            c = lax.cond(jnp.sum(x) > 0, lambda c: c + x, lambda c: c * 0.5 - x, c)
            y = lax.switch(s, [jnp.sin, lambda v: v[::-1] * 2, jnp.cumsum], c)
            return c, y
        return lax.scan(step, jnp.ones(8), (xs, sel))
    return f, (xs, sel)


def newton_collatz():
    x = (np.abs(RNG.standard_normal(8)) + 1.0).astype(np.float32)

    def f(x, n):
        def close(c):
            return (jnp.max(jnp.abs(c[0] * c[0] - x)) > 1e-5) & (c[1] < 50)
        y, steps = lax.while_loop(close, lambda c: (0.5 * (c[0] + x / c[0]), c[1] + 1), (x, 0))

        def collatz(c):
            return jnp.where(c[0] % 2 == 0, c[0] // 2, 3 * c[0] + 1), c[1] + 1
        _, count = lax.while_loop(lambda c: c[0] != 1, collatz, (n, 0))
        return y, steps, count
    return f, (x, np.int32(97))


def random_in_jit():
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(42)))

    def f(key):
        k1, k2, k3 = jax.random.split(jax.random.wrap_key_data(key), 3)
        return (jax.random.uniform(k1, (64, 8)), jax.random.normal(k2, (32,)),
                jax.random.randint(k3, (50,), 0, 10), jax.random.bernoulli(k2, 0.3, (40,)))
    return f, (key,)


def gamma_sample():
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(7)))

    def f(key):
        return jax.random.gamma(jax.random.wrap_key_data(key), 2.0, (10,))
    return f, (key,)


PROGRAMS: dict[str, Callable] = {"cond_in_scan": cond_in_scan,
                                 "newton_collatz": newton_collatz,
                                 "random_in_jit": random_in_jit, "gamma_sample": gamma_sample}


def _leaves(out) -> list[np.ndarray]:
    return [np.asarray(a) for a in (out if isinstance(out, tuple) else (out,))]


def measure(name: str, runs: int) -> tuple[float, float]:
    fn, args = PROGRAMS[name]()
    text = jax.jit(fn).lower(*args).as_text("hlo")
    args = [np.asarray(a) for a in args]
    exe = runtime.compile(text)
    device_args = [runtime.device_put(a, exe.device) for a in args]

    def ours() -> float:
        start = time.perf_counter()
        out = exe.run(*device_args)
        for leaf in jax.tree.leaves(out):
            leaf.block_until_ready()
        return time.perf_counter() - start

    xla = xla_cpu.compile_hlo(text)
    want = [np.asarray(a) for a in xla.executable.execute([jax.device_put(a) for a in args])]
    for got, ref in zip(_leaves(exe(*args)), want):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6, err_msg=name)
    theirs = xla.runner(args)
    best = [math.inf, math.inf]
    for run in (ours, theirs):
        run()
    for _ in range(runs):
        for i, run in enumerate((ours, theirs)):
            best[i] = min(best[i], run())
    return best[0], best[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    print(f"device: {get_device(None)}; best of {args.runs} interleaved runs")
    print(f"  {'program':16s} {'ours ms':>9s} {'XLA ms':>9s} {'ours/XLA':>9s}")
    for name in PROGRAMS:
        if args.only in name:
            ours, theirs = measure(name, args.runs)
            print(f"  {name:16s} {1e3 * ours:9.3f} {1e3 * theirs:9.3f} {ours / theirs:8.2f}x",
                  flush=True)


if __name__ == "__main__":
    main()
