"""shard_map regions written as HLO text: each runs once per device on its shard and gives
the global result; whatever cannot be run exactly is a located HloUnsupportedError."""

from __future__ import annotations

import numpy as np
import pytest

import runtime

MESH = 'frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=2]>}}'
ROWS = r'{\"x\"}, {}'           # dimension 0 over mesh axis x (Shardy's escaped quotes)


def sdy(spec: str) -> str:
    return f'"#sdy.sharding_per_value<[<@mesh, [{spec}]>]>"'


def shard_map(body: str, in_spec: str = ROWS, out_spec: str = ROWS,
              global_shape: str = "f32[4,3]", local_shape: str = "f32[2,3]",
              mesh: str = MESH, extra: str = "") -> str:
    return f"""HloModule m, {mesh}

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}}

body {{
  p = {local_shape} parameter(0)
  {body}
}}

ENTRY main {{
  x = {global_shape} parameter(0), sharding={{devices=[2,1]<=[2]}}
  g = {local_shape} custom-call(x), custom_call_target="xla.sdy.GlobalToLocalShape", frontend_attributes={{xla.sdy.in_shardings={sdy(in_spec)}}}
  c = {local_shape} call(g), to_apply=body
  {extra}ROOT l = {global_shape} custom-call(c), custom_call_target="xla.sdy.LocalToGlobalShape", frontend_attributes={{xla.sdy.out_shardings={sdy(out_spec)}}}
}}
"""


X = np.arange(12, dtype=np.float32).reshape(4, 3)


def run(text: str, x: np.ndarray = X) -> np.ndarray:
    return np.asarray(runtime.compile(text).run(x))


def test_each_device_runs_the_body_on_its_rows_with_its_partition_id():
    body = ("i = u32[] partition-id()\n  f = f32[] convert(i)\n"
            "  b = f32[2,3] broadcast(f), dimensions={}\n  ROOT r = f32[2,3] add(p, b)")
    np.testing.assert_array_equal(run(shard_map(body)), X + np.repeat([0, 1], 2)[:, None])


def test_psum_inside_the_region_adds_the_devices_shards():
    body = ("ROOT r = f32[2,3] all-reduce(p), channel_id=1, replica_groups={{0,1}}, "
            "use_global_device_ids=true, to_apply=add")
    both = X[:2] + X[2:]
    np.testing.assert_array_equal(run(shard_map(body)), np.concatenate([both, both]))


def test_a_replicated_operand_reaches_every_device_whole():
    body = ("s = f32[4,3] all-reduce(p), channel_id=1, replica_groups={{0,1}}, "
            "use_global_device_ids=true, to_apply=add\n  ROOT r = f32[4,3] copy(s)")
    text = shard_map(body, in_spec="{}, {}", out_spec="{}, {}", local_shape="f32[4,3]")
    np.testing.assert_array_equal(run(text), 2 * X)


def test_a_sharded_output_of_the_wrong_local_shape_is_refused():
    text = shard_map("ROOT r = f32[2,3] copy(p)", out_spec="{}, {}")
    with pytest.raises(runtime.HloUnsupportedError, match="does not give the body's") as info:
        runtime.compile(text)
    assert info.value.instruction == "c"


def test_uneven_tiles_are_refused():
    text = shard_map("ROOT r = f32[2,3] copy(p)", global_shape="f32[5,3]")
    with pytest.raises(runtime.HloUnsupportedError, match="split as"):
        runtime.compile(text)


def test_a_mesh_the_module_does_not_define_is_refused_at_its_line():
    text = shard_map("ROOT r = f32[2,3] copy(p)", mesh="frontend_attributes={}")
    with pytest.raises(runtime.HloUnsupportedError, match="@mesh") as info:
        runtime.compile(text)
    assert info.value.instruction == "g" and info.value.location is not None


def test_a_collective_outside_every_region_of_a_sharded_module_is_refused():
    extra = ("a = f32[4,3] all-reduce(x), channel_id=2, replica_groups={{0,1}}, "
             "use_global_device_ids=true, to_apply=add\n  ")
    text = shard_map("ROOT r = f32[2,3] copy(p)", extra=extra)
    with pytest.raises(runtime.HloUnsupportedError, match="outside every shard_map region") \
            as info:
        runtime.compile(text)
    assert info.value.instruction == "a"


def test_a_boundary_around_no_call_is_refused():
    text = shard_map("ROOT r = f32[2,3] copy(p)").replace(
        "c = f32[2,3] call(g), to_apply=body", "c = f32[2,3] negate(g)")
    with pytest.raises(runtime.HloUnsupportedError, match="not around a call"):
        runtime.compile(text)


def test_a_nested_region_that_splits_a_value_is_refused():
    nested = ('g2 = f32[1,3] custom-call(p), custom_call_target="xla.sdy.GlobalToLocalShape", '
              "frontend_attributes={xla.sdy.in_shardings=" + sdy(ROWS) + "}\n"
              "  ROOT r = f32[2,3] copy(p)")
    with pytest.raises(runtime.HloUnsupportedError, match="inside another shard_map"):
        runtime.compile(shard_map(nested))


def test_sharding_custom_calls_compute_their_operand():
    text = """HloModule m

ENTRY main {
  x = f32[4,3] parameter(0), sharding={devices=[2,1]<=[2]}
  s = f32[4,3] custom-call(x), custom_call_target="Sharding", sharding={devices=[1,2]0,1}
  ROOT n = f32[4,3] negate(s)
}
"""
    np.testing.assert_array_equal(run(text), -X)


def test_an_annotation_in_another_layout_than_its_operand_is_a_copy():
    """jit's result of a transpose: FuncResultSharding gives {1,0} of an operand in {0,1}."""
    text = """HloModule m

ENTRY main {
  x = f32[4,3]{1,0} parameter(0), sharding={devices=[2,1]<=[2]}
  t = f32[3,4]{0,1} transpose(x), dimensions={1,0}
  s = f32[3,4]{1,0} custom-call(t), custom_call_target="xla.sdy.FuncResultSharding", custom_call_has_side_effect=true
  ROOT n = f32[3,4]{1,0} negate(s)
}
"""
    np.testing.assert_array_equal(run(text), -X.T)


def test_a_region_without_operands_gives_each_devices_value_its_tile():
    text = f"""HloModule m, {MESH}

body {{
  i = u32[] partition-id()
  f = f32[] convert(i)
  ROOT b = f32[1,3] broadcast(f), dimensions={{}}
}}

ENTRY main {{
  c = f32[1,3] call(), to_apply=body
  ROOT l = f32[2,3] custom-call(c), custom_call_target="xla.sdy.LocalToGlobalShape", frontend_attributes={{xla.sdy.out_shardings={sdy(ROWS)}}}
}}
"""
    np.testing.assert_array_equal(np.asarray(runtime.compile(text).run()),
                                  [[0, 0, 0], [1, 1, 1]])


GSPMD = """HloModule m

body {
  p = f32[2,3] parameter(0)
  i = u32[] partition-id()
  f = f32[] convert(i)
  b = f32[2,3] broadcast(f), dimensions={}
  ROOT r = f32[2,3] add(p, b)
}

ENTRY main {
  x = f32[4,3] parameter(0)
  s = f32[4,3] custom-call(x), custom_call_target="Sharding", sharding=SPLIT
  g = f32[2,3] custom-call(s), custom_call_target="SPMDFullToShardShape", sharding={manual}
  c = f32[2,3] call(g), to_apply=body
  m = f32[2,3] custom-call(c), custom_call_target="Sharding", sharding={manual}
  ROOT l = f32[4,3] custom-call(m), custom_call_target="SPMDShardToFullShape", sharding=SPLIT
}
"""


def test_the_gspmd_form_runs_each_device_on_the_tile_its_device_id_names():
    text = GSPMD.replace("SPLIT", "{devices=[2,1]1,0}")      # device 1 holds rows 0-1
    np.testing.assert_array_equal(run(text), X + np.repeat([1, 0], 2)[:, None])


def test_a_sharding_naming_devices_beyond_the_region_is_refused():
    with pytest.raises(runtime.HloUnsupportedError, match="does not name devices 0 to 1"):
        runtime.compile(GSPMD.replace("SPLIT", "{devices=[2,1]5,7}"))


def test_a_collective_in_a_module_annotated_for_one_device_runs_as_on_one_device():
    text = """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

ENTRY main {
  x = f32[4,3] parameter(0), sharding={devices=[1,1]0}
  ROOT a = f32[4,3] all-reduce(x), replica_groups={}, to_apply=add
}
"""
    np.testing.assert_array_equal(run(text), X)
