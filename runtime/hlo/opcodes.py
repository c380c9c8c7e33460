"""The opcode table: the single source of truth for what each HLO opcode accepts.

One row per opcode, keyed by its ``Opcode`` member: how many operands, which attributes it
allows and requires, whether its result shape may be omitted in text, whether it is
elementwise, which element-type classes its operands may have, its cost class, and its shape
rule; then the facts that cut across those families (a reducer's identity, forwarding, data
movement, epilogue-safe, the backend's reason for refusing it...), set by ``_set`` lines
after the rows. The parser, verifier, passes and code generator all read this table rather
than keep opcode lists of their own; adding an opcode adds a member and a row.

``ATTRIBUTE_KINDS`` says how each attribute's value is written, so the parser and printer have
one reader and one writer per kind rather than one per attribute.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable

from . import shape_inference as rules
from .opcode_enum import Opcode
from .shape import Shape

if TYPE_CHECKING:
    from .ir import HloInstruction

# infers (and checks) an instruction's shape; the verifier calls it
ShapeRule = Callable[["HloInstruction"], Shape]

# --- attribute value syntaxes -------------------------------------------------------------

ATTRIBUTE_KINDS: dict[str, str] = {
    # structural
    "dimensions": "int_list", "index": "int", "iota_dimension": "int", "slice": "slice",
    "dynamic_slice_sizes": "int_list", "padding": "padding", "window": "window",
    "dim_labels": "dim_labels", "feature_group_count": "int", "batch_group_count": "int",
    "lhs_contracting_dims": "int_list", "rhs_contracting_dims": "int_list",
    "lhs_batch_dims": "int_list", "rhs_batch_dims": "int_list",
    "lhs_ragged_dims": "int_list", "rhs_group_dims": "int_list",
    "operand_precision": "identifier_list", "algorithm": "identifier",
    "direction": "identifier", "type": "identifier", "order": "identifier", "kind": "identifier",
    "distribution": "identifier", "api_version": "identifier", "schedule": "identifier",
    "padding_type": "identifier", "fft_type": "identifier", "transpose_a": "identifier",
    # computations
    "to_apply": "computation", "calls": "computation", "condition": "computation",
    "body": "computation", "true_computation": "computation", "false_computation": "computation",
    "select": "computation", "scatter": "computation",
    "branch_computations": "computation_list", "called_computations": "computation_list",
    # custom call
    "custom_call_target": "string", "custom_call_has_side_effect": "bool",
    "output_to_operand_aliasing": "operand_aliasing", "operand_layout_constraints": "shape_list",
    "literal": "shaped_literal",
    # misc scalars
    "delta": "int", "exponent_bits": "int", "mantissa_bits": "int", "is_stable": "bool",
    "k": "int", "largest": "bool", "index_vector_dim": "int", "indices_are_sorted": "bool",
    "unique_indices": "bool", "epsilon": "float", "feature_index": "int", "left_side": "bool",
    "lower": "bool", "unit_diagonal": "bool", "is_composite": "bool",
    "inferred_dimension": "int", "channel_id": "int", "use_global_device_ids": "bool",
    "constrain_layout": "bool", "is_host_transfer": "bool", "cross_program_prefetch_index": "int",
    "fft_length": "int_list", "infeed_config": "string", "outfeed_config": "string",
    "outfeed_shape": "shape", "async_execution_thread": "string", "is_reverse": "bool",
    # gather / scatter
    "offset_dims": "int_list", "collapsed_slice_dims": "int_list", "start_index_map": "int_list",
    "slice_sizes": "int_list", "operand_batching_dims": "int_list",
    "start_indices_batching_dims": "int_list", "update_window_dims": "int_list",
    "inserted_window_dims": "int_list", "scatter_dims_to_operand_dims": "int_list",
    "input_batching_dims": "int_list", "scatter_indices_batching_dims": "int_list",
    # kept verbatim
    "sharding": "raw", "frontend_attributes": "raw", "statistics": "raw", "origin": "raw",
    "parameter_replication": "raw", "replica_groups": "replica_groups",
    "source_target_pairs": "raw",
    "result_accuracy": "raw", "domain": "raw", "split_dims": "raw",
    "metadata": "metadata", "backend_config": "backend_config",
    "control-predecessors": "instruction_list",
}

#: the words an enum-valued attribute may take (the parser checks them at the token, the
#: verifier on instructions built in code)
ATTRIBUTE_VALUES: dict[str, frozenset[str]] = {
    name: frozenset(words.split()) for name, words in {
        "direction": "EQ NE LT LE GT GE",
        "type": "FLOAT TOTALORDER SIGNED UNSIGNED",
        "order": "TOTAL PARTIAL",
        "kind": "kLoop kInput kOutput kCustom",
        "api_version": "API_VERSION_ORIGINAL API_VERSION_STATUS_RETURNING "
                       "API_VERSION_STATUS_RETURNING_UNIFIED API_VERSION_TYPED_FFI",
        "distribution": "rng_uniform rng_normal",
        "fft_type": "FFT IFFT RFFT IRFFT",
        "schedule": "SCHEDULE_NONE SCHEDULE_LATEST SCHEDULE_EARLIEST",
        "padding_type": "PADDING_VALID PADDING_SAME",
        "transpose_a": "NO_TRANSPOSE TRANSPOSE ADJOINT",
    }.items()
}

#: attributes any instruction may carry
COMMON_ATTRIBUTES = frozenset({
    "sharding", "frontend_attributes", "statistics", "control-predecessors", "origin",
    "metadata", "backend_config", "parameter_replication",
})

#: attributes whose values are computations (used to walk the call graph)
COMPUTATION_ATTRIBUTES = frozenset(
    name for name, kind in ATTRIBUTE_KINDS.items() if kind in ("computation", "computation_list"))


@dataclass(frozen=True)
class NanRule:
    """The NaN XLA's CPU backend (x86) gives for a float operation whose C library function
    may give another (PoCL's return a positive canonical NaN): a kernel computes the
    function, then makes a NaN result this one, so that bit patterns (a bitcast of the result,
    the sign of an 8-bit float's NaN) are XLA's. Measured with XLA's CPU backend on NaNs of
    both signs with payloads, signalling NaNs, infinities, zeros, +-1 and denormals."""

    # a NaN operand's result: "quiet" (its sign and payload with the quiet bit set, as x86's
    # arithmetic passes a NaN on), "negated" (quieted and its sign flipped: logistic is
    # 1 / (1 + exp(-x)) in XLA), "kept" (the template's NaN is XLA's but in ``one_nan_in``)
    operand: str = "quiet"
    # the NaN of an invalid operation on non-NaN operands (log(-1), sqrt(-1), sine(inf),
    # inf % 1): "negative" (x86's default NaN, 0xffc00000 in f32), "positive" (a NaN constant
    # of XLA's expansion: asin(2))
    invalid: str = "negative"
    # the operand whose NaN wins when both are NaN (atan2 tests its x first)
    first: int = 0
    # (format: "f16", "f32", "f64" or "f8", the 8-bit floats XLA computes through f16; the one
    # NaN every NaN result is in it instead): "all-ones" (Eigen's f32 log, which XLA uses, ORs
    # an all-ones mask into it), "positive" (LLVM's f16 maximum and minimum give the canonical
    # NaN)
    one_nan_in: tuple[tuple[str, str], ...] = ()
    # the invalid NaN in f64 where it is not ``invalid`` (XLA's f64 log is another expansion)
    f64_invalid: str | None = None


@dataclass(frozen=True)
class OpcodeSpec:
    name: Opcode
    min_operands: int
    max_operands: int | None            # None: any number
    shape_rule: ShapeRule
    attrs: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()
    shape_required: bool = False        # the text must write the result shape
    elementwise: bool = False
    side_effect: bool = False
    # element-type classes (``ElementType.kind``) its operands may have; None: the shape rule
    # decides (the verifier checks this column after the rule)
    operand_types: frozenset[str] | None = None
    # "cheap"; "expensive": evaluating it again costs real time (XLA's ``IsExpensive``), so
    # fusion does not duplicate it into kernels that read it many times; "expensive-int":
    # only on integers (integer division)
    cost: str = "cheap"
    # what a collective computes with one replica and one partition (passes/one_device_collectives
    # writes it as plain HLO): "identity" (its operands: one, or a tuple of several),
    # "permute" (its operand when source_target_pairs sends device 0 to itself, else zeros),
    # "zero" (replica and partition ids), "<kind>-start" (an async start: a tuple of its
    # operands, the <kind> result, then zeroed context scalars), "done" (an async done: the
    # result element of its start), "value" (all-reduce-done: its start's value, which is the
    # result); None: not a collective
    one_device: str | None = None
    # as a reducer (a reduce's or reduce-window's computation): its identity, the init value
    # that applying more than once is harmless ("zero", "one", "all-ones", "lowest",
    # "highest"; analysis/reducers turns it into a value of an element type); None: kernels
    # never regroup a reduction by it
    identity: str | None = None
    # as a reducer, whether its fold gives the same result in any order: "any" on every
    # element type it takes (a float maximum or minimum too: XLA's NaN wins, +0 above -0, is
    # exactly associative and commutative), "exact" only where its arithmetic is exact (not
    # on floats); None: order matters
    order_free: str | None = None
    # a user that only forwards its operand's buffer (a tuple, an alias, a call's argument):
    # liveness counts no read at it, the value lives on through what it forwards to
    forwards: bool = False
    # the attributes through which it runs computations as program steps, in the order the
    # call graph lists them (a while's condition before its body, a conditional's branches)
    sequential_calls: tuple[str, ...] = ()
    # an in-place update: (the operand it writes into, not reading it whole; the operand
    # holding the update it computes); None: not one
    updates: tuple[int, int] | None = None
    # moves or re-indexes elements without arithmetic: fused like an elementwise op, and may
    # root a loop fusion
    data_movement: bool = False
    # computes each result element from indices into its operands, so a loop kernel can root
    # a fusion at it (besides elementwise and data-movement ops)
    loop_root: bool = False
    # reads nothing big: copied into kernels without counting against a target's
    # ``max_duplicates``
    free_duplicate: bool = False
    # cheap per element and loops over nothing: the contraction families evaluate it in an
    # output fusion's epilogue beside the dot or convolution (elementwise ops always are)
    epilogue_safe: bool = False
    # reads an operand through the operand's own layout, whatever it is (elementwise ops
    # always do), so transpose folding may leave a transposed layout in place for it
    layout_free_reader: bool = False
    # instances are distinct by intent, whatever their operands: CSE never merges two
    distinct: bool = False
    # its work is in the computations it runs (a loop, a branch, a call, a custom call),
    # which the fusion cost model's ``kernel_work`` does not count
    runs_computations: bool = False
    # holds complex values without computing on them: a module whose complex values meet
    # only these stays in complex form (passes/complex_lowering)
    complex_pass_through: bool = False
    # passes a value on unchanged as a number (a convert, a copy, a re-indexing): a negation
    # below one is still the value's, as the elemental emitter's accumulation checks read it
    passes_value: bool = False
    # its result is exact in any float format, so a narrow float (f16, bf16) result needs no
    # rounding after it
    exact: bool = False
    # XLA's result at f8e8m0fnu's code 0 (2^-127, an f32 denormal) is not f32 arithmetic on
    # that denormal: LLVM folds the operation into the select XLA widens the code by, where
    # nothing is flushed (codegen.templates.EXPONENT_FLOAT_TINY holds the folded result), so
    # float normalisation selects that result there (passes/float_normalization.CODE_0)
    folds_exponent_float_tiny: bool = False
    # on bf16 and the 8-bit floats, XLA's CPU backend computes it whole in their arithmetic
    # type (``ElementType.arithmetic_type``) and rounds its result once, so float
    # normalisation gives a convert to that type the unrounded result with the operands
    # kept narrow (a dot or convolution: XLA rounds a reduction at every step, so not those)
    contraction_normalized: bool = False
    # the NaN its float result is where XLA's differs from what the C function gives
    # (``NanRule``); None: the template's own NaN is XLA's (bit operations, x86 arithmetic)
    nan: NanRule | None = None
    # why the OpenCL backend does not lower it (the code generator refuses it with this, and
    # the exhaustiveness test reads it); None: lowered
    unsupported: str | None = None

    @property
    def arity_text(self) -> str:
        if self.max_operands == self.min_operands:
            return str(self.min_operands)
        if self.max_operands is None:
            return f"at least {self.min_operands}"
        return f"{self.min_operands} to {self.max_operands}"


OPCODES: dict[Opcode, OpcodeSpec] = {}


def _op(name: str, arity: int | tuple[int, int | None], rule: ShapeRule,
        attrs: Iterable[str] = (), required: Iterable[str] = (), *, shape_required: bool = False,
        elementwise: bool = False, side_effect: bool = False,
        operand_types: Iterable[str] | None = None, cost: str = "cheap",
        one_device: str | None = None) -> None:
    lo, hi = (arity, arity) if isinstance(arity, int) else arity
    opcode = Opcode(name)
    OPCODES[opcode] = OpcodeSpec(opcode, lo, hi, rule, frozenset(attrs) | frozenset(required),
                                 frozenset(required), shape_required, elementwise, side_effect,
                                 None if operand_types is None else frozenset(operand_types),
                                 cost, one_device)


_ACCURACY = ("result_accuracy",)

# element-type classes (the loops below read them and the attribute lists as one type each)
_types: tuple[str, ...] | None
_a: tuple[str, ...]
FLOAT = ("float",)
FLOAT_OR_COMPLEX = ("float", "complex")
INTEGER = ("sint", "uint")
INTEGER_OR_PRED = ("sint", "uint", "pred")
NUMBER = ("sint", "uint", "float", "complex")          # anything but pred
ANY = ("pred", "sint", "uint", "float", "complex")

# elementwise unary: same shape; (operand types, cost)
for _n, _types, _cost in (
        ("abs", NUMBER, "cheap"), ("negate", NUMBER, "cheap"), ("sign", NUMBER, "cheap"),
        ("floor", FLOAT, "cheap"), ("ceil", FLOAT, "cheap"), ("round-nearest-afz", FLOAT, "cheap"),
        ("round-nearest-even", FLOAT, "cheap"),
        ("exponential", FLOAT_OR_COMPLEX, "expensive"),
        ("exponential-minus-one", FLOAT_OR_COMPLEX, "expensive"),
        ("log", FLOAT_OR_COMPLEX, "expensive"), ("log-plus-one", FLOAT_OR_COMPLEX, "expensive"),
        ("sqrt", FLOAT_OR_COMPLEX, "expensive"), ("rsqrt", FLOAT_OR_COMPLEX, "expensive"),
        ("cbrt", FLOAT, "expensive"), ("sine", FLOAT_OR_COMPLEX, "expensive"),
        ("cosine", FLOAT_OR_COMPLEX, "expensive"), ("tan", FLOAT_OR_COMPLEX, "expensive"),
        ("tanh", FLOAT_OR_COMPLEX, "expensive"), ("sinh", FLOAT_OR_COMPLEX, "expensive"),
        ("cosh", FLOAT_OR_COMPLEX, "expensive"), ("asin", FLOAT_OR_COMPLEX, "expensive"),
        ("acos", FLOAT_OR_COMPLEX, "expensive"), ("atan", FLOAT_OR_COMPLEX, "expensive"),
        ("asinh", FLOAT_OR_COMPLEX, "expensive"), ("acosh", FLOAT_OR_COMPLEX, "expensive"),
        ("atanh", FLOAT_OR_COMPLEX, "expensive"), ("logistic", FLOAT, "expensive"),
        ("erf", FLOAT, "expensive"), ("not", INTEGER_OR_PRED, "cheap"),
        ("popcnt", INTEGER, "cheap"), ("count-leading-zeros", INTEGER, "cheap"),
        ("real", FLOAT_OR_COMPLEX, "cheap"), ("imag", FLOAT_OR_COMPLEX, "cheap"),
        ("is-finite", FLOAT, "cheap"), ("copy", None, "cheap")):
    _op(_n, 1, rules.unary, _ACCURACY if _n not in ("not", "popcnt", "count-leading-zeros", "copy")
        else (), elementwise=True, operand_types=_types, cost=_cost)

_op("convert", 1, rules.convert, shape_required=True, elementwise=True)
_op("bitcast-convert", 1, rules.bitcast_convert, shape_required=True)
_op("reduce-precision", 1, rules.reduce_precision, ("exponent_bits", "mantissa_bits"),
    ("exponent_bits", "mantissa_bits"), elementwise=True)
_op("stochastic-convert", 2, rules.stochastic_convert, shape_required=True, elementwise=True)

# elementwise binary (complex: the shape rule checks for f32/f64). As in XLA's shape inference,
# add and maximum take pred (computed as or), multiply and minimum too (as and); the rest of
# the arithmetic does not
for _n, _types, _cost in (
        ("add", ANY, "cheap"), ("subtract", NUMBER, "cheap"), ("multiply", ANY, "cheap"),
        ("divide", NUMBER, "expensive-int"), ("remainder", NUMBER, "expensive-int"),
        ("power", NUMBER, "expensive"), ("maximum", ANY, "cheap"), ("minimum", ANY, "cheap"),
        ("atan2", FLOAT_OR_COMPLEX, "expensive"), ("complex", None, "cheap"),
        ("and", INTEGER_OR_PRED, "cheap"), ("or", INTEGER_OR_PRED, "cheap"),
        ("xor", INTEGER_OR_PRED, "cheap"), ("shift-left", INTEGER, "cheap"),
        ("shift-right-logical", INTEGER, "cheap"), ("shift-right-arithmetic", INTEGER, "cheap"),
        ("mulhi", INTEGER, "cheap")):
    _op(_n, 2, rules.binary, elementwise=True, operand_types=_types, cost=_cost)

_op("compare", 2, rules.compare, ("direction", "type", "order"), ("direction",), elementwise=True)
_op("select", 3, rules.select, elementwise=True)
_op("clamp", 3, rules.clamp, elementwise=True)

# shape manipulation
_op("parameter", 0, rules.declared, shape_required=True)
_op("constant", 0, rules.declared, shape_required=True)
_op("iota", 0, rules.iota, ("iota_dimension",), ("iota_dimension",), shape_required=True)
_op("broadcast", 1, rules.broadcast, ("dimensions",), shape_required=True)
_op("reshape", 1, rules.reshape, ("inferred_dimension",), shape_required=True)
_op("dynamic-reshape", (1, None), rules.declared, shape_required=True)
_op("transpose", 1, rules.transpose, ("dimensions",), ("dimensions",))
_op("bitcast", 1, rules.bitcast, shape_required=True)
_op("slice", 1, rules.slice_, ("slice",), ("slice",))
_op("dynamic-slice", (2, None), rules.dynamic_slice, ("dynamic_slice_sizes",),
    ("dynamic_slice_sizes",))
_op("dynamic-update-slice", (3, None), rules.dynamic_update_slice)
_op("concatenate", (1, None), rules.concatenate, ("dimensions",), ("dimensions",))
_op("pad", 2, rules.pad, ("padding",), ("padding",))
_op("reverse", 1, rules.reverse, ("dimensions",), ("dimensions",))
_op("get-tuple-element", 1, rules.get_tuple_element, ("index",), ("index",))
_op("tuple", (0, None), rules.tuple_)
_op("get-dimension-size", 1, rules.get_dimension_size, ("dimensions",), ("dimensions",))
_op("set-dimension-size", 2, rules.set_dimension_size, ("dimensions",), ("dimensions",))
_op("gather", 2, rules.gather,
    ("offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim", "slice_sizes",
     "operand_batching_dims", "start_indices_batching_dims", "indices_are_sorted"),
    ("offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim",
     "slice_sizes"), cost="expensive")
_op("scatter", (3, None), rules.scatter,
    ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
     "index_vector_dim", "input_batching_dims", "scatter_indices_batching_dims",
     "indices_are_sorted", "unique_indices", "to_apply"),
    ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
     "index_vector_dim", "to_apply"))

# reductions, windows, contractions
_op("reduce", (2, None), rules.reduce, ("dimensions", "to_apply"), ("dimensions", "to_apply"),
    cost="expensive")
_op("reduce-window", (2, None), rules.reduce_window, ("window", "to_apply"),
    ("window", "to_apply"), cost="expensive")
_op("select-and-scatter", 3, rules.select_and_scatter, ("window", "select", "scatter"),
    ("window", "select", "scatter"), cost="expensive")
_op("map", (1, None), rules.map_, ("dimensions", "to_apply"), ("to_apply",), cost="expensive")
_op("dot", 2, rules.dot,
    ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims",
     "operand_precision", "algorithm"), cost="expensive")
_op("ragged-dot", 3, rules.declared,
    ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims",
     "lhs_ragged_dims", "rhs_group_dims", "operand_precision"), shape_required=True)
_op("scaled-dot", 4, rules.declared,
    ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims",
     "operand_precision"), shape_required=True)
_op("convolution", 2, rules.convolution,
    ("window", "dim_labels", "feature_group_count", "batch_group_count", "operand_precision"),
    ("dim_labels",), cost="expensive")
_op("sort", (1, None), rules.sort, ("dimensions", "is_stable", "to_apply"),
    ("dimensions", "to_apply"))
# XLA prints ``is_stable`` on topk from 2026 (jaxlib 0.11): ties in index order, which the
# top-k kernel always keeps (the lower index first), so either value is honoured.
_op("topk", 1, rules.topk, ("k", "largest", "is_stable"), ("k",))
_op("fft", 1, rules.fft, ("fft_type", "fft_length"), ("fft_type", "fft_length"))
_op("cholesky", 1, rules.cholesky, ("lower",))
_op("triangular-solve", 2, rules.triangular_solve,
    ("left_side", "lower", "unit_diagonal", "transpose_a"))
_op("batch-norm-training", 3, rules.batch_norm_training, ("epsilon", "feature_index"),
    ("epsilon", "feature_index"))
_op("batch-norm-inference", 5, rules.batch_norm_inference, ("epsilon", "feature_index"),
    ("epsilon", "feature_index"))
_op("batch-norm-grad", 5, rules.batch_norm_grad, ("epsilon", "feature_index"),
    ("epsilon", "feature_index"))

# control flow and calls
_op("while", 1, rules.while_, ("condition", "body"), ("condition", "body"))
_op("conditional", (1, None), rules.conditional,
    ("branch_computations", "true_computation", "false_computation"))
_op("call", (0, None), rules.call, ("to_apply", "is_composite"), ("to_apply",))
_op("fusion", (0, None), rules.fusion, ("kind", "calls", "output_to_operand_aliasing"),
    ("kind", "calls"))
_op("custom-call", (0, None), rules.custom_call,
    ("custom_call_target", "api_version", "custom_call_has_side_effect",
     "output_to_operand_aliasing", "operand_layout_constraints", "called_computations",
     "to_apply", "window", "dim_labels", "feature_group_count", "batch_group_count",
     "padding_type", "literal", "schedule", "operand_precision"),
    ("custom_call_target",), shape_required=True)
_op("opt-barrier", 1, rules.identity)
_op("domain", 1, rules.identity, ("domain",))
_op("add-dependency", 2, rules.add_dependency)
_op("after-all", (0, None), rules.token, side_effect=True)

# random numbers
_op("rng", 2, rules.rng, ("distribution",), ("distribution",), shape_required=True, side_effect=True)
_op("rng-bit-generator", 1, rules.rng_bit_generator, ("algorithm",), ("algorithm",),
    shape_required=True)
_op("rng-get-and-update-state", 0, rules.declared, ("delta",), ("delta",),
    shape_required=True, side_effect=True)

# single-device I/O and collectives: parsed so every printed module reads; shapes as written
for _n, _a in (
        ("infeed", ("infeed_config",)), ("outfeed", ("outfeed_config", "outfeed_shape")),
        ("send", ("channel_id", "is_host_transfer")), ("send-done", ("channel_id", "is_host_transfer")),
        ("recv", ("channel_id", "is_host_transfer")), ("recv-done", ("channel_id", "is_host_transfer"))):
    _op(_n, (0, None), rules.declared, _a, shape_required=True, side_effect=True)
_op("replica-id", 0, rules.u32_scalar, one_device="zero")
_op("partition-id", 0, rules.u32_scalar, one_device="zero")
_COLLECTIVE = ("replica_groups", "channel_id", "use_global_device_ids", "constrain_layout")
# (opcode, attributes, one-device value, its async start's one-device value or None)
for _n, _a, _one, _start in (
        ("all-reduce", _COLLECTIVE + ("to_apply",), "identity", "identity"),
        ("all-gather", _COLLECTIVE + ("dimensions",), "identity", "identity-start"),
        ("reduce-scatter", _COLLECTIVE + ("dimensions", "to_apply"), "identity", None),
        ("all-to-all", _COLLECTIVE + ("dimensions", "split_dims"), "identity", None),
        ("ragged-all-to-all", _COLLECTIVE, None, None),
        ("collective-permute", ("source_target_pairs", "channel_id", "slice_sizes"), "permute",
         "permute-start"),
        ("collective-broadcast", _COLLECTIVE, "identity", None)):
    _op(_n, (0, None), rules.declared, _a, shape_required=True, one_device=_one)
    if _start is not None:
        # all-reduce-start's value is its result (XLA aliases nothing); the others' a tuple
        _op(_n + "-start", (0, None), rules.declared, _a, shape_required=True, one_device=_start)
        _op(_n + "-done", 1, rules.declared, shape_required=True,
            one_device="value" if _start == "identity" else "done")
_op("copy-start", 1, rules.declared, ("cross_program_prefetch_index",), shape_required=True)
_op("copy-done", 1, rules.declared, shape_required=True)
_op("async-start", (0, None), rules.declared,
    ("calls", "async_execution_thread", "output_to_operand_aliasing"), ("calls",),
    shape_required=True)
_op("async-update", 1, rules.declared, shape_required=True)
_op("async-done", 1, rules.declared, shape_required=True)



# --- facts that cut across the families above ---------------------------------------------

def _set(column: str, value: Any, *names: str) -> None:
    """Give the rows of ``names`` ``value`` in ``column``: facts that cut across the families
    the rows above are grouped by."""
    for name in names:
        opcode = Opcode(name)
        OPCODES[opcode] = replace(OPCODES[opcode], **{column: value})


_set("identity", "zero", "add", "or", "xor")
_set("identity", "one", "multiply")
_set("identity", "all-ones", "and")
_set("identity", "lowest", "maximum")
_set("identity", "highest", "minimum")
_set("order_free", "any", "maximum", "minimum", "and", "or")
_set("order_free", "exact", "add", "multiply")
_set("forwards", True, "tuple", "get-tuple-element", "bitcast", "domain", "opt-barrier",
     "add-dependency", "call")
_set("sequential_calls", ("to_apply",), "call")
_set("sequential_calls", ("condition", "body"), "while")
_set("sequential_calls", ("true_computation", "false_computation", "branch_computations"),
     "conditional")
_set("updates", (0, 1), "dynamic-update-slice")
_set("updates", (0, -1), "scatter")
_set("data_movement", True, "broadcast", "reshape", "transpose", "slice", "pad", "concatenate",
     "reverse", "bitcast-convert")
_set("loop_root", True, "dynamic-slice", "dynamic-update-slice", "gather", "reduce-window",
     "scatter")
_set("free_duplicate", True, "constant", "iota", "broadcast")
_set("epilogue_safe", True, "parameter", "constant", "broadcast", "iota", "reshape", "bitcast",
     "transpose", "slice", "copy", "reverse", "pad", "concatenate", "dynamic-slice", "gather")
_set("layout_free_reader", True, "dot", "convolution", "reduce", "reshape", "transpose",
     "broadcast", "slice", "dynamic-slice", "concatenate", "copy", "pad", "reverse",
     "reduce-window")
_set("distinct", True, "parameter", "opt-barrier", "add-dependency", "domain", "after-all")
_set("runs_computations", True, "while", "conditional", "call", "custom-call")
_set("complex_pass_through", True, "parameter", "tuple", "get-tuple-element", "custom-call",
     "opt-barrier", "bitcast")
_set("passes_value", True, "convert", "copy", "real", "bitcast", "reshape", "broadcast",
     "transpose", "slice", "reverse")
_set("exact", True, "abs", "negate", "sign", "floor", "ceil", "round-nearest-afz",
     "round-nearest-even", "copy", "is-finite", "maximum", "minimum", "real", "imag")
_set("folds_exponent_float_tiny", True, "sign", "ceil", "exponential-minus-one", "tan", "asin",
     "power", "atan2")
_set("contraction_normalized", True, "dot", "convolution")
# (exponential, expm1, sqrt, rsqrt, floor, ceil and the roundings have none: their C
# functions give x86's NaNs already, and they are the hot ones)
_set("nan", NanRule(), "cbrt", "sine", "cosine", "tan", "tanh", "sinh", "cosh", "asinh",
     "acosh", "atanh", "erf", "remainder", "power")
_set("nan", NanRule(invalid="positive"), "asin", "acos")
_set("nan", NanRule(operand="negated"), "logistic")
_set("nan", NanRule(first=1), "atan2")
_set("nan", NanRule(one_nan_in=(("f32", "all-ones"), ("f8", "all-ones")),
                    f64_invalid="positive"), "log")
_set("nan", NanRule(one_nan_in=(("f16", "all-ones"), ("f32", "all-ones"), ("f8", "all-ones")),
                    f64_invalid="positive"), "log-plus-one")
_set("nan", NanRule(operand="kept", one_nan_in=(("f16", "positive"), ("f8", "positive"))),
     "maximum", "minimum", "clamp")

_HOST_IO = "host I/O channels do not exist on this single-device runtime"
_ASYNC_OR_COLLECTIVE = ("asynchronous and collective operations are not supported; print the "
                        "module before XLA's SPMD/async passes")
_ONE_DEVICE = ("a one-device collective is rewritten to copies or constants before code "
               "generation (passes/one_device_collectives), and this one was not")
_EXPANDED_BY_XLA = ("XLA rewrites it into simpler HLO before code generation; print the "
                    "module after XLA's optimisation passes (compiled.as_text()) to run it")
_RAGGED = "ragged and scaled dots are not implemented"
_set("unsupported", _HOST_IO, "infeed", "outfeed", "send", "send-done", "recv", "recv-done")
_set("unsupported", _ASYNC_OR_COLLECTIVE, "async-start", "async-update", "async-done", "copy-start",
     "copy-done", "ragged-all-to-all")
_set("unsupported", _ONE_DEVICE, *(n for n, s in OPCODES.items() if s.one_device is not None))
_set("unsupported", "kernels never see FFTs: the complex lowering pass writes them as dots "
     "against DFT matrices (passes/fft_lowering), and this one was not rewritten", "fft")
_set("unsupported", "kernels never see it: passes/cholesky_host_calls makes it a host call "
     "computing XLA's expansion, and this one was not rewritten", "cholesky")
_set("unsupported", "JAX lowers it to the lapack_?trsm_ffi custom call on CPU, which this "
     "runtime implements; use that form", "triangular-solve")
_set("unsupported", _EXPANDED_BY_XLA, "batch-norm-training", "batch-norm-inference",
     "batch-norm-grad")
_set("unsupported", "kernels never see it: passes/stochastic_convert writes it as XLA's "
     "decomposition, and this one was not rewritten", "stochastic-convert")
_set("unsupported", "its random stream is implementation-defined; use rng-bit-generator (or "
     "JAX's threefry, which is plain integer HLO)", "rng")
_set("unsupported", "module-level rng state is not supported; use rng-bit-generator with an "
     "explicit state", "rng-get-and-update-state")
_set("unsupported", "kernels never see it: passes/dynamic_padding stores dynamic shapes at "
     "their bounds with the sizes beside them, and this one was not rewritten",
     "get-dimension-size", "set-dimension-size", "dynamic-reshape")
_set("unsupported", _RAGGED, "ragged-dot", "scaled-dot")
