"""Row plans: which values a row kernel computes once per row, and when no plan is valid."""

import runtime
from runtime.analysis.reducers import init_is_identity, reducer_opcode
from runtime.analysis.rows import plan_rows, reused_members, row_count

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def entry(body: str, extra: str = ADD):
    module = runtime.parse(f"HloModule m\n{extra}\nENTRY e {{\n{body}\n}}\n")
    return module.entry


def plan_of(comp):
    return plan_rows(comp.root, comp.instructions)


def by_name(comp, name):
    return next(i for i in comp.instructions if i.name == name)


NORMALISE = """
  x = f32[32,100]{1,0} parameter(0)
  z = f32[] constant(0)
  s = f32[32]{0} reduce(x, z), dimensions={1}, to_apply=add
  r = f32[32]{0} rsqrt(s)
  b = f32[32,100]{1,0} broadcast(r), dimensions={0}
  ROOT y = f32[32,100]{1,0} multiply(x, b)
"""


def test_a_reduction_broadcast_back_is_computed_once_per_row():
    comp = entry(NORMALISE)
    plan = plan_of(comp)
    assert plan.row_dims == (0,) and plan.column_dims == (1,)
    assert [h.name for h in plan.hoisted] == ["s", "r"]
    assert plan.index_of[by_name(comp, "r")] == (0,)
    assert row_count(comp.root, comp.instructions) == 32


def test_rows_follow_the_physical_layout():
    comp = entry(NORMALISE.replace("f32[32,100]{1,0} broadcast", "f32[32,100]{0,1} broadcast")
                 .replace("ROOT y = f32[32,100]{1,0}", "ROOT y = f32[32,100]{0,1}"))
    # dimension 1 is now major: a row plan must still fix dimension 0, so it loops over all
    plan = plan_of(comp)
    assert plan.row_dims == (1, 0) and plan.column_dims == ()


def test_a_value_read_at_two_different_indices_is_not_row_invariant():
    comp = entry("""
  x = f32[16,16]{1,0} parameter(0)
  z = f32[] constant(0)
  s = f32[16]{0} reduce(x, z), dimensions={1}, to_apply=add
  a = f32[16,16]{1,0} broadcast(s), dimensions={0}
  b = f32[16,16]{1,0} broadcast(s), dimensions={1}
  ROOT y = f32[16,16]{1,0} add(a, b)
""")
    assert plan_of(comp) is None


def test_a_sliced_reduction_has_no_row_plan():
    comp = entry("""
  x = f32[16,16]{1,0} parameter(0)
  z = f32[] constant(0)
  s = f32[16]{0} reduce(x, z), dimensions={1}, to_apply=add
  t = f32[8]{0} slice(s), slice={[4:12]}
  ROOT b = f32[8,16]{1,0} broadcast(t), dimensions={0}
""")
    assert plan_of(comp) is None and row_count(comp.root, comp.instructions) is None


def test_plain_elementwise_needs_no_plan():
    comp = entry("""
  x = f32[16,16] parameter(0)
  ROOT y = f32[16,16] exponential(x)
""")
    assert plan_of(comp) is None


def test_expensive_values_read_through_broadcasts_are_reused():
    comp = entry("""
  x = f32[16] parameter(0)
  y = f32[16,300] parameter(1)
  e = f32[16] exponential(x)
  b = f32[16,300] broadcast(e), dimensions={0}
  ROOT a = f32[16,300] add(b, y)
""")
    assert {i.name for i in reused_members(comp.root, comp.instructions)} == {"e"}
    # 16 rows are too few to give up recomputing a cheap-enough value per element ...
    assert plan_of(comp) is None
    # ... but enough for the fusion pass to keep such a value in a row fusion
    assert row_count(comp.root, comp.instructions) == 16


def test_a_reduction_of_a_reduction_result_is_hoisted_after_it():
    comp = entry("""
  x = f32[8,64]{1,0} parameter(0)
  z = f32[] constant(0)
  s = f32[8]{0} reduce(x, z), dimensions={1}, to_apply=add
  sb = f32[8,64]{1,0} broadcast(s), dimensions={0}
  c = f32[8,64]{1,0} subtract(x, sb)
  v = f32[8]{0} reduce(c, z), dimensions={1}, to_apply=add
  vb = f32[8,64]{1,0} broadcast(v), dimensions={0}
  ROOT y = f32[8,64]{1,0} multiply(c, vb)
""")
    plan = plan_of(comp)
    assert [h.name for h in plan.hoisted] == ["s", "v"]


def test_identity_inits_are_recognised():
    comp = entry("""
  x = f32[8] parameter(0)
  z = f32[] constant(0)
  five = f32[] constant(5)
  a = f32[] reduce(x, z), dimensions={0}, to_apply=add
  ROOT b = f32[] reduce(x, five), dimensions={0}, to_apply=add
""")
    assert reducer_opcode(by_name(comp, "a").attrs["to_apply"]) == "add"
    assert init_is_identity(by_name(comp, "a"))
    assert not init_is_identity(by_name(comp, "b"))
    mx = entry("""
  x = s32[8] parameter(0)
  lo = s32[] constant(-2147483648)
  ROOT m = s32[] reduce(x, lo), dimensions={0}, to_apply=max
""", extra="""
max {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT m = s32[] maximum(a, b)
}
""")
    assert init_is_identity(mx.root)
