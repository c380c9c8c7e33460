"""Generate the sharded test programs in ``tests/spmd/data`` with JAX (XLA's CPU backend
with 8 host devices; each program uses the first 2, 4 or 8): for each program NAME,
``NAME.opt.hlo`` (XLA's partitioned module, ``lowered.compile().as_text()``), ``NAME.hlo``
(the module before partitioning, ``lowered.as_text('hlo')``: global shapes, ``sharding=``
annotations, shard_map regions in Shardy's form), for shard_map programs ``NAME.gspmd.hlo``
(the same before partitioning with ``jax_use_shardy_partitioner`` off: the older
``Sharding``/``SPMDFullToShardShape`` form) and ``NAME.npz`` (``arg_I_pP``: device P's shard
of argument I; ``out_J_pP``: XLA's output J on device P; ``arg_I``/``out_J``: the global
arrays). Device P is ``jax.devices()[P]``, device P of every mesh here (meshes are built in
device order). ``NAME.json`` holds the number of devices and XLA's per-device
``memory_analysis()`` bytes, as the shared examples' JSON has them.

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


def _save(name: str, fn, mesh: Mesh, specs, args, donate: tuple[int, ...] = (),
          out_specs=None) -> None:
    """``donate``: the arguments jit donates (the module aliases them to outputs; the test
    runs it with them donated); ``out_specs``: jit's out_shardings (None: XLA's choice)."""
    shardings = tuple(NamedSharding(mesh, s) for s in specs)
    outs_sharding = None if out_specs is None else tuple(NamedSharding(mesh, s)
                                                          for s in out_specs)
    placed = [jax.device_put(a, s) for a, s in zip(args, shardings)]
    lowered = jax.jit(fn, in_shardings=shardings, out_shardings=outs_sharding,
                      donate_argnums=donate).lower(*placed)
    compiled = lowered.compile()
    outs = jax.tree_util.tree_leaves(jax.jit(fn, in_shardings=shardings,
                                             out_shardings=outs_sharding)(*placed))
    data = {}
    for kind, arrays in (("arg", placed), ("out", outs)):
        for i, array in enumerate(arrays):
            data[f"{kind}_{i}"] = np.asarray(array)
            for shard in array.addressable_shards:
                data[f"{kind}_{i}_p{shard.device.id}"] = np.asarray(shard.data)
    OUT.mkdir(exist_ok=True)
    (OUT / f"{name}.opt.hlo").write_text(compiled.as_text())
    (OUT / f"{name}.hlo").write_text(lowered.as_text("hlo"))
    if "shard_map" in lowered.as_text("hlo"):
        jax.config.update("jax_use_shardy_partitioner", False)
        try:
            gspmd = jax.jit(fn, in_shardings=shardings).lower(*placed).as_text("hlo")
        finally:
            jax.config.update("jax_use_shardy_partitioner", True)
        (OUT / f"{name}.gspmd.hlo").write_text(gspmd)
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


def psum_ppermute_2() -> None:
    """Two devices, a 1-D mesh: psum, a ring ppermute and the axis index in a shard_map."""
    mesh = _mesh((2,), ("x",))

    def fn(a, b):                                       # a: [3, 4], b: [6, 2] per device
        s = jax.lax.psum(a @ b[:4], "x")
        r = jax.lax.ppermute(a[:, :2], "x", [(0, 1), (1, 0)])
        return s + r * jax.lax.axis_index("x").astype(jnp.float32), jnp.sum(b, axis=0)
    sm = _shard_map(fn, mesh, (P("x", None), P(None, "x")), (P("x", None), P("x")))
    _save("shardmap2_psum_ppermute", sm, mesh, (P("x", None), P(None, "x")),
          (_rand(17, 6, 4), _rand(18, 6, 4)))


def all_gather_4() -> None:
    """Four devices: all_gather (untiled, a new leading axis) and psum of a replicated
    operand inside a shard_map; a replicated output."""
    mesh = _mesh((4,), ("d",))

    def fn(x, w):
        g = jax.lax.all_gather(x, "d")                  # [4, 2, 8] on every device
        return jnp.sum(g, axis=0) @ w, jax.lax.psum(jnp.sum(x * x), "d")
    sm = _shard_map(fn, mesh, (P("d", None), P()), (P("d", None), P()))
    _save("shardmap4_all_gather", sm, mesh, (P("d", None), P()), (_rand(19, 8, 8), _rand(20, 8, 3)))


def scan_over_shard_map() -> None:
    """A shard_map inside a scan: each step runs the manual region on the carry."""
    mesh = _mesh((4,), ("i",))

    def step(h):
        h = jnp.tanh(h) + jax.lax.psum(h, "i") * 0.1
        return jax.lax.ppermute(h, "i", [(k, (k + 1) % 4) for k in range(4)])
    sm = _shard_map(step, mesh, (P("i", None),), P("i", None))

    def fn(x, ws):
        def body(carry, w):
            nxt = sm(carry @ w)
            return nxt, jnp.sum(nxt)
        return jax.lax.scan(body, x, ws)
    _save("scan4_over_shard_map", fn, mesh, (P("i", None), P()),
          (_rand(21, 8, 8), _rand(22, 3, 8, 8) * 0.5))


def partial_manual() -> None:
    """A 2x2 mesh, shard_map manual over 'a' only ('b' left to the partitioner)."""
    mesh = _mesh((2, 2), ("a", "b"))

    def fn(x):
        return jax.lax.psum(jnp.sin(x), "a") + jax.lax.axis_index("a").astype(jnp.float32)
    sm = jax.shard_map(fn, mesh=mesh, in_specs=(P("a", None),), out_specs=P("a", None),
                       axis_names={"a"}, check_vma=False)
    _save("mesh2x2_partial_manual", sm, mesh, (P("a", "b"),), (_rand(23, 8, 4),))


def constraint_and_out_shardings() -> None:
    """jit over a 2x2 mesh with a sharding constraint and the outputs' shardings given
    (``Sharding`` and ``xla.sdy.FuncResultSharding`` custom calls, a root tuple sharding; the
    partitioned module groups an all-reduce over a mesh whose devices are out of order,
    ``mesh[...], device_ids=([2,2]T(1,0)) {'axis_0'}``)."""
    mesh = _mesh((2, 2), ("a", "b"))

    def fn(x, y):
        h = jax.lax.with_sharding_constraint(jnp.tanh(x @ y), NamedSharding(mesh, P("b", None)))
        return h.sum(0), h * 2
    _save("mesh2x2_constraint_out_shardings", fn, mesh, (P("a", "b"), P()),
          (_rand(24, 8, 4), _rand(25, 4, 6)), out_specs=(P(), P("a", "b")))


def jit_constraints_8() -> None:
    """jit over a 2x4 mesh with two sharding constraints and the outputs' shardings: XLA
    groups its all-reduces and its all-to-all over meshes whose devices are out of order
    (``mesh['axis_0'=4,'axis_1'=2], device_ids=([2,4]T(1,0)) {'axis_0'}``)."""
    mesh = _mesh((2, 4), ("x", "y"))

    def fn(a, b):
        h = jax.lax.with_sharding_constraint(jnp.tanh(a @ b), NamedSharding(mesh, P("y", "x")))
        k = jax.lax.with_sharding_constraint(h.T @ h, NamedSharding(mesh, P(None, ("x", "y"))))
        return h.sum(0), k
    _save("mesh2x4_jit_constraints", fn, mesh, (P("x", "y"), P("y", None)),
          (_rand(44, 16, 8), _rand(45, 8, 16)), out_specs=(P(), P("x", "y")))


def while_psum_8() -> None:
    """A 2x4 mesh: a while loop whose condition all-reduces over both axes (a collective in
    the condition computation) and whose body takes a pmean over 'x'."""
    mesh = _mesh((2, 4), ("x", "y"))

    def fn(x):
        def cond(c):
            i, v = c
            return jnp.logical_and(jax.lax.psum(jnp.sum(v * v), ("x", "y")) > 1.0, i < 20)

        def body(c):
            i, v = c
            return i + 1, 0.7 * v + 0.1 * jax.lax.pmean(v, "x")
        return jax.lax.while_loop(cond, body, (jnp.int32(0), x))
    sm = _shard_map(fn, mesh, (P("x", "y"),), (P(), P("x", "y")))
    _save("mesh2x4_while_psum_cond", sm, mesh, (P("x", "y"),), (_rand(33, 8, 8),))


def scan_all_to_all_4x2() -> None:
    """A 4x2 mesh: a scan whose body all-to-alls over 'a' there and back and takes pmax and
    pmin over 'b'."""
    mesh = _mesh((4, 2), ("a", "b"))

    def fn(x, ws):
        def body(h, w):
            r = jax.lax.all_to_all(h, "a", 0, 0, tiled=True)
            r = jax.lax.all_to_all(jnp.tanh(r @ w), "a", 0, 0, tiled=True)
            m = jax.lax.pmax(r, "b")
            return m - 0.5 * jax.lax.pmin(r, "b"), jnp.sum(m)
        return jax.lax.scan(body, x, ws)
    sm = _shard_map(fn, mesh, (P("a", None), P()), (P("a", None), P(None)))
    _save("mesh4x2_scan_all_to_all_pmax", sm, mesh, (P("a", None), P()),
          (_rand(31, 16, 8), _rand(32, 3, 8, 8) * 0.5))


def small_permutes_8() -> None:
    """8 devices, f32[4] each: a shift-by-two ring ppermute, a partial chain ppermute, pmax
    and pmin (small collective results, which pack at their own size as XLA's do)."""
    mesh = _mesh((8,), ("r",))

    def fn(x):
        a = jax.lax.ppermute(x, "r", [(k, (k + 2) % 8) for k in range(8)])
        b = jax.lax.ppermute(x, "r", [(k, k + 1) for k in range(7)])
        return a + 2 * b + jax.lax.pmax(x, "r") - jax.lax.pmin(x, "r")
    sm = _shard_map(fn, mesh, (P("r"),), P("r"))
    _save("ring8_small_permutes", sm, mesh, (P("r"),), (_rand(35, 32),))


if __name__ == "__main__":
    assert len(jax.devices()) >= DEVICES
    for make in (fsdp, tp_dp, moe_all_to_all, scan_psum, gather_scatter, fsdp_tp_8,
                 ring_loop_8, psum_ppermute_2, all_gather_4, scan_over_shard_map, partial_manual,
                 constraint_and_out_shardings, jit_constraints_8, while_psum_8,
                 scan_all_to_all_4x2, small_permutes_8):
        make()
