"""``runtime.analyze``: the memory plan without a device; ``compile`` builds on it (lazily if
asked), elided constants run only with an explicit fill, and compile times per stage."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import runtime
from runtime.execution import kernel_builds

REPO = Path(__file__).resolve().parent.parent

ADD_MUL = """HloModule add_mul, input_output_alias={ {0}: (0, {}, may-alias) }

ENTRY main {
  x = f32[4,8] parameter(0)
  y = f32[4,8] parameter(1)
  s = f32[4,8] add(x, y)
  m = f32[4,8] multiply(s, y)
  ROOT t = (f32[4,8], f32[4,8]) tuple(m, s)
}
"""

ELIDED = """HloModule elided

ENTRY main {
  p = f32[16] parameter(0)
  c = f32[16] constant({...})
  n = s32[12] constant({...})
  ROOT t = (f32[16], s32[12]) tuple(f32[16] add(p, c), s32[12] negate(n))
}
"""


@pytest.fixture
def builds(monkeypatch) -> list[list[str]]:
    built: list[list[str]] = []
    original = kernel_builds.build_kernels

    def counting(dev, program, report, times=None):
        built.append(list(program.kernel_names))
        return original(dev, program, report, times)
    monkeypatch.setattr(kernel_builds, "build_kernels", counting)
    return built


def test_analyze_gives_the_plan_compile_makes(builds):
    analysis = runtime.analyze(ADD_MUL)
    assert analysis.alignment == 128 and analysis.name == "add_mul"
    assert any(i.opcode == "fusion" for i in analysis.module.entry.instructions)
    assert analysis.source.entry.root.opcode == "tuple"
    exe = runtime.compile(ADD_MUL, force=True, alignment=128)
    assert exe.analysis.buffer_assignment.to_text() == analysis.buffer_assignment.to_text()
    assert exe.memory_stats == analysis.memory_stats
    assert len(builds) == 1


def test_analyze_takes_an_alignment_and_a_device():
    assert runtime.analyze(ADD_MUL, alignment=64).buffer_assignment.alignment == 64
    device = runtime.get_device()
    assert runtime.analyze(ADD_MUL, device=device).alignment == device.mem_base_addr_align
    with pytest.raises(ValueError, match="power of two"):
        runtime.analyze(ADD_MUL, alignment=96)
    with pytest.raises(runtime.HloParseError):
        runtime.analyze("HloModule broken\nENTRY e { ROOT x = f32[] bogus() }")


def test_analyze_needs_no_opencl_at_all():
    """In a process where pyopencl cannot be imported and no OpenCL vendor is registered."""
    code = ("import sys\nsys.modules['pyopencl'] = None\n"
            "import runtime\n"
            "a = runtime.analyze(open(sys.argv[1]).read())\n"
            "print(a.memory_stats.argument, a.memory_stats.output)\n"
            "try:\n    runtime.compile(open(sys.argv[1]).read())\n"
            "except runtime.DeviceError as e:\n    print('DeviceError')\n")
    path = REPO / "notebooks" / "modules" / "increment.hlo"
    env = dict(os.environ, OCL_ICD_VENDORS="/nonexistent-vendors-dir",
               PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["4 4", "DeviceError"]


def test_a_lazy_compile_builds_at_the_first_run_only(builds):
    exe = runtime.compile(ADD_MUL, force=True, lazy=True)
    assert not exe.is_built and builds == []
    assert set(exe.compile_times) >= {"parse", "verify", "passes", "assignment"}
    x = np.ones((4, 8), np.float32)
    m, s = exe(x, x)
    np.testing.assert_array_equal(m, 2 * x)
    assert exe.is_built and len(builds) == 1
    exe(x, x)
    again = runtime.compile(ADD_MUL, lazy=True)
    again(x, x)
    assert again.cache_hit and len(builds) == 1
    lazy = runtime.compile(ADD_MUL, force=True, lazy=True)
    eager = runtime.compile(ADD_MUL)                  # a cache hit of an unbuilt executable
    assert eager.cache_hit and eager.is_built and lazy.is_built and len(builds) == 2
    assert set(exe.compile_times) >= {"codegen", "opencl-build", "warm-up"}
    assert exe.compile_seconds == pytest.approx(sum(exe.compile_times.values()))


def test_elided_constants_analyse_but_run_only_with_a_fill(builds):
    analysis = runtime.analyze(ELIDED)
    assert analysis.memory_stats.argument == 64
    with pytest.raises(runtime.HloUnsupportedError, match=r"constant c was printed elided") as e:
        runtime.compile(ELIDED, force=True)
    assert e.value.line == 5 and "elided_constants='zeros'" in str(e.value)
    assert builds == []
    x = np.arange(16, dtype=np.float32)
    zeros = runtime.compile(ELIDED, elided_constants="zeros", force=True)
    assert zeros.elided_constants == "zeros" and zeros.memory_stats == analysis.memory_stats
    added, negated = zeros(x)
    np.testing.assert_array_equal(added, x)
    np.testing.assert_array_equal(negated, np.zeros(12, np.int32))
    random = runtime.compile(ELIDED, elided_constants="random", force=True)
    added, negated = random(x)
    assert np.all(np.abs(added - x) <= 1) and not np.array_equal(added, x)
    again, _ = runtime.compile(ELIDED, elided_constants="random", force=True)(x)
    np.testing.assert_array_equal(again, added)                  # reproducible values
    assert runtime.compile(ADD_MUL, elided_constants="zeros").elided_constants is None
    with pytest.raises(ValueError, match="elided_constants='ones'"):
        runtime.compile(ELIDED, elided_constants="ones")


def test_a_failed_build_is_located_and_carries_the_log():
    device = runtime.get_device()
    from runtime.opencl.device import build_program
    with pytest.raises(runtime.DeviceError, match=r"line 2:\d+: error") as e:
        build_program(device, "__kernel void f(__global int* o) {\n  o[0] = undefined_name;\n}\n")
    assert "undefined_name" in e.value.build_log
