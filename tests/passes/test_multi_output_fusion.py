"""Multi-output fusion: a loop kernel absorbs same-shape operands that others read too, writes
them as extra outputs, never closes a cycle, and computes what the unmerged kernels did."""

import numpy as np
import pytest

import runtime
from runtime import compiler
from runtime.codegen.plan import iter_launches
from runtime.execution import program_cache
from runtime.opencl.device import get_device
from runtime import pipeline
from runtime.passes.multi_output_fusion import multi_output_fuse_in_place
from runtime.pipeline import optimise
from runtime.target import Target

from .loop_text import counted_loop

RNG = np.random.default_rng(3)

# a recurrent cell's shape: a gate (exp) and a candidate (tanh) kept for the backward pass,
# both read by the new state; instruction fusion leaves three kernels (each expensive value
# has two readers)
CELL = """
HloModule cell
ENTRY e {
  x = f32[16,192]{1,0} parameter(0)
  h = f32[16,192]{1,0} parameter(1)
  nx = f32[16,192]{1,0} negate(x)
  g = f32[16,192]{1,0} exponential(nx)
  gh = f32[16,192]{1,0} add(g, h)
  t = f32[16,192]{1,0} tanh(gh)
  o = f32[16,192]{1,0} multiply(t, g)
  ROOT r = (f32[16,192]{1,0}, f32[16,192]{1,0}, f32[16,192]{1,0}) tuple(o, g, t)
}
"""


def cell_reference(x, h):
    g = np.exp(-x)
    t = np.tanh(g + h)
    return t * g, g, t


def without_multi_output(monkeypatch):
    monkeypatch.setattr(pipeline, "OPTIMISATION",
                        [e for e in pipeline.OPTIMISATION if e[0] != "multi-output-fusion"])
    monkeypatch.setattr(program_cache, "load", lambda key: None)
    compiler.clear_cache()


def test_a_cell_becomes_one_kernel_writing_every_kept_value():
    module = optimise(runtime.parse(CELL))
    [fusion] = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert fusion.shape.is_tuple and len(fusion.shape.elements) == 3
    assert {i.opcode for i in module.entry.root.operands} == {"get-tuple-element"}
    runtime.parse(module.to_text())                 # valid HLO, re-parsed and verified


def test_the_merged_kernel_computes_what_three_kernels_did(monkeypatch, unchained):
    x = RNG.standard_normal((16, 192)).astype(np.float32)
    h = RNG.standard_normal((16, 192)).astype(np.float32)
    compiler.clear_cache()
    exe = runtime.compile(CELL)
    [launch] = iter_launches(exe.program.plan)
    if Target.for_device(get_device()).kind == "cpu":    # each output: a whole and a partial block
        assert exe.program.kernel_texts[launch.kernel].count("vstore16(") == 2 * 3
    got = [np.asarray(v) for v in exe(x, h)]
    without_multi_output(monkeypatch)
    separate = runtime.compile(CELL)
    assert len(list(iter_launches(separate.program.plan))) == 3
    for a, b, want in zip(got, separate(x, h), cell_reference(x, h)):
        np.testing.assert_array_equal(a, np.asarray(b))
        np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6)
    monkeypatch.undo()
    compiler.clear_cache()


@pytest.mark.parametrize("dims", ["16,190", "3,5,7"])
def test_rows_no_vector_divides_keep_every_output(dims):
    """Rows of 190 and 7 elements: the vector loop's partial blocks (or the one-element
    kernel) store every output."""
    text = CELL.replace("16,192", dims)
    shape = tuple(int(d) for d in dims.split(","))
    if len(shape) == 3:
        text = text.replace("{1,0}", "{2,1,0}")
    x = RNG.standard_normal(shape).astype(np.float32)
    h = RNG.standard_normal(shape).astype(np.float32)
    for got, want in zip(runtime.compile(text)(x, h), cell_reference(x, h)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_a_producer_read_on_the_way_to_its_consumer_stays_apart():
    """``d`` reads ``g`` and the consumer reads ``d``: merging ``g`` into the consumer would
    make the fusion both feed ``d`` and wait for it."""
    module = runtime.parse("""
HloModule cycle
ENTRY e {
  x = f32[8,8]{1,0} parameter(0)
  w = f32[8,8]{1,0} parameter(1)
  g = f32[8,8]{1,0} exponential(x)
  d = f32[8,8]{1,0} dot(g, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT c = f32[8,8]{1,0} add(g, d)
}
""")
    multi_output_fuse_in_place(module)
    assert [i.opcode for i in module.entry.instructions] == \
        ["parameter", "parameter", "exponential", "dot", "add"]


def test_instructions_merge_too_and_scalars_stay():
    module = runtime.parse("""
HloModule plain
ENTRY e {
  x = f32[4,32]{1,0} parameter(0)
  i = s32[] parameter(1)
  g = f32[4,32]{1,0} exponential(x)
  t = f32[4,32]{1,0} tanh(g)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  k = s32[] multiply(j, i)
  ROOT r = (f32[4,32]{1,0}, f32[4,32]{1,0}, s32[], s32[]) tuple(t, g, j, k)
}
""")
    multi_output_fuse_in_place(module)
    opcodes = [i.opcode for i in module.entry.instructions]
    assert opcodes.count("fusion") == 1 and "add" in opcodes and "multiply" in opcodes
    runtime.parse(module.to_text())


ARRAY = "f32[4,64]{1,0}"


def state_loop(trips: int, step: str, computations: str = "") -> str:
    """A while loop over (counter, h, s), running ``step`` (lines reading ``h`` and ``s`` and
    defining ``h2`` and ``s2``) ``trips`` times from (0, the argument, zeros)."""
    return counted_loop(trips, {"h": ARRAY, "s": ARRAY}, step, ["h2", "s2"],
                        f"  h0 = {ARRAY} parameter(0)\n"
                        f"  s0 = {ARRAY} broadcast(fz), dimensions={{}}", ["h0", "s0"],
                        computations)


LOOP = state_loop(6, """
  g = f32[4,64]{1,0} exponential(h)
  t = f32[4,64]{1,0} tanh(g)
  q = f32[4,64]{1,0} multiply(t, g)
  h2 = f32[4,64]{1,0} subtract(h, q)
  s2 = f32[4,64]{1,0} add(s, g)""")


def test_a_loop_step_writes_its_new_state_over_the_old_in_one_kernel():
    """The state update reads the old state element by element, so the merged kernel may write
    the new state into the old one's bytes: no copy per iteration."""
    h0 = (RNG.standard_normal((4, 64)) * 0.1).astype(np.float32)
    compiler.clear_cache()
    exe = runtime.compile(LOOP)
    assert not [c for c in exe.analysis.buffer_assignment.copies
                if c.reason.startswith("loop state")]
    h, s = h0.copy(), np.zeros_like(h0)
    for _ in range(6):
        g = np.exp(h)
        h, s = h - np.tanh(g) * g, s + g
    _, got_h, got_s = exe(h0)
    np.testing.assert_allclose(np.asarray(got_h), h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_s), s, rtol=1e-5, atol=1e-6)


TWO_OUTPUTS_IN_PLACE = state_loop(5, """
  f = (f32[4,64]{1,0}, f32[4,64]{1,0}) fusion(h), kind=kLoop, calls=two
  h2 = f32[4,64]{1,0} get-tuple-element(f), index=0
  e = f32[4,64]{1,0} get-tuple-element(f), index=1
  s2 = f32[4,64]{1,0} add(s, e)""", computations="""
two {
  p0 = f32[4,64]{1,0} parameter(0)
  n = f32[4,64]{1,0} negate(p0)
  e = f32[4,64]{1,0} exponential(p0)
  ROOT t = (f32[4,64]{1,0}, f32[4,64]{1,0}) tuple(n, e)
}""")


def test_a_multi_output_kernel_may_write_one_output_over_an_operand_the_other_reads():
    """``negate`` writes the new state over the old while ``exponential`` of the old state is
    the second output: every value is computed before any store, so no copy is needed."""
    h0 = RNG.standard_normal((4, 64)).astype(np.float32)
    compiler.clear_cache()
    exe = runtime.compile(TWO_OUTPUTS_IN_PLACE)
    assert not [c for c in exe.analysis.buffer_assignment.copies
                if c.reason.startswith("loop state")]
    h, s = h0.copy(), np.zeros_like(h0)
    for _ in range(5):
        h, s = -h, s + np.exp(h)
    _, got_h, got_s = exe(h0)
    np.testing.assert_array_equal(np.asarray(got_h), h)
    np.testing.assert_allclose(np.asarray(got_s), s, rtol=1e-5)


def test_a_cell_reading_a_slice_of_its_input_is_one_row_vector_kernel():
    """Slices (a gate's part of a stacked projection) leave the vector loop to the row vector
    loop, which stores every output of the tuple too."""
    text = CELL.replace("x = f32[16,192]{1,0} parameter(0)",
                        "xs = f32[16,384]{1,0} parameter(0)\n"
                        "  x = f32[16,192]{1,0} slice(xs), slice={[0:16], [192:384]}")
    xs = RNG.standard_normal((16, 384)).astype(np.float32)
    h = RNG.standard_normal((16, 192)).astype(np.float32)
    compiler.clear_cache()
    exe = runtime.compile(text)
    [launch] = iter_launches(exe.program.plan)
    if Target.for_device(get_device()).kind == "cpu":
        assert exe.program.kernel_texts[launch.kernel].count("vstore16(") == 3
    for got, want in zip(exe(xs, h), cell_reference(xs[:, 192:], h)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_a_predicate_and_a_float_stay_in_separate_kernels():
    """A kernel writing a float and a predicate would lose its vector form."""
    module = runtime.parse("""
HloModule kinds
ENTRY e {
  x = f32[4,32]{1,0} parameter(0)
  g = f32[4,32]{1,0} exponential(x)
  m = pred[4,32]{1,0} compare(g, x), direction=GT
  ROOT r = (pred[4,32]{1,0}, f32[4,32]{1,0}) tuple(m, g)
}
""")
    multi_output_fuse_in_place(module)
    assert "fusion" not in [i.opcode for i in module.entry.instructions]


def test_readers_of_one_value_become_one_kernel_through_a_multi_output_producer():
    """``exp`` feeds three expensive readers: the last two are passed over first (another
    reader comes before them), the first absorbs it; the next pass finds the others reading
    that multi-output kernel, and they absorb it in turn. One kernel writes the three
    results; ``exp``'s own output, read by no one any more, is dropped."""
    text = """
HloModule three
ENTRY e {
  x = f32[4,64]{1,0} parameter(0)
  a = f32[4,64]{1,0} exponential(x)
  b = f32[4,64]{1,0} tanh(a)
  c = f32[4,64]{1,0} log(a)
  d = f32[4,64]{1,0} sqrt(a)
  ROOT r = (f32[4,64]{1,0}, f32[4,64]{1,0}, f32[4,64]{1,0}) tuple(b, c, d)
}
"""
    module = optimise(runtime.parse(text))
    [fusion] = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(fusion.shape.elements) == 3
    x = RNG.standard_normal((4, 64)).astype(np.float32)
    compiler.clear_cache()
    got = runtime.compile(text)(x)
    a = np.exp(x)
    for g, want in zip(got, (np.tanh(a), np.log(a), np.sqrt(a))):
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-6)


def test_a_producer_whose_readers_merged_joins_their_kernel():
    """``exp`` is read by ``tanh`` and the product, so instruction fusion leaves it apart;
    once the product absorbs ``tanh`` (kept as an output), that kernel is ``exp``'s only
    reader, which instruction fusion never revisits: it absorbs ``exp`` too. One kernel."""
    text = """
HloModule chain
ENTRY e {
  x = f32[4,64]{1,0} parameter(0)
  a = f32[4,64]{1,0} exponential(x)
  b = f32[4,64]{1,0} tanh(a)
  m = f32[4,64]{1,0} multiply(a, b)
  ROOT r = (f32[4,64]{1,0}, f32[4,64]{1,0}) tuple(m, b)
}
"""
    module = optimise(runtime.parse(text))
    [fusion] = [i for i in module.entry.instructions
                if i.opcode not in ("parameter", "get-tuple-element", "tuple")]
    assert fusion.opcode == "fusion" and len(fusion.shape.elements) == 2
    x = RNG.standard_normal((4, 64)).astype(np.float32)
    compiler.clear_cache()
    got_m, got_b = runtime.compile(text)(x)
    a = np.exp(x)
    np.testing.assert_allclose(np.asarray(got_m), a * np.tanh(a), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_b), np.tanh(a), rtol=1e-5)


def test_fusions_whose_computations_share_instruction_names_merge():
    """Names are unique per computation only: two written fusions both holding an ``s``
    become one kernel whose computation names them apart (it was refused as a duplicate)."""
    text = """HloModule same_names
f1 {
  a = f32[4,8]{1,0} parameter(0)
  b = f32[4,8]{1,0} parameter(1)
  ROOT s = f32[4,8]{1,0} add(a, b)
}
f2 {
  a = f32[4,8]{1,0} parameter(0)
  b = f32[4,8]{1,0} parameter(1)
  ROOT s = f32[4,8]{1,0} multiply(a, b)
}
ENTRY e {
  x = f32[4,8]{1,0} parameter(0)
  first = f32[4,8]{1,0} fusion(x, x), kind=kLoop, calls=f1
  second = f32[4,8]{1,0} fusion(first, x), kind=kLoop, calls=f2
  ROOT r = (f32[4,8]{1,0}, f32[4,8]{1,0}) tuple(first, second)
}
"""
    module = optimise(runtime.parse(text))
    [fusion] = [i for i in module.entry.instructions if i.opcode == "fusion"]
    names = [i.name for i in fusion.calls.instructions]
    assert len(names) == len(set(names))
    runtime.parse(module.to_text())
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    first, second = runtime.compile(text)(x)
    np.testing.assert_allclose(first, x + x, rtol=1e-6)
    np.testing.assert_allclose(second, (x + x) * x, rtol=1e-6)
