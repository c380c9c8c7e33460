"""Whole models beyond the shared models folder, written with JAX, for measuring generality:
a BERT-style encoder train step (exact GELU, padding mask, tied read-out, AdamW), a bf16 UNet
forward pass (group norm, SiLU, max pooling, nearest upsampling, skip concatenation), an LSTM
language model train step (``lax.scan``: a while loop), a MobileNet-style train step
(depthwise convolutions, batch norm, ReLU6) and a mixed-precision transformer block train step
(bf16 matmuls accumulating in f32, causal attention). Train steps donate their state.

Each program is written as ``NAME.hlo`` (``jax.jit(f).lower(...).as_text('hlo')``) and
``NAME.npz`` (inputs ``arg_i`` and XLA CPU's outputs ``out_i``, bf16 stored as its raw
``uint16`` bits, as in the shared folders) from a seeded generator. ``benchmarks/run.py``
takes the files, reads the inputs beside them and checks the outputs::

    python benchmarks/jax_models.py /tmp/jax-models [--only bert,lstm]
    python benchmarks/run.py --no-corpus --no-models /tmp/jax-models/*.hlo

Needs jax; nothing in the runtime or the tests reads these files.
"""

from __future__ import annotations

import argparse
import zlib
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

rng = np.random.default_rng(0)   # reseeded per model by ``write``


def normal(shape, scale=0.05, dtype=np.float32):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def layer_norm(x, s, b, eps=1e-5):
    m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * lax.rsqrt(v + eps) * s + b

def bert():
    """A BERT-like encoder train step (AdamW, exact GELU, padding mask).

    Each model returns (function, arguments, donated argument numbers)."""
    L, D, H, F, V, S, B = 4, 256, 4, 1024, 8192, 128, 8
    p = {"emb": normal((V, D)), "pos": normal((S, D)), "lnf_s": np.ones(D, np.float32), "lnf_b": np.zeros(D, np.float32)}
    for i in range(L):
        p.update({f"{i}_qkv": normal((D, 3*D)), f"{i}_o": normal((D, D)), f"{i}_ln1s": np.ones(D, np.float32),
                  f"{i}_ln1b": np.zeros(D, np.float32), f"{i}_w1": normal((D, F)), f"{i}_b1": np.zeros(F, np.float32),
                  f"{i}_w2": normal((F, D)), f"{i}_b2": np.zeros(D, np.float32), f"{i}_ln2s": np.ones(D, np.float32), f"{i}_ln2b": np.zeros(D, np.float32)})
    tokens = rng.integers(0, V, (B, S)).astype(np.int32)
    lengths = rng.integers(S//2, S+1, (B,)).astype(np.int32)
    targets = rng.integers(0, V, (B, S)).astype(np.int32)
    def loss(p, tokens, lengths, targets):
        x = p["emb"][tokens] + p["pos"]
        mask = jnp.arange(S)[None, :] < lengths[:, None]
        for i in range(L):
            qkv = x @ p[f"{i}_qkv"]
            q, k, v = jnp.split(qkv.reshape(B, S, 3, H, D//H), 3, axis=2)
            q, k, v = q[:, :, 0], k[:, :, 0], v[:, :, 0]
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D//H).astype(np.float32)
            s = jnp.where(mask[:, None, None, :], s, -1e9)
            a = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v).reshape(B, S, D)
            x = layer_norm(x + a @ p[f"{i}_o"], p[f"{i}_ln1s"], p[f"{i}_ln1b"])
            h = jax.nn.gelu(x @ p[f"{i}_w1"] + p[f"{i}_b1"], approximate=False)
            x = layer_norm(x + h @ p[f"{i}_w2"] + p[f"{i}_b2"], p[f"{i}_ln2s"], p[f"{i}_ln2b"])
        x = layer_norm(x, p["lnf_s"], p["lnf_b"])
        logits = x @ p["emb"].T
        lp = jax.nn.log_softmax(logits)
        nll = -jnp.take_along_axis(lp, targets[..., None], -1)[..., 0]
        return jnp.sum(nll * mask) / jnp.sum(mask)
    m = jax.tree.map(np.zeros_like, p); v = jax.tree.map(np.zeros_like, p)
    def step(p, m, v, tokens, lengths, targets):
        l, g = jax.value_and_grad(loss)(p, tokens, lengths, targets)
        m = jax.tree.map(lambda m, g: 0.9*m + 0.1*g, m, g)
        v = jax.tree.map(lambda v, g: 0.999*v + 0.001*g*g, v, g)
        p = jax.tree.map(lambda p, m, v: p - 1e-3*(m/(jnp.sqrt(v)+1e-8) + 0.01*p), p, m, v)
        return l, p, m, v
    return step, (p, m, v, tokens, lengths, targets), (0, 1, 2)

def unet():
    """A bf16 UNet forward pass (group norm, SiLU, nearest upsampling, skip concatenation)."""
    B, Hh, C = 2, 64, 32
    bf = jnp.bfloat16
    def conv_p(cin, cout, k=3):
        return normal((k, k, cin, cout), scale=1/np.sqrt(k*k*cin))
    chans = [C, 2*C, 4*C]
    p = {"in": conv_p(3, C)}
    cin = C
    for i, c in enumerate(chans):
        p[f"d{i}a"] = conv_p(cin, c); p[f"d{i}b"] = conv_p(c, c); cin = c
    p["mid"] = conv_p(cin, cin)
    for i, c in reversed(list(enumerate(chans))):
        p[f"u{i}a"] = conv_p(cin + c, c); p[f"u{i}b"] = conv_p(c, c); cin = c
    p["out"] = conv_p(cin, 3)
    p = {k: v.astype(jnp.bfloat16) for k, v in p.items()}
    x = normal((B, Hh, Hh, 3), 1.0).astype(jnp.bfloat16)
    t = normal((B, 4*C), 1.0).astype(jnp.bfloat16)
    def conv(x, w, stride=1):
        return lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    def gn(x, groups=8):
        b, h, w, c = x.shape
        xf = x.astype(jnp.float32).reshape(b, h, w, groups, c//groups)
        m = xf.mean((1, 2, 4), keepdims=True); v = xf.var((1, 2, 4), keepdims=True)
        return ((xf - m) * lax.rsqrt(v + 1e-5)).reshape(b, h, w, c).astype(bf)
    def block(x, wa, wb):
        h = jax.nn.silu(gn(conv(x, wa)))
        return jax.nn.silu(gn(conv(h, wb)))
    def f(p, x, t):
        h = conv(x, p["in"]); skips = []
        for i in range(3):
            h = block(h, p[f"d{i}a"], p[f"d{i}b"]); skips.append(h)
            h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = jax.nn.silu(conv(h, p["mid"]) + t[:, None, None, :h.shape[-1]])
        for i in reversed(range(3)):
            h = jnp.repeat(jnp.repeat(h, 2, 1), 2, 2)
            h = block(jnp.concatenate([h, skips[i]], -1), p[f"u{i}a"], p[f"u{i}b"])
        return conv(h, p["out"])
    return f, (p, x, t), ()

def lstm():
    """An LSTM language model train step through ``lax.scan``."""
    T, B, E, Hd, V = 48, 32, 128, 256, 1000
    p = {"emb": normal((V, E)), "wx": normal((E, 4*Hd)), "wh": normal((Hd, 4*Hd)), "b": np.zeros(4*Hd, np.float32),
         "out": normal((Hd, V)), "ob": np.zeros(V, np.float32)}
    tokens = rng.integers(0, V, (B, T)).astype(np.int32)
    targets = rng.integers(0, V, (B, T)).astype(np.int32)
    def loss(p, tokens, targets):
        xs = p["emb"][tokens].transpose(1, 0, 2)
        def cell(carry, x):
            h, c = carry
            z = x @ p["wx"] + h @ p["wh"] + p["b"]
            i, f, g, o = jnp.split(z, 4, -1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        _, hs = lax.scan(cell, (jnp.zeros((B, Hd)), jnp.zeros((B, Hd))), xs)
        logits = hs @ p["out"] + p["ob"]
        lp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(lp, targets.T[..., None], -1))
    def step(p, tokens, targets):
        l, g = jax.value_and_grad(loss)(p, tokens, targets)
        g = jax.tree.map(lambda g: jnp.clip(g, -1, 1), g)
        return l, jax.tree.map(lambda p, g: p - 0.1 * g, p, g)
    return step, (p, tokens, targets), (0,)

def mobilenet():
    """A MobileNet-style train step: depthwise convolutions, stride 2, batch norm, ReLU6."""
    B, Hh = 8, 32
    cfg = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1)]
    p = {"stem": normal((3, 3, 3, 32), 0.2)}
    for i, (ci, co, s) in enumerate(cfg):
        p[f"dw{i}"] = normal((3, 3, 1, ci), 0.2); p[f"pw{i}"] = normal((1, 1, ci, co), 1/np.sqrt(ci))
        p[f"g{i}"] = np.ones(co, np.float32); p[f"b{i}"] = np.zeros(co, np.float32)
    p["fc"] = normal((256, 10), 0.05)
    x = normal((B, Hh, Hh, 3), 1.0); y = rng.integers(0, 10, (B,)).astype(np.int32)
    dn = ("NHWC", "HWIO", "NHWC")
    def loss(p, x, y):
        h = jax.nn.relu6(lax.conv_general_dilated(x, p["stem"], (2, 2), "SAME", dimension_numbers=dn))
        for i, (ci, co, s) in enumerate(cfg):
            h = lax.conv_general_dilated(h, p[f"dw{i}"], (s, s), "SAME", dimension_numbers=dn, feature_group_count=ci)
            h = jax.nn.relu6(h)
            h = lax.conv_general_dilated(h, p[f"pw{i}"], (1, 1), "VALID", dimension_numbers=dn)
            m = h.mean((0, 1, 2)); v = h.var((0, 1, 2))
            h = jax.nn.relu6((h - m) * lax.rsqrt(v + 1e-5) * p[f"g{i}"] + p[f"b{i}"])
        logits = h.mean((1, 2)) @ p["fc"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], -1))
    mom = jax.tree.map(np.zeros_like, p)
    def step(p, mom, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        mom = jax.tree.map(lambda m, g: 0.9*m + g, mom, g)
        return l, jax.tree.map(lambda p, m: p - 0.05*m, p, mom), mom
    return step, (p, mom, x, y), (0, 1)

def mixed():
    """A mixed-precision transformer block train step (bf16 compute, f32 master weights)."""
    B, S, D, F, H = 8, 128, 384, 1536, 6
    p = {"qkv": normal((D, 3*D)), "o": normal((D, D)), "w1": normal((D, F)), "w2": normal((F, D)),
         "s1": np.ones(D, np.float32), "s2": np.ones(D, np.float32)}
    x = normal((B, S, D), 1.0)
    bf = jnp.bfloat16
    def rms(x, s): return x * lax.rsqrt((x*x).mean(-1, keepdims=True) + 1e-6) * s
    def mm(a, w): return jnp.einsum("...d,df->...f", a.astype(bf), w.astype(bf), preferred_element_type=jnp.float32)
    def loss(p, x):
        h = rms(x, p["s1"])
        q, k, v = jnp.split(mm(h, p["qkv"]).reshape(B, S, 3, H, D//H), 3, 2)
        q, k, v = (t[:, :, 0].astype(bf) for t in (q, k, v))
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * (D//H) ** -0.5
        s = jnp.where(jnp.tril(jnp.ones((S, S), bool)), s, -jnp.inf)
        a = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1).astype(bf), v, preferred_element_type=jnp.float32)
        x = x + mm(a.reshape(B, S, D), p["o"])
        x = x + mm(jax.nn.gelu(mm(rms(x, p["s2"]), p["w1"])), p["w2"])
        return jnp.mean(x.astype(jnp.float32) ** 2)
    def step(p, x):
        l, g = jax.value_and_grad(loss)(p, x)
        return l, jax.tree.map(lambda p, g: p - 1e-2 * g, p, g)
    return step, (p, x), (0,)

MODELS: dict[str, Callable] = {"bert_train_step": bert, "unet_bf16_forward": unet,
                                "lstm_train_step": lstm, "mobilenet_train_step": mobilenet,
                                "mixed_bf16_block_train_step": mixed}


def _raw(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.uint16) if a.dtype == jnp.bfloat16 else a


def write(name: str, out: Path) -> None:
    global rng
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    fn, args, donate = MODELS[name]()
    text = jax.jit(fn, donate_argnums=donate).lower(*args).as_text("hlo")
    outputs = jax.tree.leaves(jax.jit(fn)(*args))
    (out / f"{name}.hlo").write_text(text)
    np.savez(out / f"{name}.npz",
             **{f"arg_{i}": _raw(a) for i, a in enumerate(jax.tree.leaves(args))},
             **{f"out_{i}": _raw(a) for i, a in enumerate(outputs)})
    print(f"{name}: {len(text.splitlines())} lines")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", help="comma-separated names: " + ", ".join(MODELS))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only.split(",") if args.only else MODELS:
        write(name, args.out)


if __name__ == "__main__":
    main()
