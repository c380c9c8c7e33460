"""The parameter table of a module written for several devices gains each parameter's
sharding and bytes per device; its outputs get a table of their own."""

from __future__ import annotations

import numpy as np

import runtime
from hlo_magic.donation import describe_parameters
from hlo_magic.report import output_sharding_table, parameter_table, with_sharding_columns
from tests.spmd.spmd_data import SHARED


def test_sharded_parameters_and_outputs_are_described():
    a = runtime.analyze((SHARED / "shardmap2_swap_ppermute.hlo").read_text())
    plan = a.buffer_assignment
    table = with_sharding_columns(
        parameter_table(describe_parameters(plan), frozenset(), plan, None),
        a.parameter_shardings)
    assert table.columns[-2:] == ("sharding", "per device")
    assert table.rows[0][-2:] == ("dim 0 in 2 over mesh axis 'data': f32[2,16] per device "
                                  "(2 devices)", "128 B")
    outputs = output_sharding_table(a.output_shardings)
    assert outputs.rows == [("{}", "f32[4,16]", "not annotated", "256 B")]


def test_a_sharded_cell_reports_its_shardings_and_a_plain_one_does_not(ip):
    from hlo_magic.render import to_text
    from hlo_magic.report import build_report
    ip.user_ns["x"] = np.ones((4, 16), np.float32)
    sharded = to_text(build_report(ip.run_cell_magic(
        "hlo", "--run x", (SHARED / "shardmap2_swap_ppermute.hlo").read_text())))
    assert "Output shardings" in sharded and "over mesh axis 'data'" in sharded
    ip.user_ns["x"] = np.ones(4, np.float32)
    plain = to_text(build_report(ip.run_cell_magic("hlo", "--run x", """HloModule m

ENTRY main {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x)
}
""")))
    assert "Output shardings" not in plain and "per device" not in plain
