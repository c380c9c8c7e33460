"""The Target's vector and tiling settings reach the kernels: lowering one module with a
changed setting changes exactly what that setting governs (vector widths of vector loops and
register tiles, tile rows and vectors, the row group, the transpose block)."""

import re
from dataclasses import replace

import runtime
from runtime.codegen.lower import lower
from runtime.codegen.plan import Launch
from runtime.pipeline import run
from runtime.target import CPU, Target

ELEMENTWISE = """HloModule e
ENTRY e {
  a = f32[1000] parameter(0)
  b = f32[1000] parameter(1)
  m = f32[1000] maximum(a, b)
  ROOT t = f32[1000] tanh(m)
}"""

DOT = """HloModule d
ENTRY e {
  a = f32[256,64] parameter(0)
  b = f32[64,256] parameter(1)
  ROOT d = f32[256,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""

TRANSPOSE = """HloModule t
ENTRY e {
  a = f32[64,48] parameter(0)
  ROOT t = f32[48,64] transpose(a), dimensions={1,0}
}"""


def lowered(text: str, target: Target):
    return lower(run(runtime.parse(text), target), target)


def launches(text: str, target: Target) -> list[Launch]:
    return [s for s in lowered(text, target).plan if isinstance(s, Launch)]


def widths(source: str, scalar: str) -> set[int]:
    return {int(n) for n in re.findall(rf"\b{scalar}(\d+)\b", source)}


def accumulators(source: str) -> list[str]:
    """The register tile's declarations (``float16 c<row>_<n> = (float16)(0);``)."""
    return re.findall(r"\bfloat\d+ c\d+_\d+ = ", source)


def test_vector_loops_are_as_wide_as_the_targets_vector_bits():
    assert widths(lowered(ELEMENTWISE, CPU).source, "float") == {16}
    narrow = lowered(ELEMENTWISE, replace(CPU, vector_bits=256)).source
    assert widths(narrow, "float") == {8}
    assert "xla_fmax_float8(" in narrow          # the helper of that width is included
    scalar = lowered(ELEMENTWISE, replace(CPU, vector_bits=32)).source
    assert widths(scalar, "float") == set()       # one lane: the scalar loop kernel


def test_register_tiles_follow_the_targets_tile_shape():
    [tiled] = launches(DOT, CPU)
    assert tiled.local_size == (1, CPU.tiles.row_group, 1)
    source = lowered(DOT, CPU).source
    assert widths(source, "float") == {16} and "rb * 8 + 7" in source
    assert len(accumulators(source)) == 8 * 2
    target = replace(CPU, vector_bits=256, tiles=replace(CPU.tiles, rows=4, vectors=1,
                                                         row_group=2))
    [tiled] = launches(DOT, target)
    assert tiled.local_size == (1, 2, 1)
    assert tiled.global_size == (256 // 8, 256 // 4, 1)
    source = lowered(DOT, target).source
    assert widths(source, "float") == {8} and "rb * 4 + 3" in source
    assert len(accumulators(source)) == 4 * 1


def test_the_transpose_block_is_the_targets():
    assert "vload16" in lowered(TRANSPOSE, CPU).source
    [blocked] = launches(TRANSPOSE, replace(CPU, transpose_block=8))
    assert blocked.global_size[0] == 64 // 8     # blocks along the output's columns
    assert "vload8" in lowered(TRANSPOSE, replace(CPU, transpose_block=8)).source


def test_tile_vectors_shrink_to_tile_the_columns_exactly_where_the_overlap_costs():
    from runtime.codegen.families.tiles import vectors_for
    from runtime.target import CPU_AVX2
    tiles = CPU_AVX2.tiles                       # 3 vectors of 8 lanes
    assert vectors_for(768, 8, tiles) == 3       # 32 tiles of 24
    assert vectors_for(64, 8, tiles) == 2        # 24 does not divide 64, 16 does
    assert vectors_for(1024, 8, tiles) == 3      # ... nor 1024, but 1032 computed is 0.8% more
    assert vectors_for(50257, 8, tiles) == 3     # nothing divides it: the widest tile
    assert vectors_for(20, 8, tiles) == 1        # fewer columns than one tile
    assert vectors_for(96, 16, CPU.tiles) == CPU.tiles.vectors   # 2 vectors: never shrunk


def test_the_avx2_target_packs_row_major_columns_and_the_cpu_target_does_not():
    from runtime.target import CPU_AVX2
    assert "__local" in lowered(DOT, CPU_AVX2).source
    assert "__local" not in lowered(DOT, CPU).source
    # ... unless one work-group's tiles cover every row: each panel is then copied once
    # (over a contraction long enough to be worth copying: not 32)
    assert "__local" not in lowered(DOT.replace("256,64", "128,32").replace("64,256", "32,256")
                                    .replace("256,256", "128,256"), CPU_AVX2).source
    assert "__local" in lowered(DOT.replace("256,64", "128,2048").replace("64,256", "2048,256")
                                .replace("256,256", "128,256"), CPU).source
    # ... or the columns are too many for the second-level cache (2 MiB), however many rows
    assert "__local" in lowered(DOT.replace("256,64", "256,2048").replace("64,256", "2048,256"),
                                CPU).source


def test_packed_row_groups_are_narrower_where_the_row_operand_is_strided():
    from runtime.target import CPU_AVX2
    tiles = CPU_AVX2.tiles
    assert tiles.pack_strided_row_group < tiles.pack_row_group
    [streamed] = launches(DOT, CPU_AVX2)                     # a's rows contiguous along k
    assert streamed.local_size == (1, tiles.pack_row_group, 1)
    strided = DOT.replace("f32[256,64] parameter(0)", "f32[64,256] parameter(0)").replace(
        "lhs_contracting_dims={1}", "lhs_contracting_dims={0}")
    [tiled] = launches(strided, CPU_AVX2)
    assert tiled.local_size == (1, tiles.pack_strided_row_group, 1)
    same = replace(CPU_AVX2, tiles=replace(tiles, pack_strided_row_group=None))
    assert launches(strided, same)[0].local_size == (1, tiles.pack_row_group, 1)


ROW_LOOPS = """HloModule rows
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT l = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[4,300] parameter(0)
  s = f32[4,300] sort(x), dimensions={1}, to_apply=less
  t = (f32[4,3], s32[4,3]) topk(x), k=3, largest=true
  z = f32[] constant(-inf)
  c = f32[4,300] reduce-window(x, z), window={size=1x300 pad=0_0x299_0}, to_apply=max
  ROOT r = (f32[4,300], (f32[4,3], s32[4,3]), f32[4,300]) tuple(s, t, c)
}"""


def test_kernels_looping_over_whole_rows_are_work_groups_of_one_on_cpus():
    """A sort, a top-k and a scan give each row's work-item a group of its own on CPUs (PoCL
    runs a group on one thread), and keep the loop work-group size on GPUs."""
    from runtime.target import GPU
    for target, local in ((CPU, (1,)), (GPU, (GPU.loop_local_size,))):
        found = launches(ROW_LOOPS, target)        # independent: they may share one launch
        names = {part for s in found for part in s.instruction.split("+")}
        assert {"s", "t"} <= names and len(names) == 3               # sort, topk, the scan
        assert {s.local_size for s in found} == {local}
