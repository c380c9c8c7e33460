"""One malformed module per kind of mistake: the exception class, where it points, what it says.

Each text marks the expected error position with ``@@`` (removed before parsing), so a case
reads as "the caret belongs here" and the line and column are checked exactly.
"""

import pytest

import runtime
from runtime.errors import HloParseError, HloVerifyError

MARK = "@@"

ADD = """%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
"""

LESS = """%less (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %lt = pred[] compare(%a, %b), direction=LT
}
"""


def entry(body: str, header: str = "", before: str = "") -> str:
    """A module whose entry computation has ``body`` (instructions, one per line)."""
    lines = "\n".join("  " + line.strip() for line in body.strip().splitlines())
    return f"HloModule m{header}\n\n{before}\nENTRY %e {{\n{lines}\n}}\n"


def marked(text: str) -> tuple[str, int, int]:
    """The text without its marker, and the marker's 1-based line and column."""
    at = text.index(MARK)
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return text.replace(MARK, "", 1), line, column


P = HloParseError
V = HloVerifyError

CASES = [
    # --- lexing ---------------------------------------------------------------------------
    ("bad-character", entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] negate(@@$p)"),
     P, "unexpected character '$'"),
    ("unterminated-string", entry('%p = f32[4] parameter(0), metadata={op_name=@@"abc}'),
     P, "unterminated string"),
    ("unterminated-comment", "HloModule m\n@@/* no end\nENTRY %e { %p = f32[] parameter(0) }",
     P, "unterminated block comment"),
    ("nul-byte", "HloModule m\nENTRY %e {\n  %p = f32[]@@\0 parameter(0)\n}", P, "NUL byte"),
    ("lone-slash", entry("%p = f32[] parameter(0) @@/ oops"), P, "unexpected '/'"),
    ("hex-integer", entry("%p = f32[] parameter(@@0x1)"), P,
     "expects parameter number but sees '0x1'"),
    # --- syntax ---------------------------------------------------------------------------
    ("empty-text", "@@", P, "the text has neither"),
    ("only-comments", "// nothing here\n/* at all */ @@", P, "it is empty or only comments"),
    ("missing-equals", entry("%p @@f32[] parameter(0)"), P, "expects '=' in instruction"),
    ("missing-paren", "HloModule m\nENTRY %e {\n  %p = f32[] parameter(0)\n"
     "  ROOT %r = f32[] negate(%p\n@@}", P, "expects ')' to close the operands of negate but sees '}'"),
    ("missing-brace", "HloModule m\nENTRY %e {\n  %p = f32[] parameter(0)\n@@", P,
     "expects '}' to close computation e"),
    ("bad-shape", entry("%p = f32[4 @@parameter(0)"), P, "expects ']' to close the dimensions"),
    ("negative-dimension", entry("%p = f32[@@-4] parameter(0)"), P,
     "dimension size must be between 0 and 2^63-1"),
    ("layout-rank", entry("%p = f32[4]@@{1,0} parameter(0)"), P,
     "Dimensions size is 1, but minor to major size is 2"),
    ("layout-permutation", entry("%p = f32[4,4]@@{1,1} parameter(0)"), P, "not a permutation"),
    ("literal-count", entry("%c = f32[3] constant({1, 2@@})"), P,
     "expects 3 elements in the []th element, but sees 2"),
    ("literal-nesting", entry("%c = f32[2,2] constant({@@1, 2})"), P,
     "expects nested array in rank 2, but sees 1"),
    ("literal-bare-value-empty-array", entry("%c = f32[0] constant(@@1)"), P,
     "expects nested array in rank 1, but sees 0"),
    ("literal-bare-value-range", entry("%c = u8[3] constant(@@300)"), P,
     "value 300 is out of range for literal's primitive type U8 namely [0, 255]."),
    ("literal-range", entry("%c = s8[] constant(@@128)"), P,
     "value 128 is out of range for literal's primitive type S8 namely [-128, 127]."),
    ("literal-token", entry("%c = f32[] constant(@@=)"), P, "unexpected token type in a literal"),
    ("literal-complex-parens", entry("%c = f32[2] constant({@@(1, 2), 3})"), P,
     "parenthesised values are only valid for complex types"),
    ("constant-without-shape", entry("%c = @@constant(1)"), P, "constant needs its shape"),
    ("shape-required", entry("%p = f32[4] parameter(0)\nROOT %r = @@reshape(%p)"), P,
     "reshape needs its result shape written"),
    ("header-duplicate", "HloModule m, is_scheduled=true, @@is_scheduled=false\n"
     "ENTRY %e { ROOT %p = f32[] parameter(0) }", P, "attribute is_scheduled already exists"),
    ("alias-format", "HloModule m, input_output_alias={ {}: @@x }\n"
     "ENTRY %e { ROOT %p = f32[] parameter(0) }", P,
     "Expected format: <output_shape_index>: (<input_param>, <input_param_shape_index>) OR "
     "<output_shape_index>: <input_param>"),
    ("deep-nesting", entry("%p = " + "(" * 70 + "f32[]" + ")" * 70 + " parameter(0)")
     .replace("(" * 65, "(" * 64 + MARK + "(", 1), P, "deeper than 64 levels"),
    # --- opcodes and attributes -----------------------------------------------------------
    ("unknown-opcode", entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] @@nagate(%p)"), P,
     "unknown opcode: nagate"),
    ("unknown-attribute", entry("%p = f32[4] parameter(0)\n"
                                "ROOT %r = f32[4] add(%p, %p), @@dimensions={0}"), P,
     'unexpected attribute "dimensions" for add. Allowed attributes:'),
    ("duplicate-attribute", entry("%p = f32[4] parameter(0)\n"
                                  "ROOT %r = f32[4] reverse(%p), dimensions={0}, @@dimensions={0}"),
     P, "attribute dimensions already exists"),
    ("missing-attribute", entry("%p = f32[4,2] parameter(0)\nROOT %r = f32[2,4] @@transpose(%p)"),
     P, "attribute dimensions is expected but not seen"),
    ("bad-enum-value", entry("%p = f32[4] parameter(0)\n"
                             "ROOT %r = pred[4] compare(%p, %p), direction=@@EQQ"), P,
     "unexpected value EQQ for attribute direction"),
    ("bad-attribute-value", entry("%p = f32[4] parameter(0)\n"
                                  "ROOT %r = f32[4] reverse(%p), dimensions=@@0"), P,
     "expects '{' to open a list of integers"),
    ("arity", entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] @@negate(%p, %p)"), P,
     "negate expects 1 operands, but has 2 operands"),
    # --- names ----------------------------------------------------------------------------
    ("undefined-operand", entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] add(%p, @@%q)"), P,
     "instruction does not exist: q"),
    ("use-before-definition", entry("ROOT %r = f32[4] negate(@@%p)\n%p = f32[4] parameter(0)"),
     P, "instruction does not exist: p"),
    ("undefined-control-predecessor", entry(
        "%p = f32[4] parameter(0)\nROOT %r = f32[4] negate(%p), control-predecessors={@@%z}"), P,
     "instruction does not exist: z"),
    ("duplicate-instruction", entry("%p = f32[4] parameter(0)\n@@%p = f32[4] parameter(1)"), P,
     "instruction already exists: p"),
    ("duplicate-computation", "HloModule m\n" + ADD + "\n@@%add { ROOT %x = f32[] parameter(0) }\n"
     "ENTRY %e { ROOT %p = f32[] parameter(0) }", P, "computation already exists: add"),
    ("two-entries", "HloModule m\nENTRY %e1 { ROOT %p = f32[] parameter(0) }\n"
     "@@ENTRY %e2 { ROOT %p = f32[] parameter(0) }", P, "expects only one ENTRY"),
    ("two-roots", entry("ROOT %p = f32[] parameter(0)\n@@ROOT %q = f32[] negate(%p)"), P,
     "one computation should have only one ROOT"),
    ("unknown-computation", entry(
        "%p = f32[4] parameter(0)\n%z = f32[] constant(0)\n"
        "ROOT %r = f32[] reduce(%p, %z), dimensions={0}, to_apply=@@%ad", before=ADD), P,
     "computation does not exist: ad"),
    ("recursion", "HloModule m\n@@%f (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"
     "  ROOT %c = f32[] call(%x), to_apply=%f\n}\n"
     "ENTRY %e { %p = f32[] parameter(0)\n ROOT %r = f32[] call(%p), to_apply=%f }", P,
     "computation f calls itself"),
    # --- parameters and signatures (verifier) ---------------------------------------------
    ("parameter-gap", entry("%p = f32[] parameter(0)\n@@%q = f32[] parameter(2)\n"
                            "ROOT %t = (f32[], f32[]) tuple(%p, %q)"), V,
     "parameter(1) is missing"),
    ("parameter-twice", entry("%p = f32[] parameter(0)\n@@%q = f32[] parameter(0)\n"
                              "ROOT %t = (f32[], f32[]) tuple(%p, %q)"), V,
     "parameter number 0 is used twice"),
    ("signature-result", "HloModule m\nENTRY %e (x: f32[]) -> @@s32[] {\n"
     "  %x = f32[] parameter(0)\n  ROOT %n = f32[] negate(%x)\n}", V,
     "Shape of computation e, s32[], is not compatible with that of its root instruction n, f32[]"),
    # a signature's parameter list is not checked (XLA ignores it): tests/hlo/test_xla_forms.py
    # --- tuple elements as operands (``%t#0``) --------------------------------------------
    ("element-of-array", entry("%p = f32[] parameter(0)\nROOT %r = f32[] negate(%p#@@0)"), P,
     "'#0' names a tuple element, but p has the non-tuple shape f32[]"),
    ("element-out-of-bounds", entry("%p = (f32[], f32[]) parameter(0)\n"
                                    "ROOT %r = f32[] negate(%p#@@2)"), P,
     "tuple element index 2 is out of bounds for p of shape (f32[], f32[])"),
    ("element-negative", entry("%p = (f32[], f32[]) parameter(0)\n"
                               "ROOT %r = f32[] negate(%p#@@-1)"), P,
     "tuple element index -1 is out of bounds"),
    ("element-no-index", entry("%p = (f32[], f32[]) parameter(0)\n"
                               "ROOT %r = f32[] negate(%p#@@)"), P,
     "expects tuple element index after '#' but sees ')'"),
    ("element-declared-shape", entry("%p = (f32[], s32[]) parameter(0)\n"
                                     "ROOT %r = f32[] negate(@@f32[] %p#1)"), P,
     "the declared operand shape f32[] is not compatible with the shape of p_1, s32[]"),
    ("entry-layout", "HloModule m, @@entry_computation_layout={(f32[4]{0})->f32[2]{0}}\n"
     "ENTRY %e { %p = f32[4] parameter(0)\n ROOT %n = f32[4] negate(%p) }", V,
     "entry_computation_layout result is f32[2], but e returns f32[4]"),
    ("inferred-shape", entry("%p = f32[4] parameter(0)\n%q = f32[5] parameter(1)\n"
                             "ROOT @@%r = add(%p, %q)"), V,
     "add operands must have the same dimensions"),
    # --- shape mismatch per op family -----------------------------------------------------
    ("unary", entry("%p = f32[4] parameter(0)\nROOT @@%r = f32[5] negate(%p)"), V,
     "negate r has shape f32[5], but its operands give f32[4]"),
    ("unary-type", entry("%p = s32[4] parameter(0)\nROOT @@%r = s32[4] exponential(%p)"), V,
     "exponential expects a floating-point or complex operand"),
    ("binary-dims", entry("%p = f32[4] parameter(0)\n%q = f32[] parameter(1)\n"
                          "ROOT @@%r = f32[4] add(%p, %q)"), V, "no implicit broadcasting"),
    ("binary-type", entry("%p = f32[4] parameter(0)\n%q = s32[4] parameter(1)\n"
                          "ROOT @@%r = f32[4] multiply(%p, %q)"), V,
     "multiply operands must have the same element type: f32 vs s32"),
    ("compare", entry("%p = f32[4] parameter(0)\n%q = f32[3] parameter(1)\n"
                      "ROOT @@%r = pred[4] compare(%p, %q), direction=LT"), V,
     "compare operands must have the same dimensions"),
    ("select", entry("%c = s32[4] parameter(0)\n%p = f32[4] parameter(1)\n"
                     "ROOT @@%r = f32[4] select(%c, %p, %p)"), V, "select's predicate must be pred"),
    ("clamp", entry("%lo = f32[3] parameter(0)\n%p = f32[4] parameter(1)\n"
                    "ROOT @@%r = f32[4] clamp(%lo, %p, %lo)"), V,
     "clamp's min f32[3] must be a scalar or match f32[4]"),
    ("convert", entry("%p = f32[4] parameter(0)\nROOT @@%r = s32[5] convert(%p)"), V,
     "convert cannot change dimensions"),
    ("bitcast-convert", entry("%p = f32[4] parameter(0)\nROOT @@%r = u8[4] bitcast-convert(%p)"), V,
     "does not preserve the bytes"),
    ("bitcast", entry("%p = f32[4] parameter(0)\nROOT @@%r = f32[5] bitcast(%p)"), V,
     "changes the byte size"),
    ("broadcast", entry("%p = f32[3] parameter(0)\n"
                        "ROOT @@%r = f32[4,2] broadcast(%p), dimensions={0}"), V,
     "broadcast operand dimension 0 has size 3, but output dimension 0 has size 4"),
    ("reshape", entry("%p = f32[4,2] parameter(0)\nROOT @@%r = f32[9] reshape(%p)"), V,
     "changes the element count (8 to 9)"),
    ("transpose", entry("%p = f32[4,2] parameter(0)\n"
                        "ROOT @@%r = f32[2,4] transpose(%p), dimensions={0,0}"), V,
     "not a permutation"),
    ("iota", entry("ROOT @@%r = s32[4] iota(), iota_dimension=1"), V,
     "iota_dimension 1 is out of range"),
    ("slice", entry("%p = f32[4] parameter(0)\nROOT @@%r = f32[3] slice(%p), slice={[2:5]}"), V,
     "slice [2:5] is out of bounds for dimension 0 of size 4"),
    ("dynamic-slice", entry("%p = f32[4,4] parameter(0)\n%i = s32[] parameter(1)\n"
                            "ROOT @@%r = f32[2,2] dynamic-slice(%p, %i), "
                            "dynamic_slice_sizes={2,2}"), V, "expects 2 start indices"),
    ("dynamic-update-slice", entry("%p = f32[4] parameter(0)\n%u = f32[5] parameter(1)\n"
                                   "%i = s32[] parameter(2)\n"
                                   "ROOT @@%r = f32[4] dynamic-update-slice(%p, %u, %i)"), V,
     "update dimension 0 (5) exceeds the operand's 4"),
    ("concatenate", entry("%p = f32[4,2] parameter(0)\n%q = f32[4,3] parameter(1)\n"
                          "ROOT @@%r = f32[8,2] concatenate(%p, %q), dimensions={0}"), V,
     "concatenate operand 1 f32[4,3] does not match f32[4,2] outside dimension 0"),
    ("pad", entry("%p = f32[4] parameter(0)\n%z = f32[] constant(0)\n"
                  "ROOT @@%r = f32[6] pad(%p, %z), padding=1_1x1_1"), V,
     "padding has 2 dimensions for an operand of rank 1"),
    ("reverse", entry("%p = f32[4] parameter(0)\nROOT @@%r = f32[4] reverse(%p), dimensions={1}"),
     V, "reverse dimension 1 is out of range for rank 1"),
    ("gather", entry("%p = f32[5,3] parameter(0)\n%i = s32[2,1] parameter(1)\n"
                     "ROOT @@%r = f32[2,3] gather(%p, %i), offset_dims={1}, "
                     "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
                     "slice_sizes={1}"), V, "gather slice_sizes has 1 entries for an operand of rank 2"),
    ("scatter", entry("%p = f32[5] parameter(0)\n%i = s32[2,1] parameter(1)\n"
                      "%u = f32[2] parameter(2)\n"
                      "ROOT @@%r = f32[5] scatter(%p, %i, %u), update_window_dims={}, "
                      "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                      "index_vector_dim=1, to_apply=%less", before=LESS), V,
     "scatter combiner less returns pred[], expected f32[]"),
    ("reduce", entry("%p = f32[4] parameter(0)\n%z = s32[] constant(0)\n"
                     "ROOT @@%r = s32[] reduce(%p, %z), dimensions={0}, to_apply=%add",
                     before=ADD), V, "reducer add parameter 0 has shape f32[], but the caller passes s32[]"),
    ("reduce-window", entry("%p = f32[4] parameter(0)\n%z = f32[] constant(0)\n"
                            "ROOT @@%r = f32[2] reduce-window(%p, %z), window={size=2x2}, "
                            "to_apply=%add", before=ADD), V,
     "reduce-window window has 2 dimensions for an operand of rank 1"),
    ("select-and-scatter", entry("%p = f32[4] parameter(0)\n%s = f32[3] parameter(1)\n"
                                 "%z = f32[] constant(0)\n"
                                 "ROOT @@%r = f32[4] select-and-scatter(%p, %s, %z), "
                                 "window={size=2 stride=2}, select=%less, scatter=%add",
                                 before=ADD + LESS), V,
     "select-and-scatter source f32[3] must have the window output dimensions [2]"),
    ("dot", entry("%a = f32[2,3] parameter(0)\n%b = f32[4,5] parameter(1)\n"
                  "ROOT @@%r = f32[2,5] dot(%a, %b), lhs_contracting_dims={1}, "
                  "rhs_contracting_dims={0}"), V,
     "dot contracting dimensions differ: lhs dimension 1 has 3, rhs dimension 0 has 4"),
    ("convolution", entry("%x = f32[1,4,4,3] parameter(0)\n%k = f32[2,2,2,8] parameter(1)\n"
                          "ROOT @@%r = f32[1,3,3,8] convolution(%x, %k), window={size=2x2}, "
                          "dim_labels=b01f_01io->b01f"), V,
     "convolution input features (3) divided by feature_group_count (1) must equal the "
     "kernel's input features (2)"),
    ("sort", entry("%p = f32[4] parameter(0)\n"
                   "ROOT @@%r = f32[4] sort(%p), dimensions={0}, to_apply=%add", before=ADD), V,
     "comparator add returns f32[], expected pred[]"),
    ("map", entry("%p = f32[4] parameter(0)\n"
                  "ROOT @@%r = f32[4] map(%p), dimensions={0}, to_apply=%add", before=ADD), V,
     "mapped computation add takes 2 parameters, but 1 are passed"),
    ("while", entry("%p = f32[] parameter(0)\n"
                    "ROOT @@%r = f32[] while(%p), condition=%cond, body=%body",
                    before="%cond { %c = f32[] parameter(0)\n ROOT %t = pred[] constant(true) }\n"
                           "%body { %b = f32[] parameter(0)\n ROOT %x = s32[] constant(0) }\n"), V,
     "while body body returns s32[], expected f32[]"),
    ("conditional", entry("%i = s32[] parameter(0)\n%p = f32[] parameter(1)\n"
                          "ROOT @@%r = f32[] conditional(%i, %p, %p), "
                          "branch_computations={%b0, %b1}",
                          before="%b0 { %x = f32[] parameter(0)\n ROOT %y = f32[] negate(%x) }\n"
                                 "%b1 { %x = f32[] parameter(0)\n ROOT %y = pred[] constant(false) }\n"),
     V, "conditional branches return different shapes: f32[] vs pred[]"),
    ("call", entry("%p = s32[] parameter(0)\nROOT @@%r = f32[] call(%p, %p), to_apply=%add",
                   before=ADD), V,
     "called computation add parameter 0 has shape f32[], but the caller passes s32[]"),
    ("fusion", entry("%p = f32[] parameter(0)\n"
                     "ROOT @@%r = f32[] fusion(%p), kind=kLoop, calls=%add", before=ADD), V,
     "fused computation add takes 2 parameters, but 1 are passed"),
    ("get-tuple-element", entry("%p = (f32[], s32[]) parameter(0)\n"
                                "ROOT @@%r = f32[] get-tuple-element(%p), index=2"), V,
     "get-tuple-element index 2 is out of range for a tuple of 2 elements"),
    ("tuple", entry("%p = f32[] parameter(0)\nROOT @@%r = (f32[], f32[]) tuple(%p)"), V,
     "tuple r has shape (f32[], f32[]), but its operands give (f32[])"),
    # --- aliasing and donors (verifier) ---------------------------------------------------
    ("alias-size", entry("%p = f32[4] parameter(0)\nROOT %r = f32[8] concatenate(%p, %p), "
                         "dimensions={0}", header=", input_output_alias={ @@{}: (0, {}, may-alias) }"),
     V, "Expected aliased input 0 at index {} and output at index {} to have the same size. "
        "Input sub-shape is f32[4] with size 16, output sub-shape is f32[8] with size 32"),
    ("alias-parameter", entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] negate(%p)",
                              header=", input_output_alias={ @@{}: (3, {}) }"), V,
     "input_output_alias names parameter 3, but the entry computation has 1 parameters"),
    ("alias-output-index", entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] negate(%p)",
                                 header=", input_output_alias={ @@{1}: (0, {}) }"), V,
     "output index {1} is not valid for the entry result f32[4]"),
    ("alias-parameter-index", entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] negate(%p)",
                                    header=", input_output_alias={ @@{}: (0, {0}) }"), V,
     "parameter index {0} is not valid for parameter 0 of shape f32[4]"),
    ("alias-output-twice", entry("%p = f32[4] parameter(0)\n%q = f32[4] parameter(1)\n"
                                 "ROOT %r = f32[4] add(%p, %q)",
                                 header=", input_output_alias={ {}: 0, @@{}: (1, {}) }"), V,
     "output {} is aliased twice"),
    ("alias-short-form-size", entry("%p = f32[2] parameter(0)\nROOT %r = f32[4] concatenate(%p, %p), "
                                    "dimensions={0}", header=", input_output_alias={ @@{}: 0 }"),
     V, "to have the same size"),
    ("donor-parameter", entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] negate(%p)",
                              header=", buffer_donor={ @@(1, {}) }"), V,
     "buffer_donor names parameter 1, but the entry computation has 1 parameters"),
    ("donor-twice", entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] negate(%p)",
                          header=", buffer_donor={ (0, {}), @@(0, {}) }"), V,
     "buffer_donor lists parameter 0 at {} twice"),
]


@pytest.mark.parametrize("text, cls, fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error_class_location_and_message(text, cls, fragment):
    source, line, column = marked(text)
    with pytest.raises(cls) as info:
        runtime.parse(source)
    err = info.value
    assert type(err) is cls
    assert fragment in err.message
    assert (err.line, err.column) == (line, column), err.message
    assert err.source_line == source.split("\n")[line - 1]


def test_the_table_covers_at_least_forty_kinds():
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)


def test_verify_errors_name_the_instruction_and_computation():
    source, _, _ = marked(entry("%p = f32[4] parameter(0)\nROOT @@%r = f32[5] negate(%p)"))
    with pytest.raises(HloVerifyError) as info:
        runtime.parse(source)
    assert info.value.instruction == "r"
    assert info.value.computation == "e"
    assert (info.value.expected, info.value.got) == ("f32[4]", "f32[5]")


def test_parse_errors_name_the_instruction_and_computation():
    with pytest.raises(HloParseError) as info:
        runtime.parse(entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] add(%p, %q)"))
    assert (info.value.instruction, info.value.computation) == ("r", "e")


def test_undefined_operand_suggests_a_name_in_scope():
    with pytest.raises(HloParseError) as info:
        runtime.parse(entry("%param = f32[4] parameter(0)\nROOT %r = f32[4] negate(%parm)"))
    assert info.value.hint == "did you mean param?"


def test_unknown_opcode_suggests_the_closest_opcode():
    with pytest.raises(HloParseError) as info:
        runtime.parse(entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] nagate(%p)"))
    assert info.value.hint == "did you mean negate?"


def test_render_traceback_is_location_source_caret_then_class_and_message():
    source, line, column = marked(entry("%p = f32[4] parameter(0)\nROOT %r = f32[4] @@nagate(%p)"))
    with pytest.raises(HloParseError) as info:
        runtime.parse(source)
    lines = info.value._render_traceback_()
    assert lines[0] == f"line {line}:{column}, in computation e"
    assert lines[1] == "  " + source.splitlines()[line - 1]
    assert lines[2] == "  " + " " * (column - 1) + "^"
    assert lines[1][lines[2].index("^"):].startswith("nagate")
    assert lines[-2] == "hint: did you mean negate?"
    assert lines[-1] == "HloParseError: unknown opcode: nagate"
    assert len(lines) == 5


def test_render_traceback_of_a_verify_error_ends_with_its_class():
    with pytest.raises(HloVerifyError) as info:
        runtime.parse(entry("%p = f32[4] parameter(0)\nROOT %r = f32[5] negate(%p)"))
    lines = info.value._render_traceback_()
    assert lines[2].endswith("^") and lines[1].strip().startswith("ROOT %r")
    assert lines[-1] == "HloVerifyError: " + info.value.message


def test_str_of_an_error_starts_with_its_location():
    with pytest.raises(HloParseError) as info:
        runtime.parse("HloModule m\nENTRY %e {\n  %p = f32[] paramter(0)\n}")
    assert str(info.value).startswith("line 3:14, in computation e: unknown opcode: paramter")
