"""Whole models beyond the shared models folder, written with JAX, for measuring generality:
a BERT-style encoder train step (exact GELU, padding mask, tied read-out, AdamW), a bf16 UNet
forward pass (group norm, SiLU, max pooling, nearest upsampling, skip concatenation), an LSTM
language model train step (``lax.scan``: a while loop), a MobileNet-style train step
(depthwise convolutions, batch norm, ReLU6), a mixed-precision transformer block train step
(bf16 matmuls accumulating in f32, causal attention), a bidirectional GRU train step (two
scans, one reversed), a conv VAE train step (strided convolutions, ``conv_transpose``, average
pooling, Adam with a step counter), a mixture-of-experts layer train step (router softmax,
``top_k``, capacity slots from a cumsum, scatter-add dispatch, gather combine), a bf16
T5-style encoder forward pass (relative position buckets, a gathered bias, gated GELU,
cumsum), a ConvNeXt train step (7x7 depthwise convolutions, layer norm over channels, max
pooling whose gradient is select-and-scatter), a diffusion sampler (``fori_loop`` with a
``cond`` inside), a kNN forward pass (``top_k``, ``argsort``, ``take_along_axis``), greedy
decoding with a KV cache (a ``fori_loop`` writing each step's keys and values with
``dynamic_update_slice``, an iota mask, ``argmax`` fed back through the embedding gather), an
int8-quantised MLP (per-row activation quantisation, s8 x s8 dots accumulating in s32) and a
WaveNet-style train step (dilated causal 1-D convolutions, gated units).
Train steps donate their state.

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

def momentum_step(loss):
    """A train step of SGD with momentum 0.9 and learning rate 0.05 on ``loss(p, x, y)``."""
    def step(p, mom, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        mom = jax.tree.map(lambda m, g: 0.9*m + g, mom, g)
        return l, jax.tree.map(lambda p, m: p - 0.05*m, p, mom), mom
    return step


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
    return momentum_step(loss), (p, jax.tree.map(np.zeros_like, p), x, y), (0, 1)

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

def rms_norm(x, s, eps=1e-6):
    return x * lax.rsqrt((x * x).mean(-1, keepdims=True) + eps) * s


def xent(logits, labels):
    lp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(lp, labels[..., None], -1))

# 1 ---------------------------------------------------------------------------------------
def gru_bidir():
    """A bidirectional GRU classifier train step: forward scan and a reverse=True scan."""
    T, B, E, H, V, C = 40, 16, 96, 192, 2000, 10
    p = {"emb": normal((V, E), 0.1)}
    for d in ("f", "b"):
        p.update({f"{d}_wx": normal((E, 3*H), 1/np.sqrt(E)), f"{d}_wh": normal((H, 3*H), 1/np.sqrt(H)),
                  f"{d}_bx": np.zeros(3*H, np.float32), f"{d}_bh": np.zeros(3*H, np.float32)})
    p["out"] = normal((2*H, C), 1/np.sqrt(2*H)); p["ob"] = np.zeros(C, np.float32)
    tokens = rng.integers(0, V, (B, T)).astype(np.int32)
    labels = rng.integers(0, C, (B,)).astype(np.int32)

    def run(p, d, xs, reverse):
        gx = xs @ p[f"{d}_wx"] + p[f"{d}_bx"]           # [T, B, 3H], hoisted out of the loop

        def cell(h, g):
            gh = h @ p[f"{d}_wh"] + p[f"{d}_bh"]
            xr, xz, xn = jnp.split(g, 3, -1); hr, hz, hn = jnp.split(gh, 3, -1)
            r = jax.nn.sigmoid(xr + hr); z = jax.nn.sigmoid(xz + hz)
            n = jnp.tanh(xn + r * hn)
            h = (1 - z) * n + z * h
            return h, h
        _, hs = lax.scan(cell, jnp.zeros((B, H)), gx, reverse=reverse)
        return hs

    def loss(p, tokens, labels):
        xs = p["emb"][tokens].transpose(1, 0, 2)          # [T, B, E]
        hs = jnp.concatenate([run(p, "f", xs, False), run(p, "b", xs, True)], -1)
        logits = hs.mean(0) @ p["out"] + p["ob"]
        return xent(logits, labels)

    def step(p, tokens, labels):
        l, g = jax.value_and_grad(loss)(p, tokens, labels)
        return l, jax.tree.map(lambda p, g: p - 0.5 * g, p, g)
    return step, (p, tokens, labels), (0,)

# 2 ---------------------------------------------------------------------------------------
def vae():
    """A conv VAE train step: strided convs, conv_transpose decoder, avg pool, BCE + KL, Adam."""
    B, Hh, Z = 16, 32, 32
    dn = ("NHWC", "HWIO", "NHWC")

    def cw(k, ci, co): return normal((k, k, ci, co), 1/np.sqrt(k*k*ci))
    p = {"e1": cw(3, 3, 32), "e1b": np.zeros(32, np.float32), "e2": cw(3, 32, 64), "e2b": np.zeros(64, np.float32),
         "e3": cw(3, 64, 64), "e3b": np.zeros(64, np.float32),
         "mu": normal((4*4*64, Z), 1/32), "mub": np.zeros(Z, np.float32),
         "lv": normal((4*4*64, Z), 1/32), "lvb": np.zeros(Z, np.float32),
         "d0": normal((Z, 8*8*64), 1/np.sqrt(Z)), "d0b": np.zeros(8*8*64, np.float32),
         "d1": cw(4, 64, 32), "d1b": np.zeros(32, np.float32), "d2": cw(4, 32, 3), "d2b": np.zeros(3, np.float32)}
    x = rng.uniform(0, 1, (B, Hh, Hh, 3)).astype(np.float32)
    eps = rng.standard_normal((B, Z)).astype(np.float32)

    def conv(x, w, b, s):
        return lax.conv_general_dilated(x, w, (s, s), "SAME", dimension_numbers=dn) + b

    def loss(p, x, eps):
        h = jax.nn.leaky_relu(conv(x, p["e1"], p["e1b"], 2), 0.2)      # 16x16x32
        h = jax.nn.leaky_relu(conv(h, p["e2"], p["e2b"], 2), 0.2)      # 8x8x64
        h = jax.nn.leaky_relu(conv(h, p["e3"], p["e3b"], 1), 0.2)      # 8x8x64
        h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4   # 4x4x64
        h = h.reshape(B, -1)
        mu = h @ p["mu"] + p["mub"]; logvar = h @ p["lv"] + p["lvb"]
        z = mu + jnp.exp(0.5 * logvar) * eps
        d = jax.nn.relu(z @ p["d0"] + p["d0b"]).reshape(B, 8, 8, 64)
        d = jax.nn.relu(lax.conv_transpose(d, p["d1"], (2, 2), "SAME", dimension_numbers=dn) + p["d1b"])  # 16
        logits = lax.conv_transpose(d, p["d2"], (2, 2), "SAME", dimension_numbers=dn) + p["d2b"]           # 32
        bce = jnp.sum(jnp.maximum(logits, 0) - logits * x + jnp.log1p(jnp.exp(-jnp.abs(logits)))) / B
        kl = -0.5 * jnp.sum(1 + logvar - mu**2 - jnp.exp(logvar)) / B
        return bce + kl

    m = jax.tree.map(np.zeros_like, p); v = jax.tree.map(np.zeros_like, p)
    t = np.array(3, np.int32)

    def step(p, m, v, t, x, eps):
        l, g = jax.value_and_grad(loss)(p, x, eps)
        t = t + 1; tf = t.astype(jnp.float32)
        m = jax.tree.map(lambda m, g: 0.9*m + 0.1*g, m, g)
        v = jax.tree.map(lambda v, g: 0.999*v + 0.001*g*g, v, g)
        c1 = 1 - 0.9 ** tf; c2 = 1 - 0.999 ** tf
        p = jax.tree.map(lambda p, m, v: p - 1e-3 * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), p, m, v)
        return l, p, m, v, t
    return step, (p, m, v, t, x, eps), (0, 1, 2, 3)

# 3 ---------------------------------------------------------------------------------------
def moe():
    """A mixture-of-experts layer train step: top-2 of 8 experts, scatter-add dispatch with
    capacity, gather combine, RMSNorm, tied embedding read-out (vocab 16000)."""
    B, S, D, F, E, K, V = 4, 64, 256, 512, 8, 2, 16000
    N = B * S; Cap = int(N * K / E * 1.25)
    p = {"emb": normal((V, D), 0.05), "n1": np.ones(D, np.float32), "n2": np.ones(D, np.float32),
         "router": normal((D, E), 0.1), "w1": normal((E, D, F), 1/np.sqrt(D)),
         "w2": normal((E, F, D), 1/np.sqrt(F))}
    tokens = rng.integers(0, V, (B, S)).astype(np.int32)
    targets = rng.integers(0, V, (B, S)).astype(np.int32)

    def loss(p, tokens, targets):
        x = p["emb"][tokens].reshape(N, D)
        h = rms_norm(x, p["n1"])
        probs = jax.nn.softmax(h @ p["router"], -1)                 # [N, E]
        gate, idx = lax.top_k(probs, K)                             # [N, K]
        gate = gate / gate.sum(-1, keepdims=True)
        onehot = jax.nn.one_hot(idx, E, dtype=jnp.int32)            # [N, K, E]
        # position of each assignment within its expert: order by (k, token)
        flat = onehot.transpose(1, 0, 2).reshape(K * N, E)
        pos = (jnp.cumsum(flat, 0) - 1) * flat
        pos = pos.sum(-1).reshape(K, N).T                            # [N, K]
        keep = pos < Cap
        posc = jnp.where(keep, pos, Cap)                             # out of range: dropped
        xin = jnp.zeros((E, Cap, D)).at[idx, posc].add(jnp.broadcast_to(h[:, None], (N, K, D)),
                                                       mode="drop")
        y = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", xin, p["w1"]))
        y = jnp.einsum("ecf,efd->ecd", y, p["w2"])
        out = y.at[idx, posc].get(mode="fill", fill_value=0)         # [N, K, D]
        out = jnp.sum(out * (gate * keep)[..., None], 1)
        x = x + out
        logits = rms_norm(x, p["n2"]) @ p["emb"].T
        # load balancing auxiliary loss
        frac = onehot.sum(1).mean(0).astype(jnp.float32)
        aux = E * jnp.sum(frac * probs.mean(0))
        return xent(logits, targets.reshape(N)) + 0.01 * aux

    def step(p, tokens, targets):
        l, g = jax.value_and_grad(loss)(p, tokens, targets)
        return l, jax.tree.map(lambda p, g: p - 0.1 * g, p, g)
    return step, (p, tokens, targets), (0,)

# 4 ---------------------------------------------------------------------------------------
def t5():
    """A bf16 T5-style encoder forward pass: relative position buckets, gathered bias, RMSNorm,
    gated GELU FFN, np.float32 softmax, padding mask and a cumsum mean-pooling."""
    L, B, S, D, H, F, V, NB, MAXD = 4, 4, 128, 256, 4, 512, 4000, 32, 128
    Dh = D // H
    p = {"emb": normal((V, D), 1.0), "rel": normal((NB, H), 0.5), "nf": np.ones(D, np.float32)}
    for i in range(L):
        p.update({f"{i}_n1": np.ones(D, np.float32), f"{i}_q": normal((D, D), 1/np.sqrt(D*Dh)),
                  f"{i}_k": normal((D, D), 1/np.sqrt(D)), f"{i}_v": normal((D, D), 1/np.sqrt(D)),
                  f"{i}_o": normal((D, D), 1/np.sqrt(D)), f"{i}_n2": np.ones(D, np.float32),
                  f"{i}_wi0": normal((D, F), 1/np.sqrt(D)), f"{i}_wi1": normal((D, F), 1/np.sqrt(D)),
                  f"{i}_wo": normal((F, D), 1/np.sqrt(F))})
    p = {k: v.astype(jnp.bfloat16) for k, v in p.items()}
    tokens = rng.integers(0, V, (B, S)).astype(np.int32)
    lengths = rng.integers(S // 2, S + 1, (B,)).astype(np.int32)

    def bucket(rel):
        nb = NB // 2
        ret = (rel > 0).astype(jnp.int32) * nb
        n = jnp.abs(rel)
        max_exact = nb // 2
        is_small = n < max_exact
        large = max_exact + (jnp.log(n.astype(jnp.float32) / max_exact) / np.log(MAXD / max_exact)
                             * (nb - max_exact)).astype(jnp.int32)
        large = jnp.clip(large, 0, nb - 1)
        return ret + jnp.where(is_small, n, large)

    def rms(x, s):
        xf = x.astype(jnp.float32)
        return (xf * lax.rsqrt((xf * xf).mean(-1, keepdims=True) + 1e-6)).astype(jnp.bfloat16) * s

    def f(p, tokens, lengths):
        x = p["emb"][tokens]                                           # [B, S, D] bf16
        ctx = jnp.arange(S, dtype=jnp.int32)
        buckets = bucket(ctx[None, :] - ctx[:, None])                  # [S, S]
        bias = p["rel"][buckets].transpose(2, 0, 1).astype(jnp.float32)   # [H, S, S]
        valid = jnp.arange(S)[None, :] < lengths[:, None]              # [B, S]
        bias = bias[None] + jnp.where(valid, 0.0, -1e9)[:, None, None, :]
        for i in range(L):
            h = rms(x, p[f"{i}_n1"])
            q = (h @ p[f"{i}_q"]).reshape(B, S, H, Dh)
            k = (h @ p[f"{i}_k"]).reshape(B, S, H, Dh)
            v = (h @ p[f"{i}_v"]).reshape(B, S, H, Dh)
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) + bias
            a = jax.nn.softmax(s, -1).astype(jnp.bfloat16)
            a = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, S, D)
            x = x + a @ p[f"{i}_o"]
            h = rms(x, p[f"{i}_n2"])
            g = jax.nn.gelu(h @ p[f"{i}_wi0"], approximate=True) * (h @ p[f"{i}_wi1"])
            x = x + g @ p[f"{i}_wo"]
        x = rms(x, p["nf"])
        # causal running mean over the valid positions
        xm = x.astype(jnp.float32) * valid[..., None]
        run = jnp.cumsum(xm, 1) / jnp.maximum(jnp.cumsum(valid, 1), 1)[..., None].astype(jnp.float32)
        pooled = jnp.take_along_axis(run, (lengths - 1)[:, None, None], 1)[:, 0]
        return x, run.astype(jnp.bfloat16), pooled
    return f, (p, tokens, lengths), ()

# 5 ---------------------------------------------------------------------------------------
def convnext():
    """Two ConvNeXt blocks train step: 7x7 depthwise conv, channel layer norm, GELU, pointwise
    matmuls, layer scale, residual, max pool (select-and-scatter gradient), SGD momentum."""
    B, Hh, C, C4, K = 8, 32, 64, 256, 10
    p = {}
    for i in range(2):
        p.update({f"{i}_dw": normal((7, 7, 1, C), 1/7), f"{i}_dwb": np.zeros(C, np.float32),
                  f"{i}_lns": np.ones(C, np.float32), f"{i}_lnb": np.zeros(C, np.float32),
                  f"{i}_w1": normal((C, C4), 1/np.sqrt(C)), f"{i}_b1": np.zeros(C4, np.float32),
                  f"{i}_w2": normal((C4, C), 1/np.sqrt(C4)), f"{i}_b2": np.zeros(C, np.float32),
                  f"{i}_gamma": np.full(C, 0.1, np.float32)})
    p["hs"] = np.ones(C, np.float32); p["hb"] = np.zeros(C, np.float32); p["fc"] = normal((C, K), 1/8)
    x = normal((B, Hh, Hh, C), 1.0); y = rng.integers(0, K, (B,)).astype(np.int32)
    dn = ("NHWC", "HWIO", "NHWC")

    def block(p_, x, i):
        h = lax.conv_general_dilated(x, p_[f"{i}_dw"], (1, 1), "SAME", dimension_numbers=dn,
                                     feature_group_count=C) + p_[f"{i}_dwb"]
        h = layer_norm(h, p_[f"{i}_lns"], p_[f"{i}_lnb"], 1e-6)
        h = jax.nn.gelu(h @ p_[f"{i}_w1"] + p_[f"{i}_b1"], approximate=False)
        h = h @ p_[f"{i}_w2"] + p_[f"{i}_b2"]
        return x + p_[f"{i}_gamma"] * h

    def loss(p, x, y):
        h = block(p, x, 0)
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")   # 16x16
        h = block(p, h, 1)
        h = layer_norm(h.mean((1, 2)), p["hs"], p["hb"], 1e-6)
        return xent(h @ p["fc"], y)

    return momentum_step(loss), (p, jax.tree.map(np.zeros_like, p), x, y), (0, 1)

# 6 ---------------------------------------------------------------------------------------
def diffusion():
    """A DDPM-style sampler: fori_loop of 50 steps over an MLP denoiser, sin/cos time
    embedding of the loop index, SiLU, and a lax.cond adding noise on odd steps."""
    T, N, D, Hd, TE = 50, 64, 128, 256, 64
    p = {"wt": normal((TE, Hd), 1/np.sqrt(TE)), "bt": np.zeros(Hd, np.float32),
         "w1": normal((D, Hd), 1/np.sqrt(D)), "b1": np.zeros(Hd, np.float32),
         "w2": normal((Hd, Hd), 1/np.sqrt(Hd)), "b2": np.zeros(Hd, np.float32),
         "w3": normal((Hd, D), 1/np.sqrt(Hd)), "b3": np.zeros(D, np.float32)}
    betas = np.linspace(1e-4, 0.02, T).astype(np.float32)
    x0 = rng.standard_normal((N, D)).astype(np.float32)
    noise = rng.standard_normal((T, N, D)).astype(np.float32)
    freqs = np.exp(-np.log(10000.0) * np.arange(TE // 2) / (TE // 2)).astype(np.float32)

    def f(p, betas, x0, noise):
        alphas = 1 - betas
        abar = jnp.cumprod(alphas)

        def body(j, x):
            i = T - 1 - j
            ang = i.astype(jnp.float32) * freqs
            temb = jnp.concatenate([jnp.sin(ang), jnp.cos(ang)])
            te = jax.nn.silu(temb @ p["wt"] + p["bt"])
            h = jax.nn.silu(x @ p["w1"] + p["b1"] + te)
            h = jax.nn.silu(h @ p["w2"] + p["b2"])
            eps = h @ p["w3"] + p["b3"]
            b = betas[i]; a = alphas[i]; ab = abar[i]
            x = (x - b / jnp.sqrt(1 - ab) * eps) / jnp.sqrt(a)
            return lax.cond(i % 2 == 1, lambda x: x + jnp.sqrt(b) * noise[i], lambda x: x, x)
        return lax.fori_loop(0, T, body, x0)
    return f, (p, betas, x0, noise), ()

# 7 ---------------------------------------------------------------------------------------
def knn():
    """kNN attention-like read-out: pairwise squared distances, top_k(16), argsort,
    take_along_axis gathers, softmax-weighted sum of gathered values."""
    Q, Kn, D, Dv, K = 1024, 4096, 64, 32, 16
    q = rng.standard_normal((Q, D)).astype(np.float32)
    k = rng.standard_normal((Kn, D)).astype(np.float32)
    v = rng.standard_normal((Kn, Dv)).astype(np.float32)

    def f(q, k, v):
        d = (q * q).sum(-1)[:, None] - 2 * q @ k.T + (k * k).sum(-1)[None, :]   # [Q, Kn]
        negd, idx = lax.top_k(-d, K)                                           # [Q, K]
        dd = jnp.take_along_axis(d, idx, 1)                                    # same as -negd
        w = jax.nn.softmax(-dd / 8.0, -1)
        vals = v[idx]                                                          # [Q, K, Dv]
        out = jnp.einsum("qk,qkd->qd", w, vals)
        order = jnp.argsort(q, axis=-1)                                        # [Q, D]
        qs = jnp.take_along_axis(q, order, -1)
        ranks = jnp.argsort(order, axis=-1)
        score = jnp.sum(qs * jnp.take_along_axis(k[idx[:, 0]], order, -1), -1)
        return out, idx, negd, order, ranks, score
    return f, (q, k, v), ()

# 8 ---------------------------------------------------------------------------------------
def gpt_decode():
    """Greedy autoregressive decoding with a KV cache: a 4-layer GPT-style decoder reads a
    prompt, then a fori_loop of 48 steps writes each step's keys and values into the cache
    with dynamic_update_slice, attends over the positions written so far (an iota mask),
    and feeds back the argmax token through the embedding gather."""
    L, B, P, S, D, H, V = 4, 4, 16, 48, 256, 4, 4096
    T, Dh = P + S, D // H
    p = {"wte": normal((V, D), 0.02), "wpe": normal((T, D), 0.01),
         "lnf": np.ones(D, np.float32),
         "blocks": [{"ln1": np.ones(D, np.float32), "ln2": np.ones(D, np.float32),
                     "qkv": normal((D, 3 * D), 1/np.sqrt(D)), "o": normal((D, D), 1/np.sqrt(D)),
                     "fc": normal((D, 4 * D), 1/np.sqrt(D)),
                     "proj": normal((4 * D, D), 1/np.sqrt(4 * D))} for _ in range(L)]}
    prompt = rng.integers(0, V, (B, P)).astype(np.int32)

    def block(bp, x, cache_k, cache_v, pos):
        """x [B, n, D] at positions pos..pos+n-1; the caches [B, T, H, Dh] gain them."""
        n = x.shape[1]
        h = layer_norm(x, bp["ln1"], 0.0)
        q, k, v = jnp.split(h @ bp["qkv"], 3, -1)
        q, k, v = (t.reshape(B, n, H, Dh) for t in (q, k, v))
        cache_k = lax.dynamic_update_slice(cache_k, k, (0, pos, 0, 0))
        cache_v = lax.dynamic_update_slice(cache_v, v, (0, pos, 0, 0))
        s = jnp.einsum("bqhd,bkhd->bhqk", q, cache_k) / np.sqrt(Dh)
        allowed = jnp.arange(T)[None, :] <= (pos + jnp.arange(n))[:, None]
        s = jnp.where(allowed[None, None], s, -1e9)
        a = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), cache_v).reshape(B, n, D)
        x = x + a @ bp["o"]
        x = x + jax.nn.gelu(layer_norm(x, bp["ln2"], 0.0) @ bp["fc"]) @ bp["proj"]
        return x, cache_k, cache_v

    def logits_at(p, tokens, caches, pos):
        x = p["wte"][tokens] + lax.dynamic_slice_in_dim(p["wpe"], pos, tokens.shape[1])
        new = []
        for bp, (ck, cv) in zip(p["blocks"], caches):
            x, ck, cv = block(bp, x, ck, cv, pos)
            new.append((ck, cv))
        return layer_norm(x[:, -1], p["lnf"], 0.0) @ p["wte"].T, new

    def f(p, prompt):
        zeros = jnp.zeros((B, T, H, Dh), jnp.float32)
        logits, caches = logits_at(p, prompt, [(zeros, zeros)] * L, 0)
        out = jnp.zeros((B, S), jnp.int32)

        def step(i, state):
            logits, caches, out = state
            token = jnp.argmax(logits, -1).astype(jnp.int32)
            out = lax.dynamic_update_slice(out, token[:, None], (0, i))
            logits, caches = logits_at(p, token[:, None], caches, P + i)
            return logits, caches, out
        logits, _, out = lax.fori_loop(0, S, step, (logits, caches, out))
        return out, logits
    return f, (p, prompt), ()


def int8_mlp():
    """An int8-quantised MLP forward pass: activations quantised per row (round, clip),
    int8 weights with per-channel scales, int8 x int8 dots accumulating in int32
    (preferred_element_type), dequantised, GELU, and a residual layer norm."""
    N, D, F, L = 256, 512, 2048, 3
    ws = [(rng.integers(-127, 128, (D, F)).astype(np.int8),
           (rng.random(F) * 0.002 + 0.001).astype(np.float32),
           rng.integers(-127, 128, (F, D)).astype(np.int8),
           (rng.random(D) * 0.002 + 0.001).astype(np.float32)) for _ in range(L)]
    x = rng.standard_normal((N, D)).astype(np.float32)

    def qdot(x, w, scale):
        xs = jnp.max(jnp.abs(x), -1, keepdims=True) / 127.0 + 1e-8
        xq = jnp.clip(jnp.round(x / xs), -127, 127).astype(jnp.int8)
        acc = lax.dot(xq, w, preferred_element_type=jnp.int32)
        return acc.astype(jnp.float32) * xs * scale

    def f(ws, x):
        for w1, s1, w2, s2 in ws:
            h = jax.nn.gelu(qdot(x, w1, s1))
            x = layer_norm(x + qdot(h, w2, s2), 1.0, 0.0)
        return x
    return f, (ws, x), ()


def wavenet():
    """A WaveNet-style train step on audio: 1-D causal convolutions with dilations 1..32,
    gated tanh x sigmoid units, residual and skip 1x1 convolutions, SGD with momentum."""
    B, T, C, K = 4, 2048, 64, 2
    dil = (1, 2, 4, 8, 16, 32)
    p = {"inp": normal((1, 1, C), 0.5), "out": normal((1, C, 1), 1/np.sqrt(C)),
         "layers": [{"f": normal((K, C, C), 1/np.sqrt(K * C)), "g": normal((K, C, C), 1/np.sqrt(K * C)),
                     "res": normal((1, C, C), 1/np.sqrt(C)), "skip": normal((1, C, C), 1/np.sqrt(C))}
                    for _ in dil]}
    x = rng.standard_normal((B, T, 1)).astype(np.float32)
    y = np.roll(x, -1, 1)

    def conv(x, w, d=1):
        return lax.conv_general_dilated(x, w, (1,), [((w.shape[0] - 1) * d, 0)], rhs_dilation=(d,),
                                        dimension_numbers=("NWC", "WIO", "NWC"))

    def loss(p, x, y):
        h = conv(x, p["inp"])
        skip = 0.0
        for lp, d in zip(p["layers"], dil):
            z = jnp.tanh(conv(h, lp["f"], d)) * jax.nn.sigmoid(conv(h, lp["g"], d))
            h = h + conv(z, lp["res"])
            skip = skip + conv(z, lp["skip"])
        return jnp.mean((conv(jax.nn.relu(skip), p["out"]) - y) ** 2)
    mom = jax.tree.map(np.zeros_like, p)
    return momentum_step(loss), (p, mom, x, y), (0, 1)

def llama():
    """A LLaMA-style decoder train step: RMSNorm, rotary position embeddings (sin/cos, halves
    rotated and concatenated), grouped-query attention (8 query heads sharing 2 key/value
    heads), a causal mask, SwiGLU, AdamW-free SGD with momentum."""
    B, T, D, H, KV, F, V = 2, 256, 256, 8, 2, 768, 2048
    Dh = D // H
    p = {"emb": normal((V, D), 0.02), "n1": np.ones(D, np.float32), "n2": np.ones(D, np.float32),
         "nf": np.ones(D, np.float32), "wq": normal((D, D), 1/np.sqrt(D)),
         "wkv": normal((D, 2 * KV * Dh), 1/np.sqrt(D)), "wo": normal((D, D), 1/np.sqrt(D)),
         "wg": normal((D, F), 1/np.sqrt(D)), "wu": normal((D, F), 1/np.sqrt(D)),
         "wd": normal((F, D), 1/np.sqrt(F))}
    tokens = rng.integers(0, V, (B, T)).astype(np.int32)
    inv = 1.0 / (10000 ** (np.arange(0, Dh, 2) / Dh))
    ang = np.arange(T)[:, None] * inv[None, :]
    sin, cos = np.sin(ang).astype(np.float32), np.cos(ang).astype(np.float32)

    def rope(x):                                  # [B, T, heads, Dh]
        a, b = x[..., :Dh // 2], x[..., Dh // 2:]
        s, c = sin[None, :, None], cos[None, :, None]
        return jnp.concatenate([a * c - b * s, a * s + b * c], -1)

    def loss(p, tokens, _):
        x = p["emb"][tokens]
        h = rms_norm(x, p["n1"])
        q = rope((h @ p["wq"]).reshape(B, T, H, Dh))
        k, v = jnp.split((h @ p["wkv"]).reshape(B, T, 2 * KV, Dh), 2, 2)
        k = jnp.repeat(rope(k), H // KV, 2)
        v = jnp.repeat(v, H // KV, 2)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(Dh)
        s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -1e9)
        a = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v).reshape(B, T, D)
        x = x + a @ p["wo"]
        h = rms_norm(x, p["n2"])
        x = x + (jax.nn.silu(h @ p["wg"]) * (h @ p["wu"])) @ p["wd"]
        return xent(rms_norm(x, p["nf"]) @ p["emb"].T, jnp.roll(tokens, -1, 1))
    mom = jax.tree.map(np.zeros_like, p)
    return momentum_step(loss), (p, mom, tokens, tokens), (0, 1)


def segments():
    """Ragged-batch statistics: a long cumsum (4096 per row), segment sums and maxima by
    scatter, a stable argsort by segment, a searchsorted, and a per-segment softmax."""
    R, N, S = 32, 4096, 64
    x = rng.standard_normal((R, N)).astype(np.float32)
    seg = np.sort(rng.integers(0, S, (R, N)), 1).astype(np.int32)

    def f(x, seg):
        c = jnp.cumsum(x, 1)
        rows = jnp.arange(R)[:, None]
        sums = jnp.zeros((R, S)).at[rows, seg].add(x)
        maxs = jnp.full((R, S), -jnp.inf).at[rows, seg].max(x)
        w = jnp.exp(x - maxs[rows, seg])
        soft = w / jnp.zeros((R, S)).at[rows, seg].add(w)[rows, seg]
        order = jnp.argsort(seg * 8192 - jnp.argsort(x, 1), 1, stable=True)
        edges = jax.vmap(jnp.searchsorted)(c, jnp.linspace(-50, 50, 128)[None].repeat(R, 0))
        return c, sums, maxs, soft, order, edges
    return f, (x, seg), ()


def video():
    """A 3-D convolutional video classifier train step: two stride-2 conv3d layers, ReLU,
    global average pooling, softmax cross-entropy, SGD with momentum."""
    B, T, Hh, W, C = 2, 8, 32, 32, 3
    p = {"c1": normal((3, 3, 3, C, 16), 1/np.sqrt(27 * C)), "c2": normal((3, 3, 3, 16, 32), 1/np.sqrt(27 * 16)),
         "fc": normal((32, 10), 1/np.sqrt(32))}
    x = rng.standard_normal((B, T, Hh, W, C)).astype(np.float32)
    y = rng.integers(0, 10, (B,)).astype(np.int32)

    def loss(p, x, y):
        dn = ("NDHWC", "DHWIO", "NDHWC")
        h = jax.nn.relu(lax.conv_general_dilated(x, p["c1"], (1, 2, 2), "SAME", dimension_numbers=dn))
        h = jax.nn.relu(lax.conv_general_dilated(h, p["c2"], (2, 2, 2), "SAME", dimension_numbers=dn))
        return xent(h.mean((1, 2, 3)) @ p["fc"], y)
    mom = jax.tree.map(np.zeros_like, p)
    return momentum_step(loss), (p, mom, x, y), (0, 1)

def dropout_mlp():
    """An MLP train step with dropout drawn in the step (threefry random bits from a key
    argument: integer shifts, rotations and xors per element), f16 activations and f32
    master weights, SGD with momentum."""
    N, D, F = 256, 512, 2048
    p = {"w1": normal((D, F), 1/np.sqrt(D)), "w2": normal((F, D), 1/np.sqrt(F))}
    x = rng.standard_normal((N, D)).astype(np.float32)
    y = rng.standard_normal((N, D)).astype(np.float32)
    key = np.array([0, 42], np.uint32)

    def loss(p, x, y, key):
        k1, k2 = jax.random.split(jax.random.wrap_key_data(key))
        h = jax.nn.gelu(x.astype(jnp.float16) @ p["w1"].astype(jnp.float16))
        h = jnp.where(jax.random.bernoulli(k1, 0.9, h.shape), h / 0.9, 0).astype(jnp.float16)
        o = (h @ p["w2"].astype(jnp.float16)).astype(jnp.float32)
        o = jnp.where(jax.random.bernoulli(k2, 0.9, o.shape), o / 0.9, 0)
        return jnp.mean((o - y) ** 2)

    def step(p, mom, x, y, key):
        l, g = jax.value_and_grad(loss)(p, x, y, key)
        mom = jax.tree.map(lambda m, g: 0.9*m + g, mom, g)
        return l, jax.tree.map(lambda p, m: p - 0.05*m, p, mom), mom
    mom = jax.tree.map(np.zeros_like, p)
    return step, (p, mom, x, y, key), (0, 1)

def beam_search():
    """Beam search over a small recurrent decoder: a fori_loop of 24 steps, log-softmax over a
    4096-token vocabulary, top_k over beams x vocabulary, gathers of the surviving beams'
    states and histories."""
    B, K, V, D, S = 4, 8, 4096, 256, 24
    p = {"emb": normal((V, D), 0.05), "w": normal((D, D), 1/np.sqrt(D)), "out": normal((D, V), 1/np.sqrt(D))}
    h0 = rng.standard_normal((B, K, D)).astype(np.float32)

    def f(p, h0):
        def step(i, st):
            h, score, hist, tok = st
            h = jnp.tanh(h @ p["w"] + p["emb"][tok])
            lp = jax.nn.log_softmax(h @ p["out"], -1) + score[..., None]        # [B, K, V]
            top, idx = lax.top_k(lp.reshape(B, K * V), K)
            beam, tok = idx // V, (idx % V).astype(jnp.int32)
            h = jnp.take_along_axis(h, beam[..., None], 1)
            hist = jnp.take_along_axis(hist, beam[..., None], 1)
            hist = lax.dynamic_update_slice(hist, tok[..., None], (0, 0, i))
            return h, top, hist, tok
        st = (h0, jnp.zeros((B, K)).at[:, 1:].set(-1e9), jnp.zeros((B, K, S), jnp.int32),
              jnp.zeros((B, K), jnp.int32))
        h, score, hist, _ = lax.fori_loop(0, S, step, st)
        return score, hist
    return f, (p, h0), ()


def power_iteration():
    """Power iteration: a while loop whose trip count is an argument (unknown when compiled;
    a convergence test would make the count depend on rounding), a matrix-vector product and
    a norm per step, then a Cholesky solve (LAPACK custom calls) of a shifted system."""
    N = 512
    a = rng.standard_normal((N, N)).astype(np.float32)
    spd = (a @ a.T / N + np.eye(N)).astype(np.float32)
    b = rng.standard_normal((N, 4)).astype(np.float32)
    steps = np.int32(120)

    def f(m, b, steps):
        def cond(st):
            return st[3] < steps

        def body(st):
            v, lam, _, k = st
            w = m @ v
            return w / jnp.linalg.norm(w), v @ w, lam, k + 1
        v0 = jnp.ones(N) / np.sqrt(N)
        v, lam, _, k = lax.while_loop(cond, body, (v0, jnp.float32(1.0), jnp.float32(0.0), 0))
        c = jnp.linalg.cholesky(m + lam * 0.01 * jnp.eye(N))
        x = jax.scipy.linalg.cho_solve((c, True), b)
        return v, lam, k, x
    return f, (spd, b, steps), ()


def fft_conv():
    """A long 1-D convolution by FFT (rfft, a complex product, irfft) of 16 signals of 8192
    samples with 16 filters, then a magnitude spectrum."""
    B, N = 16, 8192
    x = rng.standard_normal((B, N)).astype(np.float32)
    k = (rng.standard_normal((B, N)) * np.exp(-np.arange(N) / 64.0)).astype(np.float32)

    def f(x, k):
        y = jnp.fft.irfft(jnp.fft.rfft(x, 2 * N) * jnp.fft.rfft(k, 2 * N), 2 * N)[:, :N]
        return y, jnp.abs(jnp.fft.rfft(y))
    return f, (x, k), ()

def gnn():
    """A graph network train step: messages gathered along 40,000 edges, summed into 4,000
    nodes by segment_sum (scatter-add), degree normalisation, two layers, SGD."""
    N, E, F, H = 4000, 40000, 64, 64
    p = {"w1": normal((F, H), 1/np.sqrt(F)), "w2": normal((H, H), 1/np.sqrt(H)),
         "out": normal((H, 1), 1/np.sqrt(H))}
    x = rng.standard_normal((N, F)).astype(np.float32)
    src = rng.integers(0, N, E).astype(np.int32)
    dst = rng.integers(0, N, E).astype(np.int32)
    y = rng.standard_normal((N, 1)).astype(np.float32)

    def loss(p, graph, y):
        x, src, dst = graph
        deg = jax.ops.segment_sum(jnp.ones(E), dst, N) + 1.0
        h = x
        for w in (p["w1"], p["w2"]):
            msg = jax.ops.segment_sum(h[src], dst, N) / deg[:, None]
            h = jax.nn.relu((h + msg) @ w)
        return jnp.mean((h @ p["out"] - y) ** 2)
    mom = jax.tree.map(np.zeros_like, p)
    return momentum_step(loss), (p, mom, (x, src, dst), y), (0, 1)


def recsys():
    """A recommendation model train step: embedding bags (20 ids a sample gathered from a
    100,000 x 32 table and summed), a dot-interaction MLP, BCE, and the table's sparse
    gradient scattered back (SGD)."""
    V, D, B, L = 100000, 32, 512, 20
    p = {"table": normal((V, D), 0.05), "w1": normal((2 * D, 128), 1/np.sqrt(2 * D)),
         "w2": normal((128, 1), 1/np.sqrt(128))}
    ids = rng.integers(0, V, (B, L)).astype(np.int32)
    dense = rng.standard_normal((B, D)).astype(np.float32)
    y = (rng.random((B, 1)) < 0.3).astype(np.float32)

    def loss(p, ids, dense, y):
        bag = p["table"][ids].sum(1)
        h = jax.nn.relu(jnp.concatenate([bag, dense * bag], -1) @ p["w1"])
        logit = h @ p["w2"]
        return jnp.mean(jnp.maximum(logit, 0) - logit * y + jnp.log1p(jnp.exp(-jnp.abs(logit))))

    def step(p, ids, dense, y):
        l, g = jax.value_and_grad(loss)(p, ids, dense, y)
        return l, jax.tree.map(lambda p, g: p - 0.1 * g, p, g)
    return step, (p, ids, dense, y), (0,)


def resnext():
    """A ResNeXt/DeepLab-style forward pass: grouped 3x3 convolutions (32 groups), dilated
    (atrous) convolutions at rates 2 and 4, average pooling with padding, batch norm folded."""
    B, Hh, W, C = 4, 32, 32, 128
    p = {"g": normal((3, 3, C // 32, C), 1/np.sqrt(9 * C // 32)),
         "d2": normal((3, 3, C, C), 1/np.sqrt(9 * C)), "d4": normal((3, 3, C, C), 1/np.sqrt(9 * C)),
         "s": np.ones(C, np.float32), "b": np.zeros(C, np.float32)}
    x = rng.standard_normal((B, Hh, W, C)).astype(np.float32)

    def f(p, x):
        dn = ("NHWC", "HWIO", "NHWC")
        h = lax.conv_general_dilated(x, p["g"], (1, 1), "SAME", dimension_numbers=dn,
                                     feature_group_count=32)
        h = jax.nn.relu(h * p["s"] + p["b"])
        a = lax.conv_general_dilated(h, p["d2"], (1, 1), "SAME", rhs_dilation=(2, 2), dimension_numbers=dn)
        b = lax.conv_general_dilated(h, p["d4"], (1, 1), "SAME", rhs_dilation=(4, 4), dimension_numbers=dn)
        pooled = lax.reduce_window(h, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0
        return jax.nn.relu(a + b + pooled + x)
    return f, (p, x), ()


def sampler():
    """Autoregressive sampling: a fori_loop of 32 steps drawing a token from a categorical
    over 8,192 logits (Gumbel-max with threefry bits split from a key each step), a GRU-like
    state update from the sampled token's embedding."""
    B, V, D, S = 8, 8192, 128, 32
    p = {"emb": normal((V, D), 0.05), "w": normal((D, D), 1/np.sqrt(D)), "out": normal((D, V), 1/np.sqrt(D))}
    key = np.array([0, 7], np.uint32)

    def f(p, key):
        def step(i, st):
            h, tok, out, key = st
            key, sub = jax.random.split(key)
            h = jnp.tanh(h @ p["w"] + p["emb"][tok])
            tok = jax.random.categorical(sub, h @ p["out"], -1).astype(jnp.int32)
            return h, tok, out.at[:, i].set(tok), key
        st = (jnp.zeros((B, D)), jnp.zeros(B, jnp.int32), jnp.zeros((B, S), jnp.int32),
              jax.random.wrap_key_data(key))
        return lax.fori_loop(0, S, step, st)[2]
    return f, (p, key), ()

def swin():
    """A Swin-style block forward pass: a cyclic shift (roll), window partition into 7x7
    windows by reshape and transpose, window attention with a relative position bias, the
    reverse partition and shift, an MLP."""
    B, Hh, W, C, Hd, w = 2, 28, 28, 96, 3, 7
    p = {"qkv": normal((C, 3 * C), 1/np.sqrt(C)), "o": normal((C, C), 1/np.sqrt(C)),
         "bias": normal((Hd, w * w, w * w), 0.02), "fc1": normal((C, 4 * C), 1/np.sqrt(C)),
         "fc2": normal((4 * C, C), 1/np.sqrt(4 * C)), "g": np.ones(C, np.float32)}
    x = rng.standard_normal((B, Hh, W, C)).astype(np.float32)

    def f(p, x):
        h = layer_norm(jnp.roll(x, (-3, -3), (1, 2)), p["g"], 0.0)
        win = h.reshape(B, Hh // w, w, W // w, w, C).transpose(0, 1, 3, 2, 4, 5).reshape(-1, w * w, C)
        q, k, v = jnp.split((win @ p["qkv"]).reshape(-1, w * w, 3, Hd, C // Hd), 3, 2)
        q, k, v = (t[:, :, 0].transpose(0, 2, 1, 3) for t in (q, k, v))
        a = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(C // Hd) + p["bias"], -1) @ v
        a = a.transpose(0, 2, 1, 3).reshape(-1, w * w, C) @ p["o"]
        a = a.reshape(B, Hh // w, W // w, w, w, C).transpose(0, 1, 3, 2, 4, 5).reshape(B, Hh, W, C)
        x = x + jnp.roll(a, (3, 3), (1, 2))
        return x + jax.nn.gelu(layer_norm(x, p["g"], 0.0) @ p["fc1"]) @ p["fc2"]
    return f, (p, x), ()


def selective_scan():
    """A Mamba-style selective state-space layer forward pass: input-dependent step sizes,
    a discretised diagonal recurrence over 1024 steps by lax.associative_scan (log-depth
    slices, pads and concatenations), gating."""
    B, L, D, N = 2, 1024, 64, 16
    p = {"a": -np.exp(normal((D, N), 0.5)), "wdt": normal((D, D), 1/np.sqrt(D)),
         "wb": normal((D, N), 1/np.sqrt(D)), "wc": normal((D, N), 1/np.sqrt(D)),
         "wg": normal((D, D), 1/np.sqrt(D))}
    x = rng.standard_normal((B, L, D)).astype(np.float32)

    def f(p, x):
        dt = jax.nn.softplus(x @ p["wdt"])                           # [B, L, D]
        abar = jnp.exp(dt[..., None] * p["a"])                       # [B, L, D, N]
        bx = (dt * x)[..., None] * (x @ p["wb"])[:, :, None, :]      # [B, L, D, N]

        def combine(l, r):
            return l[0] * r[0], r[0] * l[1] + r[1]
        _, h = lax.associative_scan(combine, (abar, bx), axis=1)
        y = jnp.einsum("bldn,bln->bld", h, x @ p["wc"])
        return y * jax.nn.silu(x @ p["wg"])
    return f, (p, x), ()


def many_params_adam():
    """An Adam step over 96 small parameter tensors of a 24-layer MLP (each layer a weight
    and a bias, plus norms), as optimisers see deep narrow models: many small kernels."""
    L, D = 24, 64
    p = {f"l{i}": {"w": normal((D, D), 1/np.sqrt(D)), "b": np.zeros(D, np.float32),
                   "g": np.ones(D, np.float32), "s": np.zeros(D, np.float32)} for i in range(L)}
    x = rng.standard_normal((32, D)).astype(np.float32)
    y = rng.standard_normal((32, D)).astype(np.float32)
    m = jax.tree.map(np.zeros_like, p)
    v = jax.tree.map(np.zeros_like, p)

    def loss(p, x, y):
        for i in range(L):
            q = p[f"l{i}"]
            x = x + jnp.tanh(layer_norm(x, q["g"], q["s"]) @ q["w"] + q["b"])
        return jnp.mean((x - y) ** 2)

    def step(p, m, v, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = jax.tree.map(lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), p, m, v)
        return l, p, m, v
    return step, (p, m, v, x, y), (0, 1, 2)

MODELS: dict[str, Callable] = {"bert_train_step": bert, "unet_bf16_forward": unet,
                                "lstm_train_step": lstm, "mobilenet_train_step": mobilenet,
                                "mixed_bf16_block_train_step": mixed,
                                "gru_bidir_train_step": gru_bidir,
                                "vae_convtranspose_train_step": vae,
                                "moe_topk_forward_backward": moe,
                                "t5_relpos_encoder_forward": t5,
                                "convnext_block_train_step": convnext,
                                "diffusion_sampler_loop": diffusion, "knn_sort_forward": knn,
                                "gpt_kv_cache_decode": gpt_decode,
                                "int8_quantized_mlp_forward": int8_mlp,
                                "wavenet_train_step": wavenet,
                                "llama_gqa_rope_train_step": llama,
                                "segment_cumsum_sort_forward": segments,
                                "conv3d_video_train_step": video,
                                "dropout_f16_mlp_train_step": dropout_mlp,
                                "beam_search_decode": beam_search,
                                "power_iteration_cholesky": power_iteration,
                                "fft_long_convolution": fft_conv,
                                "gnn_segment_sum_train_step": gnn,
                                "recsys_embedding_bag_train_step": recsys,
                                "resnext_dilated_forward": resnext,
                                "categorical_sampling_loop": sampler,
                                "swin_window_attention_forward": swin,
                                "selective_scan_forward": selective_scan,
                                "many_params_adam_step": many_params_adam}


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
