"""Regenerate ``data/``: small training and inference programs written with real JAX
libraries, as the newest JAX prints them, and XLA CPU's outputs for them (the tests only
read the files).

Printed with jax 0.12.0.1 / jaxlib 0.12.0.1 on Python 3.12, with equinox 0.13.8,
optax 0.2.8, diffrax 0.7.2, optimistix 0.1.0, flax 0.12.12 and dm-haiku 0.0.17.

Each program is written as ``NAME.hlo`` (``jax.jit(f, keep_unused=True).lower(*args)
.as_text("hlo")``, JAX's HLO before XLA's passes), ``NAME.opt.hlo`` (``lowered.compile()
.as_text()``, after XLA's passes; printed with every constant where the default print
elides large ones as ``{...}``) and ``NAME.npz`` (the flattened inputs ``arg_i`` and XLA's
flattened outputs ``out_j``). Inputs come from fixed seeds; shapes are small because the files
are checked in. Optimiser states are taken a few steps in, so that they are not zeros.
Run with a Python that has those libraries, from the repository root:
``python tests/jax12/make_programs.py [NAME ...]``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import diffrax
import equinox as eqx
from flax import linen as nn, nnx
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxlib import _hlo

OUT = Path(__file__).parent / "data"


def _normal(seed: int, *shape: int) -> jax.Array:
    return jax.random.normal(jax.random.PRNGKey(seed), shape, jnp.float32)


def _eqx_mlp_step(in_size: int, out_size: int, width: int, depth: int, batch: int,
                  opt: optax.GradientTransformation, activation: Callable = jax.nn.relu):
    """An Equinox MLP's mean-squared-error train step with ``opt``, two steps in."""
    model = eqx.nn.MLP(in_size, out_size, width, depth, activation=activation,
                       key=jax.random.PRNGKey(0))
    params, static = eqx.partition(model, eqx.is_array)

    def loss(p, x, y):
        return jnp.mean((jax.vmap(eqx.combine(p, static))(x) - y) ** 2)

    def step(p, s, x, y):
        value, grads = jax.value_and_grad(loss)(p, x, y)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s, value

    x, y = _normal(1, batch, in_size), _normal(2, batch, out_size)
    state = opt.init(params)
    for _ in range(2):
        params, state, _ = jax.jit(step)(params, state, x, y)
    return step, (params, state, x, y)


def eqx_mlp_lion():
    """Equinox MLP (8 -> 32 -> 32 -> 32 -> 4) trained with optax.lion."""
    return _eqx_mlp_step(8, 4, 32, 3, 16, optax.lion(1e-3))


def eqx_mlp_adam():
    """Equinox MLP with non-square widths (5 -> 12 -> 12 -> 3) trained with optax.adam."""
    return _eqx_mlp_step(5, 3, 12, 2, 10, optax.adam(1e-2))


def eqx_mlp_tanh():
    """Equinox tanh MLP (3 -> 16 -> 16 -> 16 -> 2) on a batch of 8 trained with optax.lion:
    its texts hold dots whose operands XLA lays out ``{0,1}``."""
    return _eqx_mlp_step(3, 2, 16, 3, 8, optax.lion(1e-3), jax.nn.tanh)


def eqx_gru_scan():
    """An Equinox GRU cell scanned over 12 time steps of a batch of 4 sequences, with a
    linear read-out; the loss's value and its gradients with respect to every weight."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(3))
    model = (eqx.nn.GRUCell(6, 10, key=k1), eqx.nn.Linear(10, 2, key=k2))
    params, static = eqx.partition(model, eqx.is_array)

    def loss(p, xs, ys):
        cell, head = eqx.combine(p, static)

        def run(seq):
            def body(h, x):
                h = cell(x, h)
                return h, head(h)
            _, out = jax.lax.scan(body, jnp.zeros(10), seq)
            return out
        return jnp.mean((jax.vmap(run)(xs) - ys) ** 2)

    return jax.value_and_grad(loss), (params, _normal(4, 4, 12, 6), _normal(5, 4, 12, 2))


def eqx_lstm_scan():
    """An Equinox LSTM cell scanned over 10 steps, trained one SGD step with momentum."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(6))
    model = (eqx.nn.LSTMCell(3, 8, key=k1), eqx.nn.Linear(8, 1, key=k2))
    params, static = eqx.partition(model, eqx.is_array)
    opt = optax.sgd(1e-2, momentum=0.9)

    def loss(p, xs, ys):
        cell, head = eqx.combine(p, static)

        def run(seq):
            def body(carry, x):
                carry = cell(x, carry)
                return carry, head(carry[0])
            _, out = jax.lax.scan(body, (jnp.zeros(8), jnp.zeros(8)), seq)
            return out
        return jnp.mean((jax.vmap(run)(xs) - ys) ** 2)

    def step(p, s, xs, ys):
        value, grads = jax.value_and_grad(loss)(p, xs, ys)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s, value

    xs, ys = _normal(7, 3, 10, 3), _normal(8, 3, 10, 1)
    state = opt.init(params)
    params, state, _ = jax.jit(step)(params, state, xs, ys)
    return step, (params, state, xs, ys)


def diffrax_neural_ode():
    """A Diffrax neural ODE (an Equinox MLP vector field, Tsit5, 8 constant steps from 0 to 1)
    and the gradient of a loss on its end state through RecursiveCheckpointAdjoint with 8
    checkpoints (a smaller text than the default's). ``throw=False``: diffrax's failed-solve
    check otherwise becomes a Python callback (``xla_ffi_python_cpu_callback``), which these
    texts avoid for now."""
    field = eqx.nn.MLP(3, 3, 16, 1, activation=jnp.tanh, key=jax.random.PRNGKey(9))
    params, static = eqx.partition(field, eqx.is_array)

    def loss(p, y0):
        f = eqx.combine(p, static)
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, args: f(y)), diffrax.Tsit5(), t0=0.0, t1=1.0,
            dt0=0.125, y0=y0,
            stepsize_controller=diffrax.ConstantStepSize(), max_steps=8, throw=False,
            adjoint=diffrax.RecursiveCheckpointAdjoint(checkpoints=8))
        return jnp.sum(sol.ys[-1] ** 2)

    return jax.value_and_grad(loss), (params, _normal(10, 3))


class _Cnn(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(6, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = nn.relu(nn.Conv(8, (3, 3), padding="VALID")(x))
        return nn.Dense(5)(x.reshape(x.shape[0], -1))


def flax_cnn():
    """A Flax linen CNN (two convolutions, average pooling, a dense layer) trained one step of
    softmax cross-entropy with optax.adamw, one step in."""
    model = _Cnn()
    x = _normal(11, 4, 10, 10, 2)
    labels = jax.random.randint(jax.random.PRNGKey(12), (4,), 0, 5)
    params = model.init(jax.random.PRNGKey(13), x)
    opt = optax.adamw(1e-3)

    def step(p, s, x, labels):
        def loss(p):
            logits = model.apply(p, x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        value, grads = jax.value_and_grad(loss)(p)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s, value

    state = opt.init(params)
    params, state, _ = jax.jit(step)(params, state, x, labels)
    return step, (params, state, x, labels)


class _Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm()(x)
        h = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=16)(h, h, mask=nn.make_causal_mask(x[..., 0]))
        x = x + h
        h = nn.LayerNorm()(x)
        return x + nn.Dense(16)(nn.gelu(nn.Dense(32)(h)))


def flax_transformer_block():
    """A Flax linen pre-norm transformer block (causal two-head attention, GELU MLP): its
    output and the gradients of a loss on it with respect to the weights and the input."""
    model = _Block()
    x = _normal(14, 2, 7, 16)
    params = model.init(jax.random.PRNGKey(15), x)

    def f(p, x):
        y = model.apply(p, x)
        return y, jax.grad(lambda p, x: jnp.sum(jnp.tanh(model.apply(p, x))), (0, 1))(p, x)

    return f, (params, x)


def haiku_lstm():
    """A Haiku LSTM unrolled over 9 steps (``hk.dynamic_unroll``) with an MLP head, trained one
    step with optax.adam, one step in."""
    def forward(xs):
        core = hk.LSTM(12)
        out, _ = hk.dynamic_unroll(core, xs, core.initial_state(xs.shape[1]))
        return hk.nets.MLP([10, 2])(out)

    net = hk.without_apply_rng(hk.transform(forward))
    xs, ys = _normal(16, 9, 3, 4), _normal(17, 9, 3, 2)
    params = net.init(jax.random.PRNGKey(18), xs)
    opt = optax.adam(3e-3)

    def step(p, s, xs, ys):
        value, grads = jax.value_and_grad(lambda p: jnp.mean((net.apply(p, xs) - ys) ** 2))(p)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s, value

    state = opt.init(params)
    params, state, _ = jax.jit(step)(params, state, xs, ys)
    return step, (params, state, xs, ys)


def optax_lbfgs():
    """Four iterations of optax.lbfgs (a fori_loop around its zoom line search's while loops)
    on a regularised least-squares problem, from a fixed start."""
    a, b = _normal(19, 12, 6), _normal(20, 12)

    def objective(w, a, b):
        return jnp.sum((a @ w - b) ** 2) + 0.1 * jnp.sum(w ** 4)

    opt = optax.lbfgs()

    def solve(w, a, b):
        f = lambda w: objective(w, a, b)   # noqa: E731
        value_and_grad = optax.value_and_grad_from_state(f)

        def iteration(_, carry):
            w, state = carry
            value, grad = value_and_grad(w, state=state)
            updates, state = opt.update(grad, state, w, value=value, grad=grad, value_fn=f)
            return optax.apply_updates(w, updates), state
        w, _ = jax.lax.fori_loop(0, 4, iteration, (w, opt.init(w)))
        return w, f(w)

    return solve, (_normal(21, 6), a, b)


def optax_chain():
    """A two-layer model trained with optax.chain(clip_by_global_norm, add_decayed_weights,
    scale_by_adam, scale_by_learning_rate) over an exponential-decay schedule, three steps in."""
    params = {"w1": _normal(22, 7, 9) * 0.3, "b1": jnp.zeros(9), "w2": _normal(23, 9, 4) * 0.3}
    schedule = optax.exponential_decay(1e-2, transition_steps=2, decay_rate=0.5)
    opt = optax.chain(optax.clip_by_global_norm(0.5), optax.add_decayed_weights(1e-2),
                      optax.scale_by_adam(), optax.scale_by_learning_rate(schedule))

    def step(p, s, x, y):
        def loss(p):
            return jnp.mean((jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] - y) ** 2)
        value, grads = jax.value_and_grad(loss)(p)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s, value

    x, y = _normal(24, 11, 7), _normal(25, 11, 4)
    state = opt.init(params)
    for _ in range(3):
        params, state, _ = jax.jit(step)(params, state, x, y)
    return step, (params, state, x, y)


def vmap_einsum():
    """Batched einsums over transposed operand layouts under two vmaps: a bilinear form with
    the contraction on leading dimensions, a transposed matmul and its reduction."""
    def f(a, b, c):
        def one(a, b, c):
            ab = jnp.einsum("kij,kjl->lik", a, b)           # contraction in the middle
            return jnp.einsum("lik,mk->iml", ab, c), jnp.einsum("kij,kil->jl", a, a).T
        return jax.vmap(jax.vmap(one, in_axes=(0, 2, None)), in_axes=(1, None, 0))(a, b, c)

    return f, (_normal(26, 3, 2, 4, 5, 6), _normal(27, 4, 6, 3, 3), _normal(28, 2, 7, 4))


class _BnCnn(nn.Module):
    @nn.compact
    def __call__(self, x, train):
        x = nn.Conv(4, (3, 3), strides=(2, 2), use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9)(x))
        x = nn.Dropout(0.3, deterministic=not train)(x)
        x = nn.RMSNorm()(nn.max_pool(x, (2, 2), strides=(1, 1)))
        return nn.Dense(3)(x.reshape(x.shape[0], -1))


def flax_bn_dropout():
    """A Flax linen CNN in train mode: strided convolution (without a bias, which BatchNorm
    would cancel: its gradient would be rounding noise), BatchNorm updating its running
    statistics (``mutable=["batch_stats"]``), Dropout from an rng key, max pooling and
    RMSNorm; one step of optax.sgd with Nesterov momentum."""
    model, x = _BnCnn(), _normal(30, 4, 8, 8, 3)
    variables = model.init({"params": jax.random.PRNGKey(0), "dropout": jax.random.PRNGKey(1)},
                           x, False)
    opt = optax.sgd(0.1, momentum=0.9, nesterov=True)
    labels = jnp.array([0, 2, 1, 1])

    def step(params, stats, s, x, key):
        def loss(p):
            y, new = model.apply({"params": p, "batch_stats": stats}, x, True,
                                 rngs={"dropout": key}, mutable=["batch_stats"])
            return optax.softmax_cross_entropy_with_integer_labels(y, labels).mean(), new
        (value, new), grads = jax.value_and_grad(loss, has_aux=True)(params)
        updates, s = opt.update(grads, s, params)
        return optax.apply_updates(params, updates), new["batch_stats"], s, value

    params = variables["params"]
    return step, (params, variables["batch_stats"], opt.init(params), x, jax.random.PRNGKey(5))


class _NnxNet(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.emb = nnx.Embed(20, 8, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=2, in_features=8, qkv_features=8,
                                           use_bias=False, decode=False, rngs=rngs)
        self.ln = nnx.LayerNorm(8, rngs=rngs)
        self.bn = nnx.BatchNorm(8, rngs=rngs)
        self.drop = nnx.Dropout(0.2, rngs=rngs)
        self.out = nnx.Linear(8, 20, rngs=rngs)

    def __call__(self, tokens, valid):
        h = self.emb(tokens)
        mask = nnx.combine_masks(nnx.make_causal_mask(tokens),
                                 nnx.make_attention_mask(valid, valid))
        h = h + self.attn(self.ln(h), mask=mask)
        return self.out(self.drop(self.bn(h.reshape(-1, 8)).reshape(h.shape)))


def nnx_embed_attention():
    """A flax.nnx next-token model (Embed, LayerNorm, causal and padding-masked attention,
    BatchNorm, Dropout from the module's own rng stream) trained one step by nnx.Optimizer
    with clip_by_global_norm and SGD momentum. The attention has no biases: BatchNorm after
    it would cancel their gradients to rounding noise (and the keys' always is). The state's
    rng keys travel as raw key data (``key_data``/``wrap_key_data``), as a program's arrays
    must."""
    model = _NnxNet(nnx.Rngs(0, dropout=1))
    opt = nnx.Optimizer(model, optax.chain(optax.clip_by_global_norm(1.0),
                                           optax.sgd(0.1, momentum=0.9)), wrt=nnx.Param)
    graphdef, state = nnx.split((model, opt))
    tokens = jax.random.randint(jax.random.PRNGKey(2), (2, 6), 0, 20)
    valid = jnp.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)

    def is_key(a):
        return jnp.issubdtype(a.dtype, jax.dtypes.prng_key)

    impls = jax.tree.map(lambda a: jax.random.key_impl(a) if is_key(a) else None, state)

    def raw(tree):
        return jax.tree.map(lambda a: jax.random.key_data(a) if is_key(a) else a, tree)

    def step(data, tokens, valid):
        state = jax.tree.map(lambda a, i: a if i is None else jax.random.wrap_key_data(a, impl=i),
                             data, impls, is_leaf=lambda x: x is None)
        model, opt = nnx.merge(graphdef, state)

        def loss(model):
            logits = model(tokens, valid)
            return optax.softmax_cross_entropy_with_integer_labels(logits[:, :-1],
                                                                   tokens[:, 1:]).mean()
        value, grads = nnx.value_and_grad(loss)(model)
        opt.update(model, grads)
        return raw(nnx.state((model, opt))), value

    return step, (raw(state), tokens, valid)


def optax_adafactor_rmsprop():
    """optax.adafactor (factored second moments) and a chain of clip_by_global_norm and
    centred RMSprop with momentum over a warmup-cosine schedule, on one model, three steps in."""
    params = {"w": _normal(40, 6, 10) * 0.3, "b": jnp.zeros(10), "v": _normal(41, 10) * 0.1}
    schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 10)
    opts = (optax.adafactor(1e-2, min_dim_size_to_factor=4),
            optax.chain(optax.clip_by_global_norm(0.1),
                        optax.rmsprop(schedule, momentum=0.9, centered=True)))
    x, y = _normal(42, 9, 6), _normal(43, 9)

    def loss(p):
        return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) @ p["v"] - y) ** 2)

    def step(p, states):
        grads = jax.grad(loss)(p)
        out = [opt.update(grads, s, p) for opt, s in zip(opts, states)]
        return tuple((optax.apply_updates(p, u), s) for u, s in out)

    states = tuple(opt.init(params) for opt in opts)
    for _ in range(3):
        states = tuple(s for _, s in jax.jit(step)(params, states))
    return step, (params, states)


def eqx_conv_embed():
    """Equinox Conv2d, LayerNorm over (C, H, W), Embedding and an MLP head under vmap: the
    loss's value and gradients by eqx.filter_value_and_grad (the embedding's gradient is a
    scatter-add with a repeated index)."""
    k = jax.random.split(jax.random.PRNGKey(50), 3)
    model = (eqx.nn.Conv2d(2, 4, 3, padding=1, key=k[0]), eqx.nn.LayerNorm((4, 6, 6)),
             eqx.nn.Embedding(10, 4, key=k[1]), eqx.nn.MLP(4 * 36 + 4, 3, 8, 2, key=k[2]))
    params, static = eqx.partition(model, eqx.is_array)

    def loss(m, x, tokens, y):
        conv, norm, embedding, mlp = m

        def one(x, t):
            return mlp(jnp.concatenate([jax.nn.gelu(norm(conv(x))).reshape(-1), embedding(t)]))
        return jnp.mean((jax.vmap(one)(x, tokens) - y) ** 2)

    def f(p, x, tokens, y):
        return eqx.filter_value_and_grad(loss)(eqx.combine(p, static), x, tokens, y)

    return f, (params, _normal(51, 3, 2, 6, 6), jnp.array([1, 7, 7]), _normal(52, 3, 3))


def haiku_bn_conv():
    """Haiku Conv2D (no bias, as before BatchNorm), BatchNorm (train mode: its moving
    averages are the new state) and LayerNorm under hk.transform_with_state; one plain
    gradient step."""
    def forward(x, is_training):
        x = hk.Conv2D(4, 3, with_bias=False)(x)
        x = jax.nn.relu(hk.BatchNorm(True, True, 0.9)(x, is_training))
        return hk.Linear(2)(hk.LayerNorm(-1, True, True)(x).reshape(x.shape[0], -1))

    net = hk.transform_with_state(forward)
    x = _normal(60, 3, 5, 5, 2)
    params, state = net.init(jax.random.PRNGKey(61), x, True)

    def step(p, state, x, key):
        def loss(p):
            y, new = net.apply(p, state, key, x, True)
            return jnp.sum(y ** 2), new
        (value, new), grads = jax.value_and_grad(loss, has_aux=True)(p)
        return jax.tree.map(lambda a, g: a - 0.01 * g, p, grads), new, value

    return step, (params, state, x, jax.random.PRNGKey(3))


def diffrax_adaptive():
    """A damped oscillator solved by Diffrax's Dopri5 with a PIDController (adaptive steps:
    a while loop whose trip count depends on the data), saved at 7 times, and the number of
    steps taken."""
    def field(t, y, args):
        return jnp.stack([y[1], -args * y[0] - 0.1 * y[1]])

    def f(y0, k):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field), diffrax.Dopri5(), 0.0, 3.0, 0.1, y0, args=k,
            saveat=diffrax.SaveAt(ts=jnp.linspace(0, 3, 7)),
            stepsize_controller=diffrax.PIDController(rtol=1e-5, atol=1e-5), max_steps=256,
            throw=False)
        return sol.ys, sol.stats["num_steps"]

    return f, (jnp.array([1.0, 0.0]), jnp.float32(2.0))


def lax_scans_and_sorts():
    """Cumulative sums, products, maxima, minima and logsumexp; sorts, argsorts, top_k,
    argmax/argmin and searchsorted, on floats and integers."""
    def f(x, i):
        return (jnp.cumsum(x, 1), jnp.cumprod(x * 0.5, 0), jax.lax.cummax(x, 1),
                jax.lax.cummin(x, 0), jax.lax.cumlogsumexp(x, 1), jnp.cumsum(i, 0),
                jnp.sort(x, 1), jnp.argsort(x, 0), *jax.lax.top_k(x, 3), jnp.sort(i, 1),
                jnp.argmax(x, 1), jnp.argmin(i, 0), jnp.sort(x.ravel(), stable=True),
                jnp.searchsorted(jnp.sort(x[0]), x[1]))

    return f, (_normal(70, 5, 9), jax.random.randint(jax.random.PRNGKey(71), (5, 9), -4, 4))


def linalg_lapack():
    """jnp.linalg on CPU, which JAX lowers to LAPACK custom calls: cholesky, solve, qr, eigh,
    svd, inv, det and slogdet."""
    def f(a, b):
        s = a @ a.T + 5 * jnp.eye(5)
        return (jnp.linalg.cholesky(s), jnp.linalg.solve(s, b), *jnp.linalg.qr(a),
                *jnp.linalg.eigh(s), jnp.linalg.svd(a, compute_uv=False), jnp.linalg.inv(s),
                jnp.linalg.det(s), jnp.linalg.slogdet(a)[1])

    return f, (_normal(80, 5, 5), _normal(81, 5, 2))


def fft_and_random():
    """jnp.fft (complex, real and two-dimensional transforms and their inverses) and
    jax.random with a threefry key and an rbg key (``key_impl="rbg"``, passed as key data):
    normal, uniform, bernoulli, randint, categorical, split under vmap, permutation."""
    def f(x, k1, raw):
        k2 = jax.random.wrap_key_data(raw, impl="rbg")
        c = jnp.fft.fft(x)
        return (jnp.abs(c), jnp.fft.ifft(c).real, jnp.fft.irfft(jnp.fft.rfft(x), n=8),
                jnp.fft.fft2(x).imag, jax.random.normal(k1, (3, 5)),
                jax.random.uniform(k1, (7,), minval=-1, maxval=2),
                jax.random.bernoulli(k1, 0.3, (9,)), jax.random.randint(k1, (4,), 0, 100),
                jax.random.categorical(k1, jnp.log(jnp.array([0.1, 0.2, 0.7])), shape=(6,)),
                jax.vmap(lambda k: jax.random.normal(k, (2,)))(jax.random.split(k1, 3)),
                jax.random.normal(k2, (3, 4)), jax.random.uniform(k2, (5,)),
                jax.random.permutation(k1, 8))

    raw = jax.random.key_data(jax.random.key(3, impl="rbg"))
    return f, (_normal(82, 4, 8), jax.random.PRNGKey(9), raw)


def int_float_edges():
    """Integer and float corner cases XLA defines: division and remainder by zero and of
    INT_MIN by -1, shifts by the bit width or more, float to integer conversions of NaN,
    infinities and out-of-range values, NaN in max/min/sort/argmax, rounding half cases."""
    def f(i, j, x, u):
        return (i // j, i % j, jax.lax.div(i, j), jax.lax.rem(i, j), i << j, i >> j,
                jax.lax.shift_right_logical(i, j), x.astype(jnp.int32), x.astype(jnp.uint8),
                x.astype(jnp.int8), x.astype(jnp.uint32), u // jnp.uint32(3),
                u >> (j.astype(jnp.uint32) & 7), jnp.maximum(x, 0.0), jnp.minimum(x, 1.0),
                jnp.fmax(x, 0.0), jnp.sort(x), jnp.argsort(x), jnp.argmax(x), jnp.argmin(x),
                jnp.round(x), jnp.floor(x), jnp.trunc(x), jnp.sign(x), x != x,
                jnp.clip(x, -1, 1), jnp.nextafter(x, 0.0), jnp.cbrt(x), jnp.expm1(x),
                jnp.log1p(x), x.astype(jnp.float16), x.astype(jnp.bfloat16))

    i = jnp.array([7, -7, 0, 2**31 - 1, -2**31, -2**31, 5, -1, 100, 3], jnp.int32)
    j = jnp.array([2, 2, 0, 0, -1, 0, 40, 31, 3, -3], jnp.int32)
    x = jnp.array([jnp.nan, jnp.inf, -jnp.inf, 2.5, -2.5, 3e9, -3e9, 300.7, -0.0, 0.5])
    u = jnp.array([0, 1, 2**32 - 1, 5, 6, 7, 8, 2**31, 10, 11], jnp.uint32)
    return f, (i, j, x, u)


def mixed_precision_int8():
    """A bf16/f16 mixed-precision step with loss scaling and a finiteness check (jmp-style),
    and an int8 quantised matmul accumulating in s32 (``preferred_element_type``) with its
    requantisation."""
    def f(w, x, xq, wq):
        def loss(w):
            h = jax.nn.gelu(x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float16)
            return jnp.mean(jnp.tanh(h).astype(jnp.float32) ** 2) * 128.0
        value, grads = jax.value_and_grad(loss)(w)
        grads = grads / 128.0
        finite = jnp.all(jnp.isfinite(grads))
        acc = jax.lax.dot_general(xq, wq, (((1,), (0,)), ((), ())),
                                  preferred_element_type=jnp.int32)
        y = acc.astype(jnp.float32) * 6e-4
        return (value, jnp.where(finite, w - 0.1 * grads, w), finite,
                x.astype(jnp.bfloat16).sum(0), acc,
                jnp.clip(jnp.round(y / 0.05), -128, 127).astype(jnp.int8))

    xq = jax.random.randint(jax.random.PRNGKey(120), (6, 8), -128, 128).astype(jnp.int8)
    wq = jax.random.randint(jax.random.PRNGKey(121), (8, 5), -128, 128).astype(jnp.int8)
    return f, (_normal(110, 8, 6), _normal(111, 5, 8), xq, wq)


def scatter_gather_modes():
    """Indexed updates and reads with out-of-range and negative indices: ``.at[]`` set, add,
    min, max, mul, fill/clip/wrap/drop modes, take_along_axis, segment sums and maxima,
    bincount, clamped dynamic slices and updates, one_hot, reflect and edge padding."""
    def f(x, idx, v):
        return (x.at[idx].set(v), x.at[idx].add(v), x.at[idx].min(v), x.at[idx].max(v),
                x.at[idx].mul(v), x.at[idx].get(mode="fill", fill_value=-7.0),
                x.at[idx].get(mode="clip"), jnp.take(x, idx, axis=0, mode="wrap"),
                jnp.take_along_axis(x, jnp.abs(idx[:6, None]) % 4, axis=1),
                jax.ops.segment_sum(v, jnp.abs(idx) % 3, 3),
                jax.ops.segment_max(v, jnp.abs(idx) % 3, 3),
                jnp.bincount(jnp.abs(idx) % 5, length=5),
                jax.lax.dynamic_slice(x, (idx[0], idx[1]), (2, 3)),
                jax.lax.dynamic_update_slice(x, v[:2, :2], (idx[2], idx[3])),
                x.at[idx, 1].add(1.0, mode="drop"), jax.nn.one_hot(idx, 6),
                jnp.pad(x, ((1, 2), (2, 0)), mode="reflect"), jnp.pad(x, 1, mode="edge"))

    idx = jnp.array([1, 3, 1, 9, -2, -8, 5], jnp.int32)
    return f, (_normal(140, 6, 4), idx, _normal(141, 7, 4))


def uint8_image_bits():
    """A uint8 image pipeline (scaling by 1/255, per-channel normalisation, requantisation,
    flips, averages in uint16), wrapping uint8 and int16 arithmetic, and bit-level views:
    population count, count leading zeros, bitcasts (of ``img / 255``, which XLA computes as
    a multiplication by the reciprocal), packbits and unpackbits."""
    def f(img, s16, u32):
        fimg = img.astype(jnp.float32) / 255.0
        norm = (fimg - fimg.mean((0, 1))) / (fimg.std((0, 1)) + 1e-5)
        avg = (img.astype(jnp.uint16) + jnp.roll(img, 1, 0).astype(jnp.uint16)) // 2
        return (jnp.clip(jnp.round(norm * 40 + 128), 0, 255).astype(jnp.uint8), img[::-1, ::2],
                avg.astype(jnp.uint8), img + jnp.uint8(200), img - jnp.uint8(100),
                img * jnp.uint8(3), img // jnp.uint8(7), s16 * jnp.int16(300) + jnp.int16(-32768),
                s16 >> 3, jax.lax.shift_right_logical(s16, jnp.int16(3)),
                jax.lax.population_count(u32), jax.lax.clz(u32), jax.lax.clz(s16),
                jax.lax.bitcast_convert_type(u32, jnp.float32),
                jax.lax.bitcast_convert_type(fimg[0, 0], jnp.int32), jnp.packbits(img[0, 0] > 100),
                jnp.unpackbits(img[1, 1]), ~img, img ^ jnp.uint8(0x5A), jnp.max(img, axis=(0, 1)),
                jnp.argmax(img.reshape(-1, 3), 0), jnp.sum(img, axis=0, dtype=jnp.uint8),
                jnp.sum(img, dtype=jnp.int32), img.astype(jnp.int8), s16.astype(jnp.uint8),
                jnp.mean(img, axis=-1), jnp.abs(s16), -s16, jnp.sign(s16))

    img = jax.random.randint(jax.random.PRNGKey(1), (4, 5, 3), 0, 256).astype(jnp.uint8)
    s16 = jnp.array([0, 1, -1, 32767, -32768, 109, -200, 7], jnp.int16)
    u32 = jnp.array([0, 1, 0xFFFFFFFF, 0x80000000, 12345, 0x3F800000, 0x7FC00000, 255], jnp.uint32)
    return f, (img, s16, u32)


def binning_quantize():
    """Step functions of computed values, where a last-place difference is a different
    answer: bins of ``x / 0.1``, time indices, digitize, floor_divide and mod by float
    constants, rounding quantisation with a straight-through gradient, divisions by square
    roots, exponentials and quotients, and the floor of a mean and of a softmax."""
    def f(x, v, a, b, t):
        def ste(x):
            return jnp.sum((x + jax.lax.stop_gradient(jnp.round(x / 0.05) * 0.05 - x)) ** 2)
        return (jnp.floor(x / 0.1), (t / 0.01).astype(jnp.int32),
                jnp.digitize(x, jnp.linspace(-1, 1, 11)), jnp.floor_divide(x, 0.25),
                jnp.mod(x, 0.3), jnp.round(x / 0.05), jax.grad(ste)(x),
                jnp.floor(x / jnp.sqrt(v)), jnp.exp(a) / jnp.exp(b), x[:4] / jnp.exp(a),
                jnp.floor(x / 2 / 3 * 60), jnp.floor(x / (v / 7)),
                jnp.argmax(jnp.stack([x / 3, x * (1 / 3)]), 0),
                jnp.ceil(jnp.mean(x.reshape(10, 3), 1) * 30),
                jnp.floor(jax.nn.softmax(x[:9].reshape(3, 3)) * 1e4))

    # hundredths (k / 100, correctly rounded) on which the quotient and XLA's product differ
    x = np.array([130, 210, 260, -235, -155, 155, 235, 65, 105, 285, -225, -165, 165, 225, -290,
                  -265, -247, 0, 7, -30, 99, 101, 149, -149, 12, 50, -50, 275, -275, 1],
                 np.float32) / np.float32(100)
    t = np.array([-290, -289, -288, -265, -264, -263, -247, -246, -245, -244, -243, -242, 0, 1,
                  2, 3, 5, 7, 10, 29, 57, 58, 99, 100, 113, 114, 199, 229, 287, 299],
                 np.float32) / np.float32(100)
    return f, (x, np.linspace(0.01, 2.0, 30, dtype=np.float32) ** 2,
               np.array([100.0, 90.0, -100.0, 1.0], np.float32),
               np.array([99.0, 89.0, -101.0, 2.0], np.float32), t)


def x64_program():
    """float64 and int64 under ``jax_enable_x64``: a solve and a Cholesky factor (LAPACK's
    d-prefixed custom calls), cumulative int64 sums, products beyond 32 bits, shifts by 40,
    int64 indices, f64 gradients and an f64 overflow to infinity."""
    def f(x, i):
        y = x @ x.T + jnp.eye(4)
        return (jnp.linalg.solve(y, x), jnp.cumsum(i), jnp.argsort(x[0]),
                i * jnp.int64(3_000_000_000), jnp.exp(x) / 3, x.astype(jnp.float32),
                i.astype(jnp.float64) / 7, jnp.sum(x ** 2, 1), x[i % 4], jnp.linalg.cholesky(y),
                jax.grad(lambda x: jnp.sum(jnp.sin(x) * x))(x),
                jnp.arange(5, dtype=jnp.int64) << 40, jnp.float64(1e300) * x[0])

    return f, (np.random.RandomState(0).randn(4, 4),
               np.array([1, -5, 2**40, 7, -2**62], np.int64))


def complex_programs():
    """complex64: a matmul and the gradient of a real loss with respect to complex weights,
    an FFT convolution, complex elementwise functions, a Hermitian matrix's eigenvalues and a
    solve against it (LAPACK's c-prefixed custom calls), cumulative sums and products."""
    def f(z, w, x, k):
        def loss(w):
            y = z @ w
            return jnp.sum(jnp.abs(jnp.exp(0.3 * y) * jnp.conj(y)) ** 2).real
        h = z @ jnp.conj(z.T) + 3 * jnp.eye(3)
        spectrum = jnp.fft.rfft(x, 16) * jnp.fft.rfft(k, 16)
        return (jax.grad(loss)(w), jnp.fft.irfft(spectrum, 16)[:10],
                jnp.sqrt(z), jnp.log(z), jnp.angle(z), jnp.tanh(z), z ** 3, jnp.reciprocal(z),
                jnp.linalg.eigvalsh(h), jnp.linalg.solve(h, z), jnp.cumsum(z, 1), jnp.prod(z, 0),
                (z * 1j).real, jax.lax.complex(x[:3], x[3:6]))

    z = (_normal(290, 3, 3) + 1j * _normal(291, 3, 3)).astype(jnp.complex64)
    w = (_normal(292, 3, 2) + 1j * _normal(293, 3, 2)).astype(jnp.complex64) * 0.5
    return f, (z, w, _normal(294, 8), _normal(295, 3))


def remat_sharding_barrier():
    """Three layers under jax.checkpoint with different policies, each output constrained
    to one device (JAX's ``Sharding`` custom calls in its text), an explicit optimisation
    barrier, a custom_jvp and stop_gradient: the loss and its gradients."""
    @jax.custom_jvp
    def safe_log(x):
        return jnp.log(x)

    @safe_log.defjvp
    def _(primals, tangents):
        return safe_log(primals[0]), tangents[0] / jnp.maximum(primals[0], 1e-3)

    policies = (jax.checkpoint_policies.nothing_saveable, jax.checkpoint_policies.dots_saveable,
                jax.checkpoint_policies.everything_saveable)
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])

    def f(ws, x):
        def loss(ws):
            h = x
            for w, policy in zip(ws, policies):
                h = jax.checkpoint(lambda w, h: jnp.tanh(h @ w), policy=policy)(w, h)
                h = jax.lax.with_sharding_constraint(h, device)
            h = jax.lax.optimization_barrier(h)
            return jnp.sum(safe_log(h ** 2 + 0.5)) + jnp.sum(jax.lax.stop_gradient(h) * h)
        return jax.value_and_grad(loss)(ws)

    return f, ([_normal(300 + i, 4, 4) * 0.5 for i in range(3)], _normal(310, 2, 4))


def diffrax_kvaerno():
    """A stiff linear system solved by Diffrax's Kvaerno3 (an implicit solver: optimistix's
    Newton iterations solving with lineax's LU, LAPACK's getrf and trsm custom calls inside
    the step loop) with a PIDController, saved at 5 times, and the number of steps taken."""
    def f(y0, a):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, a: a @ y), diffrax.Kvaerno3(), 0.0, 1.0, 0.05, y0,
            args=a, saveat=diffrax.SaveAt(ts=jnp.linspace(0, 1, 5)),
            stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6), max_steps=128,
            throw=False)
        return sol.ys, sol.stats["num_steps"]

    a = jnp.array([[-50.0, 1.0, 0.0], [1.0, -2.0, 1.0], [0.0, 0.5, -1.0]])
    return f, (jnp.array([1.0, 0.5, -0.3]), a)


class _Rnn(nn.Module):
    @nn.compact
    def __call__(self, xs):
        h = nn.RNN(nn.OptimizedLSTMCell(6))(xs)
        h = nn.RNN(nn.GRUCell(5), reverse=True, keep_order=True)(h, seq_lengths=jnp.array([7, 4]))
        return nn.Dense(2)(h)


def linen_rnn():
    """Flax linen nn.RNN (nn.scan) over an OptimizedLSTMCell, then a reversed GRUCell with
    per-sequence lengths (the shorter sequence's padding masked): a loss and its gradients."""
    model, xs = _Rnn(), _normal(230, 2, 7, 3)
    params = model.init(jax.random.PRNGKey(0), xs)

    def f(p, xs):
        return jax.value_and_grad(lambda p: jnp.mean(jnp.sin(model.apply(p, xs))))(p)

    return f, (params, xs)


class _Decoder(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.SelfAttention(num_heads=2, qkv_features=4, decode=True)(x)


def linen_decode_cache():
    """Flax linen SelfAttention with ``decode=True``: three one-token steps, each writing the
    key/value cache at its index (dynamic-update-slice) and attending to the filled part."""
    model, x = _Decoder(), _normal(360, 2, 5, 4)
    variables = model.init(jax.random.PRNGKey(0), x)

    def f(p, cache, x):
        outs = []
        for i in range(3):
            y, new = model.apply({"params": p, "cache": cache}, x[:, i:i + 1], mutable=["cache"])
            cache = new["cache"]
            outs.append(y)
        return jnp.concatenate(outs, 1), cache

    return f, (variables["params"], variables["cache"], x)


def optax_ctc():
    """optax.ctc_loss over padded logits and padded labels, and its gradient."""
    def f(logits, logit_pad, labels, label_pad):
        return jax.value_and_grad(
            lambda l: optax.ctc_loss(l, logit_pad, labels, label_pad).sum())(logits)

    return f, (_normal(220, 2, 7, 5), jnp.array([[0] * 7, [0] * 5 + [1] * 2], jnp.float32),
               jnp.array([[1, 2, 2], [3, 1, 0]], jnp.int32),
               jnp.array([[0, 0, 0], [0, 0, 1]], jnp.float32))


def eqx_while_kinds():
    """equinox.internal.while_loop, checkpointed (recomputing from 3 checkpoints in reverse
    mode) and bounded (a nest of scans and conds up to 8 steps), with gradients through both."""
    from equinox.internal import while_loop

    def f(x, w):
        def run(kind, x, w):
            def body(c):
                return c[0] + 1, jnp.tanh(w @ c[1]) + 0.1 * c[1]
            return while_loop(lambda c: c[0] < 6, body, (0, x), max_steps=8, kind=kind,
                              checkpoints=3 if kind == "checkpointed" else None)[1]
        return [jax.value_and_grad(lambda w, x: jnp.sum(run(kind, x, w) ** 2), (0, 1))(w, x)
                for kind in ("checkpointed", "bounded")]

    return f, (_normal(250, 4), _normal(251, 4, 4) * 0.6)


def float_edges_more():
    """f32 edge values (signed zeros, infinities, NaN, a denormal, 1e30) through frexp and
    ldexp (exponents past the range), nextafter, float_power, hypot, logaddexp(2), sinc,
    round to decimals, copysign, signbit, isclose, fmod/remainder/floor_divide, modf,
    heaviside, nan_to_num, fmin/fmax and exp2/log2/log10."""
    def f(x, y, e):
        m, ex = jnp.frexp(x)
        return (jnp.nextafter(x, y), jnp.ldexp(x, e), m, ex, jnp.float_power(jnp.abs(x), y),
                jnp.hypot(x, y), jnp.logaddexp(x, y), jnp.logaddexp2(x, y), jnp.sinc(x),
                jnp.round(x, 2), jnp.round(x * 10, -1), jnp.copysign(x, y), jnp.signbit(x),
                jnp.isclose(x, y), jnp.fmod(x, y), jnp.remainder(x, y), jnp.floor_divide(x, y),
                *jnp.modf(x), jnp.heaviside(x, 0.5), jnp.nan_to_num(x), jnp.fmin(x, y),
                jnp.fmax(x, y), jnp.exp2(y), jnp.log2(jnp.abs(x)), jnp.log10(jnp.abs(x)),
                jnp.arctanh(jnp.clip(y, -1, 1)), jnp.reciprocal(x), jax.lax.rsqrt(jnp.abs(x)),
                jax.lax.erf_inv(jnp.clip(y, -1, 1)))
    x = jnp.array([0.0, -0.0, 1.0, -1.0, jnp.inf, -jnp.inf, jnp.nan, 2.5, -2.5, 1e-40, 3.0,
                   0.125, -7.5, 1e30, 0.5, -0.5], jnp.float32)
    y = jnp.array([1.0, -1.0, jnp.inf, 0.0, jnp.inf, 2.0, 1.0, 2.0, 2.0, -0.0, -jnp.inf, 0.5,
                   2.0, 3.0, jnp.nan, -1.5], jnp.float32)
    e = jnp.array([1, -1, 200, -200, 3, 0, 1, 2, -3, 130, -140, 5, 1, 1, 0, 7], jnp.int32)
    return f, (x, y, e)


def int_narrow_edges():
    """int8, uint16 and int16 at their limits: floor division and remainder by negative
    divisors, shifts by 0 to 31 (past the bit width), sums and products that wrap in their
    own type, clz and popcount of negatives, abs/negation of the minimum, integer powers,
    narrowing converts, and s32 div/rem by -4 and an add that wraps."""
    def f(a8, u16, i16, s, i32):
        return (a8 // jnp.int8(-3), a8 % jnp.int8(-3), jnp.fmod(a8, jnp.int8(3)),
                jnp.floor_divide(i16, i16[::-1] | 1), a8 << s.astype(jnp.int8),
                a8 >> s.astype(jnp.int8), u16 << s.astype(jnp.uint16), u16 >> s.astype(jnp.uint16),
                jax.lax.shift_right_logical(a8, s.astype(jnp.int8)), jnp.sum(a8, dtype=jnp.int8),
                jnp.sum(u16, dtype=jnp.uint16), jnp.cumsum(u16, dtype=jnp.uint16),
                jnp.prod(a8, dtype=jnp.int8), jax.lax.clz(a8), jax.lax.clz(i16),
                jax.lax.population_count(a8), jax.lax.population_count(i16), jnp.abs(a8), -a8,
                i32 ** 3, jnp.bitwise_not(u16), jnp.sign(a8), jnp.max(a8), jnp.min(u16),
                jnp.argmax(a8), jnp.argmin(i16), a8 * jnp.int8(7), u16 * jnp.uint16(1000),
                i16.astype(jnp.uint8), u16.astype(jnp.int8), a8.astype(jnp.float32) / 3,
                jnp.mean(a8), jnp.bitwise_count(i32), jax.lax.div(i32, jnp.int32(-4)),
                jax.lax.rem(i32, jnp.int32(-4)), i32 // 4, i32 % 4, jnp.int32(2**31 - 1) + i32)
    a8 = jnp.array([-128, -127, -1, 0, 1, 5, -5, 127, 100, -100, 64, -64], jnp.int8)
    u16 = jnp.array([0, 1, 65535, 32768, 1000, 7, 60000, 12345, 2, 3, 40000, 9], jnp.uint16)
    i16 = jnp.array([-32768, 32767, -1, 0, 300, -300, 255, 256, -257, 7, -7, 1], jnp.int16)
    s = jnp.array([0, 1, 7, 8, 9, 15, 16, 17, 3, 31, 2, 5], jnp.int32)
    i32 = jnp.array([-2**31, 2**31 - 1, -7, 7, 0, -1, 12, -12, 100, -100, 33, -33], jnp.int32)
    return f, (a8, u16, i16, s, i32)


def sort_search_edges():
    """Sorting and searching with ties and NaNs: unique with size (index, inverse, counts),
    searchsorted both sides and compare_all, weighted bincount, stable argsort ascending and
    descending, top_k and approx_max_k/min_k, reversed cumulative max/min/sum/prod/logsumexp,
    lexsort, partition, nan-aware medians and arg-reductions, nonzero with size, digitize."""
    def f(x, i, v):
        xn = x.at[2].set(jnp.nan).at[7].set(jnp.nan)
        u = jnp.unique(jnp.round(x), size=10, fill_value=0.0, return_index=True,
                       return_inverse=True, return_counts=True)
        return (*u, jnp.searchsorted(jnp.sort(x), v), jnp.searchsorted(jnp.sort(x), v, side="right"),
                jnp.searchsorted(jnp.sort(xn), v, method="compare_all"),
                jnp.bincount(i, weights=x[:8], length=6), jnp.bincount(i, length=3),
                jnp.argsort(jnp.round(x), stable=True),
                jnp.argsort(jnp.round(x), stable=True, descending=True), jnp.argsort(xn),
                jnp.sort(xn), *jax.lax.top_k(xn, 4), *jax.lax.approx_max_k(x, 3),
                *jax.lax.approx_min_k(x, 3), jax.lax.cummax(xn, reverse=True),
                jax.lax.cummin(x, reverse=True), jax.lax.cumsum(xn, reverse=True),
                jax.lax.cumprod(x, reverse=True), jax.lax.cumlogsumexp(x, reverse=True),
                jnp.nancumsum(xn), jnp.lexsort((jnp.round(x), i.astype(jnp.float32).repeat(2)[:12])),
                jnp.partition(x, 3), jnp.argpartition(x, 3)[:3], jnp.nanmedian(xn), jnp.nanmean(xn),
                jnp.nanargmax(xn), jnp.nanargmin(xn), jnp.median(x), jnp.percentile(x, 37.0),
                jnp.argmax(xn), jnp.max(xn), jnp.count_nonzero(xn > 0),
                jnp.isin(i, jnp.array([1, 3])), *jnp.nonzero(i > 2, size=4, fill_value=9),
                jnp.digitize(x, jnp.array([-1.0, 0.0, 1.0]), right=True))
    return f, (jnp.round(_normal(520, 12) * 4) / 2, jnp.array([0, 3, 3, 1, 5, 1, 1, 2], jnp.int32),
               jnp.array([-1.0, 0.0, 0.5, 1.0, 99.0]))


def segment_edges():
    """Segment max/min/prod/sum over 6 segments of which several are empty (max's identity
    -inf, an int32 segment's INT_MIN), ids out of range (-1 and 7, dropped), a sorted-ids
    hint, and the gradient of a segment max."""
    def f(x, ids):
        return (jax.ops.segment_max(x, ids, 6), jax.ops.segment_min(x, ids, 6),
                jax.ops.segment_prod(x, ids, 6), jax.ops.segment_sum(x, ids, 6, indices_are_sorted=True),
                jax.ops.segment_max(x.astype(jnp.int32), ids, 6),
                jax.ops.segment_min(x.astype(jnp.int32), ids, 6),
                jax.ops.segment_sum(x, ids, 4, mode="drop"),
                jax.grad(lambda x: jnp.sum(jax.ops.segment_max(x, ids, 6) ** 2))(x))
    return f, (jnp.round(_normal(530, 9, 2) * 3), jnp.array([0, 0, 2, 2, 2, 5, 5, 7, -1], jnp.int32))


def f8_quant():
    """Per-tensor scaled float8 quantisation (e4m3fn activations, e5m2 weights, saturated by
    clipping to the format's range), the dequantised matmul and an f8 x f8 dot with an f32
    result, unscaled f8 casts, and f16 arithmetic, sums and overflow to infinity."""
    def f(x, w):
        def q(t, dt):
            scale = float(jnp.finfo(dt).max) / jnp.max(jnp.abs(t))
            limit = float(jnp.finfo(dt).max)
            return jnp.clip(t * scale, -limit, limit).astype(dt), scale
        xq, sx = q(x, jnp.float8_e4m3fn)
        wq, sw = q(w, jnp.float8_e5m2)
        y = jnp.dot(xq.astype(jnp.float32), wq.astype(jnp.float32)) / (sx * sw)
        y2 = jax.lax.dot(xq, wq.astype(jnp.float8_e4m3fn), preferred_element_type=jnp.float32)
        return (xq.astype(jnp.float32), wq.astype(jnp.float32), y, y2,
                x.astype(jnp.float8_e4m3fn).astype(jnp.float32),
                (x * 1000).astype(jnp.float8_e5m2).astype(jnp.float32),
                x.astype(jnp.float16) * jnp.float16(3.1), jnp.exp(x.astype(jnp.float16)),
                jnp.sum(x.astype(jnp.float16) * 100), (x * 1e4).astype(jnp.float16))
    return f, (_normal(540, 4, 8) * 3, _normal(541, 8, 3))


def orthogonal_init():
    """jax.nn.initializers: orthogonal (a QR of a normal draw, signs fixed by R's diagonal;
    tall and wide, scaled, on either axis), lecun_normal, truncated-normal variance scaling
    and delta_orthogonal, from split threefry keys."""
    def f(k):
        ks = jax.random.split(k, 4)
        init = jax.nn.initializers
        return (init.orthogonal()(ks[0], (6, 4)), init.orthogonal(scale=2.0, column_axis=0)(ks[1], (3, 5)),
                init.lecun_normal()(ks[2], (4, 4)),
                init.variance_scaling(1.0, "fan_avg", "truncated_normal")(ks[3], (3, 3, 2)),
                init.delta_orthogonal()(ks[0], (3, 3, 4)))
    return f, (jax.random.PRNGKey(7),)


def eqx_bn_scan():
    """An Equinox BatchNorm (``make_with_state``, batch statistics over a vmapped axis named
    "batch") stepped by lax.scan over 3 batches, its running mean and variance carried in the
    scan's State."""
    model, state = eqx.nn.make_with_state(eqx.nn.BatchNorm)(3, axis_name="batch", momentum=0.8)
    params, static = eqx.partition(model, eqx.is_array)

    def f(params, state, xs):
        model = eqx.combine(params, static)

        def body(st, x):
            y, st = jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, st)
            return st, y
        st, ys = jax.lax.scan(body, state, xs)
        return ys, st
    return f, (params, state, _normal(640, 3, 4, 3) * 2 + 1)


def optimistix_solvers():
    """optimistix with ``throw=False``: Newton and bisection root finds, Levenberg-Marquardt
    and Dogleg least squares, a BFGS minimisation and a fixed-point iteration (nested while
    loops, lineax solves inside), with their step counts."""
    import optimistix as optx

    def f(y0, c):
        def fn(y, c):
            return jnp.tanh(y) + 0.5 * y - c
        kw = dict(args=c, throw=False)
        r1 = optx.root_find(fn, optx.Newton(rtol=1e-6, atol=1e-6), y0, max_steps=30, **kw)
        r2 = optx.least_squares(lambda y, c: jnp.concatenate([fn(y, c), 0.1 * y]),
                                optx.LevenbergMarquardt(rtol=1e-6, atol=1e-6), y0, max_steps=50, **kw)
        r3 = optx.minimise(lambda y, c: jnp.sum((y - c) ** 2) + jnp.sum(y ** 4),
                           optx.BFGS(rtol=1e-6, atol=1e-6), y0, max_steps=50, **kw)
        r4 = optx.least_squares(fn, optx.Dogleg(rtol=1e-6, atol=1e-6), y0, max_steps=50, **kw)
        r5 = optx.root_find(lambda y, c: y ** 3 - c[0], optx.Bisection(rtol=1e-6, atol=1e-6),
                            jnp.float32(0.5), max_steps=80, options={"lower": -3.0, "upper": 3.0}, **kw)
        r6 = optx.fixed_point(lambda y, c: jnp.cos(y) * 0.5 + c * 0.1,
                              optx.FixedPointIteration(rtol=1e-6, atol=1e-6), y0, max_steps=100, **kw)
        return (r1.value, r2.value, r3.value, r4.value, r5.value, r6.value,
                r1.stats["num_steps"], r3.stats["num_steps"])
    return f, (jnp.array([0.1, -0.2, 0.3]), jnp.array([0.5, -1.0, 2.0]))


PROGRAMS: dict[str, Callable] = {f.__name__: f for f in (
    eqx_mlp_lion, eqx_mlp_adam, eqx_mlp_tanh, eqx_gru_scan, eqx_lstm_scan, diffrax_neural_ode,
    flax_cnn, flax_transformer_block, haiku_lstm, optax_lbfgs, optax_chain, vmap_einsum,
    flax_bn_dropout, nnx_embed_attention, optax_adafactor_rmsprop, eqx_conv_embed, haiku_bn_conv,
    diffrax_adaptive, lax_scans_and_sorts, linalg_lapack, fft_and_random, int_float_edges,
    mixed_precision_int8, scatter_gather_modes, uint8_image_bits, binning_quantize, x64_program,
    complex_programs, remat_sharding_barrier, diffrax_kvaerno, linen_rnn, linen_decode_cache,
    optax_ctc, eqx_while_kinds, float_edges_more, int_narrow_edges, sort_search_edges,
    segment_edges, f8_quant, orthogonal_init, eqx_bn_scan, optimistix_solvers)}
# printed with ``jax_enable_x64`` on (64-bit types are otherwise narrowed to 32 bits)
X64 = {"x64_program"}


def _optimised_text(compiled) -> str:
    text = compiled.as_text()
    if "{...}" in text:         # XLA's default print elides large constants
        options = _hlo.HloPrintOptions()
        options.print_large_constants = True
        text = compiled.runtime_executable().hlo_modules()[0].to_string(options)
    return text


def write(name: str) -> None:
    with jax.enable_x64(name in X64):
        _write(name)


def _write(name: str) -> None:
    fn, args = PROGRAMS[name]()
    jitted = jax.jit(fn, keep_unused=True)
    lowered = jitted.lower(*args)
    (OUT / f"{name}.hlo").write_text(lowered.as_text("hlo"))
    (OUT / f"{name}.opt.hlo").write_text(_optimised_text(lowered.compile()))
    outputs = jax.tree.leaves(jitted(*args))
    np.savez_compressed(OUT / f"{name}.npz",
                        **{f"arg_{i}": np.asarray(a) for i, a in enumerate(jax.tree.leaves(args))},
                        **{f"out_{i}": np.asarray(a) for i, a in enumerate(outputs)})


def main(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names or PROGRAMS:
        write(name)


if __name__ == "__main__":
    main(sys.argv[1:])
