"""Each collective of a multi-device module, run on every device with run_spmd, against
numpy: the groups, reductions, dimensions and pairs as XLA defines them."""

from __future__ import annotations

import numpy as np
import pytest

import runtime

REDUCERS = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b)
}
"""


def module(body: str, devices: int, header: str = "") -> str:
    return (f"HloModule m, num_partitions={devices}{header}\n{REDUCERS}ENTRY main {{\n"
            f"  x = f32[4,6] parameter(0)\n  {body}\n}}\n")


def xs(devices: int) -> list[np.ndarray]:
    return [(np.arange(24, dtype=np.float32).reshape(4, 6) * (p + 1) - 3 * p)
            for p in range(devices)]


def run(text: str, devices: int, args=None) -> list:
    exe = runtime.compile(text)
    outs = exe.run_spmd(args if args is not None else [[x] for x in xs(devices)])
    return [tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else np.asarray(out)
            for out in outs]


@pytest.mark.parametrize("devices", [2, 4])
def test_all_reduce_over_all_devices(devices):
    outs = run(module("ROOT r = f32[4,6] all-reduce(x), channel_id=1, replica_groups={}, "
                      "to_apply=add", devices), devices)
    for out in outs:
        np.testing.assert_array_equal(out, sum(xs(devices)))


def test_all_reduce_with_replica_groups_of_global_ids():
    outs = run(module("ROOT r = f32[4,6] all-reduce(x), channel_id=1, "
                      "replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=add",
                      4), 4)
    x = xs(4)
    for p in range(4):
        np.testing.assert_array_equal(outs[p], x[p & 2] + x[(p & 2) + 1])


def test_all_reduce_with_iota_groups_and_maximum():
    outs = run(module("ROOT r = f32[4,6] all-reduce(x), channel_id=1, "
                      "replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true, "
                      "to_apply=max", 4), 4)
    x = xs(4)
    for p in range(4):          # groups {0,2} and {1,3}
        np.testing.assert_array_equal(outs[p], np.maximum(x[p % 2], x[p % 2 + 2]))


def test_all_reduce_over_a_named_mesh_axis():
    outs = run(module("ROOT r = f32[4,6] all-reduce(x), channel_id=1, "
                      "replica_groups=mesh['a'=2,'b'=2] {'a'}, use_global_device_ids=true, "
                      "to_apply=add", 4), 4)
    x = xs(4)
    for p in range(4):          # devices differing along 'a' only: {0,2} and {1,3}
        np.testing.assert_array_equal(outs[p], x[p % 2] + x[p % 2 + 2])


@pytest.mark.parametrize("order", ["([2,2]T(1,0))", "(0,2,1,3)"])
def test_all_reduce_over_a_mesh_whose_devices_are_out_of_order(order):
    """``device_ids`` (as XLA prints a jit's 2x2 mesh after a sharding constraint) lays the
    devices out as [[0,2],[1,3]]: along 'a' are {0,1} and {2,3}, not the in-order {0,2}."""
    outs = run(module("ROOT r = f32[4,6] all-reduce(x), channel_id=1, "
                      f"replica_groups=mesh['a'=2,'b'=2], device_ids={order} {{'a'}}, "
                      "use_global_device_ids=true, to_apply=add", 4), 4)
    x = xs(4)
    for p in range(4):
        np.testing.assert_array_equal(outs[p], x[p & 2] + x[(p & 2) + 1])


@pytest.mark.parametrize("axes, partner", [("'a':(1)2", 4), ("'a':(2)2", 2),
                                           ("'b', 'a':(2)2", None)])
def test_all_reduce_over_a_sub_axis(axes, partner):
    """``'a':(P)S``: the S-sized piece of 'a' after its major P, on mesh['a'=4,'b'=2] (device
    = 2a + b): (1)2 pairs devices 4 apart, (2)2 devices 2 apart; with 'b' too, groups of 4."""
    outs = run(module("ROOT r = f32[4,6] all-reduce(x), channel_id=1, "
                      f"replica_groups=mesh['a'=4,'b'=2] {{{axes}}}, "
                      "use_global_device_ids=true, to_apply=add", 8), 8)
    x = xs(8)
    for p in range(8):
        group = [p & ~partner, (p & ~partner) + partner] if partner else \
            [d for d in range(8) if d // 4 == p // 4]
        np.testing.assert_array_equal(outs[p], sum(x[d] for d in group))


def test_all_reduce_across_replicas_without_a_channel():
    """No channel_id: the groups are replicas, within each partition."""
    text = module("ROOT r = f32[4,6] all-reduce(x), replica_groups={}, to_apply=add", 2,
                  header=", replica_count=2")
    outs = run(text, 4)
    x = xs(4)
    for p in range(4):          # device = replica * 2 + partition
        np.testing.assert_array_equal(outs[p], x[p % 2] + x[p % 2 + 2])


@pytest.mark.parametrize("devices", [2, 4])
def test_all_gather(devices):
    outs = run(module(f"ROOT r = f32[4,{6 * devices}] all-gather(x), channel_id=1, "
                      "replica_groups={}, dimensions={1}", devices), devices)
    for out in outs:
        np.testing.assert_array_equal(out, np.concatenate(xs(devices), axis=1))


@pytest.mark.parametrize("devices", [2, 4])
def test_reduce_scatter(devices):
    rows = 4 // devices
    outs = run(module(f"ROOT r = f32[{rows},6] reduce-scatter(x), channel_id=1, "
                      "replica_groups={}, dimensions={0}, to_apply=add", devices), devices)
    total = sum(xs(devices))
    for p, out in enumerate(outs):
        np.testing.assert_array_equal(out, total[p * rows:(p + 1) * rows])


@pytest.mark.parametrize("devices", [2, 4])
def test_all_to_all_array_form(devices):
    rows = 4 // devices
    outs = run(module("ROOT r = f32[4,6] all-to-all(x), channel_id=1, replica_groups={}, "
                      "dimensions={0}", devices), devices)
    x = xs(devices)
    for p, out in enumerate(outs):
        want = np.concatenate([x[q][p * rows:(p + 1) * rows] for q in range(devices)])
        np.testing.assert_array_equal(out, want)


def test_all_to_all_tuple_form():
    body = ("y = f32[4,6] negate(x)\n  ROOT r = (f32[4,6], f32[4,6]) all-to-all(x, y), "
            "channel_id=1, replica_groups={{0,1}}")
    outs = run(module(body, 2), 2)
    x = xs(2)
    for p in range(2):          # element j is operand p of device j
        for j in range(2):
            np.testing.assert_array_equal(outs[p][j], x[j] if p == 0 else -x[j])


def test_collective_permute_with_a_partial_pairs_list():
    outs = run(module("ROOT r = f32[4,6] collective-permute(x), channel_id=1, "
                      "source_target_pairs={{0,1},{1,2}}", 4), 4)
    x = xs(4)
    np.testing.assert_array_equal(outs[1], x[0])
    np.testing.assert_array_equal(outs[2], x[1])
    for p in (0, 3):            # nothing received: zeros
        np.testing.assert_array_equal(outs[p], np.zeros((4, 6), np.float32))


def test_collective_broadcast_sends_the_first_member_of_each_group():
    outs = run(module("ROOT r = f32[4,6] collective-broadcast(x), channel_id=1, "
                      "replica_groups={{1,0},{3,2}}", 4), 4)
    x = xs(4)
    for p in range(4):
        np.testing.assert_array_equal(outs[p], x[1] if p < 2 else x[3])


def test_async_pairs_forward_their_start_results():
    body = """ars = f32[4,6] all-reduce-start(x), channel_id=1, replica_groups={}, to_apply=add
  ard = f32[4,6] all-reduce-done(ars)
  ags = (f32[4,6], f32[8,6]) all-gather-start(x), channel_id=2, replica_groups={}, dimensions={0}
  agd = f32[8,6] all-gather-done(ags)
  cps = (f32[4,6], f32[4,6], u32[], u32[]) collective-permute-start(x), channel_id=3, source_target_pairs={{0,1},{1,0}}
  cpd = f32[4,6] collective-permute-done(cps)
  ROOT t = (f32[4,6], f32[8,6], f32[4,6]) tuple(ard, agd, cpd)"""
    outs = run(module(body, 2), 2)
    x = xs(2)
    for p in range(2):
        np.testing.assert_array_equal(outs[p][0], x[0] + x[1])
        np.testing.assert_array_equal(outs[p][1], np.concatenate(x))
        np.testing.assert_array_equal(outs[p][2], x[1 - p])


def test_partition_and_replica_ids():
    text = ("HloModule m, replica_count=2, num_partitions=2\nENTRY main {\n"
            "  p = u32[] partition-id()\n  r = u32[] replica-id()\n"
            "  ROOT t = (u32[], u32[]) tuple(p, r)\n}\n")
    outs = run(text, 4, args=[[] for _ in range(4)])
    for device, (partition, replica) in enumerate(outs):
        assert partition.dtype == np.uint32 and replica.dtype == np.uint32
        assert (int(partition), int(replica)) == (device % 2, device // 2)


def test_all_reduce_in_a_loop_body_runs_once_per_iteration():
    text = f"""HloModule m, num_partitions=2
{REDUCERS}cond {{
  s = (s32[], f32[4,6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}}
body {{
  s = (s32[], f32[4,6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[4,6] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = f32[4,6] all-reduce(v), channel_id=1, replica_groups={{}}, to_apply=add
  ROOT t = (s32[], f32[4,6]) tuple(j, w)
}}
ENTRY main {{
  x = f32[4,6] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[4,6]) tuple(zero, x)
  l = (s32[], f32[4,6]) while(t), condition=cond, body=body
  ROOT r = f32[4,6] get-tuple-element(l), index=1
}}
"""
    outs = run(text, 2)
    x = xs(2)
    for out in outs:            # each all-reduce doubles the common sum
        np.testing.assert_array_equal(out, 4 * (x[0] + x[1]))


def test_donation_applies_to_each_device():
    text = ("HloModule m, num_partitions=2, input_output_alias={ {}: (0, {}, may-alias) }\n"
            f"{REDUCERS}ENTRY main {{\n  x = f32[4,6] parameter(0)\n"
            "  ROOT r = f32[4,6] all-reduce(x), channel_id=1, replica_groups={}, to_apply=add\n}\n")
    exe = runtime.compile(text)
    args = [[runtime.device_put(x, exe.device)] for x in xs(2)]
    outs = exe.run_spmd(args, donate=(0,))
    for p in range(2):
        np.testing.assert_array_equal(np.asarray(outs[p]), sum(xs(2)))
        with pytest.raises(runtime.errors.DonatedBufferError):
            np.asarray(args[p][0])


def test_generic_async_wrappers_around_collectives():
    """async-start calling a computation whose root is the collective, as XLA's async
    passes print reduce-scatter and all-to-all; async-update and async-done forward."""
    text = f"""HloModule m, num_partitions=2
{REDUCERS}wrapped_rs {{
  p = f32[4,6] parameter(0)
  ROOT rs = f32[2,6] reduce-scatter(p), channel_id=1, replica_groups={{}}, dimensions={{0}}, to_apply=add
}}
wrapped_a2a {{
  p = f32[4,6] parameter(0)
  ROOT a = f32[4,6] all-to-all(p), channel_id=2, replica_groups={{}}, dimensions={{1}}
}}
ENTRY main {{
  x = f32[4,6] parameter(0)
  s = ((f32[4,6]), f32[2,6]) async-start(x), async_execution_thread="parallel", calls=wrapped_rs
  u = ((f32[4,6]), f32[2,6]) async-update(s)
  d = f32[2,6] async-done(u)
  s2 = ((f32[4,6]), f32[4,6], u32[]) async-start(x), calls=wrapped_a2a
  d2 = f32[4,6] async-done(s2)
  ROOT t = (f32[2,6], f32[4,6]) tuple(d, d2)
}}
"""
    outs = run(text, 2)
    x = xs(2)
    total = x[0] + x[1]
    for p in range(2):
        np.testing.assert_array_equal(outs[p][0], total[2 * p:2 * p + 2])
        np.testing.assert_array_equal(outs[p][1], np.concatenate([x[0][:, 3 * p:3 * p + 3],
                                                                  x[1][:, 3 * p:3 * p + 3]], 1))


def test_combined_collective_permute_moves_every_operand():
    body = ("y = f32[4,6] negate(x)\n  ROOT r = (f32[4,6], f32[4,6]) collective-permute(x, y), "
            "channel_id=1, source_target_pairs={{0,1}}")
    outs = run(module(body, 2), 2)
    x = xs(2)
    np.testing.assert_array_equal(outs[1][0], x[0])
    np.testing.assert_array_equal(outs[1][1], -x[0])
    for k in range(2):
        np.testing.assert_array_equal(outs[0][k], np.zeros((4, 6), np.float32))


@pytest.mark.parametrize("op, fold", [("and", np.bitwise_and), ("or", np.bitwise_or),
                                      ("xor", np.bitwise_xor), ("minimum", np.minimum),
                                      ("multiply", np.multiply)])
def test_integer_all_reduce_with_each_reducer(op, fold):
    text = (f"HloModule m, num_partitions=4\nred {{\n  a = s32[] parameter(0)\n"
            f"  b = s32[] parameter(1)\n  ROOT r = s32[] {op}(a, b)\n}}\nENTRY main {{\n"
            "  x = s32[5] parameter(0)\n  ROOT r = s32[5] all-reduce(x), channel_id=1, "
            "replica_groups={}, to_apply=red\n}\n")
    args = [np.array([3, -7, 12, 5 + p, 1 << p], np.int32) for p in range(4)]
    outs = run(text, 4, args=[[a] for a in args])
    want = args[0]
    for a in args[1:]:
        want = fold(want, a)
    for out in outs:
        np.testing.assert_array_equal(out, want)
