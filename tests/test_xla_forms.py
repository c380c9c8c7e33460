"""Forms XLA accepts and runs that this runtime once refused: tuple elements written as
operands (``%t#0``), a signature whose parameter list disagrees with the body, arithmetic on
``pred``, and collectives in one-replica, one-partition modules.

Every expected value is what XLA computes: its CPU backend (jaxlib 0.10.2, through
``benchmarks/xla_cpu.py``, one replica and one partition) for the arithmetic and the
collectives, its parser (jaxlib 0.12, the first to read ``#``) for the tuple elements.
"""

import numpy as np
import pytest

import runtime
from runtime.errors import HloUnsupportedError, HloVerifyError

# --- tuple elements as operands -------------------------------------------------------------

ELEMENTS = """HloModule m
ENTRY main {
  %p = f32[] parameter(0)
  %q = (f32[], (f32[], s32[])) parameter(1)
  %sum = f32[] add(f32[] %p, f32[] %q#0)
  %twice = f32[] add(%sum, %q#0)
  %i = f32[] convert(s32[] %q#1#1)
  ROOT %r = (f32[], f32[], f32[]) tuple(%twice, %q#1#0, %i)
}
"""


def test_tuple_elements_parse_as_get_tuple_elements_as_xla_does():
    """XLA (jaxlib 0.12) reads ``%q#1#0`` as ``%q_1 = get-tuple-element(%q), index=1`` and
    ``%q_1_0 = get-tuple-element(%q_1), index=0``, one per element, before the first user."""
    text = runtime.parse(ELEMENTS).to_text()
    assert "%q_0 = f32[] get-tuple-element(%q), index=0\n  %sum = f32[] add(%p, %q_0)" in text
    assert "%twice = f32[] add(%sum, %q_0)" in text and text.count("index=0") == 2
    assert "%q_1 = (f32[], s32[]) get-tuple-element(%q), index=1" in text
    assert "%q_1_1 = s32[] get-tuple-element(%q_1), index=1\n  %i = f32[] convert(%q_1_1)" in text
    assert "%q_1_0 = f32[] get-tuple-element(%q_1), index=0\n  ROOT %r" in text
    assert runtime.parse(text).to_text() == text      # the printed form reads back the same


def test_tuple_element_names_give_way_to_written_ones():
    """A written instruction keeps its name; the element takes XLA's ``.1`` suffix."""
    text = runtime.parse("""HloModule m
ENTRY main {
  %p = (f32[], f32[]) parameter(0)
  %a = f32[] negate(%p#1)
  %p_1 = f32[] constant(2)
  ROOT %r = f32[] add(%a, %p_1)
}""").to_text()
    assert "%p_1.1 = f32[] get-tuple-element(%p), index=1\n  %a = f32[] negate(%p_1.1)" in text
    assert "%p_1 = f32[] constant(2)" in text


def test_tuple_elements_run():
    out = runtime.compile(ELEMENTS)(np.float32(1.5), (np.float32(2), (np.float32(-3), np.int32(7))))
    assert [float(np.asarray(o)) for o in out] == [5.5, -3.0, 7.0]


# --- signatures --------------------------------------------------------------------------

def test_signature_parameter_list_is_not_checked_as_xla():
    """XLA's parser checks a signature's result shape only (it accepts ``() -> f32[6]`` over
    two parameters); the parameters come from the body, with a warning here."""
    module = runtime.parse("""HloModule m
ENTRY main () -> f32[6] {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT c = f32[6] concatenate(a, b), dimensions={0}
}""")
    assert any("lists parameters ()" in w and "(f32[3], f32[3])" in w for w in module.warnings)
    assert "ENTRY %main (a: f32[3], b: f32[3]) -> f32[6] {" in module.to_text()
    out = runtime.compile(module.to_text().replace("(a: f32[3], b: f32[3])", "(x: s32[2])"))(
        np.arange(3, dtype=np.float32), np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(out), [0, 1, 2, 1, 1, 1])


# --- pred arithmetic ----------------------------------------------------------------------

PRED = """HloModule m
or_ {
  x = pred[] parameter(0)
  y = pred[] parameter(1)
  ROOT r = pred[] add(x, y)
}
and_ {
  x = pred[] parameter(0)
  y = pred[] parameter(1)
  ROOT r = pred[] multiply(x, y)
}
ENTRY main {
  a = pred[4] parameter(0)
  b = pred[4] parameter(1)
  s = pred[4] add(a, b)
  m = pred[4] multiply(a, b)
  ss = pred[4] add(s, s)
  c = s8[4] convert(ss)
  f = pred[] constant(false)
  t = pred[] constant(true)
  any = pred[] reduce(a, f), dimensions={0}, to_apply=or_
  all = pred[] reduce(s, t), dimensions={0}, to_apply=and_
  ROOT out = (pred[4], pred[4], s8[4], pred[], pred[]) tuple(s, m, c, any, all)
}"""


def test_pred_add_and_multiply_compute_or_and_and_as_xla():
    """XLA's shape inference takes pred for add, multiply, maximum and minimum (not subtract,
    divide, ...); its CPU backend computes add as or, multiply as and (bytes 0 and 1 only)."""
    a = np.array([False, False, True, True])
    b = np.array([False, True, False, True])
    s, m, c, any_, all_ = runtime.compile(PRED)(a, b)
    np.testing.assert_array_equal(np.asarray(s).view(np.uint8), [0, 1, 1, 1])
    np.testing.assert_array_equal(np.asarray(m).view(np.uint8), [0, 0, 0, 1])
    np.testing.assert_array_equal(np.asarray(c), [0, 1, 1, 1])
    assert np.asarray(any_).view(np.uint8) == 1 and np.asarray(all_).view(np.uint8) == 0


@pytest.mark.parametrize("opcode", ["subtract", "divide", "remainder", "power"])
def test_pred_arithmetic_xla_refuses_is_refused(opcode):
    with pytest.raises(HloVerifyError, match=f"{opcode} r: .*pred") as info:
        runtime.parse(f"HloModule m\nENTRY e {{\n  a = pred[4] parameter(0)\n"
                      f"  ROOT r = pred[4] {opcode}(a, a)\n}}")
    assert info.value.line == 4


# --- collectives on one device -------------------------------------------------------------

X = (np.arange(6, dtype=np.float32) + 1).reshape(2, 3)
Y = np.arange(4, dtype=np.float32) + 10
ZEROS = np.zeros((2, 3), np.float32)

# (body of the entry after x = f32[2,3] parameter(0), y = f32[4] parameter(1); XLA's outputs)
COLLECTIVES = {
    "all-reduce": ("ROOT r = f32[2,3] all-reduce(x), replica_groups={}, to_apply=add", [X]),
    "all-reduce-group": ("ROOT r = f32[2,3] all-reduce(x), replica_groups={{0}}, channel_id=1, "
                         "use_global_device_ids=true, to_apply=add", [X]),
    "all-reduce-variadic": ("ROOT r = (f32[2,3], f32[4]) all-reduce(x, y), replica_groups={}, "
                            "to_apply=add", [X, Y]),
    "all-gather": ("ROOT r = f32[2,3] all-gather(x), replica_groups={}, dimensions={0}", [X]),
    "all-gather-variadic": ("ROOT r = (f32[2,3], f32[4]) all-gather(x, y), "
                            "replica_groups={{0}}, dimensions={0}", [X, Y]),
    "reduce-scatter": ("ROOT r = f32[2,3] reduce-scatter(x), replica_groups={}, dimensions={0}, "
                       "to_apply=add", [X]),
    "all-to-all": ("ROOT r = f32[2,3] all-to-all(x), replica_groups={{0}}, dimensions={0}", [X]),
    # XLA's verifier takes the tuple form with one operand per group member (its CPU backend
    # then crashes): the identity, as the array form
    "all-to-all-tuple": ("ROOT r = (f32[2,3]) all-to-all(x), replica_groups={{0}}", [X]),
    "collective-permute-self": ("ROOT r = f32[2,3] collective-permute(x), "
                                "source_target_pairs={{0,0}}", [X]),
    "collective-permute-empty": ("ROOT r = f32[2,3] collective-permute(x), "
                                 "source_target_pairs={}", [ZEROS]),
    "collective-permute-away": ("ROOT r = f32[2,3] collective-permute(x), "
                                "source_target_pairs={{0,1}}", [ZEROS]),
    # XLA's CPU backend has no collective-broadcast; one member broadcasts to itself
    "collective-broadcast": ("ROOT r = f32[2,3] collective-broadcast(x), replica_groups={{0}}",
                             [X]),
    "replica-id": ("ROOT r = u32[] replica-id()", [np.uint32(0)]),
    "partition-id": ("ROOT r = u32[] partition-id()", [np.uint32(0)]),
    "ids-used": ("a = u32[] replica-id()\n  b = u32[] partition-id()\n  c = u32[] add(a, b)\n"
                 "  d = f32[] convert(c)\n  e = f32[2,3] broadcast(d), dimensions={}\n"
                 "  ROOT r = f32[2,3] add(x, e)", [X]),
    "all-reduce-start": ("s = f32[2,3] all-reduce-start(x), replica_groups={}, to_apply=add\n"
                         "  ROOT r = f32[2,3] all-reduce-done(s)", [X]),
    # StableHLO has no async tuple all-reduce, so XLA was not asked; the synchronous form's
    "all-reduce-start-variadic": ("s = (f32[2,3], f32[4]) all-reduce-start(x, y), "
                                  "replica_groups={}, to_apply=add\n"
                                  "  ROOT r = (f32[2,3], f32[4]) all-reduce-done(s)", [X, Y]),
    "all-gather-start": ("s = (f32[2,3], f32[2,3]) all-gather-start(x), replica_groups={}, "
                         "dimensions={0}\n  ROOT r = f32[2,3] all-gather-done(s)", [X]),
    "collective-permute-start": ("s = (f32[2,3], f32[2,3], u32[], u32[]) "
                                 "collective-permute-start(x), source_target_pairs={{0,0}}\n"
                                 "  ROOT r = f32[2,3] collective-permute-done(s)", [X]),
    "collective-permute-start-empty": ("s = (f32[2,3], f32[2,3], u32[], u32[]) "
                                       "collective-permute-start(x), source_target_pairs={}\n"
                                       "  ROOT r = f32[2,3] collective-permute-done(s)", [ZEROS]),
    "collective-permute-start-pair": ("s = (f32[2,3], f32[2,3]) collective-permute-start(x), "
                                      "source_target_pairs={{0,0}}\n"
                                      "  ROOT r = f32[2,3] collective-permute-done(s)", [X]),
    # the result's buffer is not its operand's: the operand is read again after it
    "all-reduce-operand-reused": ("n = f32[2,3] negate(x)\n  ar = f32[2,3] all-reduce(n), "
                                  "replica_groups={}, to_apply=add\n"
                                  "  ROOT r = f32[2,3] add(ar, n)", [-2 * X]),
}

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
"""


def collective_module(body: str, header: str = "") -> str:
    return (f"HloModule m{header}\n{ADD}ENTRY main {{\n  x = f32[2,3] parameter(0)\n"
            f"  y = f32[4] parameter(1)\n  {body}\n}}\n")


@pytest.mark.parametrize("name", list(COLLECTIVES))
def test_one_device_collectives_compute_what_xla_computes(name):
    body, expected = COLLECTIVES[name]
    out = runtime.compile(collective_module(body))(X, Y)
    got = list(out) if isinstance(out, tuple) else [out]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g = np.asarray(g)
        assert g.dtype == np.asarray(e).dtype
        np.testing.assert_array_equal(g, e)


def test_one_device_collectives_leave_no_collective_for_later_passes():
    from runtime.hlo.opcodes import OPCODES
    from runtime.pipeline import optimise
    for body, _ in COLLECTIVES.values():
        module = optimise(runtime.parse(collective_module(body)), fusion=False)
        assert not [i.name for i in module.instructions()
                    if OPCODES[i.opcode].one_device is not None]


@pytest.mark.parametrize("key", ["replica_count", "num_partitions"])
def test_multi_device_module_run_as_one_device_is_refused_at_its_header(key):
    """It compiles (one device's program), but run() alone would give one shard's answer."""
    text = collective_module(COLLECTIVES["all-reduce"][0], header=f", {key}=2")
    exe = runtime.compile(text)
    with pytest.raises(HloUnsupportedError, match=f"{key}=2 in its HloModule header") as info:
        exe.run(X, Y)
    assert (info.value.line, info.value.column) == (1, text.index(key) + 1)
    assert "run_spmd" in info.value.hint


def test_one_device_collective_that_changes_the_shape_is_refused():
    """XLA runs this all-gather reading past its operand (garbage rows); here it is refused."""
    text = collective_module("ROOT r = f32[4,3] all-gather(x), replica_groups={}, "
                             "dimensions={0}")
    with pytest.raises(HloUnsupportedError,
                       match="all-gather r in a one-device module: with one device it "
                             r"computes f32\[2,3\], but its shape is f32\[4,3\]") as info:
        runtime.compile(text)
    assert info.value.line == 10


def test_tuple_all_to_all_with_more_operands_than_devices_is_refused_as_xla():
    text = collective_module("ROOT r = (f32[2,3], f32[2,3]) all-to-all(x, x), "
                             "replica_groups={{0}}")
    with pytest.raises(HloVerifyError, match="has 2 operands") as info:
        runtime.compile(text)
    assert info.value.line == 10



LOOP = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  s = f32[4] all-reduce-start(x), replica_groups={}, to_apply=add
  d = f32[4] all-reduce-done(s)
  r = u32[] replica-id()
  rf = f32[] convert(r)
  rb = f32[4] broadcast(rf), dimensions={}
  y = f32[4] add(d, x)
  z = f32[4] add(y, rb)
  ROOT t = (s32[], f32[4]) tuple(j, z)
}
ENTRY e {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[4]) tuple(zero, x)
  w = (s32[], f32[4]) while(t), condition=cond, body=body
  ROOT o = f32[4] get-tuple-element(w), index=1
}"""


def test_one_device_collectives_in_a_loop_body():
    """An all-reduce pair and a replica-id inside a while body: x + x each trip, three trips."""
    out = runtime.compile(LOOP)(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(out), [0, 8, 16, 24])
