"""XLA's sharding syntax and Shardy's annotations read into ``HloSharding``, and the words
and bytes per device ``runtime.analyze`` reports for each parameter and output."""

from __future__ import annotations

import pytest

import runtime
from runtime.hlo.sdy import meshes, parse_sdy_shardings
from runtime.hlo.sharding import ShardingSyntaxError, parse_sharding


@pytest.mark.parametrize("text, kind, tile, subgroups, devices", [
    ("{replicated}", "replicated", (), (), ()),
    ("{manual}", "manual", (), (), ()),
    ("{devices=[2,1]0,1}", "tiled", (2, 1), (), (0, 1)),
    ("{devices=[2,2]<=[4]}", "tiled", (2, 2), (), (0, 1, 2, 3)),
    ("{devices=[2,2]<=[2,2]T(1,0)}", "tiled", (2, 2), (), (0, 2, 1, 3)),
    ("{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}", "tiled", (1, 2),
     (("replicated", 2),), (0, 2, 1, 3)),
    ("{devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}", "tiled", (1, 1),
     (("manual", 2), ("replicated", 2)), (0, 1, 2, 3)),
    ('{devices=[2,1]<=[2] metadata={op_name="x" source_file="a.py"}}', "tiled", (2, 1), (),
     (0, 1)),
])
def test_sharding_forms(text, kind, tile, subgroups, devices):
    s = parse_sharding(text)
    assert (s.kind, s.tile, s.subgroups, s.devices) == (kind, tile, subgroups, devices)


def test_maximal_and_tuple_shardings():
    s = parse_sharding("{{maximal device=1}, {devices=[2]1,0}, {replicated}}")
    assert [e.kind for e in s.elements] == ["maximal", "tiled", "replicated"]
    assert s.elements[0].device == 1 and s.elements[1].tile_index(1) == (0,)


@pytest.mark.parametrize("text", ["{devices=[2,1]0,0}", "{devices=[3]<=[4]}", "{bogus}",
                                  "replicated", "{devices=[2]0,1 last_tile_dims={weird}}"])
def test_malformed_shardings_are_refused(text):
    with pytest.raises(ShardingSyntaxError):
        parse_sharding(text)


def test_shardy_mesh_axes_order_the_devices():
    known = meshes('{xla.sdy.meshes={mesh = #sdy.mesh<["a"=2, "b"=2]>}}')
    (s,) = parse_sdy_shardings('#sdy.sharding<@mesh, [{"b"}, {}]>', known)
    # dimension 0 over b, replicated over a: devices {0,2} hold tile 0, {1,3} tile 1
    assert s.tile == (2, 1) and s.subgroups == (("replicated", 2),)
    assert [s.tile_index(d) for d in range(4)] == [(0, 0), (1, 0), (0, 0), (1, 0)]
    assert s.axes == (("b",), ())


MODULE = """HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["data"=2, "model"=2]>}}

ENTRY main {
  x = f32[8,6] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}, frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\\"data\\"}, {}]>"}
  w = f32[6,4] parameter(1), sharding={replicated}
  b = f32[4] parameter(2)
  d = f32[8,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[8,4], f32[4]) tuple(d, b), sharding={{devices=[2,2]<=[4]}, {maximal device=0}}
}
"""


def test_analyze_reports_each_parameters_and_outputs_sharding_in_words():
    a = runtime.analyze(MODULE)
    params = [(v.words, v.bytes_per_device) for v in a.parameter_shardings]
    assert params == [
        ("dim 0 in 2 over mesh axis 'data': f32[4,6] per device (4 devices), each tile on 2 "
         "devices", 96),
        ("replicated: the whole f32[6,4] on every device", 96),
        ("not annotated", 16)]
    outs = [(v.what, v.words, v.bytes_per_device) for v in a.output_shardings]
    assert outs == [("output {0}", "dim 0 in 2, dim 1 in 2: f32[4,2] per device (4 devices)",
                     32),
                    ("output {1}", "on device 0 only (the whole f32[4])", 16)]


def test_a_quoted_mesh_attribute_and_explicit_device_ids():
    known = meshes('{xla.sdy.meshes="{mesh = #sdy.mesh<[\\"x\\"=2], device_ids=[1,0]>}"}')
    (s,) = parse_sdy_shardings('#sdy.sharding<@mesh, [{"x"}]>', known)
    assert s.devices == (1, 0) and s.tile_index(1) == (0,)
