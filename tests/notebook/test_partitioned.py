"""%%hlo on a partitioned module: the per-device peak, each collective's bytes and step in
the report and on the memory timeline, and --run on every device."""

from __future__ import annotations

import numpy as np
import pytest
from IPython.core.error import UsageError

import runtime
from hlo_magic.arguments import per_device
from hlo_magic.timeline_data import timeline_data

from .hlo_texts import INCREMENT

SPMD2 = """HloModule spmd2, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY main {
  w = f32[4] parameter(0), sharding={replicated}
  x = f32[2,4] parameter(1), sharding={devices=[2,1]<=[2]}
  b = f32[2,4] broadcast(w), dimensions={1}
  y = f32[2,4] multiply(x, b)
  g = f32[4,4] all-gather(y), channel_id=1, replica_groups={{0,1}}, dimensions={0},
    use_global_device_ids=true
  r = f32[4,4] all-reduce(g), channel_id=2, replica_groups={{0,1}},
    use_global_device_ids=true, to_apply=add
  ROOT t = (f32[4,4], f32[4,4]) tuple(g, r)
}
"""
W = np.array([1, 2, 3, 4], np.float32)
XS = [np.arange(8, dtype=np.float32).reshape(2, 4), -np.ones((2, 4), np.float32)]


def hlo(ip, line: str):
    ip.run_cell_magic("hlo", f"{line} -o r -q", SPMD2)
    return ip.user_ns["r"]


def test_the_report_gives_the_peak_per_device_and_each_collectives_bytes_and_step(ip):
    r = hlo(ip, "")
    text = r.report_text()
    assert "devices          2 (num_partitions=2)" in text
    assert f"peak per device  {r.peak} B; {2 * r.peak} B over all 2 devices" in text
    gather, reduce = r.collectives()
    assert (gather.instruction, gather.sent, reduce.instruction, reduce.sent) == \
        ("g", (32, 32), "r", (64, 64))              # (n-1) shards; 2(n-1)/n of the buffer
    assert "2 (1 all-gather, 1 all-reduce); per device and run: sends 96 B, receives 96 B" \
        in text
    row = f"{gather.step}     g           all-gather  2      32 B   32 B      once"
    assert row in text


def test_the_timeline_marks_each_collective_at_its_step(ip):
    r = hlo(ip, "")
    marks = timeline_data(r.assignment).meta()["collectives"]
    assert [(m["step"], m["kind"]) for m in marks] == \
        [(t.step, str(t.kind)) for t in r.collectives()]
    assert "sends 64 B, receives 64 B per device" in marks[1]["text"]
    gids = {p.get_gid() for p in r.live_bytes().axes[0].patches}
    assert {"collective-g", "collective-r"} <= gids


def test_a_one_device_module_has_no_collective_marks(ip):
    ip.run_cell_magic("hlo", "-o one -q", INCREMENT)
    one = ip.user_ns["one"]
    assert one.collectives() == [] and "peak per device" not in one.report_text()
    assert timeline_data(one.assignment).meta()["collectives"] == []


def test_run_with_a_list_of_shards_runs_every_device(ip):
    ip.user_ns.update(w=W, xs=XS)
    r = hlo(ip, "--run w xs")
    gathered = np.concatenate([XS[0] * W, XS[1] * W])
    for device in range(2):
        g, total = r.outputs[device]
        np.testing.assert_array_equal(g, gathered)
        np.testing.assert_array_equal(total, 2 * gathered)
    assert "Outputs per device" in r.report_text()


def test_run_random_gives_replicated_parameters_the_same_values_everywhere(ip):
    r = hlo(ip, "--run random --seed 3")
    args = runtime.random_device_arguments(r.executable, 3)
    np.testing.assert_array_equal(args[0][0], args[1][0])          # w: replicated
    assert not np.array_equal(args[0][1], args[1][1])               # x: each device's shard
    gathered = np.concatenate([args[0][1] * args[0][0], args[1][1] * args[1][0]])
    np.testing.assert_allclose(r.outputs[1][0], gathered)
    zeros = hlo(ip, "--run zeros")
    assert all(not o.any() for outs in zeros.outputs for o in outs)


def test_a_shard_list_of_the_wrong_length_is_every_devices_value():
    assert per_device([W, XS], 2) == [[W, XS[0]], [W, XS[1]]]
    assert per_device([[1.0, 2.0]], 2) == [[[1.0, 2.0]], [[1.0, 2.0]]]
    three = per_device([XS + XS[:1]], 2)
    assert three[0][0] is three[1][0]


def test_a_wrong_shard_shape_is_the_users_error(ip):
    ip.user_ns.update(w=W, bad=[np.zeros((3, 4), np.float32)] * 2)
    with pytest.raises((runtime.HloArgumentError, UsageError)):
        hlo(ip, "--run w bad")


def test_run_on_a_partitioned_jax_module_matches_xla_on_every_device(ip):
    from tests.spmd.spmd_data import GENERATED, device_arguments, mismatches
    name = "mesh2x2_gather_scatter_permute"
    data = np.load(GENERATED / f"{name}.npz")
    per_parameter = list(zip(*device_arguments(data, 4)))
    ip.user_ns.update({f"a{i}": list(shards) for i, shards in enumerate(per_parameter)})
    names = " ".join(f"a{i}" for i in range(len(per_parameter)))
    ip.run_cell_magic("hlo", f"--run {names} -o r -q", (GENERATED / f"{name}.opt.hlo").read_text())
    assert mismatches(ip.user_ns["r"].outputs, data, 4) == []
