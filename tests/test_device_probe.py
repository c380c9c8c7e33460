"""runtime.device_probe: the host's vector ISA, what each device targets, the default-device
rule with its reasons, and the registration of Intel's CPU runtime from its pip wheels."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

import runtime
from runtime.opencl import device, device_probe
from runtime.cli import main as cli_main

REPO = Path(__file__).resolve().parent.parent


def _fake(name: str, platform_short: str = "pocl", kind: str = "cpu", driver: str = "3.1",
          problem: str | None = None, spec: str = "cpu:9") -> device.Device:
    """A real device's record under another identity, with a fixed probe result."""
    real = device.devices()[0]
    fake = dataclasses.replace(real, name=name, platform_short=platform_short, kind=kind,
                               driver_version=driver, spec=spec, _lazy={})
    fake._lazy["probe"] = problem
    return fake


def _cpuinfo_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_host_isa_agrees_with_the_kernel():
    flags = _cpuinfo_flags()
    expected = "avx512" if "avx512f" in flags else "avx2" if {"avx2", "fma"} <= flags \
        else "baseline"
    assert device_probe.host_isa() == expected


@pytest.mark.parametrize("name, cpu, isa", [
    ("pthread-skylake-avx512-AMD EPYC", "skylake-avx512", "avx512"),
    ("pthread-haswell-Intel(R) Core(TM) i7-4770", "haswell", "avx2"),
    ("pthread-znver3-AMD EPYC 7763", "znver3", "avx2"),
    ("pthread-generic-AMD EPYC", "generic", "baseline"),
    ("pthread-AMD EPYC", None, "unknown"),          # PoCL 3.0 does not name its target
    ("cpu-x86-64-v4-Some CPU", None, "unknown"),
])
def test_pocl_target_is_read_from_the_device_name(name, cpu, isa):
    dev = _fake(name)
    assert device_probe.llvm_cpu(dev) == cpu
    assert device_probe.target_isa(dev) == isa


def test_intel_runtime_targets_the_host_and_gpus_are_unknown():
    assert device_probe.target_isa(_fake("AMD EPYC", "intel")) == device_probe.host_isa()
    assert device_probe.target_isa(_fake("Some GPU", "nvidia", "gpu")) == "unknown"


def test_rule_prefers_host_isa_then_pocl_then_cpus_over_gpus(monkeypatch):
    monkeypatch.setattr(device_probe, "host_isa", lambda: "avx2")
    broken = _fake("pthread-haswell-X", driver="9.9", problem="unknown target CPU", spec="cpu:0")
    pip_pocl = _fake("pthread-AMD EPYC", driver="3.0-rc2", spec="cpu:1")
    intel = _fake("AMD EPYC", "intel", driver="2026.22", spec="cpu:2")
    wider = _fake("pthread-skylake-avx512-X", spec="cpu:3")     # not this (AVX2) host's ISA
    old = _fake("pthread-haswell-X", driver="3.0", spec="cpu:4")
    new = _fake("pthread-haswell-X", driver="3.1+debian", spec="cpu:5")
    gpu = _fake("Some GPU", "nvidia", "gpu", spec="gpu:0")
    found = [broken, pip_pocl, intel, wider, old, gpu, new]
    order = [a.device.spec for a in device_probe.assess(found)]
    assert order == ["cpu:5", "cpu:4", "cpu:2", "cpu:3", "cpu:1", "gpu:0", "cpu:0"]
    assert device_probe.choose(found) is new
    # where no PoCL targets the host, Intel's runtime (which always does) wins
    assert device_probe.choose([pip_pocl, intel, wider, gpu]) is intel
    assert device_probe.choose([pip_pocl, gpu]) is pip_pocl
    assert "no device here compiles for this CPU's avx2: install" in \
        device_probe.reasons([pip_pocl, gpu], pip_pocl)["cpu:1"]
    assert device_probe.choose([broken]) is None

    reasons = device_probe.reasons(found, new)
    assert reasons["cpu:5"].startswith("used (default")
    assert "haswell" in reasons["cpu:5"]
    assert reasons["cpu:0"].startswith("not used: cannot compile (unknown target CPU")
    assert "newer" in reasons["cpu:4"]
    assert "measured slower" in reasons["cpu:2"]
    assert "not this CPU's avx2" in reasons["cpu:3"]
    assert "does not say which CPU" in reasons["cpu:1"]
    assert "only when asked for" in reasons["gpu:0"]
    chosen = device_probe.reasons(found, gpu, "HLO_DEVICE=gpu")
    assert chosen["gpu:0"] == "used (chosen by HLO_DEVICE=gpu)"
    assert chosen["cpu:5"] == "not used: HLO_DEVICE=gpu picks gpu:0"


def test_default_device_follows_the_rule():
    found = device.devices()
    assert device.get_device() is device_probe.choose(found)
    reasons = runtime.device_reasons()
    assert set(reasons) == {d.spec for d in found}
    assert sum(r.startswith("used") for r in reasons.values()) == 1
    assert reasons[device.get_device().spec].startswith("used (default")


def test_host_isa_device_is_the_default_where_one_exists():
    """Here Debian's PoCL 3.1 compiles for the host (skylake-avx512 on this AVX-512 CPU)."""
    host = device_probe.host_isa()
    if any(device_probe.target_isa(d) == host and d.kind == "cpu" and d.probe_build() is None
           for d in device.devices()):
        assert device_probe.target_isa(device.get_device()) == host


def test_a_chosen_device_is_reported_as_chosen(monkeypatch):
    last = device.devices()[-1]
    monkeypatch.setenv("HLO_DEVICE", last.spec)
    assert runtime.device_reasons()[last.spec] == f"used (chosen by HLO_DEVICE={last.spec})"
    assert runtime.device_reasons(last)[last.spec] == f"used (chosen by device={last.spec})"


def test_hlo_devices_cli_names_the_used_device_and_why(capsys):
    assert cli_main(["devices"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"host CPU vector ISA: {device_probe.host_isa()}\n")
    used = device.get_device()
    assert f"{used.spec:6} {used}" in out and "used (default" in out
    assert out.count("not used") == len(device.devices()) - 1


def test_devices_magic_table_says_why():
    from hlo_magic.devices import DeviceTable
    found = device.devices()
    table = DeviceTable(found, device.get_device(), runtime.device_reasons())
    text = repr(table)
    assert "used (default" in text and "used?" in text


# --- ICD registration -------------------------------------------------------------------------

def test_intel_library_is_registered_next_to_the_system_icds(monkeypatch, tmp_path):
    system = tmp_path / "system"
    system.mkdir()
    (system / "pocl.icd").write_text("libpocl.so.2\n")
    library = tmp_path / "lib" / "libintelocl.so"
    library.parent.mkdir()
    library.write_text("")
    monkeypatch.setattr(device_probe, "intel_library", lambda: library)
    monkeypatch.setenv("OCL_ICD_VENDORS", str(system))
    vendors = device_probe.register_vendor_icds(tmp_path / "cache")
    assert vendors is not None and vendors.parent == tmp_path / "cache"
    assert os.environ["OCL_ICD_VENDORS"] == str(vendors)
    contents = sorted(p.read_text().strip() for p in vendors.glob("*.icd"))
    assert contents == sorted(["libpocl.so.2", str(library)])
    # already listed: nothing more to do
    assert device_probe.register_vendor_icds(tmp_path / "cache") is None
    # a process with another vendor list (here: none at all) gets its own directory and
    # leaves this one as it is
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("OCL_ICD_VENDORS", str(empty))
    alone = device_probe.register_vendor_icds(tmp_path / "cache")
    assert alone is not None and alone != vendors
    assert [p.read_text().strip() for p in alone.glob("*.icd")] == [str(library)]
    assert sorted(p.read_text().strip() for p in vendors.glob("*.icd")) == contents


def test_registration_can_be_turned_off(monkeypatch, tmp_path):
    library = tmp_path / "libintelocl.so"
    library.write_text("")
    monkeypatch.setattr(device_probe, "intel_library", lambda: library)
    monkeypatch.setenv("HLO_INTEL_OPENCL", "0")
    monkeypatch.setenv("OCL_ICD_VENDORS", str(tmp_path))
    assert device_probe.register_vendor_icds(tmp_path / "cache") is None
    assert os.environ["OCL_ICD_VENDORS"] == str(tmp_path)


def test_nothing_is_registered_without_the_wheel(monkeypatch, tmp_path):
    monkeypatch.setattr(device_probe, "intel_library", lambda: None)
    monkeypatch.setenv("OCL_ICD_VENDORS", str(tmp_path))
    assert device_probe.register_vendor_icds(tmp_path / "cache") is None
    assert os.environ["OCL_ICD_VENDORS"] == str(tmp_path)


def test_installed_intel_wheel_shows_up_as_a_device(tmp_path):
    """Where the wheels are installed (dependencies on x86-64 Linux), a fresh process
    lists Intel's CPU device with no setup; where they are not, the registration adds none."""
    env = {**os.environ, "HLO_MAGIC_CACHE": str(tmp_path), "PYTHONPATH": str(REPO)}
    env.pop("OCL_ICD_VENDORS", None)
    env.pop("HLO_INTEL_OPENCL", None)
    code = ("import runtime\nprint(sorted({d.platform_short for d in runtime.devices()}))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, check=True)
    platforms = done.stdout.strip()
    system = " ".join(p.read_text() for p in Path("/etc/OpenCL/vendors").glob("*.icd"))
    if device_probe.intel_library() is not None:
        assert "'intel'" in platforms
    elif "intel" not in system.lower():
        assert "'intel'" not in platforms


def test_a_device_array_from_another_device_is_refused():
    """With several devices (here: Debian PoCL, Intel's runtime, the PoCL wheel), an array
    on one cannot feed an executable compiled for another: a clear error, not OpenCL's."""
    import numpy as np
    usable = [d for d in device.devices() if d.probe_build() is None]
    assert len(usable) >= 2, "expected at least two usable OpenCL devices here"
    exe = runtime.compile("HloModule m\nENTRY e { p = f32[4] parameter(0)\n"
                          "  ROOT n = f32[4] negate(p) }\n", usable[0])
    elsewhere = runtime.device_put(np.ones(4, np.float32), usable[1])
    with pytest.raises(runtime.HloArgumentError, match=r"argument 0 \(p\) lives on .* but m was "
                                                        r"compiled for"):
        exe.run(elsewhere)
    np.testing.assert_array_equal(exe(np.ones(4, np.float32)), -np.ones(4, np.float32))


def test_the_default_compiles_only_until_a_device_can_win(monkeypatch):
    """Devices that cannot win are never probed, so their compilers never load into the
    process (two LLVMs in one process crashed there)."""
    monkeypatch.setattr(device_probe, "host_isa", lambda: "avx2")
    best = _fake("pthread-haswell-X", spec="cpu:0")
    others = [_fake("AMD EPYC", "intel", spec="cpu:1"), _fake("pthread-AMD EPYC", spec="cpu:2")]
    for other in others:
        del other._lazy["probe"]           # probing one of these would build a kernel
    probed: list[str] = []
    original = device.Device.probe_build

    def counting(self):
        probed.append(self.spec)
        return original(self)
    monkeypatch.setattr(device.Device, "probe_build", counting)
    assert device_probe.choose([*others, best]) is best
    assert probed == ["cpu:0"]
