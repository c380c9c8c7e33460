"""Regenerate the HLO modules the tutorials read, with JAX and XLA's CPU backend.

The tutorials must run without JAX, so what JAX prints is committed next to this script:
for each program ``NAME.hlo`` (the text ``jax.jit(f).lower(...).as_text('hlo')`` gives),
``NAME.npz`` (inputs ``arg_0..`` and XLA's outputs ``out_0..``) and ``NAME.json`` (XLA's
``compiled.memory_analysis()`` in bytes and the tolerance the outputs are compared with).
Inputs come from a seeded generator, so running this again reproduces the files up to the
jaxlib version. ``vit_tiny_train_step.hlo`` (a whole model's training step, for the memory
views and the browser tests) ships as text only: its 32 MB of inputs are not needed to
inspect it, and ``%%hlo --run random`` makes some. Run from anywhere: ``python notebooks/modules/make_modules.py [OUT_DIR]``
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


# ViT-tiny's shapes on 32x32 images: 4x4 patches (64 and a [CLS] token), width 192, 3 heads,
# MLP 768, 6 pre-LN layers, 10 classes; one AdamW step with global-norm clipping.
VIT_BATCH, VIT_IMAGE, VIT_PATCH, VIT_DIM, VIT_HEADS, VIT_MLP = 16, 32, 4, 192, 3, 768
VIT_LAYERS, VIT_CLASSES = 6, 10
VIT_TOKENS = (VIT_IMAGE // VIT_PATCH) ** 2 + 1


def vit_params() -> dict:
    """ViT-tiny's parameters as shapes (80 arrays, 2.7M numbers), in a fixed order."""
    d, m = VIT_DIM, VIT_MLP
    params = {"patch_w": (VIT_PATCH * VIT_PATCH * 3, d), "patch_b": (d,), "cls": (1, 1, d),
              "pos": (1, VIT_TOKENS, d), "ln_scale": (d,), "ln_bias": (d,),
              "head_w": (d, VIT_CLASSES), "head_b": (VIT_CLASSES,), "layers": []}
    for _ in range(VIT_LAYERS):
        params["layers"].append({
            "ln1_scale": (d,), "ln1_bias": (d,), "qkv_w": (d, 3 * d), "qkv_b": (3 * d,),
            "proj_w": (d, d), "proj_b": (d,), "ln2_scale": (d,), "ln2_bias": (d,),
            "fc1_w": (d, m), "fc1_b": (m,), "fc2_w": (m, d), "fc2_b": (d,)})
    return jax.tree_util.tree_map(lambda shape: jax.ShapeDtypeStruct(shape, jnp.float32),
                                  params, is_leaf=lambda x: isinstance(x, tuple))


def _vit_layer(x, p):
    h = _layer_norm(x, p["ln1_scale"], p["ln1_bias"])
    qkv = (h @ p["qkv_w"] + p["qkv_b"]).reshape(
        VIT_BATCH, VIT_TOKENS, 3, VIT_HEADS, VIT_DIM // VIT_HEADS).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(VIT_DIM // VIT_HEADS))
    att = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3)
    x = x + att.reshape(VIT_BATCH, VIT_TOKENS, VIT_DIM) @ p["proj_w"] + p["proj_b"]
    h = _layer_norm(x, p["ln2_scale"], p["ln2_bias"])
    return x + jax.nn.gelu(h @ p["fc1_w"] + p["fc1_b"], approximate=False) @ p["fc2_w"] \
        + p["fc2_b"]


def _vit_loss(params, images, labels):
    n = VIT_IMAGE // VIT_PATCH
    patches = images.reshape(VIT_BATCH, n, VIT_PATCH, n, VIT_PATCH, 3).transpose(
        0, 1, 3, 2, 4, 5).reshape(VIT_BATCH, n * n, VIT_PATCH * VIT_PATCH * 3)
    x = patches @ params["patch_w"] + params["patch_b"]
    cls = jnp.broadcast_to(params["cls"], (VIT_BATCH, 1, VIT_DIM))
    x = jnp.concatenate([cls, x], axis=1) + params["pos"]
    for layer in params["layers"]:
        x = _vit_layer(x, layer)
    x = _layer_norm(x[:, 0], params["ln_scale"], params["ln_bias"])
    logp = jax.nn.log_softmax(x @ params["head_w"] + params["head_b"])
    target = jax.nn.one_hot(labels, VIT_CLASSES) * 0.9 + 0.1 / VIT_CLASSES
    return -(target * logp).sum(-1).mean()


def vit_tiny_train_step(params, m, v, step, images, labels):
    """One AdamW step of ViT-tiny (6 layers) with global-norm clipping, all state donated."""
    loss, grads = jax.value_and_grad(_vit_loss)(params, images, labels)
    leaves = jax.tree_util.tree_leaves(grads)
    norm = jnp.sqrt(sum(jnp.sum(g * g) for g in leaves))
    grads = jax.tree_util.tree_map(lambda g: g * jnp.minimum(1.0, 1.0 / (norm + 1e-6)), grads)
    step = step + 1
    t = step.astype(jnp.float32)
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, grads)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, grads)
    scale = 1e-3 * jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
    params = jax.tree_util.tree_map(
        lambda p, m, v: p - scale * m / (jnp.sqrt(v) + 1e-8) - 1e-4 * p, params, m, v)
    return params, m, v, step, norm, loss


def write_vit(out: Path) -> None:
    """``vit_tiny_train_step.hlo`` from shapes alone (no inputs, no XLA run)."""
    params = vit_params()
    lowered = jax.jit(vit_tiny_train_step, donate_argnums=(0, 1, 2, 3)).lower(
        params, params, params, jax.ShapeDtypeStruct((), jnp.int32),
        jax.ShapeDtypeStruct((VIT_BATCH, VIT_IMAGE, VIT_IMAGE, 3), jnp.float32),
        jax.ShapeDtypeStruct((VIT_BATCH,), jnp.int32))
    (out / "vit_tiny_train_step.hlo").write_text(lowered.as_text(dialect="hlo"))


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
    write_vit(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
