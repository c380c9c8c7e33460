"""Every whole model of the shared models folder (``$HLO_MODELS``, default ``../shared/models``)
compiles, runs on the default device and on every other CPU device that compiles for this
CPU (Intel's OpenCL runtime beside PoCL), and matches XLA's CPU reference: the outputs are
checked against the index's ``expected_summary`` (samples, min, max, mean, sums) under its
per-output tolerances; and no fused kernel recomputes a reduction. A missing models folder
fails, never skips."""

import pytest

import runtime
from runtime.opencl import device as devices, device_probe
from runtime.analysis.fusion_cost import reduction_evaluations
from runtime.pipeline import optimise

from ..corpus_data import MODELS, flatten, mismatches, model_programs

_MODELS = model_programs()

pytestmark = pytest.mark.slow


def test_models_are_present():
    if not (MODELS / "index.json").is_file():
        pytest.fail(f"the shared models folder is missing: expected {MODELS}/index.json "
                    "(set HLO_MODELS to its location)")
    assert len(_MODELS) >= 3


@pytest.mark.parametrize("program", _MODELS, ids=lambda p: p.name)
def test_model_matches_xla(program):
    exe = runtime.compile(program.text("hlo"))
    got = flatten(exe(*program.inputs()))
    problems = mismatches(program, got)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("program", _MODELS, ids=lambda p: p.name)
def test_model_matches_xla_on_the_other_cpu_devices(program):
    """Each device kind gets its own target and its own compiler: Intel's vectorised a
    subtracting accumulation of ResNet-18's loss gradient wrong (``target.CPU_IMPLICIT_SIMD``)."""
    default = devices.get_device()
    others = [d for d in devices.devices() if d.kind == "cpu" and d != default
              and device_probe.target_isa(d) == device_probe.host_isa()]
    if not others:
        pytest.skip("no other CPU device compiles for this CPU")
    for dev in others:
        exe = runtime.compile(program.text("hlo"), device=dev)
        got = flatten(exe(*(runtime.device_put(x, dev) for x in program.inputs())))
        problems = mismatches(program, got)
        assert not problems, f"{dev}:\n" + "\n".join(problems)


@pytest.mark.parametrize("program", _MODELS, ids=lambda p: p.name)
def test_no_fusion_recomputes_a_reduction(program):
    """Each reduction of the fused module computes each of its outputs once: a kernel never
    recomputes a reduction per output element (or per row that shares the reduction's output)."""
    module = optimise(runtime.parse(program.text("hlo")))
    recomputed = []
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode == "fusion":
                for reduce, times in reduction_evaluations(inst.attrs["calls"]).items():
                    if times != 1:
                        recomputed.append(f"{inst.name}: {reduce.name} x{times:g}")
    assert not recomputed, "\n".join(recomputed)
