"""Generate the sharded test programs in ``tests/spmd/data`` with JAX (XLA's CPU backend
with 8 host devices; each program uses the first 4 or 8): for each program NAME,
``NAME.opt.hlo`` (XLA's partitioned module, ``lowered.compile().as_text()``), ``NAME.npz`` (``arg_I_pP``: device P's shard of
argument I; ``out_J_pP``: XLA's output J on device P) and ``NAME.json`` (the number of
devices and XLA's per-device ``memory_analysis()`` bytes, as the shared examples' JSON has them). Device P is ``jax.devices()[P]``,
device P of every mesh here (meshes are built in device order).

    python -m tests.spmd.make_programs      # jax 0.10.2 in the main venv
"""

from __future__ import annotations

import json
import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + \
    " --xla_force_host_platform_device_count=8"

from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = Path(__file__).resolve().parent / "data"
DEVICES = 8


def _mesh(shape: tuple[int, ...], axes: tuple[str, ...]) -> Mesh:
    return Mesh(np.array(jax.devices()[:int(np.prod(shape))]).reshape(shape), axes)


def _save(name: str, fn, mesh: Mesh, specs, args, donate: tuple[int, ...] = ()) -> None:
    """``donate``: the arguments jit donates (the module aliases them to outputs; the test
    runs it with them donated)."""
    shardings = tuple(NamedSharding(mesh, s) for s in specs)
    placed = [jax.device_put(a, s) for a, s in zip(args, shardings)]
    compiled = jax.jit(fn, in_shardings=shardings, donate_argnums=donate).lower(*placed).compile()
    outs = jax.tree_util.tree_leaves(jax.jit(fn, in_shardings=shardings)(*placed))
    data = {}
    for kind, arrays in (("arg", placed), ("out", outs)):
        for i, array in enumerate(arrays):
            for shard in array.addressable_shards:
                data[f"{kind}_{i}_p{shard.device.id}"] = np.asarray(shard.data)
    OUT.mkdir(exist_ok=True)
    (OUT / f"{name}.opt.hlo").write_text(compiled.as_text())
    np.savez(OUT / f"{name}.npz", **data)
    memory = compiled.memory_analysis()
    figures = {key: int(getattr(memory, key)) for key in (
        "argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
        "temp_size_in_bytes")}
    (OUT / f"{name}.json").write_text(json.dumps(
        {"devices": mesh.size, "xla_per_device_bytes": figures}, indent=1) + "\n")
    print(name, sorted({k.split("_")[0] + "_" + k.split("_")[1] for k in data}))


def _rand(key: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(key).standard_normal(shape).astype(np.float32)


def fsdp() -> None:
    """FSDP: parameters and batch sharded over 4 devices; an SGD step (all-gather of the
    weights, reduce-scatter of the gradients)."""
    def step(w1, w2, x, y):
        def loss(w1, w2):
            return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)
        l, (g1, g2) = jax.value_and_grad(loss, argnums=(0, 1))(w1, w2)
        return l, w1 - 0.1 * g1, w2 - 0.1 * g2
    mesh = _mesh((4,), ("d",))
    _save("fsdp4_mlp_sgd", step, mesh, (P("d", None), P("d", None), P("d", None), P("d", None)),
          (_rand(1, 16, 32), _rand(2, 32, 8), _rand(3, 16, 16), _rand(4, 16, 8)))


def tp_dp() -> None:
    """A 2x2 mesh: batch over 'data', the MLP's hidden dimension over 'model'."""
    def forward(x, w1, w2):
        return jnp.sum(jax.nn.relu(x @ w1) @ w2, axis=0)
    mesh = _mesh((2, 2), ("data", "model"))
    _save("mesh2x2_tp_dp_mlp", forward, mesh, (P("data", None), P(None, "model"), P("model", None)),
          (_rand(5, 8, 16), _rand(6, 16, 32), _rand(7, 32, 16)))


def _shard_map(fn, mesh: Mesh, in_specs, out_specs):
    return jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)


def moe_all_to_all() -> None:
    """MoE-style dispatch: tokens exchanged with all_to_all, a per-device expert, and back."""
    mesh = _mesh((4,), ("e",))

    def layer(x, w):
        routed = jax.lax.all_to_all(x, "e", 0, 0, tiled=True)
        out = jnp.tanh(routed @ w[0])
        return jax.lax.all_to_all(out, "e", 0, 0, tiled=True)
    fn = _shard_map(layer, mesh, (P("e", None), P("e", None, None)), P("e", None))
    _save("alltoall4_moe", fn, mesh, (P("e", None), P("e", None, None)),
          (_rand(8, 32, 8), _rand(9, 4, 8, 8)))


def scan_psum() -> None:
    """A collective inside a loop: lax.scan whose body all-reduces and ring-permutes."""
    mesh = _mesh((4,), ("i",))

    def body(carry, w):
        h = jnp.tanh(carry @ w)
        h = jax.lax.psum(h, "i") * 0.25
        h = h + 0.5 * jax.lax.ppermute(h, "i", [(k, (k + 1) % 4) for k in range(4)])
        return h, jnp.sum(h)

    def fn(x, ws):
        return jax.lax.scan(body, x, ws)
    sm = _shard_map(fn, mesh, (P("i", None), P(None, None, None)), (P("i", None), P(None)))
    _save("scan4_psum_ppermute", sm, mesh, (P("i", None), P(None, None, None)),
          (_rand(10, 8, 8), _rand(11, 5, 8, 8) * 0.5))


def gather_scatter() -> None:
    """all_gather and psum_scatter over one axis of a 2x2 mesh, a partial ppermute over the
    other, and an axis_index."""
    mesh = _mesh((2, 2), ("a", "b"))

    def fn(x):
        g = jax.lax.all_gather(x, "b", axis=1, tiled=True)
        s = jax.lax.psum_scatter(x, "a", scatter_dimension=0, tiled=True)
        p = jax.lax.ppermute(x, "a", [(0, 1)])
        i = jax.lax.axis_index("b").astype(jnp.float32)
        return g, s, p + i
    sm = _shard_map(fn, mesh, (P("a", "b"),), (P("a", "b"), P("a", "b"), P("a", "b")))
    _save("mesh2x2_gather_scatter_permute", sm, mesh, (P("a", "b"),), (_rand(12, 8, 8),))


def fsdp_tp_8() -> None:
    """8 devices as a 2x4 mesh: an SGD step with the weights sharded over both axes and
    donated, the batch over 'data'."""
    def step(w1, w2, x, y):
        def loss(w1, w2):
            return jnp.mean((jax.nn.gelu(x @ w1) @ w2 - y) ** 2)
        l, (g1, g2) = jax.value_and_grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2, l
    mesh = _mesh((2, 4), ("data", "model"))
    _save("mesh2x4_fsdp_tp_sgd_donated", step, mesh,
          (P("data", "model"), P("model", "data"), P("data", None), P("data", None)),
          (_rand(13, 16, 32), _rand(14, 32, 16), _rand(15, 8, 16), _rand(16, 8, 16)),
          donate=(0, 1))


def ring_loop_8() -> None:
    """8 devices in one ring: a fori_loop whose body all-gathers, reduce-scatters,
    ring-permutes and all-reduces its carry, both parameters donated (collectives inside a
    while loop rather than a scan, and XLA's per-device bytes with aliased outputs)."""
    mesh = _mesh((8,), ("r",))

    def fn(x, acc):
        def body(i, carry):
            x, acc = carry
            g = jax.lax.all_gather(x, "r", axis=0, tiled=True)
            s = jax.lax.psum_scatter(jnp.tanh(g), "r", scatter_dimension=0, tiled=True)
            x = 0.5 * s + jax.lax.ppermute(x, "r", [(k, (k + 1) % 8) for k in range(8)])
            return x, acc + jax.lax.psum(jnp.sum(x), "r")
        return jax.lax.fori_loop(0, 3, body, (x, acc))
    sm = _shard_map(fn, mesh, (P("r", None), P()), (P("r", None), P()))
    _save("ring8_fori_gather_scatter_donated", sm, mesh, (P("r", None), P()),
          (_rand(17, 16, 4), np.zeros((), np.float32)), donate=(0, 1))


if __name__ == "__main__":
    assert len(jax.devices()) >= DEVICES
    for make in (fsdp, tp_dp, moe_all_to_all, scan_psum, gather_scatter, fsdp_tp_8,
                 ring_loop_8):
        make()
