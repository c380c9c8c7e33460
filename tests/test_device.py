"""runtime.opencl.device and runtime.opencl.cache: discovery, selection, builds, memory errors, PoCL cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.opencl import cache, device
from runtime.errors import DeviceError
from runtime.target import Target

REPO = Path(__file__).resolve().parent.parent


def test_devices_are_listed_with_their_facts():
    found = device.devices()
    assert found, "expected at least PoCL's CPU device"
    for dev in found:
        assert dev.kind in ("cpu", "gpu", "accelerator")
        assert dev.spec.startswith(dev.kind + ":")
        assert str(dev) == f"{dev.platform_short}:{dev.kind} ({dev.name})"
        assert dev.mem_base_addr_align >= 4 and dev.mem_base_addr_align % 4 == 0
        assert 0 < dev.max_alloc_bytes <= dev.global_mem_bytes
        assert dev.name in dev.identity and dev.driver_version in dev.identity
        assert Target.for_device(dev).kind == ("cpu" if dev.kind == "cpu" else "gpu")
    assert len({d.spec for d in found}) == len(found)


def test_default_device_compiles_and_is_a_cpu():
    """Which CPU device: tests/test_device_probe.py."""
    dev = device.get_device()
    assert dev.probe_build() is None
    if any(d.kind == "cpu" and d.probe_build() is None for d in device.devices()):
        assert dev.kind == "cpu"
    assert "-cl-denorms-are-zero" in dev.build_options


def test_specs_select_devices():
    dev = device.get_device("cpu:0")
    assert dev.spec == "cpu:0"
    assert device.get_device("cpu") is dev
    assert device.get_device(dev) is dev
    assert device.get_device(f"{dev.platform_short}:{dev.kind}").platform_short == \
        dev.platform_short
    assert device.get_device(dev.name[:6].upper()).name.startswith(dev.name[:6])


def test_hlo_device_environment_variable_is_honoured(monkeypatch):
    last = device.devices()[-1]
    monkeypatch.setenv("HLO_DEVICE", last.spec)
    assert device.get_device() is last


def test_unknown_spec_lists_the_devices_found():
    with pytest.raises(DeviceError, match=r"no OpenCL device matches 'quantum:3'.*cpu:0 = "):
        device.get_device("quantum:3")


def test_no_opencl_at_all_says_what_to_install(monkeypatch):
    monkeypatch.setattr(device, "_devices", [])
    with pytest.raises(DeviceError, match="no OpenCL platform found") as info:
        device.get_device()
    assert "pocl-binary-distribution" in info.value.hint


def test_context_and_queue_are_created_once():
    dev = device.get_device()
    assert dev.context is dev.context
    assert dev.queue is dev.queue


def test_build_program_is_cached_per_source_and_options():
    dev = device.get_device()
    source = "__kernel void twice(__global int* x) { x[get_global_id(0)] *= 2; }\n"
    first = device.build_program(dev, source)
    assert device.build_program(dev, source) is first
    assert device.build_program(dev, source, ("-DUNUSED=1",)) is not first


def test_build_failure_shows_errors_with_numbered_source_lines():
    source = ("__kernel void broken(__global float* x) {\n"
              "  float y = 1.0f;\n"
              "  x[0] = y + undefined_name;\n"
              "}\n")
    with pytest.raises(DeviceError) as info:
        device.build_program(device.get_device(), source)
    message = str(info.value)
    assert "line 3:" in message and "undefined_name" in message
    assert "3 |   x[0] = y + undefined_name;" in message


@pytest.mark.parametrize("log", [
    "<source>:2:5: error: expected ';'\n<source>:3:1: warning: unused\n",
    "error: /tmp/cache/tempfile_ab.cl:2:5: expected ';'\n1 error generated.\n",
])
def test_build_failure_format_reads_clang_and_pocl_logs(log):
    dev = device.get_device()
    text = device.format_build_failure(dev, "line one\nline two\nline three\n", log)
    assert text.splitlines()[1:] == ["  line 2:5: error: expected ';'", "  2 | line two"]


def test_unlocated_build_log_is_shown_as_is():
    text = device.format_build_failure(device.get_device(), "x", "error: unknown target CPU")
    assert text.endswith("error: unknown target CPU")


def test_allocation_beyond_the_device_limit_is_an_out_of_memory_error():
    dev = device.get_device()
    with pytest.raises(DeviceError, match=rf"out of device memory: needed "
                                          rf"{dev.max_alloc_bytes + 1} bytes for the arena"):
        device.allocate_buffer(dev, dev.max_alloc_bytes + 1, "the arena")


def test_opencl_allocation_failures_become_out_of_memory_errors():
    dev = device.get_device()
    cl = device.opencl()

    def failing_allocation():
        with device.translate_memory_errors(dev, 1234, "a temp buffer"):
            cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, size=0)

    with pytest.raises(cl.Error):  # a zero-size buffer is INVALID_BUFFER_SIZE (-61)
        cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, size=0)
    with pytest.raises(DeviceError, match="needed 1234 bytes for a temp buffer"):
        failing_allocation()


def test_buffers_are_whole_words_and_empty_ones_get_one():
    """A packed sub-byte store updates the 32-bit word holding its byte."""
    dev = device.get_device()
    assert device.allocate_buffer(dev, 256).size == 256
    assert device.allocate_buffer(dev, 3).size == 4
    assert device.allocate_buffer(dev, 0).size == 4


def test_cache_dir_and_pocl_tag(monkeypatch, tmp_path):
    monkeypatch.setenv("HLO_MAGIC_CACHE", str(tmp_path))
    monkeypatch.delenv("POCL_CACHE_DIR", raising=False)
    for name in cache.POCL_CODEGEN_ENV:
        monkeypatch.delenv(name, raising=False)
    assert cache.cache_dir() == tmp_path
    plain = cache.pocl_cache_tag()
    assert plain.startswith("pocl-")
    path = cache.configure_pocl_cache()
    assert path == tmp_path / plain and path.is_dir()
    assert os.environ["POCL_CACHE_DIR"] == str(path)
    monkeypatch.setenv("POCL_FORCE_PARALLEL_OUTER_LOOP", "1")
    assert cache.pocl_cache_tag() not in (plain, "")
    assert cache.pocl_cache_tag() == cache.pocl_cache_tag()


def test_a_user_chosen_pocl_cache_dir_is_kept(monkeypatch, tmp_path):
    chosen = tmp_path / "mine"
    monkeypatch.setenv("POCL_CACHE_DIR", str(chosen))
    assert cache.configure_pocl_cache() == chosen and chosen.is_dir()


def _fresh_process(code: str, cache_root: Path) -> str:
    env = {**os.environ, "HLO_MAGIC_CACHE": str(cache_root), "PYTHONPATH": str(REPO)}
    env.pop("POCL_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, check=True)
    return done.stdout.strip()


def test_importing_runtime_does_not_touch_opencl(tmp_path):
    assert _fresh_process("import sys, runtime, runtime.opencl.device, runtime.codegen.templates;"
                          "print('pyopencl' in sys.modules)", tmp_path) == "False"


def test_a_fresh_process_reuses_pocls_cached_program(tmp_path):
    """Builds hand PoCL the exact source (no pyopencl binary cache salting it), so a second
    process finds the program in the project's PoCL cache instead of adding another."""
    code = ("import numpy as np; from runtime.opencl import device as d\n"
            "dev = d.get_device()\n"
            "p = d.build_program(dev, '__kernel void k(__global int* x) { x[0] = 7; }\\n')\n"
            "b = d.allocate_buffer(dev, 4)\n"
            "p.k(dev.queue, (1,), (1,), b)\n"
            "out = np.zeros(1, np.int32); d.opencl().enqueue_copy(dev.queue, out, b)\n"
            "print(out[0])\n")
    assert _fresh_process(code, tmp_path) == "7"
    if not device.get_device().is_pocl:
        return
    programs = sorted(p.parent.name for p in tmp_path.rglob("program.bc"))
    assert _fresh_process(code, tmp_path) == "7"
    assert sorted(p.parent.name for p in tmp_path.rglob("program.bc")) == programs


ADD = """HloModule add

ENTRY main {
  x = f32[64] parameter(0)
  ROOT y = f32[64] add(x, x)
}
"""


def _unprobed_first(monkeypatch, probe) -> tuple[device.Device, device.Device]:
    """A device ranked before the default one (same facts but its alignment), whose probe
    build is ``probe(the device)``: (that device, the default)."""
    import dataclasses
    real = device.get_device()
    first = dataclasses.replace(real, spec="cpu:9", _lazy={},
                                mem_base_addr_align=2 * real.mem_base_addr_align)
    monkeypatch.setattr(device, "_devices", [first, *device.devices()])
    monkeypatch.setattr(device.device_probe, "ranked", lambda found: [first, real])

    def probe_build(self) -> str | None:
        if self is first and "probe" not in self._lazy:
            self._lazy["probe"] = probe(self)
        return self._lazy.get("probe") if self is first else None
    monkeypatch.setattr(device.Device, "probe_build", probe_build)
    return first, real


def test_the_analysis_runs_while_the_probe_decides_the_default_device(monkeypatch):
    """The probe build (1.2 s on PoCL's empty cache) runs beside the analysis of the first
    report, which needs the best-ranked device's properties only."""
    import threading

    import runtime
    from runtime import compiler
    analysing = threading.Event()
    seen_while_probing: list[bool] = []

    def probe(_) -> None:
        seen_while_probing.append(analysing.wait(timeout=30))
    first, _ = _unprobed_first(monkeypatch, probe)
    analyse = compiler._analyse

    def spy(*args, **kwargs):
        analysing.set()
        return analyse(*args, **kwargs)
    monkeypatch.setattr(compiler, "_analyse", spy)
    exe = runtime.compile(ADD, lazy=True, force=True)
    assert seen_while_probing == [True]
    assert exe.device is first and exe.buffer_assignment.alignment == first.mem_base_addr_align


def test_a_best_ranked_device_that_cannot_compile_is_replaced_after_the_analysis(monkeypatch):
    """The analysis made for the best-ranked device is made again for the device used."""
    import runtime
    first, real = _unprobed_first(monkeypatch, lambda _: "no compiler here")
    exe = runtime.compile(ADD, lazy=True, force=True)
    assert exe.device is real and exe.buffer_assignment.alignment == real.mem_base_addr_align
    assert first.mem_base_addr_align != real.mem_base_addr_align
