"""Regenerate ``data/``: small training and inference programs written with real JAX
libraries, as the newest JAX prints them, and XLA CPU's outputs for them (the tests only
read the files).

Printed with jax 0.12.0.1 / jaxlib 0.12.0.1 on Python 3.12, with equinox 0.13.8,
optax 0.2.8, diffrax 0.7.2, flax 0.12.12 and dm-haiku 0.0.17.

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
import flax.linen as nn
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


PROGRAMS: dict[str, Callable] = {f.__name__: f for f in (
    eqx_mlp_lion, eqx_mlp_adam, eqx_mlp_tanh, eqx_gru_scan, eqx_lstm_scan, diffrax_neural_ode, flax_cnn,
    flax_transformer_block, haiku_lstm, optax_lbfgs, optax_chain, vmap_einsum)}


def _optimised_text(compiled) -> str:
    text = compiled.as_text()
    if "{...}" in text:         # XLA's default print elides large constants
        options = _hlo.HloPrintOptions()
        options.print_large_constants = True
        text = compiled.runtime_executable().hlo_modules()[0].to_string(options)
    return text


def write(name: str) -> None:
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
