"""HLO-text cases for the GPU target's work-group kernels (tiled dot, tree row reduction),
checked against numpy. Run by ``runner`` inside Oclgrind; shapes straddle tile edges (the
tile is 32 or 16 from the simulator's limits), and cover batch dimensions, transposed
operands, non-default layouts, several contracting dimensions, f16/bf16 and integers,
output fusions, and rows shorter and longer than a work-group."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import ml_dtypes
import numpy as np

import runtime
from runtime.target import Target, WorkGroups


@dataclass(frozen=True)
class Case:
    name: str
    text: str
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[..., np.ndarray]
    rtol: float = 1e-5
    atol: float = 1e-5
    work_group_kernel: bool = True     # whether a local-memory kernel must compute it


def _normal(*shape, dtype=np.float32):
    return lambda rng: rng.standard_normal(shape).astype(dtype)


def _complex_normal(rng: np.random.Generator, shape) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _inputs(*makers):
    return lambda rng: [m(rng) for m in makers]


def _matmul(m: int, k: int, n: int) -> Case:
    return Case(f"dot f32 {m}x{k}x{n}",
                f"""HloModule d
ENTRY e {{
  a = f32[{m},{k}] parameter(0)
  b = f32[{k},{n}] parameter(1)
  ROOT d = f32[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}""", _inputs(_normal(m, k), _normal(k, n)), lambda a, b: a @ b)


DOT_CASES = [
    _matmul(1, 1, 1),
    _matmul(32, 32, 32),
    _matmul(33, 47, 65),
    _matmul(5, 100, 3),
    _matmul(70, 8, 1),
    Case("dot transposed lhs and rhs (A^T B^T)", """HloModule d
ENTRY e {
  a = f32[37,21] parameter(0)
  b = f32[19,37] parameter(1)
  ROOT d = f32[21,19] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={1}
}""", _inputs(_normal(37, 21), _normal(19, 37)), lambda a, b: a.T @ b.T),
    Case("dot column-major layouts", """HloModule d
ENTRY e {
  a = f32[23,41]{0,1} parameter(0)
  b = f32[41,18]{0,1} parameter(1)
  ROOT d = f32[23,18]{0,1} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", _inputs(_normal(23, 41), _normal(41, 18)), lambda a, b: a @ b),
    Case("batched dot, batch dims not leading", """HloModule d
ENTRY e {
  a = f32[9,3,17] parameter(0)
  b = f32[17,3,40] parameter(1)
  ROOT d = f32[3,9,40] dot(a, b), lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={1}, rhs_contracting_dims={0}
}""", _inputs(_normal(9, 3, 17), _normal(17, 3, 40)),
         lambda a, b: np.einsum("ibk,kbj->bij", a, b)),
    Case("dot two contracting and two free dims", """HloModule d
ENTRY e {
  a = f32[5,6,7,4] parameter(0)
  b = f32[7,3,5,11] parameter(1)
  ROOT d = f32[6,4,3,11] dot(a, b), lhs_contracting_dims={0,2}, rhs_contracting_dims={2,0}
}""", _inputs(_normal(5, 6, 7, 4), _normal(7, 3, 5, 11)),
         lambda a, b: np.einsum("pmqn,qxpy->mnxy", a, b)),
    Case("dot f16 accumulates in f32", """HloModule d
ENTRY e {
  a = f16[34,300] parameter(0)
  b = f16[300,20] parameter(1)
  ROOT d = f16[34,20] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", _inputs(_normal(34, 300, dtype=np.float16), _normal(300, 20, dtype=np.float16)),
         lambda a, b: (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16),
         rtol=1e-3, atol=1e-3),
    Case("dot bf16 accumulates in f32", """HloModule d
ENTRY e {
  a = bf16[20,70] parameter(0)
  b = bf16[70,36] parameter(1)
  ROOT d = bf16[20,36] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", _inputs(_normal(20, 70, dtype=ml_dtypes.bfloat16),
              _normal(70, 36, dtype=ml_dtypes.bfloat16)),
         lambda a, b: (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.bfloat16),
         rtol=1e-2, atol=1e-2),
    Case("dot f16 operands, f32 result", """HloModule d
ENTRY e {
  a = f16[2,33,40] parameter(0)
  b = f16[2,33,17] parameter(1)
  ROOT d = f32[2,40,17] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}""", _inputs(_normal(2, 33, 40, dtype=np.float16), _normal(2, 33, 17, dtype=np.float16)),
         lambda a, b: np.einsum("bkm,bkn->bmn", a.astype(np.float32), b.astype(np.float32))),
    Case("dot s32 wraps", """HloModule d
ENTRY e {
  a = s32[17,35] parameter(0)
  b = s32[35,9] parameter(1)
  ROOT d = s32[17,9] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", lambda rng: [rng.integers(-2**20, 2**20, (17, 35)).astype(np.int32),
                   rng.integers(-2**12, 2**12, (35, 9)).astype(np.int32)],
         lambda a, b: (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32),
         rtol=0, atol=0),
    Case("dot f64", """HloModule d
ENTRY e {
  a = f64[20,45] parameter(0)
  b = f64[45,36] parameter(1)
  ROOT d = f64[20,36] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", _inputs(_normal(20, 45, dtype=np.float64), _normal(45, 36, dtype=np.float64)),
         lambda a, b: a @ b, rtol=1e-12, atol=1e-12),
    Case("output fusion: bias and relu over a dot", """HloModule d
fused {
  p0 = f32[40,24] parameter(0)
  p1 = f32[24,33] parameter(1)
  p2 = f32[33] parameter(2)
  d = f32[40,33] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  b = f32[40,33] broadcast(p2), dimensions={1}
  s = f32[40,33] add(d, b)
  z0 = f32[] constant(0)
  z = f32[40,33] broadcast(z0), dimensions={}
  ROOT r = f32[40,33] maximum(s, z)
}
ENTRY e {
  a = f32[40,24] parameter(0)
  w = f32[24,33] parameter(1)
  bias = f32[33] parameter(2)
  ROOT f = f32[40,33] fusion(a, w, bias), kind=kOutput, calls=fused
}""", _inputs(_normal(40, 24), _normal(24, 33), _normal(33)),
         lambda a, w, bias: np.maximum(a @ w + bias, 0)),
    # its own generator: the cases after it keep the shared generator's draws
    Case("FFT of 300 points as dots (c64: a 15 x 20 split, twiddles, transposes)",
         """HloModule f
ENTRY e {
  x = c64[3,300] parameter(0)
  ROOT y = c64[3,300] fft(x), fft_type=FFT, fft_length={300}
}""", lambda _: [_complex_normal(np.random.default_rng(300), (3, 300))],
         lambda x: np.fft.fft(x).astype(np.complex64), rtol=1e-4, atol=1e-3),
]


def _reduce(name: str, shape: str, dims: str, out: str, make, reference, *, et: str = "f32",
            init: str = "0", op: str = "add", **kw) -> Case:
    return Case(name, f"""HloModule r
red {{
  x = {et}[] parameter(0)
  y = {et}[] parameter(1)
  ROOT s = {et}[] {op}(x, y)
}}
ENTRY e {{
  a = {et}{shape} parameter(0)
  z = {et}[] constant({init})
  ROOT r = {et}{out} reduce(a, z), dimensions={{{dims}}}, to_apply=red
}}""", make, reference, **kw)


REDUCE_CASES = [
    _reduce("row sums 3x1000", "[3,1000]", "1", "[3]", _inputs(_normal(3, 1000)),
            lambda a: a.sum(1), rtol=1e-4, atol=1e-4),
    _reduce("row max 5x777", "[5,777]", "1", "[5]", _inputs(_normal(5, 777)),
            lambda a: a.max(1), init="-inf", op="maximum"),
    _reduce("sum over two dims, 4x3x300", "[4,3,300]", "0,2", "[3]",
            _inputs(_normal(4, 3, 300)), lambda a: a.sum((0, 2)), rtol=1e-4, atol=1e-4),
    _reduce("column-major input, contiguous dim reduced", "[600,7]{0,1}", "0", "[7]",
            _inputs(_normal(600, 7)), lambda a: a.sum(0), rtol=1e-4, atol=1e-4),
    # an f16 reducer rounds every partial sum to f16, so the order matters: XLA's order
    # (passes/tree_reductions), which no work-group tree regroups; within a few ulp of the
    # ~50 the sums reach (0.03 each)
    _reduce("f16 row sums", "[2,2000]", "1", "[2]",
            _inputs(_normal(2, 2000, dtype=np.float16)),
            lambda a: a.astype(np.float32).sum(1).astype(np.float16), et="f16",
            rtol=0, atol=0.25, work_group_kernel=False),
    _reduce("s32 row sums", "[3,513]", "1", "[3]",
            lambda rng: [rng.integers(-1000, 1000, (3, 513)).astype(np.int32)],
            lambda a: a.sum(1).astype(np.int32), et="s32", rtol=0, atol=0),
    _reduce("column sums 3000x64 (the contiguous dimension kept)", "[3000,64]", "0", "[64]",
            _inputs(_normal(3000, 64)), lambda a: a.sum(0), rtol=1e-4, atol=1e-4),
    _reduce("group-norm sums over runs of 8 channels", "[2,9,7,4,8]", "1,2,4", "[2,4]",
            _inputs(_normal(2, 9, 7, 4, 8)), lambda a: a.sum((1, 2, 4)), rtol=1e-4, atol=1e-4),
    _reduce("short rows keep one work-item per row", "[40,10]", "1", "[40]",
            _inputs(_normal(40, 10)), lambda a: a.sum(1), work_group_kernel=False),
    _reduce("an init that is not the identity keeps the sequential order", "[2,700]", "1",
            "[2]", _inputs(_normal(2, 700)), lambda a: a.sum(1) + 23, init="1",  # XLA: once
            # per window of its tree (22 windows of 32, then the rest)
            rtol=1e-4, atol=1e-4, work_group_kernel=False),
    Case("softmax fusion over rows of 300", """HloModule s
max {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT m = f32[] maximum(x, y)
}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
fused {
  p = f32[6,300] parameter(0)
  ninf = f32[] constant(-inf)
  m = f32[6] reduce(p, ninf), dimensions={1}, to_apply=max
  mb = f32[6,300] broadcast(m), dimensions={0}
  d = f32[6,300] subtract(p, mb)
  e = f32[6,300] exponential(d)
  zero = f32[] constant(0)
  s = f32[6] reduce(e, zero), dimensions={1}, to_apply=add
  sb = f32[6,300] broadcast(s), dimensions={0}
  ROOT r = f32[6,300] divide(e, sb)
}
ENTRY e {
  a = f32[6,300] parameter(0)
  ROOT f = f32[6,300] fusion(a), kind=kInput, calls=fused
}""", _inputs(_normal(6, 300)),
         lambda a: np.exp(a - a.max(1, keepdims=True))
         / np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True)),
]


def run(cases: list[Case], *, tiling: str = "") -> list[str]:
    """Problems of ``cases`` on the default device's target (``tiling`` names another
    work-group shape in the messages; the kernel form is then not checked)."""
    rng = np.random.default_rng(0)
    problems = []
    for case in cases:
        inputs = case.inputs(rng)
        # compiled afresh: the compile cache may hold it from another case's work-group shapes
        exe = runtime.compile(case.text, force=True)
        case_name = f"{case.name}{tiling}"
        if not tiling and (
                "barrier(CLK_LOCAL_MEM_FENCE)" in exe.program.source) != case.work_group_kernel:
            problems.append(f"{case_name}: a work-group kernel was "
                            f"{'not ' if case.work_group_kernel else ''}generated")
        got = np.asarray(exe(*inputs))
        want = case.reference(*inputs)
        wide = np.complex128 if want.dtype.kind == "c" else np.float64
        if got.shape != want.shape or got.dtype != want.dtype:
            problems.append(f"{case_name}: got {got.dtype}{got.shape}, want "
                            f"{want.dtype}{want.shape}")
        elif not np.allclose(got.astype(wide), want.astype(wide), rtol=case.rtol, atol=case.atol):
            bad = ~np.isclose(got.astype(wide), want.astype(wide), rtol=case.rtol, atol=case.atol)
            problems.append(f"{case_name}: {int(bad.sum())} of {bad.size} values off")
    return problems


# smaller shapes than the simulator's limits give: 16-wide tiles, 4 x 4 blocks of 2 x 2
# work-items, one work-item per tile (and per row reduction: a tree of one)
SMALL_WORK_GROUPS = (WorkGroups(tile=16, block=2, reduce_group=64),
                     WorkGroups(tile=8, block=4, reduce_group=16),
                     WorkGroups(tile=8, block=8, reduce_group=1))


def run_small_work_groups() -> list[str]:
    """Every case again with each of ``SMALL_WORK_GROUPS`` as the device's target."""
    problems = []
    original = Target.for_device
    try:
        for groups in SMALL_WORK_GROUPS:
            Target.for_device = staticmethod(  # type: ignore[method-assign]
                lambda device, g=groups: replace(original(device), work_groups=g))
            problems += run(DOT_CASES + REDUCE_CASES,
                            tiling=f" (tile {groups.tile}, block {groups.block}, "
                                   f"group {groups.reduce_group})")
    finally:
        Target.for_device = staticmethod(original)  # type: ignore[method-assign]
    return problems
