"""Window outputs: a scan step's dynamic-update-slices stacking what it computes join the loop
kernel computing it (or reading what they read), which writes each update window in place;
values are those of the separate kernels, and the loop state needs no copy."""

import numpy as np
import pytest

import runtime
from runtime import compiler
from runtime.analysis.in_place import kernel_outputs
from runtime.codegen.plan import HostWhile, Launch
from runtime.execution import program_cache
from runtime.opencl.device import get_device
from runtime.passes import multi_output_fusion
from runtime.pipeline import optimise
from runtime.target import Target

from .loop_text import counted_loop

RNG = np.random.default_rng(11)


def scan(dims: str, trips: int, index: str = "i", stacked_layout: str = "{2,1,0}") -> str:
    """A scan over ``trips`` steps of state h: each step computes g = exp(-h) and the new
    state tanh(g + h) * g, and stacks g, the new state and the old state at row ``index``."""
    arr = f"f32[{dims}]{{1,0}}"
    stk = f"f32[{trips},{dims}]{stacked_layout}"
    one = f"f32[1,{dims}]{stacked_layout}"
    return counted_loop(trips, {"h": arr, "gs": stk, "hs": stk, "olds": stk}, f"""
  last = s32[] constant({trips - 1})
  back = s32[] subtract(last, i)
  nh = {arr} negate(h)
  g = {arr} exponential(nh)
  gh = {arr} add(g, h)
  t = {arr} tanh(gh)
  h2 = {arr} multiply(t, g)
  g1 = {one} reshape(g)
  gs2 = {stk} dynamic-update-slice(gs, g1, {index}, zero, zero)
  h1 = {one} reshape(h2)
  hs2 = {stk} dynamic-update-slice(hs, h1, {index}, zero, zero)
  o1 = {one} reshape(h)
  olds2 = {stk} dynamic-update-slice(olds, o1, {index}, zero, zero)""",
        ["h2", "gs2", "hs2", "olds2"],
        f"  h0 = {arr} parameter(0)\n  s0 = {stk} broadcast(fz), dimensions={{}}",
        ["h0", "s0", "s0", "s0"])


def scan_reference(h0: np.ndarray, trips: int, reverse: bool = False):
    h = h0.copy()
    gs, hs, olds = (np.zeros((trips,) + h0.shape, np.float32) for _ in range(3))
    for i in range(trips):
        row = trips - 1 - i if reverse else i
        g = np.exp(-h)
        h2 = np.tanh(g + h) * g
        gs[row], hs[row], olds[row] = g, h2, h
        h = h2
    return h, gs, hs, olds


def body_of(module):
    return next(c for c in module.computations if c.name == "body")


def body_launches(exe) -> list[Launch]:
    [loop] = [s for s in exe.program.plan if isinstance(s, HostWhile)]
    return [s for s in loop.body if isinstance(s, Launch)]


def without_windows(monkeypatch):
    monkeypatch.setattr(multi_output_fusion._Merger, "_merge_windows", lambda self: None)
    monkeypatch.setattr(program_cache, "load", lambda key: None)
    compiler.clear_cache()


def test_a_scan_step_is_one_kernel_writing_its_windows():
    body = body_of(optimise(runtime.parse(scan("4,64", 6))))
    [kernel] = [i for i in body.instructions if i.opcode == "fusion" and i.shape.is_tuple]
    space, outputs = kernel_outputs(kernel)
    assert space.dims == (4, 64)
    assert sum(o.window is not None for o in outputs) == 3      # the old state's too
    assert len(outputs) == 4        # and the new state: g, read only by its window, is not
    assert not [i for i in body.instructions if i.opcode == "fusion" and not i.shape.is_tuple
                and i.shape.dims != ()]


@pytest.mark.parametrize("dims,reverse", [("4,64", False), ("4,64", True), ("3,7", False)])
def test_window_kernels_compute_what_separate_kernels_did(monkeypatch, dims, reverse, unchained):
    """Rows of 64: the row vector loop stores each window as vectors; rows of 7: the
    one-element loop kernel over the same space; a reverse scan's row is computed."""
    trips = 5
    text = scan(dims, trips, index="back" if reverse else "i")
    shape = tuple(int(d) for d in dims.split(","))
    h0 = (RNG.standard_normal(shape) * 0.5).astype(np.float32)
    compiler.clear_cache()
    exe = runtime.compile(text)
    assert len(body_launches(exe)) == 2                      # the step and the counter
    assert not [c for c in exe.analysis.buffer_assignment.copies
                if c.reason.startswith("loop state")]
    if dims == "4,64" and Target.for_device(get_device()).kind == "cpu":
        kernel = max(body_launches(exe), key=lambda s: len(s.buffers)).kernel
        assert exe.program.kernel_texts[kernel].count("vstore16(") == 4   # h2 and 3 windows
    got = [np.asarray(v) for v in exe(h0)[1:]]
    without_windows(monkeypatch)
    separate = runtime.compile(text)
    assert len(body_launches(separate)) > 2
    for a, b, want in zip(got, separate(h0)[1:], scan_reference(h0, trips, reverse)):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6)
    monkeypatch.undo()
    compiler.clear_cache()


def test_a_window_in_another_memory_order_stays_a_kernel_of_its_own():
    """Stacked outputs in column-major order: element i of the step is not element i of the
    window's update in memory order, so the windows keep their own kernels."""
    trips = 4
    text = scan("4,64", trips, stacked_layout="{0,1,2}")
    body = body_of(optimise(runtime.parse(text)))
    assert not [i for i in body.instructions if kernel_outputs(i) is not None]
    h0 = (RNG.standard_normal((4, 64)) * 0.5).astype(np.float32)
    compiler.clear_cache()
    got = [np.asarray(v) for v in runtime.compile(text)(h0)[1:]]
    for a, want in zip(got, scan_reference(h0, trips)):
        np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6)


def test_a_window_across_its_operands_rows_is_stored_element_by_element(unchained):
    """Stacking along the minor dimension: the window fits the step's space, but its rows
    are strided in the stacked array, so the one-element kernel stores it."""
    trips = 6
    text = counted_loop(trips, {"h": "f32[4,64]{1,0}", "gs": "f32[4,64,6]{2,1,0}"}, """
  nh = f32[4,64]{1,0} negate(h)
  g = f32[4,64]{1,0} exponential(nh)
  gh = f32[4,64]{1,0} multiply(g, h)
  h2 = f32[4,64]{1,0} tanh(gh)
  g1 = f32[4,64,1]{2,1,0} reshape(g)
  gs2 = f32[4,64,6]{2,1,0} dynamic-update-slice(gs, g1, zero, zero, i)""", ["h2", "gs2"],
        "  h0 = f32[4,64]{1,0} parameter(0)\n"
        "  s0 = f32[4,64,6]{2,1,0} broadcast(fz), dimensions={}", ["h0", "s0"])
    h0 = (RNG.standard_normal((4, 64)) * 0.5).astype(np.float32)
    compiler.clear_cache()
    exe = runtime.compile(text)
    assert len(body_launches(exe)) == 2
    kernel = max(body_launches(exe), key=lambda s: len(s.buffers)).kernel
    assert "vstore" not in exe.program.kernel_texts[kernel]
    _, got_h, got_gs = (np.asarray(v) for v in exe(h0))
    h, gs = h0.copy(), np.zeros((4, 64, trips), np.float32)
    for i in range(trips):
        g = np.exp(-h)
        gs[:, :, i] = g
        h = np.tanh(g * h)
    np.testing.assert_allclose(got_gs, gs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_h, h, rtol=1e-5, atol=1e-6)


def test_a_kernel_reading_what_the_window_overwrites_stays_apart(unchained):
    """The step reads the stacked array it would write into: one kernel would read rows
    other work-items overwrite."""
    text = scan("4,64", 4).replace(
        "  gh = f32[4,64]{1,0} add(g, h)",
        "  first = f32[1,4,64]{2,1,0} slice(gs), slice={[0:1], [0:4], [0:64]}\n"
        "  fr = f32[4,64]{1,0} reshape(first)\n"
        "  gf = f32[4,64]{1,0} add(g, fr)\n"
        "  gh = f32[4,64]{1,0} add(gf, h)")
    body = body_of(optimise(runtime.parse(text)))
    [writer] = [i for i in body.instructions if i.opcode == "fusion"
                and any(op.name == "gs" for op in i.operands) and not i.shape.is_tuple]
    assert writer.calls.root.opcode == "dynamic-update-slice"
    h0 = (RNG.standard_normal((4, 64)) * 0.5).astype(np.float32)
    _, gs, hs, olds = (np.asarray(v) for v in runtime.compile(text)(h0)[1:])
    h = h0.copy()
    want_gs = np.zeros((4, 4, 64), np.float32)
    for i in range(4):
        g = np.exp(-h)
        h = np.tanh(g + want_gs[0] + h) * g
        want_gs[i] = g
    np.testing.assert_allclose(gs, want_gs, rtol=1e-5, atol=1e-6)


def test_a_window_joins_a_kernel_read_before_it_at_that_kernels_place(unchained):
    """The projection reads the step's concatenation before the window stacking it: the
    merged kernel goes to the concatenation's place, the stacked array's
    get-tuple-element moving up with it."""
    trips = 4
    text = counted_loop(trips, {"h": "f32[4,64]{1,0}", "cs": "f32[4,4,128]{2,1,0}",
                                "w": "f32[128,64]{1,0}"}, """
  a = f32[4,64]{1,0} exponential(h)
  c = f32[4,128]{1,0} concatenate(a, h), dimensions={1}
  d = f32[4,64]{1,0} dot(c, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  h2 = f32[4,64]{1,0} tanh(d)
  c1 = f32[1,4,128]{2,1,0} reshape(c)
  cs2 = f32[4,4,128]{2,1,0} dynamic-update-slice(cs, c1, i, zero, zero)""", ["h2", "cs2", "w"],
        "  h0 = f32[4,64]{1,0} parameter(0)\n  w0 = f32[128,64]{1,0} parameter(1)\n"
        "  s0 = f32[4,4,128]{2,1,0} broadcast(fz), dimensions={}", ["h0", "s0", "w0"])
    body = body_of(optimise(runtime.parse(text)))
    [kernel] = [i for i in body.instructions if kernel_outputs(i) is not None]
    [dot] = [i for i in body.instructions if i.opcode == "dot"
             or i.opcode == "fusion" and str(i.attrs["kind"]) == "kOutput"]
    assert body.instructions.index(kernel) < body.instructions.index(dot)
    h0 = (RNG.standard_normal((4, 64)) * 0.5).astype(np.float32)
    w0 = (RNG.standard_normal((128, 64)) * 0.1).astype(np.float32)
    compiler.clear_cache()
    exe = runtime.compile(text)
    assert len(body_launches(exe)) == 3         # concatenation and window, the dot, the counter
    _, got_h, got_cs, _ = (np.asarray(v) for v in exe(h0, w0))
    h, cs = h0.copy(), np.zeros((trips, 4, 128), np.float32)
    for i in range(trips):
        c = np.concatenate([np.exp(h), h], axis=1)
        cs[i] = c
        h = np.tanh(c @ w0)
    np.testing.assert_allclose(got_cs, cs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_h, h, rtol=1e-4, atol=1e-5)


def test_a_kernel_left_with_windows_only_writes_just_the_windows(unchained):
    """A value computed only to be stacked twice: both windows join its kernel, whose own
    output then has no reader and leaves it; the kernel still writes only the two windows."""
    trips = 5
    stk = "f32[5,4,64]{2,1,0}"
    text = counted_loop(trips, {"h": "f32[4,64]{1,0}", "ys": stk, "zs": stk}, f"""
  y = f32[4,64]{{1,0}} exponential(h)
  y1 = f32[1,4,64]{{2,1,0}} reshape(y)
  ys2 = {stk} dynamic-update-slice(ys, y1, i, zero, zero)
  last = s32[] constant({trips - 1})
  back = s32[] subtract(last, i)
  zs2 = {stk} dynamic-update-slice(zs, y1, back, zero, zero)""", ["h", "ys2", "zs2"],
        f"  h0 = f32[4,64]{{1,0}} parameter(0)\n  s0 = {stk} broadcast(fz), dimensions={{}}",
        ["h0", "s0", "s0"])
    body = body_of(optimise(runtime.parse(text)))
    [kernel] = [i for i in body.instructions if kernel_outputs(i) is not None]
    assert all(o.window is not None for o in kernel_outputs(kernel)[1])
    h0 = RNG.standard_normal((4, 64)).astype(np.float32)
    compiler.clear_cache()
    exe = runtime.compile(text)
    step = max(body_launches(exe), key=lambda s: len(s.buffers))
    # it reads the state and the counter and writes the two windows; a kernel computing the
    # whole stacked arrays would read them too
    assert len(step.buffers) == 4
    _, _, ys, zs = (np.asarray(v) for v in exe(h0))
    np.testing.assert_allclose(ys, np.broadcast_to(np.exp(h0), (5, 4, 64)), rtol=1e-6)
    np.testing.assert_allclose(zs, np.broadcast_to(np.exp(h0), (5, 4, 64)), rtol=1e-6)
