"""``collective_traffic``: the bytes each device sends and receives at each collective, as the
collective defines them, and the collective's place in the schedule."""

from __future__ import annotations

import runtime
from runtime.buffers.collective_traffic import collective_traffic
from runtime.hlo.opcode_enum import Opcode

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
"""


def traffic(body: str, devices: int = 4, params: str = "x = f32[8,6] parameter(0)"):
    text = (f"HloModule m, num_partitions={devices}\n{ADD}ENTRY main {{\n  {params}\n"
            f"  {body}\n}}\n")
    return collective_traffic(runtime.analyze(text).buffer_assignment)


def test_all_reduce_moves_twice_the_buffer_less_a_share_each_way():
    [t] = traffic("ROOT r = f32[8,6] all-reduce(x), channel_id=1, replica_groups={}, "
                  "to_apply=add")
    assert (t.kind, t.group_size, t.operand_bytes) == (Opcode.ALL_REDUCE, 4, 192)
    assert t.sent == t.received == (288,) * 4          # 2 * 3/4 * 192
    assert t.executions == 1


def test_all_gather_receives_every_other_shard():
    [t] = traffic("ROOT r = f32[16,6] all-gather(x), channel_id=1, "
                  "replica_groups={{0,1},{2,3}}, use_global_device_ids=true, dimensions={0}")
    assert (t.group_size, t.result_bytes) == (2, 384)
    assert t.sent == t.received == (192,) * 4


def test_reduce_scatter_and_all_to_all_move_all_but_their_own_part():
    [rs] = traffic("ROOT r = f32[2,6] reduce-scatter(x), channel_id=1, replica_groups={}, "
                   "dimensions={0}, to_apply=add")
    [a2a] = traffic("ROOT r = f32[8,6] all-to-all(x), channel_id=1, replica_groups={}, "
                    "dimensions={0}")
    assert rs.sent == rs.received == a2a.sent == a2a.received == (144,) * 4


def test_collective_permute_counts_only_real_transfers():
    [t] = traffic("ROOT r = f32[8,6] collective-permute(x), channel_id=1, "
                  "source_target_pairs={{0,1},{1,2},{3,3}}")
    assert t.sent == (192, 192, 0, 0)
    assert t.received == (0, 192, 192, 0)     # device 0 gets zeros, device 3 keeps its own


def test_collective_broadcast_sends_from_the_first_of_each_group():
    [t] = traffic("ROOT r = f32[8,6] collective-broadcast(x), channel_id=1, "
                  "replica_groups={{1,0},{2,3}}")
    assert t.sent == (0, 192, 192, 0)
    assert t.received == (192, 0, 0, 192)


def test_ids_move_nothing_and_collectives_come_in_schedule_order():
    found = traffic("p = u32[] partition-id()\n"
                    "  g = f32[16,6] all-gather(x), channel_id=1, replica_groups={{0,1},{2,3}}, "
                    "use_global_device_ids=true, dimensions={0}\n"
                    "  n = f32[16,6] negate(g)\n"
                    "  ROOT r = f32[16,6] all-reduce(n), channel_id=2, replica_groups={}, "
                    "to_apply=add")
    assert [t.kind for t in found] == [Opcode.ALL_GATHER, Opcode.ALL_REDUCE]
    assert [t.instruction for t in found] == ["g", "r"] and found[0].step < found[1].step


def test_a_collective_in_a_counted_loop_runs_once_an_iteration():
    text = f"""HloModule m, num_partitions=2
{ADD}
cond {{
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}}
body {{
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  v = f32[4] get-tuple-element(s), index=1
  w = f32[4] all-reduce(v), channel_id=1, replica_groups={{}}, to_apply=add
  ROOT t = (s32[], f32[4]) tuple(j, w)
}}
ENTRY main {{
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[4]) tuple(zero, x)
  loop = (s32[], f32[4]) while(t), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(loop), index=1
}}
"""
    plan = runtime.analyze(text).buffer_assignment
    [t] = collective_traffic(plan)
    assert t.executions == 3 and t.computation != plan.module.entry.name
    assert plan.schedule.flattened[t.step].attrs["collective"].instruction == "w"


def test_a_one_device_module_has_no_traffic():
    [] = traffic("ROOT r = f32[8,6] all-reduce(x), replica_groups={}, to_apply=add", devices=1)


def test_an_async_collective_is_counted_once_at_its_start():
    [t] = traffic("s = (f32[8,6], f32[16,6]) all-gather-start(x), channel_id=1, "
                  "replica_groups={{0,1},{2,3}}, use_global_device_ids=true, dimensions={0}\n"
                  "  ROOT d = f32[16,6] all-gather-done(s)")
    assert (t.kind, t.instruction, t.result_bytes) == (Opcode.ALL_GATHER, "s", 384)
    assert t.sent == t.received == (192,) * 4
