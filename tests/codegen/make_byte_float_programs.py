"""Regenerate ``data/byte_floats/``: JAX programs on 8-bit floats and XLA CPU's outputs for
them (needs jax; the tests only read the files).

Each program is ``NAME.hlo`` (JAX's HLO, before XLA's passes) and ``NAME.npz``: inputs
``arg_i`` and outputs ``out_i``, 8-bit and bf16 arrays as their raw bits with their ml_dtypes
names in ``dtypes``. Run from the repository root:
``python tests/codegen/make_byte_float_programs.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

OUT = Path(__file__).parent / "data" / "byte_floats"
FORMATS = (jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.float8_e4m3fnuz, jnp.float8_e5m2fnuz,
           jnp.float8_e4m3b11fnuz, jnp.float8_e4m3, jnp.float8_e3m4)


def arithmetic():
    """Arithmetic in each format (computed in f16 by XLA, rounded to the format), sums in
    XLA's tree order, dots with 8-bit and f32 results, converts, bitcasts, 8-bit inputs."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 40)).astype(np.float32)
    y = rng.standard_normal((16, 40)).astype(np.float32)
    z = rng.standard_normal((3, 40, 50)).astype(np.float32)
    w8 = (rng.standard_normal((8, 8)) * 4).astype(ml_dtypes.float8_e4m3fn)

    def f(x, y, z, w8):
        outs = []
        for t in FORMATS:
            a, b = (x * 3.0).astype(t), (y * 3.0).astype(t)
            outs += [a + b, a * b, jnp.maximum(a, b), a / (b + t(1)), jnp.sum(a, axis=1),
                     jnp.exp(a.astype(jnp.float32) * 0.1).astype(t), jnp.dot(a, b.T),
                     jnp.dot(a, b.T, preferred_element_type=jnp.float32),
                     a.astype(jnp.bfloat16), jax.lax.bitcast_convert_type(a, jnp.uint8)]
        c = (z * 2.0).astype(jnp.float8_e4m3fn)
        outs += [jnp.sum(c, axis=(1, 2)), jnp.sum(c[0, :33, 0]), jnp.max(c, axis=0),
                 jnp.sum(c.reshape(300, 20), axis=0), w8.astype(jnp.float32) * 2, w8 * w8]
        return tuple(outs)
    return f, (x, y, z, w8)


def quantized_matmul():
    """Per-tensor scaled e4m3 and e5m2 matmuls into f32 (an fp8 inference layer)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    w = (rng.standard_normal((128, 96)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((96, 32)) * 0.1).astype(np.float32)

    def q(t, dt, fmax):
        scale = jnp.max(jnp.abs(t)) / fmax
        return (t / scale).astype(dt), scale

    def f(x, w, w2):
        xq, sx = q(x, jnp.float8_e4m3fn, 448.0)
        wq, sw = q(w, jnp.float8_e4m3fn, 448.0)
        h = jax.nn.relu(jnp.dot(xq, wq, preferred_element_type=jnp.float32) * (sx * sw))
        hq, sh = q(h, jnp.float8_e5m2, 57344.0)
        w2q, sw2 = q(w2, jnp.float8_e5m2, 57344.0)
        out = jnp.dot(hq, w2q, preferred_element_type=jnp.float32) * (sh * sw2)
        return h, out, jnp.dot(xq, w.astype(jnp.float8_e5m2), preferred_element_type=jnp.float32)
    return f, (x, w, w2)


PROGRAMS: dict[str, Callable] = {"f8_arithmetic": arithmetic, "f8_quantized_matmul": quantized_matmul}


def _raw(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.uint8 if a.itemsize == 1 else np.uint16) if a.dtype.name in _ML else a


_ML = {"bfloat16"} | {np.dtype(t).name for t in FORMATS}


def write(name: str) -> None:
    fn, args = PROGRAMS[name]()
    text = jax.jit(fn).lower(*args).as_text("hlo")
    outputs = [np.asarray(o) for o in jax.jit(fn)(*args)]
    (OUT / f"{name}.hlo").write_text(text)
    arrays = [np.asarray(a) for a in args] + outputs
    np.savez_compressed(OUT / f"{name}.npz", dtypes=np.array([a.dtype.name for a in arrays]),
                        **{f"arg_{i}": _raw(a) for i, a in enumerate(args)},
                        **{f"out_{i}": _raw(o) for i, o in enumerate(outputs)})


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in PROGRAMS:
        write(name)


if __name__ == "__main__":
    main()
