"""The lowering registry: order by target then priority, no ties, and a target-specific rule
(here a stand-in GPU dot, registered the way a new kernel module would) winning over the
common one on its target only."""

import copy

import pytest

import runtime
from runtime.codegen import registry
from runtime.codegen.families.loop import lower_loop
from runtime.codegen.lower import lower
from runtime.pipeline import run
from runtime.hlo.opcode_enum import Opcode
from runtime.target import Target, TargetKind

DOT = """HloModule d
ENTRY e {
  a = f32[8,32] parameter(0)
  b = f32[32,64] parameter(1)
  ROOT d = f32[8,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""


@pytest.fixture
def rules(monkeypatch):
    monkeypatch.setattr(registry, "_RULES", copy.deepcopy(registry._RULES))
    return registry


def test_target_rules_come_first_then_priority(rules):
    def common_low(ctx, inst): return None
    def common_high(ctx, inst): return None
    def cpu_only(ctx, inst): return None
    rules.add("k", common_low, priority=0)
    rules.add("k", common_high, priority=5)
    rules.add("k", cpu_only, target=TargetKind.CPU, priority=-10)
    assert rules.rules("k", "cpu") == [cpu_only, common_high, common_low]
    assert rules.rules("k", "gpu") == [common_high, common_low]


def test_two_rules_at_one_priority_are_refused(rules):
    rules.add("k", lambda ctx, inst: None, target=TargetKind.GPU, priority=3)
    with pytest.raises(ValueError, match="two lowering rules"):
        rules.add("k", lambda ctx, inst: None, target=TargetKind.GPU, priority=3)


def test_a_gpu_specific_dot_is_one_registration(rules):
    used = []

    # above the work-group dot (``families.workgroup_dot``, priority 0 on "gpu")
    @rules.register(Opcode.DOT, target=TargetKind.GPU, priority=100, fusion_root_too=True)
    def gpu_dot(ctx, inst):
        used.append(inst.name)
        return lower_loop(ctx, inst)

    module = runtime.parse(DOT)
    for kind in ("cpu", "gpu"):
        target = Target.for_kind(kind)
        lower(run(module, target), target)
    assert used == ["d"]           # the GPU lowering only; the CPU kept its register tiles
