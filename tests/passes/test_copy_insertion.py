"""Copy insertion adds exactly the copies the aliasing constraints need, each with its reason."""

import numpy as np

import runtime
from runtime.hlo.verifier import verify
from runtime.passes.copy_insertion import copy_insertion, inserted_copies

from ..buffers.checked import assigned
from ..buffers.memory_interpreter import MemoryRun, run_reference

LOOP_STATE = "(s32[], f32[4], f32[4])"


def loop_module(body_results: str, after: str = "",
                root: str = "(f32[4], f32[4]) tuple(w1, w2)") -> str:
    return f"""
HloModule loop

cond {{
  p = {LOOP_STATE} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}}

body {{
  p = {LOOP_STATE} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(p), index=1
  y = f32[4] get-tuple-element(p), index=2
  xy = f32[4] add(x, y)
  ROOT t = {LOOP_STATE} tuple(next, {body_results})
}}

ENTRY e {{
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  zero = s32[] constant(0)
  na = f32[4] negate(a)
  nb = f32[4] negate(b)
  init = {LOOP_STATE} tuple(zero, na, nb)
  w = {LOOP_STATE} while(init), condition=cond, body=body
  w1 = f32[4] get-tuple-element(w), index=1
  w2 = f32[4] get-tuple-element(w), index=2{after}
  ROOT r = {root}
}}
"""


def run_both(text):
    module = runtime.parse(text)
    ba = assigned(module)
    rng = np.random.default_rng(7)
    args = [rng.integers(-4, 5, size=p.shape.dims).astype(np.float32)
            for p in module.entry.parameters]
    for got, want in zip(MemoryRun(ba).run(args), run_reference(module, args)):
        np.testing.assert_array_equal(got, want)
    return ba


def reasons(ba):
    return {c.instruction: c.reason for c in ba.copies}


def test_swapped_loop_state_is_copied_through_a_temporary():
    ba = run_both(loop_module("y, x"))
    body_copies = [c for c in ba.copies if "computed by the body" in c.reason]
    assert len(body_copies) == 3
    assert any("would overwrite p{1}" in c.reason or "would overwrite p{2}" in c.reason
               for c in body_copies)


def test_state_updated_in_place_needs_no_copy_beyond_the_constant_counter():
    ba = run_both(loop_module("xy, y"))
    assert [c.reason.split(":")[0] for c in ba.copies] == ["initial loop state {0} of w"]


def test_init_still_read_after_the_loop_is_copied():
    ba = run_both(loop_module("xy, y", after="\n  late = f32[4] add(na, na)",
                              root="(f32[4], f32[4]) tuple(late, w1)"))
    init_copies = [c.reason for c in ba.copies if c.reason.startswith("initial loop state {1}")]
    assert len(init_copies) == 1 and "na" in init_copies[0] and "late" in init_copies[0]


def test_outputs_that_are_parameters_constants_or_repeated_are_copied():
    module = runtime.parse("""
HloModule outs
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  n = f32[4] negate(p)
  ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(p, p, c, n, n)
}
""")
    out = copy_insertion(module)
    verify(out)
    assert [c.instruction for c in inserted_copies(out)] == ["copy.0", "copy.1", "copy.2", "copy.3"]
    why = [c.reason for c in inserted_copies(out)]
    assert "which the caller owns" in why[0] and "constant c" in why[2]
    assert "outputs {3} and {4} would share" in why[3]
    assert [op.name for op in out.entry.root.operands] == ["copy.0", "copy.1", "copy.2", "copy.3", "n"]


def test_reasons_survive_printing_and_parsing():
    module = runtime.parse(loop_module("y, x"))
    out = copy_insertion(module)
    again = runtime.parse(out.to_text())
    assert inserted_copies(again) == inserted_copies(out) != []


def test_in_place_operand_read_later_is_copied_and_not_otherwise():
    template = """
HloModule dus
ENTRY e {{
  a = f32[8] parameter(0)
  u = f32[2] parameter(1)
  i = s32[] constant(3)
  x = f32[8] negate(a)
  d = f32[8] dynamic-update-slice(x, u, i)
  ROOT t = {root}
}}
"""
    later = run_both(template.format(root="(f32[8], f32[8]) tuple(d, x)").replace(
        "u = f32[2] parameter(1)", "u = f32[2] slice(a), slice={[0:2]}"))
    assert [c.reason.split(":")[0] for c in later.copies] == [
        "operand 0 {} of d, which dynamic-update-slice overwrites in place"]
    alone = run_both(template.format(root="f32[8] abs(d)").replace(
        "u = f32[2] parameter(1)", "u = f32[2] slice(a), slice={[0:2]}"))
    assert alone.copies == []
    placed = alone.slice(alone.module.entry.instructions[-2])
    assert placed == alone.slice(alone.module.entry.instructions[-3])


def test_custom_call_output_to_operand_aliasing_is_in_place():
    module = runtime.parse("""
HloModule cc
ENTRY e {
  a = f32[4] parameter(0)
  x = f32[4] negate(a)
  y = f32[4] custom-call(x), custom_call_target="inplace", output_to_operand_aliasing={ {}: (0, {}) }
  ROOT t = (f32[4], f32[4]) tuple(y, x)
}
""")
    ba = assigned(module)
    (copy,) = ba.copies
    assert copy.reason.startswith("operand 0 {} of y, which custom-call overwrites in place")
    y = ba.module.entry.instructions[-2]
    assert ba.slice(y) == ba.slice(y.operands[0])


def test_swapped_input_output_aliases_go_through_copies():
    """output 0 lives in parameter 0 but is parameter 1, and the other way round."""
    ba = run_both("""
HloModule swap, input_output_alias={ {0}: (0, {}), {1}: (1, {}) }
ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  ROOT t = (f32[4], f32[4]) tuple(b, a)
}
""")
    assert len(ba.copies) == 3
    assert all(c.reason.startswith(("parameter", "output")) for c in ba.copies)
    outputs = ba.output_slices()
    assert outputs[(0,)] == ba.parameter_slice(0) and outputs[(1,)] == ba.parameter_slice(1)


DONATED_UPDATE = """
HloModule donated_update, input_output_alias={ {0}: (0, {}) }
ENTRY e {
  w = f32[4] parameter(0)
  g = f32[4] parameter(1)
  u = f32[4] subtract(w, g)
  wb = f32[256,4] broadcast(w), dimensions={1}
  s = f32[256,4] multiply(wb, wb)
  ROOT t = (f32[4], f32[256,4]) tuple(u, s)
}
"""


def test_donated_weight_is_updated_after_its_last_read_without_a_copy():
    """The update frees nothing and defines little, so a greedy schedule would run it first
    and overwrite the weight another instruction still reads; it is ordered after that read
    (as a loop body's state updates are), and the weight is updated in place."""
    ba = run_both(DONATED_UPDATE)
    assert ba.copies == []
    steps = {i.name: n for n, i in enumerate(ba.schedule.flattened)}
    assert steps["u"] > steps["wb"]
    assert ba.output_slices()[(0,)] == ba.parameter_slice(0)
