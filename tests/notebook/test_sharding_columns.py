"""The parameter table of a module written for several devices gains each parameter's
sharding and bytes per device; its outputs get a table of their own."""

from __future__ import annotations

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
