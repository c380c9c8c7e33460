"""Printing: every construct of the grammar survives parse -> print -> parse -> print unchanged,
and the printed form is XLA's canonical one (``%`` names, signatures, long alias form)."""

import pytest

import runtime
from runtime.hlo.parser import parse

H = "HloModule m\n\n"

ADD = """%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
"""

CONSTRUCTS = {
    "sub-byte-types": H + """ENTRY %e {
  %a = s4[4]{0:E(4)} parameter(0)
  %b = u4[3] constant({1, 2, 15})
  %c = s1[2] constant({0, -1})
  %d = u1[2] constant({0, 1})
  %f = s2[2] constant({-2, 1})
  %g = u2[2] constant({3, 0})
  ROOT %t = (s4[4]{0:E(4)}, u4[3], s1[2], u1[2], s2[2], u2[2]) tuple(%a, %b, %c, %d, %f, %g)
}""",
    "f8-and-small-floats": H + "ENTRY %e {\n" + "\n".join(
        f"  %c{i} = {t}[3] constant({{1.5, -2, 0.25}})" for i, t in enumerate(
            ["f8e5m2", "f8e4m3fn", "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz", "f8e4m3", "f8e3m4",
             "f6e2m3fn", "f6e3m2fn", "f4e2m1fn", "bf16", "f16"]))
    + "\n  %z = f8e8m0fnu[2] constant({0.5, 4})\n  ROOT %r = f32[] constant(0)\n}",
    "complex-literals": H + """ENTRY %e {
  %a = c64[] constant((1, 2))
  %b = c64[2] constant({(1, 2), (3.5, -4)})
  %c = c128[2,1] constant({ {(1e300, -0.5)}, {(nan, inf)} })
  ROOT %t = (c64[], c64[2], c128[2,1]) tuple(%a, %b, %c)
}""",
    "nan-payloads-and-infinities": H + """ENTRY %e {
  %a = f32[4] constant({nan, -nan, nan(0x1f), -nan(0x7)})
  %b = f64[3] constant({nan(0x123456789), -inf, inf})
  %c = f16[2] constant({nan(0x1), -inf})
  %d = bf16[2] constant({nan(0x3), -nan})
  %z = c64[1] constant({(nan(0x5), -nan(0x2))})
  ROOT %t = (f32[4], f64[3], f16[2], bf16[2], c64[1]) tuple(%a, %b, %c, %d, %z)
}""",
    "pred-and-integer-extremes": H + """ENTRY %e {
  %p = pred[3] constant({true, 0, 1})
  %u = u64[2] constant({18446744073709551615, 0})
  %s = s64[] constant(-9223372036854775808)
  %z = s32[2,0] constant({ {}, {} })
  ROOT %t = (pred[3], u64[2], s64[], s32[2,0]) tuple(%p, %u, %s, %z)
}""",
    "tuple-literal": H + """ENTRY %e {
  ROOT %c = (f32[], s32[2], (pred[], u8[0])) constant((1.5, {2, 3}, (true, {})))
}""",
    "elided-constant": H + """ENTRY %e {
  %c = f32[20] constant({...})
  %t = (f32[], f32[12]) constant((1, {...}))
  ROOT %r = f32[20] negate(%c)
}""",
    "dynamic-dimensions": H + """ENTRY %e {
  %a = f32[<=8,4] parameter(0)
  %b = f32[?,4] parameter(1)
  ROOT %t = (f32[<=8,4], f32[?,4]) tuple(%a, %b)
}""",
    "tiled-layout": H + """ENTRY %e {
  %a = f32[8,128]{1,0:T(8,128)(2,1)E(4)S(1)} parameter(0)
  %s = f32[]{:S(5)} parameter(1)
  ROOT %n = f32[8,128]{0,1:T(8,128)(2,1)} negate(%a)
}""",
    "token-and-empty-tuple": H + """ENTRY %e {
  %t = token[] after-all()
  %p = f32[] parameter(0)
  %d = f32[] add-dependency(%p, %t)
  ROOT %r = ((), f32[], token[]) tuple(%empty, %d, %t)
  %empty = () tuple()
}""".replace("  ROOT %r = ((), f32[], token[]) tuple(%empty, %d, %t)\n  %empty = () tuple()",
             "  %empty = () tuple()\n  ROOT %r = ((), f32[], token[]) tuple(%empty, %d, %t)"),
    "inline-computation": H + """ENTRY %e {
  %p = f32[4] parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%p, %z), dimensions={0}, to_apply={ a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
}""",
    "nested-operand-instructions": H + """ENTRY %e {
  %x = f32[4] parameter(0)
  %y = f32[4] parameter(1)
  ROOT %r = f32[4] add(f32[4] sqrt(f32[4] negate(%x)), exponential(%y))
}""",
    "comments-everywhere": """// a module
HloModule /*name*/ m // trailing
/* block
   comment */
ENTRY /*a*/ %e /*b*/ { // open
  %p /*c*/ = /*d*/ f32[4] /*e*/ parameter(/*f*/0) // g
  ROOT /*h*/ %t = (f32[4], f32[4], f32[4]) tuple(%p, /*index=1*/%p, /*index=2*/ %p) /*i*/
} // end
// after""",
    "strings-with-escapes": H + """ENTRY %e {
  %p = f32[4] parameter(0)
  ROOT %c = f32[4] custom-call(%p), custom_call_target="a\\"b\\\\c\\n\\x41\\t", backend_config='it\\'s'
}""",
    "names-without-percent-and-spaces": H + """ENTRY e {
  x=f32[4] parameter(0)
  ROOT y=f32[4] negate(x)
}""",
    "headerless": """ENTRY e {
  x = f32[4] parameter(0)
  ROOT y = f32[4] negate(x)
}""",
    "seed-increment": """HloModule increment, input_output_alias={ {}: 0 }

ENTRY entry {
  %p = f32[] parameter(0)
  %c = f32[] constant(1)
  ROOT %out = f32[] add(%p, %c)
}""",
    "jax-lowered-text": """HloModule jit_f, input_output_alias={ {0}: (0, {}, may-alias) }, entry_computation_layout={(f32[4,8]{1,0}, f32[4,8]{1,0})->(f32[4,8]{1,0}, f32[])}

region_0.1 {
  a.1 = f32[] parameter(0)
  b.1 = f32[] parameter(1)
  ROOT s.1 = f32[] add(a.1, b.1)
}

ENTRY main.2 {
  x.1 = f32[4,8]{1,0} parameter(0)
  y.1 = f32[4,8]{1,0} parameter(1)
  add.1 = f32[4,8]{1,0} add(x.1, y.1)
  zero.1 = f32[] constant(0)
  reduce_sum.7 = f32[] reduce(add.1, zero.1), dimensions={0,1}, to_apply=region_0.1
  ROOT tuple.1 = (f32[4,8]{1,0}, f32[]) tuple(add.1, reduce_sum.7)
}""",
    "xla-optimised-dump": """HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[4]{0})->f32[4]{0}}, allow_spmd_sharding_propagation_to_output={true}, frontend_attributes={fingerprint_before_lhs="abc"}

FileNames
1 "model.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=4 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%fused_computation (param_0: f32[4]) -> f32[4] {
  %param_0 = f32[4]{0} parameter(0)
  ROOT %exp.0 = f32[4]{0} exponential(%param_0), metadata={op_type="exp" op_name="jit(f)/exp" source_file="model.py" source_line=3 stack_frame_id=1}
}

ENTRY %main.1 (x.1: f32[4]) -> f32[4] {
  %x.1 = f32[4]{0} parameter(0), sharding={replicated}, metadata={op_name="x"}
  ROOT %f = f32[4]{0} fusion(%x.1), kind=kLoop, calls=%fused_computation, backend_config={"outer_dimension_partitions":[],"flag":"}{"}
}, execution_thread="main"
""",
    "aliasing-and-donors": """HloModule m, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {1}, must-alias) }, buffer_donor={ (1, {0}) }

ENTRY %e {
  %p = f32[4] parameter(0)
  %q = (s32[2], f32[3]) parameter(1)
  %n = f32[4] negate(%p)
  %g = f32[3] get-tuple-element(%q), index=1
  ROOT %t = (f32[4], f32[3]) tuple(%n, %g)
}""",
    "custom-call-attributes": H + """%cmp (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %lt = pred[] compare(%a, %b), direction=LT
}

ENTRY %e {
  %p = f32[3,3]{1,0} parameter(0)
  %q = f32[3]{0} parameter(1)
  %lu = (f32[3,3]{0,1}, s32[3]{0}) custom-call(%p), custom_call_target="lapack_sgetrf_ffi", operand_layout_constraints={f32[3,3]{0,1}}, output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI, backend_config={alpha = 2.000000e+00 : f64, arr = dense<[1, 2]> : tensor<2xi32>}
  %s = f32[3]{0} custom-call(%q), custom_call_target="sorter", called_computations={%cmp}, custom_call_has_side_effect=true, schedule=SCHEDULE_LATEST, api_version=API_VERSION_STATUS_RETURNING_UNIFIED, backend_config="opaque\\x01bytes"
  %k = s32[2] custom-call(), custom_call_target="const", literal=s32[2] {1, 2}
  %l = s32[2]{0} custom-call(), custom_call_target="const", literal=s32[2]{0} {3, 4}
  ROOT %t = ((f32[3,3]{0,1}, s32[3]{0}), f32[3]{0}, s32[2], s32[2]{0}) tuple(%lu, %s, %k, %l)
}""",
    "windows-padding-slices-gather-scatter": H + ADD + """
ENTRY %e {
  %x = f32[1,6,6,2] parameter(0)
  %k = f32[3,3,2,4] parameter(1)
  %z = f32[] constant(0)
  %i = s32[2,1] parameter(2)
  %v = f32[5] parameter(3)
  %u = f32[2] parameter(4)
  %c = f32[1,3,3,4] convolution(%x, %k), window={size=3x3 stride=2x2 pad=1_1x0_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f, feature_group_count=1, batch_group_count=1, operand_precision={DEFAULT, HIGHEST}
  %w = f32[1,3,3,2] reduce-window(%x, %z), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=%add
  %pd = f32[1,8,16,2] pad(%x, %z), padding=0_0x1_1x0_0_2x0_0
  %sl = f32[1,3,6,1] slice(%x), slice={[0:1], [0:6:2], [0:6], [1:2]}
  %g = f32[2] gather(%v, %i), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1}, indices_are_sorted=true
  %sc = f32[5] scatter(%v, %i, %u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=false, to_apply=%add
  ROOT %t = (f32[1,3,3,4], f32[1,3,3,2], f32[1,8,16,2], f32[1,3,6,1], f32[2], f32[5]) tuple(%c, %w, %pd, %sl, %g, %sc)
}""",
    "control-flow-and-predecessors": H + """%cond (s: s32[]) -> pred[] {
  %s = s32[] parameter(0)
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%s, %n), direction=LT, type=SIGNED
}

%body (s: s32[]) -> s32[] {
  %s = s32[] parameter(0)
  %one = s32[] constant(1)
  ROOT %next = s32[] add(%s, %one)
}

ENTRY %e {
  %p = s32[] parameter(0)
  %w = s32[] while(%p), condition=%cond, body=%body
  %b = s32[] conditional(%w, %p, %p), branch_computations={%body, %body}
  %d = s32[] call(%b), to_apply=%body, is_composite=false
  ROOT %r = s32[] negate(%d), control-predecessors={%w, %b}
}""",
    "random-and-misc-attributes": H + """ENTRY %e {
  %s = u64[2] parameter(0)
  %a = f32[] parameter(1)
  %r = (u64[2], u32[4]) rng-bit-generator(%s), algorithm=rng_three_fry
  %n = f32[4] rng(%a, %a), distribution=rng_normal
  %x = f32[4] reduce-precision(%n), exponent_bits=5, mantissa_bits=10
  %io = s32[4,2] iota(), iota_dimension=1
  %bn = (f32[4,1], f32[1], f32[1]) batch-norm-training(f32[4,1] reshape(%x), f32[1] reshape(%a), f32[1] reshape(%a)), epsilon=0.001, feature_index=1
  ROOT %t = ((u64[2], u32[4]), f32[4], s32[4,2], (f32[4,1], f32[1], f32[1])) tuple(%r, %x, %io, %bn)
}""",
    "forward-computation-reference": H + """ENTRY %e {
  %p = f32[] parameter(0)
  ROOT %c = f32[] call(%p, %p), to_apply=%add
}

""" + ADD,
}


@pytest.mark.parametrize("text", CONSTRUCTS.values(), ids=CONSTRUCTS.keys())
def test_construct_parses_verifies_and_round_trips(text):
    module = runtime.parse(text)
    printed = module.to_text()
    again = runtime.parse(printed)
    assert again.to_text() == printed
    assert [c.name for c in again.computations] == [c.name for c in module.computations]
    assert [i.shape for i in again.instructions()] == [i.shape for i in module.instructions()]


def test_printed_form_is_canonical():
    printed = runtime.parse(CONSTRUCTS["seed-increment"]).to_text()
    assert printed == (
        "HloModule increment, input_output_alias={ {}: (0, {}, may-alias) }\n\n"
        "ENTRY %entry (p: f32[]) -> f32[] {\n"
        "  %p = f32[] parameter(0)\n"
        "  %c = f32[] constant(1)\n"
        "  ROOT %out = f32[] add(%p, %c)\n"
        "}\n")


def test_printing_names_inferred_shapes_and_nested_instructions():
    printed = runtime.parse(CONSTRUCTS["nested-operand-instructions"]).to_text()
    assert "  %negate.anon = f32[4] negate(%x)\n" in printed
    assert "  %sqrt.anon = f32[4] sqrt(%negate.anon)\n" in printed
    assert "  %exponential.anon = f32[4] exponential(%y)\n" in printed
    assert "  ROOT %r = f32[4] add(%sqrt.anon, %exponential.anon)\n" in printed


def test_printing_keeps_stack_frames_metadata_and_backend_config_verbatim():
    text = CONSTRUCTS["xla-optimised-dump"]
    printed = runtime.parse(text).to_text()
    for piece in ('FileNames\n1 "model.py"', "StackFrames\n1 {file_location_id=1 parent_frame_id=1}",
                  'metadata={op_type="exp" op_name="jit(f)/exp" source_file="model.py" '
                  'source_line=3 stack_frame_id=1}',
                  'backend_config={"outer_dimension_partitions":[],"flag":"}{"}',
                  '}, execution_thread="main"', "sharding={replicated}", "is_scheduled=true",
                  'frontend_attributes={fingerprint_before_lhs="abc"}'):
        assert piece in printed


def test_printing_inline_computation_moves_it_before_its_caller():
    printed = runtime.parse(CONSTRUCTS["inline-computation"]).to_text()
    assert printed.index("%_ (a: f32[], b: f32[]) -> f32[] {") < printed.index("ENTRY %e")
    assert "to_apply=%_" in printed


def test_printed_floats_are_the_shortest_text_of_their_type():
    m = parse(H + "ENTRY %e {\n  %a = f32[3] constant({0.1, 1e-30, 3})\n"
              "  %b = bf16[2] constant({0.1, 1.00390625})\n  %c = f64[1] constant({0.1})\n"
              "  ROOT %t = (f32[3], bf16[2], f64[1]) tuple(%a, %b, %c)\n}")
    printed = m.to_text()
    assert "f32[3] constant({0.1, 1e-30, 3})" in printed
    assert "bf16[2] constant({0.1, 1})" in printed
    assert "f64[1] constant({0.1})" in printed
