"""Which Target a device gets: from its OpenCL properties (type, preferred float vector
width) and the vector ISA it compiles for, never from the vendor's name; the CPU targets
generate different kernels, and the program cache keeps their programs apart."""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import runtime
from runtime.codegen.families import reduction
from runtime.analyzer import analyze_verified
from runtime.codegen.lower import lower
from runtime.codegen.plan import Launch
from runtime.execution.kernel_builds import KernelBuild
from runtime.opencl import device as devices, device_probe
from runtime.execution.executable import Executable
from runtime.execution.program_cache import program_key
from runtime.pipeline import run
from runtime.errors import DeviceError
from runtime.target import CPU, CPU_AVX2, CPU_IMPLICIT_SIMD, GPU, TARGETS, Target, TargetKind

ROWS = """HloModule rows
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[37,300]{1,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[37] reduce(x, z), dimensions={1}, to_apply=add
}"""


def fake(kind: str, width: int, name: str = "Some CPU", platform: str = "Some OpenCL",
         isa: str = "avx512", local_mem: int = 1 << 20, pairs: bool = False):
    return SimpleNamespace(kind=kind, preferred_vector_width_float=width, name=name,
                           platform=platform, vendor=platform, local_mem_bytes=local_mem,
                           max_work_group_size=256, vector_isa=isa, pair_multiply_add=pairs)


@pytest.mark.parametrize("name, short, pairs", [
    ("pthread-skylake-avx512-AMD EPYC", "pocl", True),
    ("pthread-haswell-AMD EPYC", "pocl", True),
    ("pthread-knl-Intel(R) Xeon Phi", "pocl", False),     # AVX-512 F without BW
    ("pthread-x86-64-AMD EPYC", "pocl", False),           # SSE2 only
    ("cpu-x86-64-AMD EPYC", "pocl", False),               # PoCL 3.0: no CPU named
    ("pthread-haswell-AMD EPYC", "intel", False),
])
def test_integer_pair_multiply_adds_only_where_pocls_clang_targets_avx2_or_avx512_bw(
        name, short, pairs):
    device = SimpleNamespace(name=name, kind="cpu", platform_short=short,
                             is_pocl=short == "pocl")
    assert device_probe.pair_multiply_add(device) is pairs
    for isa, base in (("avx512", CPU), ("avx2", CPU_AVX2)):
        target = Target.for_device(fake("cpu", 16, isa=isa, pairs=pairs))
        assert target.tiles.pair_madd is pairs
        assert replace(target, tiles=replace(target.tiles, pair_madd=False)) == base


def test_the_target_follows_the_preferred_vector_width_not_the_name():
    assert Target.for_device(fake("cpu", 16)) == CPU
    assert Target.for_device(fake("cpu", 8)) == CPU
    assert Target.for_device(fake("cpu", 1)) == CPU_IMPLICIT_SIMD
    # the name says Intel, the property says explicit vectors: the CPU target
    assert Target.for_device(fake("cpu", 16, "Intel(R) Xeon", "Intel(R) OpenCL")) == CPU
    assert Target.for_device(fake("gpu", 1)) == GPU       # GPU's limits give its work-groups
    assert Target.for_device(fake("accelerator", 1)) == GPU


def test_cpus_without_avx512_get_256_bit_vectors_and_smaller_tiles():
    assert Target.for_device(fake("cpu", 16, isa="avx2")) == CPU_AVX2
    assert Target.for_device(fake("cpu", 8, isa="baseline")) == CPU_AVX2
    assert Target.for_device(fake("cpu", 16, isa="unknown")) == CPU
    assert Target.for_device(fake("cpu", 1, isa="avx2")) == CPU_IMPLICIT_SIMD
    assert CPU_AVX2.tile_lanes(32) == 8 and CPU.tile_lanes(32) == 16
    # accumulators of the register tile fit AVX2's 16 registers with the loads beside them
    accumulators = CPU_AVX2.tiles.rows * CPU_AVX2.tiles.vectors
    assert accumulators + CPU_AVX2.tiles.vectors + 1 <= 16


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_packed_dot_panels_fit_the_devices_local_memory(isa):
    small = Target.for_device(fake("cpu", 16, isa=isa, local_mem=32 * 1024))
    large = Target.for_device(fake("cpu", 16, isa=isa))
    assert small.tiles.pack_panel_bytes == 32 * 1024
    assert large.tiles.pack_panel_bytes == (CPU if isa == "avx512" else CPU_AVX2).tiles.pack_panel_bytes
    assert large.tiles.pack_panel_bytes > 32 * 1024
    a, b = np.ones((50, 600), np.float32), np.ones((40, 600), np.float32)
    text = """HloModule nt
    ENTRY e {
      a = f32[50,600] parameter(0)
      b = f32[40,600] parameter(1)
      ROOT d = f32[50,40] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}
    }"""
    dev = devices.get_device()
    module = runtime.parse(text)
    analysis = analyze_verified(module, dev.mem_base_addr_align, True, small)
    exe = Executable(module, analysis, dev, KernelBuild(analysis, dev)).build()
    assert "__local float" in exe.program.source
    assert max(int(n) for n in re.findall(r"__local float \w+\[(\d+)\]", exe.program.source)) \
        * 4 <= 32 * 1024
    np.testing.assert_array_equal(exe(a, b), np.full((50, 40), 600, np.float32))


def test_every_installed_device_gets_the_target_of_its_properties():
    for dev in devices.devices():
        want = "gpu" if dev.kind != "cpu" else (
            "cpu-implicit-simd" if dev.preferred_vector_width_float == 1
            else "cpu-avx2" if dev.vector_isa in ("avx2", "baseline") else "cpu")
        assert Target.for_device(dev).name == want
        assert Target.for_device(dev).tiles.pair_madd is (
            dev.platform_short == "pocl" and dev.kind == "cpu"
            and dev.vector_isa in ("avx2", "avx512"))
        assert dev.preferred_vector_width_float >= 1


def test_the_implicit_simd_target_differs_in_reductions_and_inner_products_only():
    assert CPU_IMPLICIT_SIMD.kind is TargetKind.CPU   # the same lowering rules
    differ = {k for (k, a), (_, b) in zip(CPU.codegen_key(), CPU_IMPLICIT_SIMD.codegen_key())
              if a != b}
    assert differ == {"name", "reduction", "tiles", "subtracting_loop_pragma"}
    # its inner products: 4x4 blocks, and no all-rows form (it lost to packing there)
    assert CPU_IMPLICIT_SIMD.tiles.all_rows_bytes == 0
    assert replace(CPU_IMPLICIT_SIMD.tiles, inner_cols=CPU.tiles.inner_cols,
                   all_rows_bytes=CPU.tiles.all_rows_bytes) == CPU.tiles
    assert set(TARGETS) == {"cpu", "cpu-avx2", "cpu-implicit-simd", "gpu"}


def row_kernel(target: Target, text: str = ROWS) -> tuple[str, Launch]:
    program = lower(run(runtime.parse(text), target), target)
    [launch] = program.plan
    return program.source, launch


def test_row_kernels_follow_the_targets_reduction_shape():
    many = ROWS.replace("37,300", "300,300").replace("f32[37]", "f32[300]")
    source, launch = row_kernel(CPU, many)
    assert "+= 16" in source and re.search(r"\blong gid\b", source)
    assert launch.local_size == (8,)
    source, launch = row_kernel(CPU_IMPLICIT_SIMD, many)
    assert "+= 16" not in source and re.search(r"\bint gid\b", source)
    assert launch.local_size == (CPU_IMPLICIT_SIMD.reduction.local_size,)
    source, launch = row_kernel(replace(CPU_IMPLICIT_SIMD, reduction=replace(
        CPU_IMPLICIT_SIMD.reduction, lanes=4, local_size=2)), many)
    assert "+= 4" in source and launch.local_size == (2,)
    # few rows spread over work-groups of fewer rows (PoCL runs a group on one thread)
    assert row_kernel(CPU)[1].local_size == (37 // CPU.min_row_groups,)
    few = ROWS.replace("37,300", "8,300").replace("f32[37]", "f32[8]")
    assert row_kernel(CPU, few)[1].local_size == (1,)


def test_each_target_has_its_own_cached_program():
    dev = devices.get_device()
    module = runtime.parse(ROWS)
    keys = {program_key(analyze_verified(module, 128, True, t), dev)
            for t in (CPU, CPU_IMPLICIT_SIMD, replace(CPU, vector_bits=256))}
    assert len(keys) == 3


def dot(lhs: str, rhs: str, out: str, dims: str) -> str:
    return (f"HloModule d\nENTRY e {{\n  a = f32[{lhs}] parameter(0)\n"
            f"  b = f32[{rhs}] parameter(1)\n  ROOT d = f32[{out}] dot(a, b), {dims}\n}}")


# a loss gradient's shape: a row sum of negated values, then an elementwise epilogue (Intel's
# compiler vectorised the ``acc - x`` loop wrong, see ``target.CPU_IMPLICIT_SIMD``)
NEGATED_ROWS = """HloModule negated_rows
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[8,100]{1,0} parameter(0)
  n = f32[8,100]{1,0} negate(x)
  z = f32[] constant(0)
  r = f32[8] reduce(n, z), dimensions={1}, to_apply=add
  b = f32[8,100]{1,0} broadcast(r), dimensions={0}
  ROOT o = f32[8,100]{1,0} add(x, b)
}"""

NT = "lhs_contracting_dims={1}, rhs_contracting_dims={1}"
CASES = [   # (module, input shapes, numpy)
    (NEGATED_ROWS, [(8, 100)], lambda x: x - x.sum(1, keepdims=True)),
    (ROWS, [(37, 300)], lambda x: x.sum(1)),
    (ROWS.replace("f32[37,300]{1,0}", "f32[300,37]{1,0}").replace("dimensions={1}",
                                                                  "dimensions={0}"),
     [(300, 37)], lambda x: x.sum(0)),
    (dot("37,70", "45,70", "37,45", NT), [(37, 70), (45, 70)], lambda a, b: a @ b.T),
    (dot("5,70", "3,70", "5,3", NT), [(5, 70), (3, 70)], lambda a, b: a @ b.T),
    (dot("37,70", "70,45", "37,45", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
     [(37, 70), (70, 45)], lambda a, b: a @ b),
]


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_each_target_runs_correctly_on_every_cpu_device(name):
    """Each target's kernels are valid OpenCL anywhere: run them on every CPU device found
    that compiles for the host's ISA (PoCL 3.1 and Intel's runtime here; PoCL 3.0 from pip
    cannot build these kernels, docs/devices.md), row and column reductions, inner- and
    outer-product dots with odd sizes."""
    rng = np.random.default_rng(3)
    tested = []
    for dev in devices.devices():
        if dev.kind != "cpu" or device_probe.target_isa(dev) != device_probe.host_isa():
            continue
        tested.append(dev)
        for text, shapes, want in CASES:
            xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
            module = runtime.parse(text)
            analysis = analyze_verified(module, dev.mem_base_addr_align, True, TARGETS[name])
            exe = Executable(module, analysis, dev, KernelBuild(analysis, dev)).build()
            got = exe(*(runtime.device_put(x, dev) for x in xs))
            np.testing.assert_allclose(got, want(*xs), rtol=1e-4, atol=1e-4,
                                       err_msg=f"{dev}: {text}")
    assert tested, "no CPU device compiles for this host's ISA"


def marked_loops(text: str, target: Target) -> tuple[int, int]:
    """(loops, loops under the implicit-SIMD target's pragma) in ``text``'s program."""
    lines = lower(run(runtime.parse(text), target), target).source.splitlines()
    loops = [i for i, line in enumerate(lines) if line.lstrip().startswith("for (")]
    pragma = CPU_IMPLICIT_SIMD.subtracting_loop_pragma
    return len(loops), sum(lines[i - 1].strip() == pragma for i in loops)


def test_only_subtracting_loops_of_the_implicit_simd_target_are_kept_from_vectorising():
    """The accumulation of a negated value is marked there; a plain sum is not (its loop's
    vectorisation is what makes it fast), and no other target marks anything."""
    assert marked_loops(NEGATED_ROWS, CPU_IMPLICIT_SIMD) == (2, 1)    # the sum, the epilogue
    assert marked_loops(NEGATED_ROWS, CPU) == (marked_loops(NEGATED_ROWS, CPU)[0], 0)
    assert marked_loops(ROWS, CPU_IMPLICIT_SIMD) == (1, 0)
    scaled = NEGATED_ROWS.replace("  n = f32[8,100]{1,0} negate(x)",
                                  "  c = f32[] constant(-1)\n"
                                  "  k = f32[8,100]{1,0} broadcast(c), dimensions={}\n"
                                  "  n = f32[8,100]{1,0} multiply(x, k)")
    assert marked_loops(scaled, CPU_IMPLICIT_SIMD)[1] == 1
    subtracting = ROWS.replace("add(a, b)", "subtract(a, b)")
    assert marked_loops(subtracting, CPU_IMPLICIT_SIMD) == (1, 1)


def test_column_kernels_keep_adjacent_outputs_on_both_cpu_targets():
    text = ROWS.replace("f32[37,300]{1,0}", "f32[300,37]{1,0}").replace("dimensions={1}",
                                                                      "dimensions={0}")
    for target in (CPU, CPU_IMPLICIT_SIMD):
        [launch] = lower(run(runtime.parse(text), target), target).plan
        assert launch.scalars[0] == 3          # ceil(37 / 16) blocks of adjacent outputs


def test_target_kinds_are_a_closed_set():
    """An OpenCL accelerator gets the GPU's code; a device type with no target is refused by
    name rather than given the GPU's code by default."""
    assert Target.for_kind("accelerator") is GPU and Target.for_kind(TargetKind.CPU) is CPU
    assert {t.kind for t in TARGETS.values()} == set(TargetKind)
    with pytest.raises(DeviceError, match="'custom' has no code generation target"):
        Target.for_kind("custom")
    with pytest.raises(DeviceError, match="'custom'"):
        Target.for_device(fake("custom", 1))


def test_what_a_work_group_on_one_thread_changes_is_a_field():
    """The settings that were ``kind == "cpu"`` branches: row kernels spread over groups,
    narrow contractions upcast, convolution kernels relaid out, on every CPU target only."""
    for target in TARGETS.values():
        cpu = target.kind is TargetKind.CPU
        assert bool(target.min_row_groups) is cpu
        assert target.upcasts_narrow_contractions is cpu
        assert target.relayouts_convolution_kernels is cpu
