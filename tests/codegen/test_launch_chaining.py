"""Consecutive small launches chained into one launch of one work-group
(``codegen.launch_chaining``): a deep narrow network (batched dots, their epilogues, row
reductions, each layer reading the one before) and a loop whose trip count depends on data
(its chained body guarded by the predicate) give the unchained plan's bits in far fewer
launches, with work-groups of one work-item and of many (where the barriers between stages
matter: Oclgrind's race check runs these cases too, ``tests.gpu_sim.runner``); a large
kernel stays a launch of its own; identical layers share one chained kernel."""

from dataclasses import replace

import numpy as np
import pytest

from runtime.analyzer import analyze_verified
from runtime.codegen.launch_chaining import _chunks
from runtime.codegen.plan import HostWhile, Launch, iter_launches
from runtime.execution.kernel_builds import KernelBuild
from runtime.opencl.device import get_device
from runtime.execution.executable import Executable
from runtime.hlo.parser import parse
from runtime.target import CPU, Target


def deep_narrow(layers: int, rows: int = 16, width: int = 64) -> str:
    """``layers`` layers of ``h = tanh(h @ w + b)`` minus its row mean, over a batch of two
    groups of ``rows`` rows (batched dots: launches over three dimensions, each of them more
    than one work-group long), all weights shared."""
    lines = ["HloModule deep_narrow", "add {", "  a = f32[] parameter(0)",
             "  b = f32[] parameter(1)", "  ROOT c = f32[] add(a, b)", "}", "ENTRY e {",
             f"  h0 = f32[2,{rows},{width}] parameter(0)",
             f"  w = f32[2,{width},{width}] parameter(1)",
             f"  b = f32[{width}] parameter(2)",
             "  zero = f32[] constant(0)",
             f"  inv = f32[] constant({1 / width!r})",
             f"  invb = f32[2,{rows}] broadcast(inv), dimensions={{}}",
             f"  bb = f32[2,{rows},{width}] broadcast(b), dimensions={{2}}"]
    for k in range(1, layers + 1):
        shape = f"f32[2,{rows},{width}]"
        lines += [f"  d{k} = {shape} dot(h{k - 1}, w), lhs_batch_dims={{0}}, "
                  "lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
                  f"  a{k} = {shape} add(d{k}, bb)",
                  f"  t{k} = {shape} tanh(a{k})",
                  f"  s{k} = f32[2,{rows}] reduce(t{k}, zero), dimensions={{2}}, "
                  "to_apply=add",
                  f"  m{k} = f32[2,{rows}] multiply(s{k}, invb)",
                  f"  mb{k} = {shape} broadcast(m{k}), dimensions={{0,1}}",
                  f"  {'ROOT ' if k == layers else ''}h{k} = {shape} subtract(t{k}, mb{k})"]
    return "\n".join(lines + ["}"])


def deep_narrow_reference(layers: int, x, w, b) -> np.ndarray:
    h = x.astype(np.float64)
    for _ in range(layers):
        t = np.tanh(h @ w + b)
        h = t - t.mean(axis=-1, keepdims=True)
    return h


def deep_narrow_args(rows: int = 16, width: int = 64) -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    return [rng.standard_normal((2, rows, width)).astype(np.float32),
            (rng.standard_normal((2, width, width)) / np.sqrt(width)).astype(np.float32),
            rng.standard_normal(width).astype(np.float32)]


# a loop whose trip count depends on its data: its body's launches check the predicate
# themselves (``predication``), the chained one too
DATA_LOOP = """HloModule data_loop
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
body {
  s = (s32[], f32[8,32], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8,32] get-tuple-element(s), index=1
  t = f32[8,32] tanh(x)
  c = f32[] constant(1.5)
  cb = f32[8,32] broadcast(c), dimensions={}
  y = f32[8,32] multiply(t, cb)
  zero = f32[] constant(0)
  r = f32[8] reduce(y, zero), dimensions={1}, to_apply=add
  k = f32[] constant(0.03125)
  kb = f32[8] broadcast(k), dimensions={}
  m = f32[8] multiply(r, kb)
  mb = f32[8,32] broadcast(m), dimensions={0}
  x2 = f32[8,32] subtract(y, mb)
  q = f32[8,32] multiply(x2, x2)
  total = f32[] reduce(q, zero), dimensions={0,1}, to_apply=add
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT out = (s32[], f32[8,32], f32[]) tuple(j, x2, total)
}
cond {
  s = (s32[], f32[8,32], f32[]) parameter(0)
  total = f32[] get-tuple-element(s), index=2
  limit = f32[] constant(200)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(40)
  small = pred[] compare(total, limit), direction=LT
  few = pred[] compare(i, n), direction=LT
  ROOT go = pred[] and(small, few)
}
ENTRY e {
  x = f32[8,32] parameter(0)
  z = s32[] constant(0)
  f = f32[] constant(0)
  init = (s32[], f32[8,32], f32[]) tuple(z, x, f)
  w = (s32[], f32[8,32], f32[]) while(init), condition=cond, body=body
  n = s32[] get-tuple-element(w), index=0
  y = f32[8,32] get-tuple-element(w), index=1
  ROOT o = (s32[], f32[8,32]) tuple(n, y)
}"""


def data_loop_reference(x: np.ndarray) -> tuple[int, np.ndarray]:
    x = x.astype(np.float64)
    i, total = 0, 0.0
    while total < 200 and i < 40:
        y = np.tanh(x) * 1.5
        x = y - y.mean(axis=1, keepdims=True)
        total = float((x * x).sum())
        i += 1
    return i, x


def base_target() -> Target:
    """The default device's target where it is a CPU's, else the CPU target (its kernels are
    valid OpenCL on any device)."""
    dev = get_device()
    return Target.for_device(dev) if dev.kind == "cpu" else CPU


# kernels of these sizes are chained whatever the target's limit (the tests are about what a
# chain computes; where the limit falls is measured, see ``Target``)
# (loops stay the host's: their bodies' chains are what these tests check; device loops are
# ``test_device_loops``'s)
TARGETS = {"unchained": lambda t: replace(t, chain_max_work=0, loop_max_work=0),
           "chained": lambda t: replace(t, chain_max_work=1 << 20, loop_max_work=0),
           "chained-16-items": lambda t: replace(t, chain_max_work=1 << 20, chain_local_size=16,
                                                 loop_max_work=0)}


def compile_for(text: str, target: Target) -> Executable:
    dev = get_device()
    analysis = analyze_verified(parse(text), dev.mem_base_addr_align, True, target)
    return Executable(parse(text), analysis, dev, KernelBuild(analysis, dev)).build()


def chained_launches(exe: Executable) -> list[Launch]:
    return [s for s in iter_launches(exe.program.plan)
            if "ch_count" in exe.program.kernel_texts[s.kernel]]


def chain_cases() -> dict[str, tuple[str, list[np.ndarray]]]:
    """The modules whose chains these tests and Oclgrind's race check run."""
    x = np.random.default_rng(4).standard_normal((8, 32)).astype(np.float32)
    return {"deep-narrow": (deep_narrow(6), deep_narrow_args()), "data-loop": (DATA_LOOP, [x])}


def run_chained(name: str, variant: str) -> tuple[Executable, list[np.ndarray]]:
    text, args = chain_cases()[name]
    exe = compile_for(text, TARGETS[variant](base_target()))
    result = exe(*args)
    return exe, [np.asarray(r) for r in (result if isinstance(result, tuple) else (result,))]


def same_as_unchained(got: np.ndarray, want: np.ndarray, variant: str) -> None:
    """The unchained launches' bits, where each work-item's code is compiled alone: a compiler
    that vectorises across work-items (Intel's runtime, ``cpu-implicit-simd``) compiles a
    stage run by sixteen work-items another way than one run by one (a few ulps apart); a
    missing barrier is further off than that."""
    if variant == "chained" or base_target().name != "cpu-implicit-simd":
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", ["chained", "chained-16-items"])
def test_a_deep_narrow_network_runs_in_few_launches_with_the_same_bits(variant):
    chained, got = run_chained("deep-narrow", variant)
    apart, want = run_chained("deep-narrow", "unchained")
    launches = list(iter_launches(chained.program.plan))
    assert len(launches) * 4 <= len(list(iter_launches(apart.program.plan)))
    found = chained_launches(chained)
    assert found and sum(s.instruction.count("+") + 1 for s in found) >= 2 * 6
    source = chained.program.source
    assert "i / (g0 * g1)" in source           # a stage launched over three dimensions
    same_as_unchained(got[0], want[0], variant)
    np.testing.assert_allclose(got[0], deep_narrow_reference(6, *deep_narrow_args()),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", ["chained", "chained-16-items"])
def test_a_loop_decided_on_the_device_runs_its_chained_body_guarded(variant):
    chained, got = run_chained("data-loop", variant)
    apart, want = run_chained("data-loop", "unchained")
    [loop] = [s for s in chained.program.plan if isinstance(s, HostWhile)]
    body = [s for s in loop.body if isinstance(s, Launch)]
    assert len(body) < len([s for s in next(s for s in apart.program.plan
                                              if isinstance(s, HostWhile)).body
                            if isinstance(s, Launch)])
    guarded = [s for s in chained_launches(chained) if s in body]
    assert guarded
    if loop.chunk > 1:
        assert all("_gbase" in chained.program.kernel_texts[s.kernel] for s in guarded)
    n, x = data_loop_reference(chain_cases()["data-loop"][1][0])
    assert int(got[0]) == int(want[0]) == n
    same_as_unchained(got[1], want[1], variant)
    np.testing.assert_allclose(got[1], x, rtol=1e-4, atol=1e-4)


def test_a_large_kernel_between_small_ones_stays_a_launch_of_its_own():
    text = """HloModule big_between
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  x = f32[4,16] parameter(0)
  w = f32[16,16] parameter(1)
  p = f32[256,256] parameter(2)
  d1 = f32[4,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d2 = f32[4,16] dot(d1, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zero = f32[] constant(0)
  r = f32[] reduce(d2, zero), dimensions={0,1}, to_apply=add
  rb = f32[256,256] broadcast(r), dimensions={}
  p2 = f32[256,256] add(p, rb)
  big = f32[256,256] dot(p2, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[4,16] slice(big), slice={[0:4], [0:16]}
  d3 = f32[4,16] dot(s, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d4 = f32[4,16] dot(d3, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT o = (f32[4,16], f32[256,256]) tuple(d4, big)
}"""
    exe = compile_for(text, replace(base_target(), chain_max_work=CPU.chain_max_work))
    members = {i.name: i for i in exe.buffer_assignment.module.entry.instructions}
    found = chained_launches(exe)
    assert len(found) >= 2
    for step in found:
        assert all(members[n].shape.dims != (256, 256) for n in step.instruction.split("+"))
    alone = [s for s in iter_launches(exe.program.plan) if s not in found
             and members[s.instruction].shape.dims == (256, 256)]
    assert alone
    rng = np.random.default_rng(2)
    x, w, p = (rng.standard_normal(shape).astype(np.float32) / 4
               for shape in ((4, 16), (16, 16), (256, 256)))
    d2 = x @ w @ w
    big = (p + d2.sum()) @ p
    got = exe(x, w, p)
    np.testing.assert_allclose(np.asarray(got[1]), big, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(got[0]), big[:4, :16] @ w @ w, rtol=1e-4, atol=1e-4)


def test_identical_layers_share_one_chained_kernel():
    """The first and last chains differ from the others only in reading the parameter and
    writing the output (buffers of their own)."""
    exe = compile_for(deep_narrow(40), TARGETS["chained"](base_target()))
    found = chained_launches(exe)
    assert len(found) == 5
    assert len({s.kernel for s in found}) == 3
    got = np.asarray(exe(*deep_narrow_args()))
    np.testing.assert_allclose(got, deep_narrow_reference(40, *deep_narrow_args()),
                               rtol=1e-4, atol=1e-5)


def _launch(kernel: str, dims: int = 1) -> Launch:
    return Launch(kernel, (), (), (1,) * dims, (1,) * dims, kernel)


def test_a_run_is_cut_where_it_turns_periodic_and_into_whole_periods():
    layer = [_launch(k) for k in "abcdefg"]
    run = [_launch("p"), _launch("q")] + layer * 11 + [_launch("z")]
    chunks = [[s.kernel for s in chunk] for chunk in _chunks(run)]
    assert chunks[0] == ["p", "q"]
    assert chunks[1:6] == [list("abcdefg") * 2] * 5
    assert chunks[6:] == [list("abcdefg") + ["z"]]       # no repeat left: one tail
    # a period longer than half a chain: one period a chain
    layer = [_launch(k) for k in "abcdefghij"]
    assert [len(c) for c in _chunks(layer * 3)] == [10, 10, 10]
    # two equal kernels in a row are not a pattern; a launch's dimensions are part of its key
    pair = [_launch("a"), _launch("a"), _launch("b"), _launch("c", 2), _launch("c")]
    assert [len(c) for c in _chunks(pair)] == [5]


def many_buffers(layers: int) -> str:
    """``layers`` dots, each with an epilogue reading three parameters of its own: a chain of
    them uses four new buffers a stage."""
    lines = ["HloModule many_buffers", "ENTRY e {", "  h0 = f32[4,8] parameter(0)"]
    for k in range(1, layers + 1):
        p = 1 + 4 * (k - 1)
        lines += [f"  w{k} = f32[8,8] parameter({p})",
                  *(f"  {n}{k} = f32[4,8] parameter({p + j})" for j, n in enumerate("abc", 1)),
                  f"  d{k} = f32[4,8] dot(h{k - 1}, w{k}), lhs_contracting_dims={{1}}, "
                  "rhs_contracting_dims={0}",
                  f"  e{k} = f32[4,8] multiply(d{k}, a{k})",
                  f"  f{k} = f32[4,8] add(e{k}, b{k})",
                  f"  {'ROOT ' if k == layers else ''}h{k} = f32[4,8] subtract(f{k}, c{k})"]
    return "\n".join(lines + ["}"])


def test_a_chain_keeps_within_the_arguments_every_device_takes():
    """Sixteen such stages would take 64 buffers, past the 1,024 bytes of kernel arguments
    OpenCL promises: the chains are cut before that."""
    from runtime.codegen.program import MAX_PARAMETER_BYTES

    from .test_launch_merging import kernel_argument_bytes
    exe = compile_for(many_buffers(24), TARGETS["chained"](base_target()))
    found = chained_launches(exe)
    assert len(found) > 24 // 16 + 1
    assert all(kernel_argument_bytes(exe.program, s.kernel) <= MAX_PARAMETER_BYTES
               for s in iter_launches(exe.program.plan))
    rng = np.random.default_rng(8)
    args = [rng.standard_normal((4, 8)).astype(np.float32)]
    h = args[0].astype(np.float64)
    for _ in range(24):
        w, a, b, c = (rng.standard_normal(shape).astype(np.float32) * scale
                      for shape, scale in (((8, 8), 0.3), ((4, 8), 1), ((4, 8), 0.1),
                                           ((4, 8), 0.1)))
        args += [w, a, b, c]
        h = (h @ w) * a + b - c
    np.testing.assert_allclose(np.asarray(exe(*args)), h, rtol=1e-4, atol=1e-5)


# a conditional whose branches are chains of small kernels (dots do not fuse with each other)
BRANCHES = """HloModule branches
on_true {
  p = (f32[4,16], f32[16,16]) parameter(0)
  x = f32[4,16] get-tuple-element(p), index=0
  w = f32[16,16] get-tuple-element(p), index=1
  a = f32[4,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[4,16] tanh(a)
  b = f32[4,16] dot(t, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT c = f32[4,16] dot(b, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
on_false {
  p = (f32[4,16], f32[16,16]) parameter(0)
  x = f32[4,16] get-tuple-element(p), index=0
  w = f32[16,16] get-tuple-element(p), index=1
  a = f32[4,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  n = f32[4,16] negate(a)
  ROOT b = f32[4,16] dot(n, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY e {
  s = pred[] parameter(0)
  x = f32[4,16] parameter(1)
  w = f32[16,16] parameter(2)
  t = (f32[4,16], f32[16,16]) tuple(x, w)
  ROOT r = f32[4,16] conditional(s, t, t), true_computation=on_true, false_computation=on_false
}"""


def test_each_branch_of_a_conditional_runs_its_chain():
    from runtime.codegen.plan import HostConditional
    exe = compile_for(BRANCHES, TARGETS["chained"](base_target()))
    [cond] = [s for s in exe.program.plan if isinstance(s, HostConditional)]
    assert [len(b) for b in cond.branches] == [1, 1]
    assert all("ch_count" in exe.program.kernel_texts[b[0].kernel] for b in cond.branches)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    w = (rng.standard_normal((16, 16)) / 4).astype(np.float32)
    np.testing.assert_allclose(np.asarray(exe(np.bool_(True), x, w)),
                               np.tanh(x @ w) @ w @ w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(exe(np.bool_(False), x, w)), -(x @ w) @ w,
                               rtol=1e-4, atol=1e-5)
