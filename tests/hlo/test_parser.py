"""What the parser builds: the IR values behind each construct of the grammar."""

import math

import ml_dtypes
import numpy as np
import pytest

import runtime
from runtime.errors import HloParseError
from runtime.hlo import AliasEntry, BufferDonor, parse_shape
from runtime.hlo.attributes import BackendConfig, Identifier, RawText

H = "HloModule m\n\n"

ADD = """%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
"""


def constant(shape: str, literal: str) -> np.ndarray:
    """The value of ``shape constant(literal)`` as parsed."""
    m = runtime.parse(f"{H}ENTRY %e {{\n  ROOT %c = {shape} constant({literal})\n}}")
    return m.entry.root.literal.numpy()


def bits(a: np.ndarray, uint) -> list[int]:
    return [int(v) for v in np.asarray(a).view(uint).ravel()]


# --- literals -----------------------------------------------------------------------------

def test_float_literals_round_to_their_type():
    assert constant("bf16[2]", "{1.00390625, 1.01171875}").tolist() == [1.0, 1.015625]
    assert constant("f16[]", "65520").item() == math.inf           # overflow rounds to inf
    assert constant("f32[3]", "{1e-3, .5, 2.}").tolist() == pytest.approx([1e-3, 0.5, 2.0])
    assert constant("f8e4m3fn[2]", "{448, 0.3}").astype(np.float32).tolist() == [448.0, 0.3125]


def test_nan_payloads_are_kept_bit_for_bit():
    assert bits(constant("f32[4]", "{nan, -nan, nan(0x1f), -nan(0x7)}"), np.uint32) == [
        0x7FC00000, 0xFFC00000, 0x7F80001F, 0xFF800007]
    assert bits(constant("f64[1]", "{nan(0x123456789)}"), np.uint64) == [0x7FF0000123456789]
    assert bits(constant("f16[1]", "{nan(0x1)}"), np.uint16) == [0x7C01]
    assert bits(constant("bf16[1]", "{-nan(0x3)}"), np.uint16) == [0xFF83]
    assert bits(constant("c64[1]", "{(nan(0x5), 1)}"), np.uint32) == [0x7F800005, 0x3F800000]


def test_nan_payload_that_does_not_fit_is_a_located_error():
    with pytest.raises(HloParseError) as info:
        constant("f16[2]", "{1, nan(0x400)}")
    assert "does not fit the 10-bit mantissa of f16" in info.value.message
    assert info.value.column == len("  ROOT %c = f16[2] constant({1, ") + 1


def test_complex_literals():
    assert constant("c64[]", "(1, -2.5)").item() == 1 - 2.5j
    np.testing.assert_array_equal(constant("c128[2,1]", "{ {(1e300, 0)}, {(-0.5, inf)} }"),
                                  np.array([[1e300 + 0j], [complex(-0.5, math.inf)]]))


def test_integer_and_pred_literals():
    assert constant("u64[2]", "{18446744073709551615, 0}").tolist() == [2**64 - 1, 0]
    assert constant("s64[]", "-9223372036854775808").item() == -2**63
    assert constant("pred[4]", "{true, false, 1, 0}").tolist() == [True, False, True, False]
    assert constant("s4[3]", "{-8, 7, 0}").tolist() == [-8, 7, 0]
    assert constant("s4[3]", "{-8, 7, 0}").dtype == ml_dtypes.int4
    assert constant("u1[2]", "{1, 0}").tolist() == [1, 0]
    assert constant("s32[2,0]", "{ {}, {} }").shape == (2, 0)


def test_bare_value_for_an_array_is_its_first_element_not_a_broadcast():
    """XLA's HloParser (jaxlib 0.10.2 runs these) stops an unbraced dense literal after one
    value: element 0 in row-major order, zeros elsewhere, whatever the layout."""
    m = runtime.parse(f"{H}ENTRY %e {{\n  ROOT %c = f32[4] constant(7)\n}}")
    assert m.entry.root.literal.numpy().tolist() == [7, 0, 0, 0]
    assert m.warnings == ["line 4: constant c of shape f32[4] has one value without braces: XLA "
                          "reads it as the first element and zeros elsewhere, not as a broadcast"]
    assert constant("f32[2,3]{0,1}", "5").tolist() == [[5, 0, 0], [0, 0, 0]]
    assert constant("pred[3]", "true").tolist() == [True, False, False]
    assert constant("s4[3]", "-3").tolist() == [-3, 0, 0]
    assert bits(constant("f32[2]", "-nan(0x7)"), np.uint32) == [0xFF800007, 0]
    m = runtime.parse(H + "ENTRY %e {\n  ROOT %c = (f32[2], s32[]) constant((4, 2))\n}")
    assert m.entry.root.literal.elements[0].numpy().tolist() == [4, 0]


def test_tuple_literal_elements_have_their_own_shapes():
    m = runtime.parse(H + "ENTRY %e {\n  ROOT %c = (f32[], (s32[2], pred[])) constant((1.5, ({2, 3}, true)))\n}")
    lit = m.entry.root.literal
    assert lit.elements[0].numpy().item() == 1.5
    assert lit.elements[1].elements[0].numpy().tolist() == [2, 3]
    assert lit.elements[1].elements[1].numpy().item() is True


def test_elided_constant_has_no_values_and_warns_at_parse_time():
    m = runtime.parse(H + "ENTRY %e {\n  %c = f32[20] constant({...})\n  ROOT %n = f32[20] negate(%c)\n}",
                      verify=False)
    assert m.entry.instructions[0].literal.elided
    assert m.entry.instructions[0].literal.data is None
    assert m.warnings == ["line 4: constant c was printed elided as {...}: its values are unknown "
                          "(XLA would silently use zeros), so it runs only with "
                          "elided_constants='zeros' or 'random' (--elided)"]


# --- module structure -----------------------------------------------------------------------

def test_seed_short_alias_form_means_whole_output_may_alias_parameter_0():
    m = runtime.parse("HloModule increment, input_output_alias={ {}: 0 }\n\nENTRY entry {\n"
                      "  %p = f32[] parameter(0)\n  %c = f32[] constant(1)\n"
                      "  ROOT %out = f32[] add(%p, %c)\n}")
    assert m.input_output_alias == [AliasEntry((), 0, (), "may-alias")]
    assert m.input_output_alias[0].short_form


def test_alias_and_donor_entries():
    m = runtime.parse("HloModule m, input_output_alias={ {0}: (0, {}, must-alias), {1}: (1, {1}) }, "
                      "buffer_donor={ (1, {0}) }\nENTRY %e {\n  %p = f32[4] parameter(0)\n"
                      "  %q = (s32[2], f32[3]) parameter(1)\n  %g = f32[3] get-tuple-element(%q), index=1\n"
                      "  ROOT %t = (f32[4], f32[3]) tuple(%p, %g)\n}")
    assert m.input_output_alias == [AliasEntry((0,), 0, (), "must-alias"),
                                    AliasEntry((1,), 1, (1,), "may-alias")]
    assert m.buffer_donors == [BufferDonor(1, (0,))]
    assert m.input_output_alias[1].location.line == 1


def test_header_attributes():
    m = runtime.parse("HloModule m, is_scheduled=true, replica_count=1, num_partitions=1, "
                      "alias_passthrough_params=true, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{1,0}}, "
                      'frontend_attributes={a="b"}, some_new_flag={x}\n'
                      "ENTRY %e {\n  %p = f32[2,3]{1,0} parameter(0)\n  ROOT %n = f32[2,3] negate(%p)\n}")
    assert m.is_scheduled
    assert m.header_attrs["replica_count"] == 1 and m.header_attrs["alias_passthrough_params"] is True
    params, result = m.entry_computation_layout
    assert params == (parse_shape("f32[2,3]{0,1}"),) and result == parse_shape("f32[2,3]{1,0}")
    assert m.header_attrs["frontend_attributes"] == RawText('{a="b"}')
    assert m.warnings == ["line 1: unknown module attribute 'some_new_flag' kept verbatim and ignored"]


def test_entry_is_the_last_computation_and_root_the_last_instruction_by_default():
    m = runtime.parse(ADD + "%main {\n  %x = f32[] parameter(0)\n  %y = f32[] negate(%x)\n}")
    assert m.name == "module_main"
    assert m.entry.name == "main" and m.entry.is_entry
    assert m.entry.root.name == "y"


def test_computations_are_ordered_callees_first_even_when_written_after():
    m = runtime.parse(H + "ENTRY %e {\n  %p = f32[] parameter(0)\n  ROOT %c = f32[] call(%p, %p), to_apply=%add\n}\n" + ADD)
    assert [c.name for c in m.computations] == ["add", "e"]
    assert m.entry.root.called_computations == [m.computation("add")]


def test_inline_computation_becomes_a_named_computation():
    m = runtime.parse(H + "ENTRY %e {\n  %p = f32[4] parameter(0)\n  %z = f32[] constant(0)\n"
                      "  ROOT %r = f32[] reduce(%p, %z), dimensions={0}, to_apply={ a = f32[] parameter(0) "
                      "b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n}")
    reducer = m.entry.root.attrs["to_apply"]
    assert reducer.name == "_" and m.computations[0] is reducer
    assert [i.opcode for i in reducer.instructions] == ["parameter", "parameter", "add"]


def test_nested_operand_instructions_are_defined_before_their_user():
    m = runtime.parse(H + "ENTRY %e {\n  %x = f32[4] parameter(0)\n  %y = f32[4] parameter(1)\n"
                      "  ROOT %r = add(f32[4] sqrt(%x), %y)\n}")
    names = [i.name for i in m.entry.instructions]
    assert names == ["x", "y", "sqrt.anon", "r"]
    assert [o.name for o in m.entry.root.operands] == ["sqrt.anon", "y"]
    assert m.entry.root.shape == parse_shape("f32[4]")


def test_operand_shape_prefix_is_checked():
    with pytest.raises(HloParseError) as info:
        runtime.parse(H + "ENTRY %e {\n  %x = f32[4] parameter(0)\n  ROOT %r = f32[4] negate(f32[5] %x)\n}")
    assert "declared operand shape f32[5] is not compatible with the shape of x, f32[4]" in info.value.message
    assert (info.value.line, info.value.column) == (5, 27)


def test_signature_parameters_and_result_are_kept():
    m = runtime.parse(ADD + "ENTRY %e (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  ROOT %n = f32[] negate(%x)\n}")
    sig = m.computation("add").signature
    assert [(p.name, p.shape.to_text()) for p in sig.parameters] == [("a", "f32[]"), ("b", "f32[]")]
    assert sig.result.shape == parse_shape("f32[]")


def test_stack_frames_and_execution_thread():
    text = ('HloModule m\n\nFileNames\n1 "a.py"\n\nFunctionNames\n1 "f"\n\nFileLocations\n'
            "1 {file_name_id=1 function_name_id=1 line=1 end_line=1 column=0 end_column=1}\n\n"
            "StackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\n"
            'ENTRY %e {\n  ROOT %p = f32[] parameter(0)\n}, execution_thread="main"\n')
    m = runtime.parse(text)
    assert m.stack_frames.startswith('FileNames\n1 "a.py"') and m.stack_frames.endswith("parent_frame_id=1}")
    assert m.entry.execution_thread == "main"


def test_comments_are_skipped_everywhere():
    m = runtime.parse("// c\nHloModule /*x*/ m // y\nENTRY /*a*/ %e { // z\n"
                      "  %p /*b*/ = f32[2] parameter(/*c*/0)\n"
                      "  ROOT %t = (f32[2], f32[2]) tuple(%p, /*index=1*/%p) // w\n} // end")
    assert [i.name for i in m.entry.instructions] == ["p", "t"]


def test_windows_line_ends_tabs_and_byte_order_mark():
    m = runtime.parse("\ufeffHloModule m\r\n\r\nENTRY %e {\r\n\t%p = f32[] parameter(0)\r\n"
                      "\tROOT %n = f32[] negate(%p)\r\n}\r\n")
    assert m.entry.root.location.line == 5
    with pytest.raises(HloParseError) as info:
        runtime.parse("HloModule m\r\nENTRY %e {\r\n\t%p = f32[] paramter(0)\r\n}")
    assert (info.value.line, info.value.column, info.value.source_line) == (
        3, 13, "\t%p = f32[] paramter(0)")


def test_names_without_percent_and_without_spaces():
    m = runtime.parse("ENTRY e {\n  x=f32[4] parameter(0)\n  ROOT y=f32[4] negate(x)\n}")
    assert [(i.name, i.opcode) for i in m.entry.instructions] == [("x", "parameter"), ("y", "negate")]


# --- attributes -----------------------------------------------------------------------------

def test_string_attributes_are_unescaped():
    m = runtime.parse(H + "ENTRY %e {\n  %p = f32[4] parameter(0)\n  ROOT %c = f32[4] custom-call(%p), "
                      'custom_call_target="a\\"b\\\\c\\n\\x41", backend_config=\'it\\\'s\'\n}')
    attrs = m.entry.root.attrs
    assert attrs["custom_call_target"] == 'a"b\\c\nA'
    assert attrs["backend_config"] == BackendConfig("it's", quoted=True)
    assert attrs["backend_config"].opaque == b"it's"


def test_custom_call_attributes():
    m = runtime.parse(H + "ENTRY %e {\n  %p = f32[3,3]{1,0} parameter(0)\n"
                      '  ROOT %lu = (f32[3,3]{0,1}, s32[3]) custom-call(%p), custom_call_target="getrf", '
                      "operand_layout_constraints={f32[3,3]{0,1}}, output_to_operand_aliasing={{0}: (0, {})}, "
                      "api_version=API_VERSION_TYPED_FFI, backend_config={n = 3 : i64}, "
                      "custom_call_has_side_effect=true, literal=s32[2] {7, 8}\n}")
    attrs = m.entry.root.attrs
    assert attrs["operand_layout_constraints"] == (parse_shape("f32[3,3]{0,1}"),)
    aliasing = attrs["output_to_operand_aliasing"].entries[0]
    assert (aliasing.output_index, aliasing.operand_number, aliasing.operand_index) == ((0,), 0, ())
    assert attrs["api_version"] == Identifier("API_VERSION_TYPED_FFI")
    assert attrs["backend_config"] == BackendConfig("{n = 3 : i64}", quoted=False)
    assert attrs["custom_call_has_side_effect"] is True
    assert attrs["literal"].literal.numpy().tolist() == [7, 8]
    assert attrs["literal"].literal.shape == parse_shape("s32[2]")


def test_window_dim_labels_padding_and_slice_values():
    m = runtime.parse(H + ADD + "ENTRY %e {\n  %x = f32[1,6,6,2] parameter(0)\n  %k = f32[3,3,2,4] parameter(1)\n"
                      "  %z = f32[] constant(0)\n"
                      "  %c = f32[1,3,3,4] convolution(%x, %k), window={size=3x3 stride=2x2 pad=1_1x0_1 "
                      "rhs_reversal=0x1}, dim_labels=b01f_01io->b01f\n"
                      "  %p = f32[1,8,16,2] pad(%x, %z), padding=0_0x1_1x0_0_2x0_0\n"
                      "  ROOT %s = f32[1,3,6,1] slice(%x), slice={[0:1], [0:6:2], [0:6], [1:2]}\n}")
    conv, pad, sl = (m.entry.instructions[i] for i in (3, 4, 5))
    w = conv.attrs["window"].dims
    assert [(d.size, d.stride, d.pad_low, d.pad_high, d.reversal) for d in w] == [
        (3, 2, 1, 1, False), (3, 2, 0, 1, True)]
    dn = conv.attrs["dim_labels"]
    assert (dn.input_batch, dn.input_feature, dn.input_spatial) == (0, 3, (1, 2))
    assert (dn.kernel_input_feature, dn.kernel_output_feature, dn.kernel_spatial) == (2, 3, (0, 1))
    assert [(d.low, d.high, d.interior) for d in pad.attrs["padding"].dims] == [
        (0, 0, 0), (1, 1, 0), (0, 0, 2), (0, 0, 0)]
    assert [(d.start, d.limit, d.stride) for d in sl.attrs["slice"].dims] == [
        (0, 1, 1), (0, 6, 2), (0, 6, 1), (1, 2, 1)]


def test_metadata_fields_and_control_predecessors():
    m = runtime.parse(H + "ENTRY %e {\n  %p = f32[] parameter(0)\n  %q = f32[] negate(%p)\n"
                      '  ROOT %r = f32[] negate(%p), metadata={op_type="neg" op_name="jit(f)/neg" '
                      "source_line=12}, control-predecessors={%q}\n}")
    root = m.entry.root
    assert root.attrs["metadata"].fields == {"op_type": "neg", "op_name": "jit(f)/neg", "source_line": "12"}
    assert root.control_predecessors == [m.entry.instructions[1]]


def test_shapes_layouts_and_dynamic_dimensions():
    tiled = parse_shape("f32[8,128]{1,0:T(8,128)(2,1)E(4)S(1)}")
    assert tiled.layout.minor_to_major == (1, 0)
    assert tiled.layout.tail == "T(8,128)(2,1)E(4)S(1)"
    assert (tiled.layout.element_size_bits, tiled.layout.memory_space, tiled.layout.is_tiled) == (4, 1, True)
    dyn = parse_shape("f32[<=8,?,3]")
    assert (dyn.dims, dyn.dynamic) == ((8, -1, 3), (True, True, False))
    assert parse_shape("(f32[2]{0}, (s32[], token[]))").to_text() == "(f32[2]{0}, (s32[], token[]))"


def test_parse_shape_rejects_trailing_text():
    with pytest.raises(HloParseError) as info:
        parse_shape("f32[2] x")
    assert (info.value.message, info.value.column) == ("unexpected 'x' after the shape", 8)
