"""Writes ``train_step.hlo``: a whole-model module for the browser test, printed by JAX: one
training step (Adam) of a 2-layer transformer language model, parameters and optimiser state
donated. Small shapes, so it compiles in seconds, but a real model's structure (hundreds of
buffers: weights, moments, activations, gradients).

Run from the repository root with JAX installed: ``python tests/browser/data/make_train_step.py``.
The printed text is committed, so the test needs no JAX.
"""

from pathlib import Path

import jax
import jax.numpy as jnp

VOCAB, SEQ, BATCH, WIDTH, HEADS, LAYERS = 64, 16, 4, 32, 2, 2


def init(key):
    def dense(key, n_in, n_out):
        return jax.random.normal(key, (n_in, n_out)) / n_in ** 0.5

    keys = iter(jax.random.split(key, 4 + 6 * LAYERS))
    params = {"embed": dense(next(keys), VOCAB, WIDTH), "pos": dense(next(keys), SEQ, WIDTH),
              "out": dense(next(keys), WIDTH, VOCAB), "layers": []}
    for _ in range(LAYERS):
        params["layers"].append({
            "qkv": dense(next(keys), WIDTH, 3 * WIDTH), "proj": dense(next(keys), WIDTH, WIDTH),
            "up": dense(next(keys), WIDTH, 4 * WIDTH), "down": dense(next(keys), 4 * WIDTH, WIDTH),
            "ln1": jnp.ones(WIDTH), "ln2": jnp.ones(WIDTH)})
    return params


def layer_norm(x, scale):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * scale


def attention(x, layer):
    q, k, v = jnp.split(x @ layer["qkv"], 3, axis=-1)
    heads = lambda t: t.reshape(BATCH, SEQ, HEADS, WIDTH // HEADS).transpose(0, 2, 1, 3)
    q, k, v = heads(q), heads(k), heads(v)
    scores = q @ k.transpose(0, 1, 3, 2) / (WIDTH // HEADS) ** 0.5
    mask = jnp.tril(jnp.ones((SEQ, SEQ), bool))
    weights = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, WIDTH)
    return out @ layer["proj"]


def loss(params, tokens, targets):
    x = params["embed"][tokens] + params["pos"]
    for layer in params["layers"]:
        x = x + attention(layer_norm(x, layer["ln1"]), layer)
        x = x + jax.nn.gelu(layer_norm(x, layer["ln2"]) @ layer["up"]) @ layer["down"]
    logits = x @ params["out"]
    log_probs = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(log_probs, targets[..., None], axis=-1))


def train_step(params, m, v, tokens, targets):
    value, grads = jax.value_and_grad(loss)(params, tokens, targets)
    m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, grads)
    v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, grads)
    params = jax.tree.map(lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), params, m, v)
    return params, m, v, value


def main() -> None:
    params = init(jax.random.PRNGKey(0))
    zeros = jax.tree.map(jnp.zeros_like, params)
    tokens = jnp.zeros((BATCH, SEQ), jnp.int32)
    lowered = jax.jit(train_step, donate_argnums=(0, 1, 2)).lower(params, zeros, zeros, tokens,
                                                                   tokens)
    Path(__file__).with_name("train_step.hlo").write_text(lowered.as_text("hlo"))


if __name__ == "__main__":
    main()
