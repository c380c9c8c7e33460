"""Recursive-descent parser from HLO text to ``HloModule``.

Accepts everything XLA and JAX print (optimised dumps with stack-frame tables, metadata,
backend configs, layouts with tiling; JAX's pre-optimisation text without ``%``) plus the
hand-written forms people use: the aliasing doc's ``input_output_alias={ {}: 0 }``, forward
references to computations, omitted result and operand shapes, nested operand instructions.
Every problem in the text is an ``HloParseError`` located at the offending token; a result
shape that the text omitted and that cannot be inferred is an ``HloVerifyError`` (the text is
well-formed, the program is not), located at its instruction.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

import numpy as np

from ..errors import HloParseError, SourceLocation
from . import lexer as L
from .attributes import (
    BackendConfig, ConvDimensionNumbers, Identifier, IdentifierList, Metadata, OperandAlias,
    OperandAliasing, PadDim, PaddingConfig, RawText, ShapedLiteral, SliceDim, SliceSpec, Window,
    WindowDim, parse_dim_labels, unquote_string,
)
from .dtypes import ELEMENT_TYPES, F64
from .graph import post_order
from .ir import (
    AliasEntry, BufferDonor, ComputationSignature, HloComputation, HloInstruction, HloModule,
    SignatureEntry,
)
from .literal import Literal
from .literal_text import LiteralTextError, read_array, read_scalar, scalar_value
from .opcode_enum import Opcode, opcode_named
from .opcodes import ATTRIBUTE_KINDS, ATTRIBUTE_VALUES, COMMON_ATTRIBUTES, OPCODES
from .opcode_hints import suggest_opcode
from .shape import ArrayShape, Layout, Shape, TupleShape, compatible
from .verifier import infer_shape

# Brackets may nest this deep (tuple shapes, tuple literals, nested operand instructions,
# inline computations together). Real modules stay under ten; the limit keeps the recursive
# descent far from Python's recursion limit, so deep garbage gets a located error.
MAX_NESTING = 64
_KNOWN_HEADER = {"is_scheduled", "entry_computation_layout", "input_output_alias", "buffer_donor",
                 "alias_passthrough_params", "replica_count", "num_partitions",
                 "frontend_attributes", "allow_spmd_sharding_propagation_to_parameters",
                 "allow_spmd_sharding_propagation_to_output", "origin_recovery_table"}


_SIMPLE_SHAPE = re.compile(r"([a-z][a-z0-9]*)\[((?:[0-9]+(?:,[0-9]+)*)?)\](?:\{([0-9]+(?:,[0-9]+)*)\})?")


class _PendingComputation:
    """A computation named in an attribute before (or without) its definition."""

    def __init__(self, name: str, location: SourceLocation) -> None:
        self.name = name
        self.location = location


class Parser:
    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise HloParseError(f"HLO text must be a str, got {type(text).__name__}")
        self.text = text
        self.lx = L.Lexer(text)
        self.computations: dict[str, HloComputation] = {}
        self.order: list[HloComputation] = []
        self.pending: list[HloInstruction] = []    # hold references to computations not yet seen
        self.names: dict[str, HloInstruction] = {}  # the instructions of the computation being read
        # its ``%t#i`` elements: (id of the tuple, i) -> their get-tuple-element
        self.elements: dict[tuple[int, int], HloInstruction] = {}
        self.element_ids: set[int] = set()          # the ids of all those instructions
        self.depth = 0
        self.anon_counter = 0
        self.warnings: list[str] = []
        self.shapes: dict[str, ArrayShape] = {}     # simple shapes by spelling, see simple_array_shape

    # --- small helpers ----------------------------------------------------------------------
    def error(self, message: str, offset: int | None = None, hint: str | None = None) -> HloParseError:
        return self.lx.error(message, offset, hint)

    def warn(self, offset: int, message: str) -> None:
        self.warnings.append(f"line {self.lx.location(offset).line}: {message}")

    def expect_punct(self, p: str, context: str = "") -> int:
        lx = self.lx
        if not lx.at_punct(p):
            where = f" {context}" if context else ""
            raise self.error(f"expects '{p}'{where} but sees {lx.describe()}")
        start = lx.start
        lx.advance()
        return start

    def accept_punct(self, p: str) -> bool:
        if self.lx.at_punct(p):
            self.lx.advance()
            return True
        return False

    def expect_int(self, what: str = "integer") -> int:
        lx = self.lx
        if lx.kind != L.INT:
            raise self.error(f"expects {what} but sees {lx.describe()}")
        v = int(lx.value)
        lx.advance()
        return v

    def next_char(self) -> str:
        """The first non-blank character after the current token (for one-char lookahead)."""
        m = L._SKIP.match(self.text, self.lx.end)
        i = m.end() if m else self.lx.end
        return self.text[i] if i < len(self.text) else ""

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"brackets, nested instructions and inline computations nest "
                             f"deeper than {MAX_NESTING} levels")

    def leave(self) -> None:
        self.depth -= 1

    # --- module -----------------------------------------------------------------------------
    def parse_module(self) -> HloModule:
        lx = self.lx
        module = HloModule(name="")
        module.source_lines = self.text.splitlines()
        if lx.kind == L.EOF:
            raise self.error("expects 'HloModule' or a computation, but the text has neither "
                             "(it is empty or only comments)")
        if lx.at(L.IDENT, "HloModule"):
            lx.advance()
            if lx.kind not in (L.IDENT, L.NAME, L.STRING):
                raise self.error(f"expects the module name after 'HloModule' but sees {lx.describe()}")
            module.name = unquote_string(lx.value[1:-1]) if lx.kind == L.STRING else lx.value
            if lx.kind == L.NAME and self.text[lx.end - 1] == ":":
                raise self.error("expects the module name, not a 'name:'")
            lx.advance()
            while self.accept_punct(","):
                self.parse_header_attribute(module)
        if lx.at(L.IDENT, "FileNames"):
            module.stack_frames = self.parse_stack_frames()
        entry: HloComputation | None = None
        while lx.kind != L.EOF:
            if entry is not None and lx.at(L.IDENT, "ENTRY"):
                raise self.error("expects only one ENTRY computation",
                                 hint=f"{entry.name} is already the ENTRY")
            comp = self.parse_computation()
            if comp.is_entry:
                entry = comp
        if not self.order:
            raise self.error("expects at least one computation")
        if entry is None:
            entry = self.order[-1]
            entry.is_entry = True
        module.entry = entry
        if not module.name:
            module.name = f"module_{entry.name}"
        self.resolve_pending()
        module.computations = _callees_first(self.order, entry)
        module.warnings = self.warnings
        _infer_omitted_shapes(module)
        return module

    def parse_header_attribute(self, module: HloModule) -> None:
        lx = self.lx
        if lx.kind != L.ATTR:
            raise self.error(f"expects a module attribute (name=value) but sees {lx.describe()}")
        name, at = lx.value, lx.start
        lx.advance()
        if name in module.attribute_locations:
            raise self.error(f"attribute {name} already exists", at)
        module.attribute_locations[name] = lx.location(at)
        if name == "is_scheduled":
            module.is_scheduled = self.parse_bool()
        elif name == "entry_computation_layout":
            module.entry_computation_layout = self.parse_program_layout()
        elif name == "input_output_alias":
            module.input_output_alias = self.parse_input_output_alias()
        elif name == "buffer_donor":
            module.buffer_donors = self.parse_buffer_donors()
        elif name in ("replica_count", "num_partitions"):
            module.header_attrs[name] = self.expect_int()
        elif name == "alias_passthrough_params":
            module.header_attrs[name] = self.parse_bool()
        else:
            module.header_attrs[name] = RawText(lx.take_raw_value())
            if name not in _KNOWN_HEADER:
                self.warn(at, f"unknown module attribute {name!r} kept verbatim and ignored")

    def parse_program_layout(self) -> tuple[tuple[Shape, ...], Shape]:
        self.expect_punct("{", "to open entry_computation_layout")
        self.expect_punct("(", "before the parameter layouts")
        params: list[Shape] = []
        if not self.lx.at_punct(")"):
            params.append(self.parse_shape())
            while self.accept_punct(","):
                params.append(self.parse_shape())
        self.expect_punct(")", "after the parameter layouts")
        self.expect_punct("->", "between parameter and result layouts")
        result = self.parse_shape()
        self.expect_punct("}", "to close entry_computation_layout")
        return tuple(params), result

    def parse_input_output_alias(self) -> list[AliasEntry]:
        lx = self.lx
        self.expect_punct("{", "to open input_output_alias")
        entries: list[AliasEntry] = []
        while not lx.at_punct("}"):
            at = lx.start
            out_index = self.parse_shape_index()
            self.expect_punct(":", "after the output index")
            if lx.kind == L.INT:
                entries.append(AliasEntry(out_index, self.expect_int(), (), "may-alias",
                                          lx.location(at), short_form=True))
            elif lx.at_punct("("):
                lx.advance()
                param = self.expect_int("parameter number")
                self.expect_punct(",", "after the parameter number")
                param_index = self.parse_shape_index()
                kind = "may-alias"
                if self.accept_punct(","):
                    if lx.kind != L.IDENT or lx.value not in ("may-alias", "must-alias"):
                        raise self.error(f"expects may-alias or must-alias but sees {lx.describe()}")
                    kind = lx.value
                    lx.advance()
                self.expect_punct(")", "to close the alias entry")
                entries.append(AliasEntry(out_index, param, param_index, kind, lx.location(at)))
            else:
                raise self.error(
                    f"unexpected {lx.describe()} in input_output_alias. Expected format: "
                    "<output_shape_index>: (<input_param>, <input_param_shape_index>) OR "
                    "<output_shape_index>: <input_param>")
            if not self.accept_punct(","):
                break
        self.expect_punct("}", "to close input_output_alias")
        return entries

    def parse_buffer_donors(self) -> list[BufferDonor]:
        lx = self.lx
        self.expect_punct("{", "to open buffer_donor")
        donors: list[BufferDonor] = []
        while not lx.at_punct("}"):
            at = lx.start
            self.expect_punct("(", "to open a buffer donor")
            param = self.expect_int("parameter number")
            self.expect_punct(",", "after the parameter number")
            index = self.parse_shape_index()
            self.expect_punct(")", "to close the buffer donor")
            donors.append(BufferDonor(param, index, lx.location(at)))
            if not self.accept_punct(","):
                break
        self.expect_punct("}", "to close buffer_donor")
        return donors

    def parse_shape_index(self) -> tuple[int, ...]:
        self.expect_punct("{", "to open a shape index")
        out: list[int] = []
        if not self.lx.at_punct("}"):
            out.append(self.expect_int("shape index"))
            while self.accept_punct(","):
                out.append(self.expect_int("shape index"))
        self.expect_punct("}", "to close a shape index")
        return tuple(out)

    def parse_stack_frames(self) -> str:
        lx = self.lx
        begin = lx.start
        end = begin
        for table, entry_kind in (("FileNames", L.STRING), ("FunctionNames", L.STRING),
                                  ("FileLocations", "{"), ("StackFrames", "{")):
            if not lx.at(L.IDENT, table):
                raise self.error(f"expects the {table} table but sees {lx.describe()}")
            end = lx.end
            lx.advance()
            while lx.kind == L.INT:
                lx.advance()
                if entry_kind == L.STRING:
                    if lx.kind != L.STRING:
                        raise self.error(f"expects a string in {table} but sees {lx.describe()}")
                    end = lx.end
                    lx.advance()
                else:
                    if not lx.at_punct("{"):
                        raise self.error(f"expects '{{' in {table} but sees {lx.describe()}")
                    lx.take_balanced()
                    end = self._last_consumed_end()
        return self.text[begin:end]

    def _last_consumed_end(self) -> int:
        """Offset just after the text consumed before the current token."""
        i = self.lx.start
        while i > 0 and self.text[i - 1] in " \t\r\n":
            i -= 1
        return i

    # --- computations -----------------------------------------------------------------------
    def parse_computation(self) -> HloComputation:
        lx = self.lx
        at = lx.start
        is_entry = False
        if lx.at(L.IDENT, "ENTRY"):
            is_entry = True
            lx.advance()
        if lx.kind not in (L.NAME, L.IDENT):
            raise self.error(f"expects a computation name but sees {lx.describe()}")
        name_at = lx.start
        name = lx.value
        colon_form = lx.kind == L.NAME and self.text[lx.end - 1] == ":"
        lx.advance()
        if colon_form:
            raise self.error(f"expects a computation name but sees '{name}:'", name_at)
        if name in self.computations:
            raise self.error(f"computation already exists: {name}", name_at)
        comp = HloComputation(name=name, is_entry=is_entry, location=lx.location(at))
        if lx.at_punct("("):
            comp.signature = self.parse_signature()
        self.computations[name] = comp
        self.parse_body(comp)
        self.check_signature_parameters(comp)
        if self.accept_punct(","):
            if not lx.at(L.ATTR, "execution_thread"):
                raise self.error(f"expects execution_thread= but sees {lx.describe()}")
            lx.advance()
            if lx.kind != L.STRING:
                raise self.error(f"expects a string but sees {lx.describe()}")
            comp.execution_thread = unquote_string(lx.value[1:-1])
            lx.advance()
        self.order.append(comp)
        return comp

    def check_signature_parameters(self, comp: HloComputation) -> None:
        """XLA takes a computation's parameters from its body and ignores the signature's list
        (only the result shape is checked, by the verifier), so a list that disagrees is
        accepted with a warning."""
        sig = comp.signature
        if sig is None:
            return
        params = comp.parameters
        agree = len(sig.parameters) == len(params) and all(
            compatible(written.shape, p.shape) for written, p in zip(sig.parameters, params))
        if not agree:
            written = ", ".join(e.shape.to_text(False) for e in sig.parameters)
            body = ", ".join(p.shape.to_text(False) for p in params)
            self.warnings.append(
                f"line {comp.location.line if comp.location else '?'}: the signature of "
                f"{comp.name} lists parameters ({written}), but its body has ({body}); the "
                "body's parameters are used, as XLA does")

    def parse_signature(self) -> ComputationSignature:
        lx = self.lx
        self.expect_punct("(")
        params: list[SignatureEntry] = []
        while not lx.at_punct(")"):
            if lx.kind != L.NAME:
                raise self.error(f"expects a parameter name in the signature but sees {lx.describe()}")
            name, at = lx.value, lx.start
            is_colon = self.text[lx.end - 1] == ":"
            lx.advance()
            if not is_colon:
                self.expect_punct(":", "after the parameter name")
            params.append(SignatureEntry(name, self.parse_shape(), lx.location(at)))
            if not self.accept_punct(","):
                break
        self.expect_punct(")", "to close the signature")
        self.expect_punct("->", "before the result shape")
        at = lx.start
        result = SignatureEntry("", self.parse_shape(), lx.location(at))
        return ComputationSignature(tuple(params), result)

    def parse_body(self, comp: HloComputation) -> None:
        lx = self.lx
        outer = lx.computation, lx.instruction, self.names
        outer_elements, self.elements = self.elements, {}
        lx.computation, lx.instruction, self.names = comp.name, None, {}
        self.expect_punct("{", f"to open the body of {comp.name}")
        root: HloInstruction | None = None
        while not lx.at_punct("}"):
            if lx.kind == L.EOF:
                raise self.error(f"expects '}}' to close computation {comp.name} but the text ends")
            is_root = False
            if lx.at(L.IDENT, "ROOT"):
                is_root = True
                at = lx.start
                lx.advance()
            inst = self.parse_instruction(comp)
            if is_root:
                if root is not None:
                    raise self.error("one computation should have only one ROOT", at,
                                     hint=f"ROOT was already given to {root.name}")
                root = inst
        if not comp.instructions:
            raise self.error(f"computation {comp.name} has no instructions")
        lx.advance()
        comp.root = root if root is not None else comp.instructions[-1]
        lx.computation, lx.instruction, self.names = outer
        self.elements = outer_elements

    # --- instructions -----------------------------------------------------------------------
    def parse_instruction(self, comp: HloComputation) -> HloInstruction:
        lx = self.lx
        at = lx.start
        if lx.kind == L.ATTR:          # "x=f32[] ..." written without spaces
            name = lx.value
            lx.advance()
        elif lx.kind in (L.NAME, L.IDENT):
            name = lx.value
            if lx.kind == L.NAME and self.text[lx.end - 1] == ":":
                raise self.error(f"expects an instruction name but sees '{name}:'")
            lx.advance()
            self.expect_punct("=", "in instruction")
        else:
            raise self.error(f"expects an instruction name but sees {lx.describe()}")
        prev = self.names.get(name)
        if prev is not None and id(prev) in self.element_ids:
            prev.name = self.fresh_name(name)   # a later definition keeps its name
            self.names[prev.name] = prev
            del self.names[name]
            prev = None
        if prev is not None:
            raise self.error(f"instruction already exists: {name}", at,
                             hint=f"first defined on line {prev.location.line}" if prev.location else None)
        return self.parse_instruction_rest(comp, name, at, allow_attributes=True)

    def parse_instruction_rest(self, comp: HloComputation, name: str, at: int,
                               allow_attributes: bool) -> HloInstruction:
        lx = self.lx
        outer, lx.instruction = lx.instruction, name
        shape: Shape | None = None
        if self.at_shape_start():
            shape = self.parse_shape()
        if lx.kind != L.IDENT:
            raise self.error(f"expects opcode but sees {lx.describe()}")
        opcode_at = lx.start
        opcode = opcode_named(lx.value)
        if opcode is None:
            guess = suggest_opcode(lx.value, OPCODES)
            raise self.error(f"unknown opcode: {lx.value}", opcode_at,
                             hint=f"did you mean {guess}?" if guess else None)
        spec = OPCODES[opcode]
        lx.advance()
        # the shape is None until _infer_omitted_shapes when the text leaves it out
        inst = HloInstruction(name=name, opcode=opcode, shape=shape,  # type: ignore[arg-type]
                              location=lx.location(at), parent=comp)
        self.expect_punct("(", f"after opcode {opcode}")
        if opcode == Opcode.PARAMETER:
            inst.parameter_number = self.expect_int("parameter number")
            if inst.parameter_number < 0:
                raise self.error("parameter number must be non-negative", opcode_at)
        elif opcode == Opcode.CONSTANT:
            if shape is None:
                raise self.error("constant needs its shape written before the opcode", opcode_at)
            inst.literal = self.parse_literal(shape)
        else:
            inst.operands = self.parse_operands(comp)
        self.expect_punct(")", f"to close the operands of {opcode}")
        n = len(inst.operands)
        if n < spec.min_operands or (spec.max_operands is not None and n > spec.max_operands):
            raise self.error(f"{opcode} expects {spec.arity_text} operands, but has {n} operands",
                             opcode_at)
        if allow_attributes:
            while lx.at_punct(","):
                lx.advance()
                self.parse_attribute(inst)
        missing = sorted(spec.required - inst.attrs.keys())
        if missing:
            raise self.error(f"attribute {missing[0]} is expected but not seen", opcode_at)
        if shape is None and spec.shape_required:
            raise self.error(f"{opcode} needs its result shape written before the opcode", opcode_at)
        self.names[name] = inst
        comp.instructions.append(inst)
        lx.instruction = outer
        return inst

    def at_shape_start(self) -> bool:
        lx = self.lx
        if lx.kind == L.IDENT and lx.value in ELEMENT_TYPES:
            return self.next_char() == "["
        return lx.at_punct("(")

    def parse_operands(self, comp: HloComputation) -> list[HloInstruction]:
        lx = self.lx
        operands: list[HloInstruction] = []
        if lx.at_punct(")"):
            return operands
        while True:
            operands.append(self.parse_operand(comp))
            if not self.accept_punct(","):
                break
        return operands

    def parse_operand(self, comp: HloComputation) -> HloInstruction:
        lx = self.lx
        shape_at = lx.start
        declared: Shape | None = None
        if self.at_shape_start():
            declared = self.parse_shape()
        at = lx.start
        if lx.kind == L.IDENT and lx.value in OPCODES and self.next_char() == "(":
            self.enter()
            self.anon_counter += 1
            anon = f"{lx.value}.anon"
            while anon in self.names:
                anon = f"{lx.value}.anon.{self.anon_counter}"
                self.anon_counter += 1
            if declared is not None:
                lx.skip_to_offset(shape_at)   # let the nested instruction read its own shape
            inst = self.parse_instruction_rest(comp, anon, at, allow_attributes=False)
            self.leave()
            return inst
        if lx.kind not in (L.NAME, L.IDENT):
            raise self.error(f"expects an operand name but sees {lx.describe()}")
        name = lx.value
        found = self.names.get(name)
        if found is None:
            guess = difflib.get_close_matches(name, list(self.names), n=1)
            raise self.error(f"instruction does not exist: {name}", at,
                             hint=f"did you mean {guess[0]}?" if guess else None)
        inst = found
        lx.advance()
        while lx.at_punct("#"):
            inst = self.tuple_element(comp, inst, at)
        if declared is not None and inst.shape is not None and not compatible(declared, inst.shape):
            raise self.error(f"the declared operand shape {declared.to_text(False)} is not "
                             f"compatible with the shape of {inst.name}, "
                             f"{inst.shape.to_text(False)}", shape_at)
        return inst

    def tuple_element(self, comp: HloComputation, tuple_: HloInstruction,
                      at: int) -> HloInstruction:
        """``%t#1``: element 1 of tuple-shaped ``%t``, as newer XLA dumps write operands. XLA's
        parser reads it as an implicit ``get-tuple-element`` named ``t_1``, made once per
        element and computation, just before its first user; so does this one."""
        lx = self.lx
        lx.advance()
        index_at = lx.start
        index = self.expect_int("tuple element index after '#'")
        shape = tuple_.shape
        if shape is not None and not shape.is_tuple:
            raise self.error(f"'#{index}' names a tuple element, but {tuple_.name} has the "
                             f"non-tuple shape {shape.to_text(False)}", index_at)
        if shape is not None and not 0 <= index < len(shape.elements):
            raise self.error(f"tuple element index {index} is out of bounds for {tuple_.name} of "
                             f"shape {shape.to_text(False)}", index_at)
        key = (id(tuple_), index)
        element = self.elements.get(key)
        if element is None:
            element = HloInstruction(
                name=self.fresh_name(f"{tuple_.name}_{index}"), opcode=Opcode.GET_TUPLE_ELEMENT,
                shape=None if shape is None else shape.elements[index],
                operands=[tuple_], attrs={"index": index}, location=lx.location(at), parent=comp)
            self.elements[key] = element
            self.element_ids.add(id(element))
            self.names[element.name] = element
            comp.instructions.append(element)
        return element

    def fresh_name(self, base: str) -> str:
        """``base``, or XLA's uniquified ``base.N`` when an instruction already has it."""
        name, k = base, 1
        while name in self.names:
            name = f"{base}.{k}"
            k += 1
        return name

    # --- attributes -------------------------------------------------------------------------
    def parse_attribute(self, inst: HloInstruction) -> None:
        lx = self.lx
        if lx.kind != L.ATTR:
            raise self.error(f"expects an attribute (name=value) but sees {lx.describe()}")
        name, at = lx.value, lx.start
        spec = OPCODES[inst.opcode]
        if name not in spec.attrs and name not in COMMON_ATTRIBUTES:
            allowed = ", ".join(sorted(spec.attrs | COMMON_ATTRIBUTES))
            hint = None
            guess = difflib.get_close_matches(name, list(spec.attrs | COMMON_ATTRIBUTES), n=1)
            if guess:
                hint = f"did you mean {guess[0]}?"
            raise self.error(f'unexpected attribute "{name}" for {inst.opcode}. Allowed attributes: '
                             f"{allowed}", at, hint=hint)
        if name in inst.attrs:
            raise self.error(f"attribute {name} already exists", at)
        lx.advance()
        value_at = lx.start
        value = getattr(self, "attr_" + ATTRIBUTE_KINDS[name])()
        values = ATTRIBUTE_VALUES.get(name)
        if values is not None and str(value) not in values:
            guess = difflib.get_close_matches(str(value), list(values), n=1)
            raise self.error(f"unexpected value {value} for attribute {name}; expected one of "
                             f"{', '.join(sorted(values))}", value_at,
                             hint=f"did you mean {guess[0]}?" if guess else None)
        if isinstance(value, _PendingComputation) or (
                isinstance(value, tuple) and any(isinstance(v, _PendingComputation) for v in value)):
            self.pending.append(inst)
        inst.attrs[name] = value

    def attr_int(self) -> int:
        return self.expect_int()

    def attr_float(self) -> float:
        lx = self.lx
        try:
            v = float(scalar_value(lx.value, F64)) if lx.kind in (L.INT, L.FLOAT, L.IDENT) else None
        except LiteralTextError:
            v = None
        if v is None:
            raise self.error(f"expects a number but sees {lx.describe()}")
        lx.advance()
        return v

    def attr_bool(self) -> bool:
        return self.parse_bool()

    def parse_bool(self) -> bool:
        lx = self.lx
        if lx.kind == L.IDENT and lx.value in ("true", "false"):
            v = lx.value == "true"
            lx.advance()
            return v
        raise self.error(f"expects true or false but sees {lx.describe()}")

    def attr_string(self) -> str:
        lx = self.lx
        if lx.kind != L.STRING:
            raise self.error(f"expects a quoted string but sees {lx.describe()}")
        v = unquote_string(lx.value[1:-1])
        lx.advance()
        return v

    def attr_identifier(self) -> Identifier:
        lx = self.lx
        if lx.kind not in (L.IDENT, L.INT):
            raise self.error(f"expects a keyword but sees {lx.describe()}")
        v = Identifier(lx.value)
        lx.advance()
        return v

    def attr_identifier_list(self) -> IdentifierList:
        lx = self.lx
        self.expect_punct("{")
        out: list[str] = []
        while lx.kind == L.IDENT:
            out.append(lx.value)
            lx.advance()
            if not self.accept_punct(","):
                break
        self.expect_punct("}")
        return IdentifierList(tuple(out))

    def attr_int_list(self) -> tuple[int, ...]:
        lx = self.lx
        self.expect_punct("{", "to open a list of integers")
        out: list[int] = []
        if not lx.at_punct("}"):
            out.append(self.expect_int())
            while self.accept_punct(","):
                out.append(self.expect_int())
        self.expect_punct("}", "to close a list of integers")
        return tuple(out)

    def attr_slice(self) -> SliceSpec:
        self.expect_punct("{", "to open slice")
        dims: list[SliceDim] = []
        while self.lx.at_punct("["):
            self.lx.advance()
            start = self.expect_int("slice start")
            self.expect_punct(":", "in slice range")
            limit = self.expect_int("slice limit")
            stride = 1
            if self.accept_punct(":"):
                stride = self.expect_int("slice stride")
            self.expect_punct("]", "to close a slice range")
            dims.append(SliceDim(start, limit, stride))
            if not self.accept_punct(","):
                break
        self.expect_punct("}", "to close slice")
        return SliceSpec(tuple(dims))

    def attr_padding(self) -> PaddingConfig:
        lx = self.lx
        if lx.at_punct("{") and self.next_char() == "}":
            lx.advance()
            lx.advance()
            return PaddingConfig(())
        if lx.kind != L.PAD:
            raise self.error(f"expects a padding pattern like 0_0x1_1 but sees {lx.describe()}")
        dims = []
        for part in lx.value.split("x"):
            nums = [int(v) for v in re.findall(r"-?\d+", part)]
            dims.append(PadDim(nums[0], nums[1], nums[2] if len(nums) > 2 else 0))
        lx.advance()
        return PaddingConfig(tuple(dims))

    def attr_window(self) -> Window:
        lx = self.lx
        self.expect_punct("{", "to open window")
        fields: dict[str, list[Any]] = {}   # ints, or (low, high) pairs for pad
        while lx.kind == L.ATTR:
            key, at = lx.value, lx.start
            lx.advance()
            if key in fields:
                raise self.error(f"window attribute {key} already exists", at)
            if key == "pad":
                if lx.kind != L.PAD:
                    raise self.error(f"expects a padding pattern like 1_1x0_0 but sees {lx.describe()}")
                fields[key] = [tuple(int(v) for v in re.findall(r"-?\d+", p)) for p in lx.value.split("x")]
            elif key in ("size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
                if lx.kind == L.DXD:
                    fields[key] = [int(v) for v in lx.value.split("x")]
                elif lx.kind == L.INT:
                    fields[key] = [int(lx.value)]
                else:
                    raise self.error(f"expects a window {key} like 3x3 but sees {lx.describe()}")
            else:
                raise self.error(f"unknown window attribute {key}; expected size, stride, pad, "
                                 "lhs_dilate, rhs_dilate or rhs_reversal", at)
            lx.advance()
        end = lx.start
        self.expect_punct("}", "to close window")
        if not fields:
            return Window(())
        if "size" not in fields:
            raise self.error("window attribute size is expected but not seen", end)
        rank = len(fields["size"])
        for key, vals in fields.items():
            if len(vals) != rank:
                raise self.error(f"window {key} has {len(vals)} dimensions, but size has {rank}", end)
        dims = []
        for i in range(rank):
            pad = fields.get("pad", [(0, 0)] * rank)[i]
            if len(pad) != 2:
                raise self.error("window pad entries are low_high pairs", end)
            dims.append(WindowDim(
                size=fields["size"][i], stride=fields.get("stride", [1] * rank)[i],
                pad_low=pad[0], pad_high=pad[1],
                lhs_dilation=fields.get("lhs_dilate", [1] * rank)[i],
                rhs_dilation=fields.get("rhs_dilate", [1] * rank)[i],
                reversal=bool(fields.get("rhs_reversal", [0] * rank)[i])))
        return Window(tuple(dims))

    def attr_dim_labels(self) -> ConvDimensionNumbers:
        lx = self.lx
        if lx.kind != L.DIM_LABELS:
            raise self.error(f"expects dim_labels like b01f_01io->b01f but sees {lx.describe()}")
        try:
            value = parse_dim_labels(lx.value)
        except ValueError as e:
            raise self.error(str(e)) from None
        lx.advance()
        return value

    def attr_computation(self) -> HloComputation | _PendingComputation:
        lx = self.lx
        if lx.at_punct("{"):
            return self.parse_inline_computation()
        if lx.kind not in (L.NAME, L.IDENT):
            raise self.error(f"expects a computation name but sees {lx.describe()}")
        value = self.computations.get(lx.value)
        found = value if value is not None else _PendingComputation(lx.value,
                                                                    lx.location(lx.start))
        lx.advance()
        return found

    def attr_computation_list(self) -> tuple[HloComputation | _PendingComputation, ...]:
        self.expect_punct("{", "to open a list of computations")
        out = []
        while not self.lx.at_punct("}"):
            out.append(self.attr_computation())
            if not self.accept_punct(","):
                break
        self.expect_punct("}", "to close a list of computations")
        return tuple(out)

    def parse_inline_computation(self) -> HloComputation:
        self.enter()
        name = "_"
        k = 1
        while name in self.computations:
            name = f"_.{k}"
            k += 1
        comp = HloComputation(name=name, location=self.lx.location(self.lx.start))
        self.computations[name] = comp
        self.parse_body(comp)
        self.order.append(comp)
        self.leave()
        return comp

    def attr_operand_aliasing(self) -> OperandAliasing:
        self.expect_punct("{", "to open output_to_operand_aliasing")
        entries = []
        while not self.lx.at_punct("}"):
            out = self.parse_shape_index()
            self.expect_punct(":", "after the output index")
            self.expect_punct("(", "to open an alias entry")
            operand = self.expect_int("operand number")
            self.expect_punct(",", "after the operand number")
            idx = self.parse_shape_index()
            self.expect_punct(")", "to close the alias entry")
            entries.append(OperandAlias(out, operand, idx))
            if not self.accept_punct(","):
                break
        self.expect_punct("}", "to close output_to_operand_aliasing")
        return OperandAliasing(tuple(entries))

    def attr_shape_list(self) -> tuple[Shape, ...]:
        self.expect_punct("{", "to open a list of shapes")
        out: list[Shape] = []
        while not self.lx.at_punct("}"):
            out.append(self.parse_shape())
            if not self.accept_punct(","):
                break
        self.expect_punct("}", "to close a list of shapes")
        return tuple(out)

    def attr_shape(self) -> Shape:
        return self.parse_shape()

    def attr_shaped_literal(self) -> ShapedLiteral:
        """``literal=s32[2] {1, 2}``: a brace group after the shape is the literal unless a
        second one follows (``s32[2]{0} {1, 2}``), where the first is the layout."""
        lx = self.lx
        start = lx.start
        shape = self.parse_shape(with_layout=False)
        if lx.at_punct("{"):
            brace = lx.start
            lx.take_balanced()
            has_layout = lx.at_punct("{")
            lx.skip_to_offset(start if has_layout else brace)
            if has_layout:
                shape = self.parse_shape()
        return ShapedLiteral(self.parse_literal(shape))

    def attr_raw(self) -> RawText:
        return RawText(self.lx.take_raw_value())

    def attr_replica_groups(self) -> RawText:
        """Kept verbatim like ``attr_raw``; but a mesh with its devices out of order prints as
        ``mesh[...], device_ids=(...) {axes}``, whose comma belongs to the value."""
        lx = self.lx
        raw = lx.take_raw_value()
        if raw.startswith("mesh[") and lx.at_punct(","):
            comma = lx.start
            lx.advance()
            if lx.at(L.ATTR, "device_ids"):
                lx.advance()
                return RawText(f"{raw}, device_ids={lx.take_raw_value()}")
            lx.skip_to_offset(comma)
        return RawText(raw)

    def attr_metadata(self) -> Metadata:
        lx = self.lx
        if not lx.at_punct("{"):
            raise self.error(f"expects '{{' to open metadata but sees {lx.describe()}")
        return Metadata(lx.take_balanced())

    def attr_backend_config(self) -> BackendConfig:
        lx = self.lx
        if lx.kind == L.STRING:
            v = BackendConfig(unquote_string(lx.value[1:-1]), quoted=True)
            lx.advance()
            return v
        if lx.at_punct("{"):
            return BackendConfig(lx.take_balanced(), quoted=False)
        raise self.error(f"expects a quoted string or '{{' for backend_config but sees {lx.describe()}")

    def attr_instruction_list(self) -> tuple[HloInstruction, ...]:
        lx = self.lx
        self.expect_punct("{", "to open a list of instructions")
        out = []
        while lx.kind in (L.NAME, L.IDENT):
            target = self.names.get(lx.value)
            if target is None:
                raise self.error(f"instruction does not exist: {lx.value}")
            out.append(target)
            lx.advance()
            if not self.accept_punct(","):
                break
        self.expect_punct("}", "to close a list of instructions")
        return tuple(out)

    # --- shapes -----------------------------------------------------------------------------
    def parse_shape(self, with_layout: bool = True) -> Shape:
        lx = self.lx
        if lx.at_punct("("):
            self.enter()
            lx.advance()
            elements: list[Shape] = []
            if not lx.at_punct(")"):
                elements.append(self.parse_shape())
                while self.accept_punct(","):
                    elements.append(self.parse_shape())
            self.expect_punct(")", "to close a tuple shape")
            self.leave()
            return TupleShape(tuple(elements))
        if lx.kind != L.IDENT or lx.value not in ELEMENT_TYPES:
            raise self.error(f"expects a shape (like f32[4,8]) but sees {lx.describe()}")
        simple = self.simple_array_shape(with_layout)
        if simple is not None:
            return simple
        et = ELEMENT_TYPES[lx.value]
        lx.advance()
        self.expect_punct("[", f"after element type {et.name}")
        dims: list[int] = []
        dynamic: list[bool] = []
        if not lx.at_punct("]"):
            while True:
                if lx.at_punct("?"):
                    lx.advance()
                    dims.append(-1)
                    dynamic.append(True)
                else:
                    is_dyn = self.accept_punct("<=")
                    at = lx.start
                    d = self.expect_int("dimension size")
                    if not 0 <= d < 1 << 63:
                        raise self.error(f"dimension size must be between 0 and 2^63-1, got {d}", at)
                    dims.append(d)
                    dynamic.append(is_dyn)
                if not self.accept_punct(","):
                    break
        self.expect_punct("]", "to close the dimensions")
        layout = None
        if with_layout and lx.at_punct("{"):
            c = self.next_char()
            if c.isdigit() or c == ":":     # as XLA: anything else after '{' opens a body
                layout = self.parse_layout(len(dims))
        return ArrayShape(et, tuple(dims), tuple(dynamic), layout)

    def simple_array_shape(self, with_layout: bool) -> ArrayShape | None:
        """The common ``f32[64,128]{1,0}`` read with one regular expression instead of a dozen
        tokens (most of a dump's tokens are shapes), shared between equal spellings. None
        when the shape is anything else, or is wrong, for the general path to read or report."""
        lx = self.lx
        m = _SIMPLE_SHAPE.match(self.text, lx.start)
        if m is None or (m.group(3) is not None and not with_layout):
            return None
        skip = L._SKIP.match(self.text, m.end())
        after = skip.end() if skip else m.end()
        if self.text.startswith("{", after):        # a layout with a tail, or a body
            return None
        key = m.group()
        shape = self.shapes.get(key)
        if shape is None:
            dims = tuple(int(d) for d in m.group(2).split(",")) if m.group(2) else ()
            m2m = tuple(int(d) for d in m.group(3).split(",")) if m.group(3) else None
            if any(d >= 1 << 63 for d in dims) or (m2m is not None and sorted(m2m) != list(range(len(dims)))):
                return None
            layout = Layout(m2m) if m2m is not None else None
            shape = self.shapes[key] = ArrayShape(ELEMENT_TYPES[m.group(1)], dims, (False,) * len(dims), layout)
        lx.skip_to_offset(m.end())
        return shape

    def parse_layout(self, rank: int) -> Layout:
        lx = self.lx
        open_at = lx.start
        lx.advance()
        m2m: list[int] = []
        while lx.kind == L.INT:
            m2m.append(int(lx.value))
            lx.advance()
            if not self.accept_punct(","):
                break
        tail = ""
        if lx.at_punct(":"):
            start = lx.end
            depth = 0
            i = start
            while i < len(self.text):
                ch = self.text[i]
                if ch == "(":
                    depth += 1
                elif ch == ")":
                    depth -= 1
                elif ch == "}" and depth == 0:
                    break
                i += 1
            else:
                raise self.error("unterminated layout", open_at)
            tail = self.text[start:i].strip()
            lx.skip_to_offset(i)
        self.expect_punct("}", "to close the layout")
        if m2m and len(m2m) != rank:
            raise self.error(f"Dimensions size is {rank}, but minor to major size is {len(m2m)}",
                             open_at)
        if m2m and sorted(m2m) != list(range(rank)):
            raise self.error(f"layout {{{','.join(map(str, m2m))}}} is not a permutation of the "
                             f"{rank} dimensions", open_at)
        return Layout(tuple(m2m), tail)

    # --- literals ---------------------------------------------------------------------------
    def parse_literal(self, shape: Shape) -> Literal:
        lx = self.lx
        if shape.is_tuple:
            self.enter()
            self.expect_punct("(", "to open a tuple literal")
            elements = []
            for i, sub in enumerate(shape.elements):
                if i:
                    self.expect_punct(",", "between tuple literal elements")
                elements.append(self.parse_literal(sub))
            self.expect_punct(")", "to close the tuple literal")
            self.leave()
            return Literal(shape, elements=tuple(elements))
        assert isinstance(shape, ArrayShape)
        if not shape.is_array:
            raise self.error(f"a constant cannot have shape {shape}")
        if shape.is_unbounded:
            raise self.error(f"a constant cannot have the unbounded shape {shape}")
        if shape.rank == 0:
            return Literal(shape, data=self.parse_scalar(shape))
        if lx.kind in (L.INT, L.FLOAT, L.IDENT):
            return self.parse_bare_array_value(shape)
        if not lx.at_punct("{"):
            raise self.error(f"expects '{{' to open an array literal of shape {shape.to_text(False)} "
                             f"but sees {lx.describe()}")
        open_at = lx.start
        if self.next_char() == ".":
            lx.advance()
            if lx.kind != L.DOTS:
                raise self.error(f"expects '...' but sees {lx.describe()}")
            lx.advance()
            self.expect_punct("}", "after '...'")
            self.warn(open_at, f"constant {lx.instruction} was printed elided as {{...}}: its values "
                      "are unknown (XLA would silently use zeros), so it runs only with "
                      "elided_constants='zeros' or 'random' (--elided)")
            return Literal(shape, elided=True)
        raw = lx.take_balanced()
        try:
            return Literal(shape, data=read_array(raw, shape))
        except LiteralTextError as e:
            raise self.error(e.message, open_at + e.pos) from None

    def parse_bare_array_value(self, shape: ArrayShape) -> Literal:
        """``f32[4] constant(7)``: XLA's parser reads one value without braces for an array as
        its first element (row-major) and leaves the others zero, {7, 0, 0, 0}; it is not a
        broadcast, so a warning says so. A complex ``(re, im)`` or an array with no elements
        is an error there, as here."""
        at = self.lx.start
        if shape.element_count == 0:
            raise self.error(f"expects nested array in rank {shape.rank}, but sees 0")
        first = self.parse_scalar(ArrayShape(shape.element_type, ()))
        data = np.zeros(shape.dims, dtype=first.dtype)
        data.flat[0] = first[()]
        self.warn(at, f"constant {self.lx.instruction} of shape {shape.to_text(False)} has one "
                  f"value without braces: XLA reads it as the first element and zeros elsewhere, "
                  f"not as a broadcast")
        return Literal(shape, data=data)

    def parse_scalar(self, shape: ArrayShape) -> np.ndarray:
        """A rank-0 value: one token, or a parenthesised ``(re, im)`` for complex types."""
        lx = self.lx
        at = lx.start
        if lx.at_punct("("):
            raw = lx.take_balanced()
        elif lx.kind in (L.INT, L.FLOAT, L.IDENT):
            raw = lx.value
            lx.advance()
        else:
            raise self.error(f"unexpected token type in a literal: {lx.describe()}")
        try:
            return read_scalar(raw, shape)
        except LiteralTextError as e:
            raise self.error(e.message, at + e.pos) from None

    # --- computation references -------------------------------------------------------------
    def resolve_pending(self) -> None:
        for inst in self.pending:
            for key, value in inst.attrs.items():
                if isinstance(value, _PendingComputation):
                    inst.attrs[key] = self._resolve(inst, value)
                elif isinstance(value, tuple):
                    inst.attrs[key] = tuple(self._resolve(inst, v) if isinstance(v, _PendingComputation)
                                            else v for v in value)

    def _resolve(self, inst: HloInstruction, ref: _PendingComputation) -> HloComputation:
        comp = self.computations.get(ref.name)
        if comp is None:
            guess = difflib.get_close_matches(ref.name, list(self.computations), n=1)
            raise HloParseError(f"computation does not exist: {ref.name}", location=ref.location,
                                hint=f"did you mean {guess[0]}?" if guess else None,
                                computation=inst.parent.name if inst.parent else None,
                                instruction=inst.name)
        return comp


# --- module post-processing -----------------------------------------------------------------

def _callees_first(order: list[HloComputation], entry: HloComputation) -> list[HloComputation]:
    """Computations ordered so that every callee precedes its callers, entry last."""
    def recursion(comp: HloComputation) -> None:
        raise HloParseError(f"computation {comp.name} calls itself (directly or indirectly); "
                            f"HLO has no recursion", location=comp.location, computation=comp.name)
    ordered = post_order([c for c in order if c is not entry] + [entry], _callees, recursion)
    return [c for c in ordered if c is not entry] + [entry]


def _callees(c: HloComputation) -> list[HloComputation]:
    seen: list[HloComputation] = []
    for inst in c.instructions:
        for callee in inst.called_computations:
            if all(callee is not s for s in seen):
                seen.append(callee)
    return seen


def _infer_omitted_shapes(module: HloModule) -> None:
    """Fill in result shapes the text left out, callees first, from the opcode table's rules."""
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.shape is None:
                inst.shape = infer_shape(inst)


def parse(text: str) -> HloModule:
    """Parse HLO text into a module (no verification; see ``runtime.hlo.verifier``)."""
    parser = Parser(text)
    try:
        return parser.parse_module()
    except RecursionError:
        raise parser.error("the text nests too deeply to parse") from None


def parse_shape(text: str) -> Shape:
    p = Parser(text)
    shape = p.parse_shape()
    if p.lx.kind != L.EOF:
        raise p.error(f"unexpected {p.lx.describe()} after the shape")
    return shape
