"""The GPU target's work-group kernels, without a device: which instructions they take, the
launch shapes the Target's work-group fields give them, and those fields from device limits;
and their values on the default device (the simulated GPU checks them for invalid accesses
and races too: ``tests/gpu_sim``, cases ``workgroup:*``)."""

from dataclasses import replace

import pytest

import runtime
from runtime.codegen.lower import lower
from runtime.codegen.plan import iter_launches
from runtime.pipeline import run
from runtime.target import CPU, GPU, Target, WorkGroups

from ..gpu_sim import workgroup_cases

DOT = """HloModule d
ENTRY e {
  a = f32[3,40,70] parameter(0)
  b = f32[3,70,33] parameter(1)
  ROOT d = f32[3,40,33] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}"""

ROW_SUMS = """HloModule r
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[%d,%d] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[%d] reduce(a, z), dimensions={1}, to_apply=add
}"""


def _program(text: str, target: Target):
    return lower(run(runtime.parse(text), target), target)


def test_gpu_dot_is_one_work_group_per_output_tile():
    gpu = replace(GPU, work_groups=WorkGroups(tile=16, block=2, reduce_group=64))
    program = _program(DOT, gpu)
    (launch,) = iter_launches(program.plan)
    # 33 columns, 40 rows: 3 x 3 tiles of 16, 8 x 8 work-items each; one per batch index
    assert launch.local_size == (8, 8, 1)
    assert launch.global_size == (3 * 8, 3 * 8, 3)
    assert "__local float" in program.source and "barrier(CLK_LOCAL_MEM_FENCE)" in program.source


def test_cpu_dot_keeps_its_register_tiles():
    # 200 rows: more than one work-group's tiles cover, so no packed panel either
    program = _program(DOT.replace("40", "200"), CPU)
    assert "__local" not in program.source and "barrier" not in program.source


def test_long_rows_get_a_work_group_each_short_rows_a_work_item():
    gpu = replace(GPU, work_groups=WorkGroups(tile=16, block=2, reduce_group=64))
    (long_rows,) = iter_launches(_program(ROW_SUMS % (5, 1000, 5), gpu).plan)
    assert long_rows.local_size == (64,) and long_rows.global_size == (5 * 64,)
    (medium,) = iter_launches(_program(ROW_SUMS % (5, 100, 5), gpu).plan)
    assert medium.local_size == (64,)            # the power of two the rows fill
    (wide,) = iter_launches(_program(ROW_SUMS % (5, 40, 5), gpu).plan)
    assert wide.local_size == (32,)
    short = _program(ROW_SUMS % (500, 30, 500), gpu)
    assert "barrier" not in short.source


def test_work_groups_follow_device_limits():
    assert WorkGroups.for_limits(32 * 1024, 256) == WorkGroups(tile=32, block=2,
                                                              reduce_group=256)
    # 16 KiB cannot hold two 32 x 33 tiles of doubles; 64 work-items allow 8 x 8 per group
    assert WorkGroups.for_limits(16 * 1024, 1024).tile == 16
    small = WorkGroups.for_limits(64 * 1024, 64)
    assert small.tile_items <= 64 and small.reduce_group == 64
    floor = WorkGroups.for_limits(1024, 1)
    assert (floor.tile_items, floor.reduce_group) == (1, 1)
    assert CPU.work_groups is None and GPU.work_groups is not None


@pytest.fixture
def gpu_target_on_default_device(monkeypatch):
    """The default device (PoCL's CPU here) compiling with the GPU target: the work-group
    kernels are valid OpenCL anywhere, so their values are checked here too."""
    monkeypatch.setattr(Target, "for_device", staticmethod(
        lambda device: replace(GPU, work_groups=WorkGroups.for_limits(
            device.local_mem_bytes, device.max_work_group_size))))


@pytest.mark.parametrize("case", workgroup_cases.DOT_CASES + workgroup_cases.REDUCE_CASES,
                         ids=lambda case: case.name)
def test_values_on_the_default_device(gpu_target_on_default_device, case):
    assert workgroup_cases.run([case]) == []
