"""A multi-device module's collectives are checked before anything runs: groups, pairs,
reductions and result shapes, each refusal located at the instruction's line; and the
ways run_spmd can be misused are refused by name."""

from __future__ import annotations

import time

import numpy as np
import pytest

import runtime
from runtime.errors import DeviceError, HloArgumentError, HloUnsupportedError, HloVerifyError
from tests.spmd.test_collectives import REDUCERS, module, xs

LINE = REDUCERS.count("\n") + 4      # the body's line in ``module``


@pytest.mark.parametrize("groups, devices, why", [
    ("{{0,5}}", 2, "name partition 5, but the module has 2 partitions"),
    ("{{0,1},{1,0}}", 2, "partition 1 is in two replica groups"),
    ("{{0}}", 2, r"leave out partitions \[1\]"),
    ("{{0},{}}", 2, "empty replica group"),
    ("[2,3]<=[4]", 4, "not a valid iota list"),
    ("mesh['a'=2] {'z'}", 2, "name axes"),
    ("mesh['a'=2,'b'=2], device_ids=(0,0,1,3) {'a'}", 4, "not each of the mesh's 4 devices"),
    ("mesh['a'=2,'b'=2], device_ids=([2,3]T(1,0)) {'a'}", 4, "not an iota of its 4"),
    ("mesh['a'=2,'b'=2], device_ids=(banana) {'a'}", 4, "device_ids .* in no form"),
    ("mesh['a'=4] {'a':(1)4}", 4, "not a piece of the axis of size 4"),
    ("mesh['a'=4] {'a':(1)2,'a'}", 4, "over a part of axis 'a' already named"),
    ("mesh['a'=2,'a'=2] {'a'}", 4, "names an axis twice"),
    ("mesh['a'=2,'b'=4] {'a'}", 4, "name partition 4"),
    ("banana", 2, "in no form this runtime reads"),
])
def test_bad_replica_groups_are_refused_at_their_line(groups, devices, why):
    text = module(f"ROOT r = f32[4,6] all-reduce(x), channel_id=1, replica_groups={groups}, "
                  "to_apply=add", devices)
    with pytest.raises(HloVerifyError, match=why) as info:
        runtime.compile(text)
    assert info.value.line == LINE and info.value.instruction == "r"


def test_groups_of_different_sizes_are_refused_where_the_shape_depends_on_them():
    text = module("ROOT r = f32[4,12] all-gather(x), channel_id=1, replica_groups={{0},{1,2}}, "
                  "dimensions={1}", 3)
    with pytest.raises(HloVerifyError, match="different sizes"):
        runtime.compile(text)


@pytest.mark.parametrize("pairs, why", [
    ("{{0,7}}", "name partition 7, but the module has 4 partitions"),
    ("{{0,1},{2,1}}", "partition 1 is the target of two pairs"),
    ("{{0,1},{0,2}}", "partition 0 is the source of two pairs"),
])
def test_bad_source_target_pairs_are_refused_at_their_line(pairs, why):
    text = module(f"ROOT r = f32[4,6] collective-permute(x), channel_id=1, "
                  f"source_target_pairs={pairs}", 4)
    with pytest.raises(HloVerifyError, match=why) as info:
        runtime.compile(text)
    assert info.value.line == LINE


def test_global_device_ids_without_a_channel_are_refused():
    text = module("ROOT r = f32[4,6] all-reduce(x), replica_groups={}, "
                  "use_global_device_ids=true, to_apply=add", 2)
    with pytest.raises(HloVerifyError, match="needs a channel_id"):
        runtime.compile(text)


def test_a_result_shape_the_collective_does_not_compute_is_refused():
    text = module("ROOT r = f32[4,6] all-gather(x), channel_id=1, replica_groups={}, "
                  "dimensions={0}", 2)
    with pytest.raises(HloVerifyError, match=r"does not match what it computes \(f32\[8,6\]\)"):
        runtime.compile(text)


def test_a_reduction_that_is_not_one_elementwise_op_is_unsupported():
    text = ("HloModule m, num_partitions=2\nsub {\n  a = f32[] parameter(0)\n"
            "  b = f32[] parameter(1)\n  ROOT r = f32[] subtract(a, b)\n}\nENTRY main {\n"
            "  x = f32[4,6] parameter(0)\n  ROOT r = f32[4,6] all-reduce(x), channel_id=1, "
            "replica_groups={}, to_apply=sub\n}\n")
    with pytest.raises(HloUnsupportedError, match="reduction computation is not one of") as info:
        runtime.compile(text)
    assert info.value.line == 9


def test_run_spmd_needs_one_argument_list_per_device():
    exe = runtime.compile(module("ROOT r = f32[4,6] all-reduce(x), channel_id=1, "
                                 "replica_groups={}, to_apply=add", 2))
    with pytest.raises(HloArgumentError, match="runs on 2 devices: run_spmd takes a list of 2"):
        exe.run_spmd([[xs(2)[0]]])


def test_a_device_whose_arguments_are_wrong_fails_the_run_with_its_error():
    """Device 1 fails before its collective; device 0, waiting there, is released and the
    run raises device 1's error (no hang)."""
    exe = runtime.compile(module("ROOT r = f32[4,6] all-reduce(x), channel_id=1, "
                                 "replica_groups={}, to_apply=add", 2))
    with pytest.raises(HloArgumentError, match=r"must be f32\[4,6\]") as info:
        exe.run_spmd([[xs(2)[0]], [np.zeros((2, 2), np.float32)]])
    assert any("device 1 of 2" in note for note in info.value.__notes__)


def test_devices_taking_different_paths_are_an_error_not_a_hang():
    """Only device 0's branch has the all-reduce: device 1 finishes without it."""
    text = f"""HloModule m, num_partitions=2
{REDUCERS}reduce {{
  a = f32[4,6] parameter(0)
  ROOT r = f32[4,6] all-reduce(a), channel_id=1, replica_groups={{}}, to_apply=add
}}
keep {{
  ROOT a = f32[4,6] parameter(0)
}}
ENTRY main {{
  x = f32[4,6] parameter(0)
  id = u32[] partition-id()
  zero = u32[] constant(0)
  first = pred[] compare(id, zero), direction=EQ
  ROOT c = f32[4,6] conditional(first, x, x), true_computation=reduce, false_computation=keep
}}
"""
    exe = runtime.compile(text)
    with pytest.raises(HloUnsupportedError, match=r"device\(s\) \[1\] finished without "
                                                  "reaching it"):
        exe.run_spmd([[x] for x in xs(2)], timeout=60)


def test_a_donated_device_array_given_to_two_devices_is_refused():
    """Each device would update it in place: one wrong answer."""
    exe = runtime.compile(module("ROOT r = f32[4,6] all-reduce(x), channel_id=1, "
                                 "replica_groups={}, to_apply=add", 2,
                                 header=", input_output_alias={ {}: (0, {}, may-alias) }"))
    shared = runtime.device_put(xs(2)[0], exe.device)
    with pytest.raises(HloArgumentError, match=r"also passed to device\(s\) \[1\]"):
        exe.run_spmd([[shared], [shared]], donate=(0,))
    outs = exe.run_spmd([[shared], [shared]])      # not donated: both only read it
    np.testing.assert_array_equal(np.asarray(outs[1]), 2 * xs(2)[0])


def test_a_device_that_does_not_arrive_in_time_is_an_error_not_a_hang():
    """Device 1 sleeps in a host call before the all-reduce; device 0 waits 0.5 s there."""
    def slow(out, ins):
        time.sleep(3)
        out[...] = ins[0]
    runtime.register_custom_call("spmd_test_slow", slow)
    text = f"""HloModule m, num_partitions=2
{REDUCERS}slow {{
  a = f32[4,6] parameter(0)
  ROOT s = f32[4,6] custom-call(a), custom_call_target="spmd_test_slow"
}}
keep {{
  ROOT a = f32[4,6] parameter(0)
}}
ENTRY main {{
  x = f32[4,6] parameter(0)
  id = u32[] partition-id()
  zero = u32[] constant(0)
  first = pred[] compare(id, zero), direction=EQ
  c = f32[4,6] conditional(first, x, x), true_computation=keep, false_computation=slow
  ROOT r = f32[4,6] all-reduce(c), channel_id=1, replica_groups={{}}, to_apply=add
}}
"""
    try:
        exe = runtime.compile(text)
        with pytest.raises(DeviceError, match=r"device 0 waited 0.5 s at collective r for "
                                              r"device\(s\) \[1\]"):
            exe.run_spmd([[x] for x in xs(2)], timeout=0.5)
    finally:
        runtime.unregister_custom_call("spmd_test_slow")
