"""Regenerate ``data/complex/``: JAX programs with complex numbers and FFTs, and XLA CPU's
outputs for them (needs jax; the tests only read the files).

Each program is written as ``NAME.hlo`` (``jax.jit(f, donate_argnums=...).lower(...)
.as_text("hlo")``, JAX's HLO before XLA's passes, which is what users paste), as
``NAME.opt.hlo`` after XLA's passes (its fusions hold complex values) where XLA prints every
constant, and ``NAME.npz``
(inputs ``arg_i`` and XLA's outputs ``out_i``), seeded from the name. Shapes are small: the
files are checked in. Run from the repository root:
``python tests/passes/make_complex_programs.py``.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

OUT = Path(__file__).parent / "data" / "complex"
rng = np.random.default_rng(0)      # reseeded per program by ``write``


def normal(shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def cx_elementwise():
    """Complex arithmetic from f32 parts, with equal entries, zeros and imaginary values."""
    s = (16, 33)
    ar, ai, br, bi = (normal(s) for _ in range(4))
    br[::3], bi[::3] = ar[::3], ai[::3]
    bi[1::5] = -ai[1::5]
    br[2::7], bi[2::7] = 0.0, 0.0
    ar[4::11, ::2] = 0.0

    def f(ar, ai, br, bi):
        a, b = lax.complex(ar, ai), lax.complex(br, bi)
        nonzero = b + (b == 0) * jnp.complex64(1 + 0.5j)
        mag = jnp.abs(a)
        return (a + b, a - b, a * b, a / nonzero, -a, jnp.conj(a), mag, jnp.angle(a),
                jnp.real(a * b), jnp.imag(a * b), jnp.exp(a * 0.5), jnp.log(a + 3.0),
                jnp.sqrt(a), a ** 2, b ** 3, a == b, a != b, jnp.where(a == b, a * 1j, b),
                jnp.where(mag > 1.0, a, jnp.conj(a) * 2.0))
    return f, (ar, ai, br, bi), ()


def cx_transcendental():
    """Complex functions HLO keeps as complex ops: tan, tanh, expm1, log1p, power, sign,
    rsqrt, reciprocal, and a cumulative sum (reduce-window)."""
    s = (8, 16)
    ar, ai, br, bi = (normal(s, 0.7) for _ in range(4))

    def f(ar, ai, br, bi):
        a, b = lax.complex(ar, ai), lax.complex(br, bi)
        a1 = a + 1.5
        return (jnp.sin(a), jnp.cos(a), jnp.tan(a), jnp.tanh(a), jnp.log1p(a * 0.3),
                jnp.expm1(a), jnp.power(a1, b * 0.5), jnp.power(a1, 2.5), jnp.sign(a),
                1.0 / a1, lax.rsqrt(a1), jnp.isfinite(a / b), jnp.cumsum(a, axis=1))
    return f, (ar, ai, br, bi), ()


def cx_reduce_dot():
    """Sums, a product, complex matmuls (batched too), vdot, complex x real."""
    a = (normal((16, 24)) + 1j * normal((16, 24))).astype(np.complex64)
    b = (normal((24, 12)) + 1j * normal((24, 12))).astype(np.complex64)
    er, ei, fr, fi = normal((3, 8, 10)), normal((3, 8, 10)), normal((3, 10, 4)), normal((3, 10, 4))
    r = normal((24, 8))

    def f(a, b, er, ei, fr, fi, r):
        e, g = lax.complex(er, ei), lax.complex(fr, fi)
        return (jnp.sum(a, axis=0), jnp.mean(a, axis=1), jnp.sum(e), a @ b,
                jnp.einsum("bij,bjk->bik", e, g), jnp.vdot(a[:, :12].reshape(-1), b[:16].reshape(-1)),
                a @ r, jnp.prod(a[:4, :8] * 0.5, axis=1),
                jnp.concatenate([a[:, :8], jnp.transpose(b)[:, :8]], axis=0))
    return f, (a, b, er, ei, fr, fi, r), ()


def fft_1d():
    """fft, ifft, rfft and irfft of lengths 8, 12, 100, 1024 and 1031 (a prime), an odd
    irfft, a truncated fft and a padded rfft."""
    lengths = (8, 12, 100, 1024, 1031)
    xs = [normal((2, n)) for n in lengths]
    ys = [normal((2, n)) for n in lengths]
    z = normal((2, 8))

    def f(*args):
        xs, ys, z = args[:5], args[5:10], args[10]
        out = []
        for x, y in zip(xs, ys):
            c = lax.complex(x, y)
            spectrum = jnp.fft.fft(c)
            out += [spectrum, jnp.fft.ifft(spectrum * 0.5 + c), jnp.fft.rfft(x),
                    jnp.fft.irfft(jnp.fft.rfft(y) * (1 + 0.1j))]
        out += [jnp.fft.irfft(lax.complex(z, z[:, ::-1]), n=15),
                jnp.fft.fft(lax.complex(xs[2], ys[2]), n=64), jnp.fft.rfft(xs[1], n=20)]
        return tuple(out)
    return f, (*xs, *ys, z), ()


def fft_nd():
    """2-D and 3-D transforms of all four kinds, and an rfftn over 4 axes (JAX splits it)."""
    xr, xi = normal((2, 16, 24)), normal((2, 16, 24))
    y = normal((2, 4, 6, 8))
    w = normal((2, 8, 8, 8))

    def f(xr, xi, y, w):
        x = lax.complex(xr, xi)
        f2 = jnp.fft.fft2(x)
        fn = jnp.fft.fftn(y.astype(jnp.complex64), axes=(1, 2, 3))
        rn = jnp.fft.rfftn(w, axes=(1, 2, 3))
        return (f2, jnp.fft.ifft2(f2 * jnp.conj(f2) / 384.0), jnp.fft.rfft2(xr),
                jnp.fft.irfft2(jnp.fft.rfft2(xr) * 0.5, s=(16, 24)), fn,
                jnp.fft.ifftn(fn, axes=(1, 2, 3)), rn,
                jnp.fft.irfftn(rn * 0.5, s=(8, 8, 8), axes=(1, 2, 3)), jnp.fft.rfftn(w))
    return f, (xr, xi, y, w), ()


def spectral_conv_fno():
    """A Fourier neural operator train step: rfft over the grid, complex weights on the
    lowest modes, irfft, a pointwise path, GELU, MSE, gradients and SGD (donated)."""
    b, g, c, m = 2, 32, 8, 6
    p = {f"l{i}": {"w_re": normal((m, c, c), 1 / c), "w_im": normal((m, c, c), 1 / c),
                   "lin": normal((c, c), 1 / np.sqrt(c)), "b": np.zeros(c, np.float32)}
         for i in range(2)}
    p["out"] = normal((c, c), 1 / np.sqrt(c))
    x, y = normal((b, g, c)), normal((b, g, c), 0.5)

    def layer(q, h):
        w = lax.complex(q["w_re"], q["w_im"])
        modes = jnp.einsum("bmi,mio->bmo", jnp.fft.rfft(h, axis=1)[:, :m], w)
        modes = jnp.pad(modes, ((0, 0), (0, g // 2 + 1 - m), (0, 0)))
        return jax.nn.gelu(jnp.fft.irfft(modes, n=g, axis=1) + h @ q["lin"] + q["b"])

    def loss(p, x, y):
        return jnp.mean((layer(p["l1"], layer(p["l0"], x)) @ p["out"] - y) ** 2)

    def step(p, x, y):
        value, grads = jax.value_and_grad(loss)(p, x, y)
        return value, jax.tree.map(lambda p, g: p - 0.1 * g, p, grads)
    return step, (p, x, y), (0,)


def cx_while():
    """A loop carrying a complex state (z = z^2 / 2 + c, clipped to |z| <= 2)."""
    n = 32
    cr = rng.uniform(-2.0, 1.0, n).astype(np.float32)
    ci = rng.uniform(-1.5, 1.5, n).astype(np.float32)

    def f(cr, ci):
        c = lax.complex(cr, ci)

        def body(i, s):
            z, escaped = s
            z = z * z * 0.5 + c
            a = jnp.abs(z)
            out = a > 2.0
            return jnp.where(out, 2.0 * z / jnp.where(out, a, 1.0), z), escaped | out
        z, escaped = lax.fori_loop(0, 8, body, (jnp.zeros(n, jnp.complex64), jnp.zeros(n, bool)))
        return z, jnp.sum(escaped.astype(jnp.int32))
    return f, (cr, ci), ()


PROGRAMS: dict[str, Callable] = {f.__name__: f for f in (
    cx_elementwise, cx_transcendental, cx_reduce_dot, fft_1d, fft_nd, spectral_conv_fno,
    cx_while)}


def write(name: str) -> None:
    global rng
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    fn, args, donate = PROGRAMS[name]()
    text = jax.jit(fn, donate_argnums=donate).lower(*args).as_text("hlo")
    outputs = jax.tree.leaves(jax.jit(fn)(*args))
    (OUT / f"{name}.hlo").write_text(text)
    optimised = jax.jit(fn, donate_argnums=donate).lower(*args).compile().as_text()
    if "{...}" not in optimised:        # XLA's print elides large constants
        (OUT / f"{name}.opt.hlo").write_text(optimised)
    np.savez_compressed(OUT / f"{name}.npz",
                        **{f"arg_{i}": np.asarray(a) for i, a in enumerate(jax.tree.leaves(args))},
                        **{f"out_{i}": np.asarray(a) for i, a in enumerate(outputs)})


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in PROGRAMS:
        write(name)


if __name__ == "__main__":
    main()
