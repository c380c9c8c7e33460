"""The HLO IR: modules, computations and instructions as plain dataclasses.

Instructions hold their operands as object references and their attributes in one ordered
dict (text order, so printing keeps the author's order), read through typed properties
(``inst.dimensions``, generated in ``attribute_accessors``). Computation references inside
attributes are ``HloComputation`` objects (or tuples of them), so renaming or cloning a
computation needs no string fix-ups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, TypeVar

from ..errors import InternalCompilerError, SourceLocation
from .attribute_accessors import TypedAttributes
from .graph import post_order
from .literal import Literal
from .opcode_enum import Opcode
from .printer import module_to_text
from .shape import ArrayShape, Shape, ShapeIndex, TupleShape

_T = TypeVar("_T")


@dataclass(eq=False)
class HloInstruction(TypedAttributes):
    name: str
    opcode: Opcode
    shape: Shape
    operands: list[HloInstruction] = field(default_factory=list)
    attrs: dict[str, object] = field(default_factory=dict)
    literal: Literal | None = None
    parameter_number: int | None = None
    location: SourceLocation | None = None
    parent: HloComputation | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # passes build instructions from text names too; holding the member keeps every
        # instruction's opcode in the closed vocabulary (a misspelt name fails here)
        self.opcode = Opcode(self.opcode)

    def __repr__(self) -> str:
        return f"<{self.opcode} {self.name}: {self.shape}>"

    @property
    def called_computations(self) -> list[HloComputation]:
        """Computations this instruction calls, in attribute order."""
        out: list[HloComputation] = []
        for value in self.attrs.values():
            if isinstance(value, HloComputation):
                out.append(value)
            elif isinstance(value, tuple) and value and isinstance(value[0], HloComputation):
                out.extend(value)
        return out

    @property
    def array_shape(self) -> ArrayShape:
        """The shape of an instruction that produces an array. Lowering and the analyses call
        it where the opcode (or an earlier check) guarantees an array, so a tuple here is a bug
        in this compiler, reported at the instruction's line."""
        if isinstance(self.shape, TupleShape):
            raise self._wrong_shape("an array")
        return self.shape

    @property
    def tuple_shape(self) -> TupleShape:
        """The shape of a tuple-shaped instruction (``tuple``, a multi-output fusion, a while
        loop's state); an array here is a bug in this compiler, as for ``array_shape``."""
        if isinstance(self.shape, ArrayShape):
            raise self._wrong_shape("a tuple")
        return self.shape

    @property
    def param_number(self) -> int:
        """A parameter's number (``parameter_number`` is None for every other opcode); the
        callers index operands or signatures with it where the opcode is known."""
        if self.parameter_number is None:
            raise InternalCompilerError("parameter access", TypeError(
                f"{self.name} is a {self.opcode}, not a parameter"), instruction=self.name,
                location=self.location)
        return self.parameter_number

    def _wrong_shape(self, expected: str) -> InternalCompilerError:
        error = TypeError(f"{self.name} has shape {self.shape}, not {expected}")
        return InternalCompilerError("shape access", error, instruction=self.name,
                                     location=self.location)

    @property
    def control_predecessors(self) -> list[HloInstruction]:
        return list(self.optional_attr("control-predecessors", tuple) or ())

    def optional_attr(self, name: str, kind: type[_T]) -> _T | None:
        """An optional attribute of type ``kind``, or None where the text leaves it out (the
        generated accessors, ``inst.window``, are for the attributes an opcode requires)."""
        value = self.attrs.get(name)
        if value is None:
            return None
        if not isinstance(value, kind):
            raise self._wrong_attribute(name, kind.__name__)
        return value

    def int_attr(self, name: str, default: int) -> int:
        """An optional integer attribute (``index_vector_dim``, ``feature_group_count``...),
        ``default`` where the text leaves it out: XLA's printer omits defaults."""
        value = self.attrs.get(name, default)
        if not isinstance(value, int):
            raise self._wrong_attribute(name, "int")
        return value

    def ints_attr(self, name: str, default: tuple[int, ...] = ()) -> tuple[int, ...]:
        """An optional list-of-integers attribute (``dimensions``, ``lhs_batch_dims``...)."""
        value = self.attrs.get(name, default)
        if not isinstance(value, tuple) or not all(isinstance(v, int) for v in value):
            raise self._wrong_attribute(name, "list of ints")
        return value

    def bool_attr(self, name: str, default: bool) -> bool:
        """An optional boolean attribute (``largest``, ``custom_call_has_side_effect``...)."""
        value = self.attrs.get(name, default)
        if not isinstance(value, bool):
            raise self._wrong_attribute(name, "bool")
        return value

    def _wrong_attribute(self, name: str, expected: str) -> InternalCompilerError:
        """The parser reads each attribute by its kind, so a value of another type is a bug
        in a pass that built the instruction."""
        error = TypeError(f"attribute {name} of {self.name} is "
                          f"{type(self.attrs.get(name)).__name__}, not {expected}")
        return InternalCompilerError("attribute access", error, instruction=self.name,
                                     location=self.location)

    @property
    def comparison_type(self) -> str | None:
        """A compare's comparison type (FLOAT, TOTALORDER, SIGNED, UNSIGNED), or None for the
        element type's default. XLA printed it as ``type=`` until 2026 and now prints
        ``order=TOTAL`` or ``order=PARTIAL`` instead, which only decides between the two float
        types (integers always compare in total order)."""
        written = self.attrs.get("type")
        if written is not None:
            return str(written)
        order = self.attrs.get("order")
        if order is None or not self.operands \
                or not self.operands[0].array_shape.element_type.is_float:
            return None
        return "TOTALORDER" if str(order) == "TOTAL" else "FLOAT"

    def operand_index(self, operand: HloInstruction) -> int:
        for i, op in enumerate(self.operands):
            if op is operand:
                return i
        raise ValueError(f"{operand.name} is not an operand of {self.name}")

    @property
    def is_root(self) -> bool:
        return self.parent is not None and self.parent.root is self


@dataclass(frozen=True)
class SignatureEntry:
    """One shape of a written computation signature, where it was written."""

    name: str
    shape: Shape
    location: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ComputationSignature:
    """The ``(p: f32[4]) -> f32[]`` a computation was written with. XLA takes parameters from
    the ``parameter(N)`` instructions, not from here, so a signature that disagrees with the
    body is a mistake the verifier reports rather than a second source of truth."""

    parameters: tuple[SignatureEntry, ...]
    result: SignatureEntry


@dataclass(eq=False)
class HloComputation:
    name: str
    instructions: list[HloInstruction] = field(default_factory=list)
    root: HloInstruction | None = None
    is_entry: bool = False
    execution_thread: str | None = None
    location: SourceLocation | None = None
    signature: ComputationSignature | None = None   # as written in the text, if it was

    def __repr__(self) -> str:
        return f"<computation {self.name}: {len(self.instructions)} instructions>"

    @property
    def root_instruction(self) -> HloInstruction:
        """The root, which every parsed or built computation has: ``root`` is None only while
        the parser reads the computation's body."""
        if self.root is None:
            raise InternalCompilerError("computation access", ValueError(
                f"computation {self.name} has no root"), computation=self.name,
                location=self.location)
        return self.root

    @property
    def parameters(self) -> list[HloInstruction]:
        params = [i for i in self.instructions if i.opcode == Opcode.PARAMETER]
        return sorted(params, key=lambda i: i.parameter_number or 0)

    def parameter(self, number: int) -> HloInstruction:
        for i in self.instructions:
            if i.opcode == Opcode.PARAMETER and i.parameter_number == number:
                return i
        raise ValueError(f"computation {self.name} has no parameter {number}")

    @property
    def parameter_shapes(self) -> list[Shape]:
        return [p.shape for p in self.parameters]

    @property
    def result_shape(self) -> Shape:
        assert self.root is not None
        return self.root.shape

    def signature_text(self) -> str:
        params = ", ".join(f"{p.name}: {p.shape.to_text(False)}" for p in self.parameters)
        return f"({params}) -> {self.result_shape.to_text(False)}"

    def post_order(self) -> list[HloInstruction]:
        """Operands (and control predecessors) before users; text order breaks ties."""
        return post_order(self.instructions, lambda i: i.operands + i.control_predecessors)

    def users(self) -> dict[int, list[HloInstruction]]:
        """id(instruction) -> its users in this computation (one entry per use)."""
        out: dict[int, list[HloInstruction]] = {id(i): [] for i in self.instructions}
        for inst in self.instructions:
            for op in inst.operands:
                out.setdefault(id(op), []).append(inst)
        return out


@dataclass(frozen=True)
class AliasEntry:
    """``input_output_alias`` entry: output leaf ``output_index`` may (or must) share the
    buffer of parameter ``parameter_number`` at ``parameter_index``."""

    output_index: ShapeIndex
    parameter_number: int
    parameter_index: ShapeIndex
    kind: str = "may-alias"   # "may-alias" | "must-alias"
    location: SourceLocation | None = field(default=None, compare=False)
    short_form: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class BufferDonor:
    parameter_number: int
    parameter_index: ShapeIndex
    location: SourceLocation | None = field(default=None, compare=False)


@dataclass(eq=False)
class HloModule:
    name: str
    computations: list[HloComputation] = field(default_factory=list)
    entry: HloComputation | None = None
    is_scheduled: bool = False
    input_output_alias: list[AliasEntry] = field(default_factory=list)
    buffer_donors: list[BufferDonor] = field(default_factory=list)
    entry_computation_layout: tuple[tuple[Shape, ...], Shape] | None = None
    header_attrs: dict[str, object] = field(default_factory=dict)   # the rest, verbatim
    stack_frames: str = ""          # FileNames/FunctionNames/FileLocations/StackFrames block
    attribute_locations: dict[str, SourceLocation] = field(default_factory=dict, repr=False)
    source_lines: list[str] = field(default_factory=list, repr=False)
    warnings: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"<HloModule {self.name}: {len(self.computations)} computations>"

    @property
    def entry_computation(self) -> HloComputation:
        """The entry, which every parsed module has: ``entry`` is None only while the parser
        reads the module."""
        if self.entry is None:
            raise InternalCompilerError("module access", ValueError(
                f"module {self.name} has no entry computation"))
        return self.entry

    def computation(self, name: str) -> HloComputation:
        for c in self.computations:
            if c.name == name:
                return c
        raise ValueError(f"module {self.name} has no computation {name}")

    def instructions(self) -> Iterator[HloInstruction]:
        for c in self.computations:
            yield from c.instructions

    def to_text(self) -> str:
        return module_to_text(self)

    def __str__(self) -> str:
        return self.to_text()

    @property
    def result_shape(self) -> Shape:
        assert self.entry is not None
        return self.entry.result_shape

    @property
    def parameter_shapes(self) -> list[Shape]:
        assert self.entry is not None
        return self.entry.parameter_shapes

    def source_line(self, line: int) -> str:
        if 1 <= line <= len(self.source_lines):
            return self.source_lines[line - 1]
        return ""
