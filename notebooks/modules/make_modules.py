"""Regenerate the HLO modules the tutorials read, with JAX and XLA's CPU backend.

The tutorials must run without JAX, so what JAX prints is committed next to this script:
for each program ``NAME.hlo`` (the text ``jax.jit(f).lower(...).as_text('hlo')`` gives),
``NAME.npz`` (inputs ``arg_0..`` and XLA's outputs ``out_0..``) and ``NAME.json`` (XLA's
``compiled.memory_analysis()`` in bytes and the tolerance the outputs are compared with).
Inputs come from a seeded generator, so running this again reproduces the files up to the
jaxlib version. Run from anywhere: ``python notebooks/modules/make_modules.py [OUT_DIR]``
(by default it writes next to itself).

The sharded training steps of notebook 07 (``transformer_dp``, ``transformer_fsdp``,
``transformer_tp``) are the same step on the same inputs, partitioned by XLA over four CPU
devices: ``NAME.opt.hlo`` is the program one device runs (``compiled.as_text()``) and
``NAME.json`` says which slice of each global input and output each device holds and XLA's
per-device memory; the inputs and outputs are ``transformer_train_step.npz``'s.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Callable

DEVICES = 4
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + f" --xla_force_host_platform_device_count={DEVICES}")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

HERE = Path(__file__).resolve().parent


def mlp_forward(x, w1, b1, w2, b2):
    """Two dense layers with a relu between: [8,32] -> [8,10]."""
    return jnp.maximum(x @ w1 + b1, 0.0) @ w2 + b2


def attention(q, k, v):
    """Causal scaled dot-product attention over [batch, time, dim]."""
    t = q.shape[1]
    scores = jnp.einsum("btd,bsd->bts", q, k) / np.sqrt(q.shape[-1]).astype(np.float32)
    mask = jnp.tril(jnp.ones((t, t), bool))
    scores = jnp.where(mask, scores, -1e9)
    return jnp.einsum("bts,bsd->btd", jax.nn.softmax(scores, axis=-1), v)


# A one-block transformer language model: token embedding, causal self-attention, an MLP,
# layer norms and a tied read-out; one SGD step on the cross-entropy of the next token.
VOCAB, SEQ, BATCH, DIM, HEADS, HIDDEN = 64, 16, 4, 32, 2, 128
PARAM_SHAPES = {
    "embed": (VOCAB, DIM), "pos": (SEQ, DIM),
    "ln1_scale": (DIM,), "ln1_bias": (DIM,),
    "wqkv": (DIM, 3 * DIM), "wo": (DIM, DIM),
    "ln2_scale": (DIM,), "ln2_bias": (DIM,),
    "w1": (DIM, HIDDEN), "b1": (HIDDEN,), "w2": (HIDDEN, DIM), "b2": (DIM,),
}


def _layer_norm(x, scale, bias):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * scale + bias


def _logits(params, tokens):
    x = params["embed"][tokens] + params["pos"]
    h = _layer_norm(x, params["ln1_scale"], params["ln1_bias"])
    q, k, v = jnp.split(h @ params["wqkv"], 3, axis=-1)
    split = lambda a: a.reshape(BATCH, SEQ, HEADS, DIM // HEADS).transpose(0, 2, 1, 3)
    q, k, v = split(q), split(k), split(v)
    scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(DIM // HEADS))
    scores = jnp.where(jnp.tril(jnp.ones((SEQ, SEQ), bool)), scores, -1e9)
    att = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, DIM)
    x = x + att @ params["wo"]
    h = _layer_norm(x, params["ln2_scale"], params["ln2_bias"])
    x = x + jax.nn.gelu(h @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]
    return x @ params["embed"].T


def _loss(params, tokens, targets):
    logp = jax.nn.log_softmax(_logits(params, tokens), axis=-1)
    return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()


def transformer_train_step(params, tokens, targets):
    """One SGD step of a one-block transformer: (new parameters, loss).

    With ``donate_argnums=0`` the new weights may take the old weights' buffers."""
    loss, grads = jax.value_and_grad(_loss)(params, tokens, targets)
    new = jax.tree_util.tree_map(lambda p, g: p - np.float32(0.1) * g, params, grads)
    return new, loss


def sgd_tanh(w, g):
    """An SGD-like update, w - 0.1 * tanh(g), with w donated (notebook 05)."""
    return w - 0.1 * jnp.tanh(g)


def transformer_inputs(rng: np.random.Generator):
    params = {name: (rng.standard_normal(shape) * 0.1).astype(np.float32)
              for name, shape in PARAM_SHAPES.items()}
    for name in ("ln1_scale", "ln2_scale"):
        params[name] = np.ones(PARAM_SHAPES[name], np.float32)
    tokens = rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int32)
    targets = np.roll(tokens, -1, axis=1)
    return params, tokens, targets


def write(out: Path, name: str, fn: Callable, args: tuple, *, donate: tuple[int, ...] = (),
          tolerance: float = 1e-4) -> None:
    """``NAME.hlo``, ``NAME.npz`` and ``NAME.json`` for ``fn`` on ``args``, in ``out``."""
    lowered = jax.jit(fn, donate_argnums=donate).lower(*args)
    (out / f"{name}.hlo").write_text(lowered.as_text(dialect="hlo"))
    compiled = lowered.compile()
    flat_in = jax.tree_util.tree_leaves(args)
    flat_out = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    arrays = {f"arg_{i}": np.asarray(a) for i, a in enumerate(flat_in)}
    arrays |= {f"out_{i}": np.asarray(a) for i, a in enumerate(flat_out)}
    np.savez_compressed(out / f"{name}.npz", **arrays)
    memory = compiled.memory_analysis()
    info = {"description": (fn.__doc__ or "").strip().splitlines()[0],
            "jax": jax.__version__,
            "xla_cpu_memory": {"argument": memory.argument_size_in_bytes,
                               "output": memory.output_size_in_bytes,
                               "alias": memory.alias_size_in_bytes,
                               "temp": memory.temp_size_in_bytes},
            "tolerance": {"rtol": tolerance, "atol": tolerance}}
    (out / f"{name}.json").write_text(json.dumps(info, indent=1) + "\n")


# How each strategy places the weights over the mesh axis "d" (the tokens and targets: the
# batch split over "d" for data parallel and FSDP, whole on every device for tensor parallel).
STRATEGIES = {
    # every device holds every weight and a quarter of the batch
    "transformer_dp": ({name: P() for name in PARAM_SHAPES}, P("d", None)),
    # every weight split by its first dimension too: gathered for use, gradients scattered
    "transformer_fsdp": ({name: P("d", *([None] * (len(shape) - 1)))
                          for name, shape in PARAM_SHAPES.items()}, P("d", None)),
    # Megatron-style: the projections into attention and the MLP split by output column,
    # the ones out of them by input row; embeddings and layer norms whole
    "transformer_tp": ({name: {"wqkv": P(None, "d"), "wo": P("d", None), "w1": P(None, "d"),
                               "b1": P("d"), "w2": P("d", None)}.get(name, P())
                        for name in PARAM_SHAPES}, P()),
}
_FILE_NAME = re.compile(r'^(\d+ )"[^"]*/([^"/]*)"$', re.M)


def _slices(sharding, shape: tuple[int, ...]) -> list[list[list[int]]]:
    """For each device, the [start, stop) of each dimension of its shard."""
    index = sharding.devices_indices_map(shape)
    return [[list(s.indices(n)[:2]) for s, n in zip(index[d], shape)]
            for d in sorted(index, key=lambda d: d.id)]


def write_sharded(out: Path, name: str, args: tuple) -> None:
    """``NAME.opt.hlo`` and ``NAME.json`` of ``transformer_train_step`` under ``STRATEGIES``
    [name] on a mesh of ``DEVICES`` (device p holds partition p)."""
    mesh = Mesh(np.array(jax.devices()[:DEVICES]), ("d",))
    weights, batch = STRATEGIES[name]
    shardings = ({k: NamedSharding(mesh, spec) for k, spec in weights.items()},
                 NamedSharding(mesh, batch), NamedSharding(mesh, batch))
    compiled = jax.jit(transformer_train_step, in_shardings=shardings,
                       donate_argnums=0).lower(*args).compile()
    # the script's path would differ between checkouts: keep the file's name only
    (out / f"{name}.opt.hlo").write_text(_FILE_NAME.sub(r'\1"\2"', compiled.as_text()))
    flat_in = jax.tree_util.tree_leaves(args)
    flat_out = jax.tree_util.tree_leaves(jax.eval_shape(transformer_train_step, *args))
    memory = compiled.memory_analysis()
    info = {"description": f"transformer_train_step over {DEVICES} devices ({name})",
            "jax": jax.__version__, "devices": DEVICES,
            "arg_slices": [_slices(s, a.shape) for s, a in
                           zip(jax.tree_util.tree_leaves(shardings), flat_in)],
            "out_slices": [_slices(s, a.shape) for s, a in
                           zip(jax.tree_util.tree_leaves(compiled.output_shardings), flat_out)],
            "xla_cpu_memory": {"argument": memory.argument_size_in_bytes,
                               "output": memory.output_size_in_bytes,
                               "alias": memory.alias_size_in_bytes,
                               "temp": memory.temp_size_in_bytes},
            "tolerance": {"rtol": 1e-3, "atol": 1e-3}}
    (out / f"{name}.json").write_text(json.dumps(info, indent=1) + "\n")


def main(out: Path = HERE) -> None:
    rng = np.random.default_rng(0)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    write(out, "mlp_forward", mlp_forward, (f32(8, 32), f32(32, 64), f32(64), f32(64, 10), f32(10)))
    write(out, "attention", attention, (f32(2, 16, 32), f32(2, 16, 32), f32(2, 16, 32)))
    w = np.linspace(-1, 1, 16 * 32, dtype=np.float32).reshape(16, 32)
    g = np.linspace(2, -2, 16 * 32, dtype=np.float32).reshape(16, 32)
    write(out, "sgd_tanh", sgd_tanh, (w, g), donate=(0,), tolerance=1e-6)
    step_args = transformer_inputs(rng)
    write(out, "transformer_train_step", transformer_train_step, step_args, donate=(0,),
          tolerance=1e-3)
    for name in STRATEGIES:
        write_sharded(out, name, step_args)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
