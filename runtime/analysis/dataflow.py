"""Dataflow: which value sits at every position (instruction, shape index) of the program.

A *value* is one piece of data, defined once; *positions* are every place it can be seen.
tuple / get-tuple-element / bitcast / call forward values instead of defining new ones, so
`gte(tuple(a, b), 1)` *is* b. Parameters of called computations are the caller's operand
values. Control flow defines "phi" values that merely name a buffer other values are written
into: a while defines one value per state index for its body/condition parameters (the loop
state seen by an iteration) and one for its result; a conditional defines one per output
index. Phi values write nothing themselves, which is what lets a loop carry a read-only input
unchanged in the same bytes.

Only sequential computations (entry, call/while/conditional callees) have positions; values
computed inside fusions and reducers never reach memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import Shape, ShapeIndex, index_text
from .call_graph import CallGraph, sequential_callees

ValueSet = dict[ShapeIndex, "HloValue"]

#: kinds of value; the last three are phi values (they write no bytes themselves)
WRITING_KINDS = frozenset({"def", "parameter", "constant"})


@dataclass(frozen=True)
class Use:
    instruction: HloInstruction
    operand_number: int
    operand_index: ShapeIndex


@dataclass(eq=False)
class HloValue:
    id: int
    instruction: HloInstruction    # where it is defined (for loop state: the body parameter)
    index: ShapeIndex
    shape: Shape
    # "def" | "parameter" | "constant" | "loop-state" | "while" | "conditional"
    kind: str
    site: HloInstruction | None = None   # the while that owns a loop-state value
    positions: list[tuple[HloInstruction, ShapeIndex]] = field(default_factory=list)
    uses: list[Use] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"<value {self.id} {self.label}>"

    @property
    def label(self) -> str:
        return self.instruction.name + (index_text(self.index) if self.index else "")

    @property
    def writes(self) -> bool:
        """Whether defining this value writes bytes (phi values only name a buffer)."""
        return self.kind in WRITING_KINDS

    @cached_property
    def size(self) -> int:
        return self.shape.byte_size


@dataclass
class LoopValues:
    """The phi values of one while: what an iteration sees and what the loop returns."""

    state: ValueSet
    result: ValueSet


class Dataflow:
    """Values, positions and uses of every sequential computation of a flattened module."""

    def __init__(self, module: HloModule, call_graph: CallGraph | None = None) -> None:
        assert module.entry is not None
        self.module = module
        self.call_graph = call_graph if call_graph is not None else CallGraph(module)
        self.values: list[HloValue] = []
        self.loops: dict[HloInstruction, LoopValues] = {}
        self._sets: dict[HloInstruction, ValueSet] = {}
        # tuple-valued instruction -> element -> its (index, value) pairs, in value-set order
        self._elements: dict[HloInstruction, dict[int, list[tuple[ShapeIndex, HloValue]]]] = {}
        self._bindings: dict[HloComputation, list[ValueSet]] = {}
        self._visit(module.entry)
        self._record_uses()

    # --- queries -------------------------------------------------------------------------
    def value_set(self, inst: HloInstruction) -> ValueSet:
        """index -> value for every position of ``inst`` (tuple nodes included)."""
        try:
            return self._sets[inst]
        except KeyError:
            where = inst.parent.name if inst.parent else "no computation"
            raise LookupError(f"{inst.name} (in {where}) is not in a sequential computation of "
                              f"module {self.module.name}") from None

    def value_at(self, inst: HloInstruction, index: ShapeIndex = ()) -> HloValue:
        return self.value_set(inst)[index]

    def has_positions(self, inst: HloInstruction) -> bool:
        return inst in self._sets

    def defined_by(self, inst: HloInstruction) -> list[HloValue]:
        """The values whose definition at ``inst`` writes bytes."""
        return [v for v in self._sets[inst].values() if v.instruction is inst and v.writes]

    # --- construction --------------------------------------------------------------------
    def _new(self, inst: HloInstruction, index: ShapeIndex, shape: Shape, kind: str,
             site: HloInstruction | None = None) -> HloValue:
        value = HloValue(len(self.values), inst, index, shape, kind, site)
        self.values.append(value)
        return value

    def _define_all(self, inst: HloInstruction, kind: str) -> ValueSet:
        return {index: self._new(inst, index, sub, kind) for index, sub in inst.shape.subshapes()}

    def _set(self, inst: HloInstruction, values: ValueSet) -> None:
        self._sets[inst] = values
        for index, value in values.items():
            value.positions.append((inst, index))

    def _visit(self, comp: HloComputation) -> None:
        for inst in comp.instructions:
            handler = _HANDLERS.get(inst.opcode, Dataflow._plain)
            self._set(inst, handler(self, inst))

    def _plain(self, inst: HloInstruction) -> ValueSet:
        return self._define_all(inst, "def")

    def _constant(self, inst: HloInstruction) -> ValueSet:
        return self._define_all(inst, "constant")

    def _parameter(self, inst: HloInstruction) -> ValueSet:
        comp = inst.parent
        if comp is self.module.entry:
            return self._define_all(inst, "parameter")
        assert comp is not None and inst.parameter_number is not None
        return self._bindings[comp][inst.parameter_number]

    def _forward_operand(self, inst: HloInstruction) -> ValueSet:
        return self._sets[inst.operands[0]]

    def _tuple(self, inst: HloInstruction) -> ValueSet:
        values: ValueSet = {(): self._new(inst, (), inst.shape, "def")}
        for k, op in enumerate(inst.operands):
            for index, value in self._sets[op].items():
                values[(k,) + index] = value
        return values

    def _get_tuple_element(self, inst: HloInstruction) -> ValueSet:
        return {index[1:]: value for index, value in self._element(inst.operands[0], inst.index)}

    def _element(self, inst: HloInstruction, k: int) -> list[tuple[ShapeIndex, HloValue]]:
        """The (index, value) pairs of ``inst``'s element ``k``, grouped once per tuple: a
        model's optimiser fusion has hundreds of outputs, each read by a get-tuple-element."""
        groups = self._elements.get(inst)
        if groups is None:
            groups = self._elements[inst] = {}
            for index, value in self._sets[inst].items():
                if index:
                    groups.setdefault(index[0], []).append((index, value))
        return groups.get(k, [])

    def _copy(self, inst: HloInstruction) -> ValueSet:
        """A copy of a tuple is shallow: a new pointer table, the same elements."""
        values = dict(self._sets[inst.operands[0]])
        values[()] = self._new(inst, (), inst.shape, "def")
        return values

    def _call(self, inst: HloInstruction) -> ValueSet:
        (callee,) = sequential_callees(inst)
        self._bindings[callee] = [self._sets[op] for op in inst.operands]
        self._visit(callee)
        assert callee.root is not None
        return self._sets[callee.root]

    def _while(self, inst: HloInstruction) -> ValueSet:
        condition, body = sequential_callees(inst)
        body_param = body.parameters[0]
        state = {index: self._new(body_param, index, sub, "loop-state", site=inst)
                 for index, sub in inst.shape.subshapes()}
        self._bindings[condition] = [state]
        self._bindings[body] = [state]
        self._visit(condition)
        self._visit(body)
        result = self._define_all(inst, "while")
        self.loops[inst] = LoopValues(state, result)
        return result

    def _conditional(self, inst: HloInstruction) -> ValueSet:
        for k, branch in enumerate(sequential_callees(inst)):
            self._bindings[branch] = [self._sets[inst.operands[k + 1]]]
            self._visit(branch)
        return self._define_all(inst, "conditional")

    def operand_values(self, inst: HloInstruction, k: int) -> list[tuple[ShapeIndex, HloValue]]:
        """The (index, value) pairs of operand ``k`` that ``inst`` touches: a
        get-tuple-element touches only the element it extracts."""
        if inst.opcode == Opcode.GET_TUPLE_ELEMENT:
            return list(self._element(inst.operands[k], inst.index))
        return list(self._sets[inst.operands[k]].items())

    def _record_uses(self) -> None:
        for inst in self._sets:
            for k in range(len(inst.operands)):
                for index, value in self.operand_values(inst, k):
                    value.uses.append(Use(inst, k, index))


_HANDLERS: dict[Opcode, Callable[[Dataflow, HloInstruction], ValueSet]] = {
    Opcode.PARAMETER: Dataflow._parameter,
    Opcode.CONSTANT: Dataflow._constant,
    Opcode.TUPLE: Dataflow._tuple,
    Opcode.GET_TUPLE_ELEMENT: Dataflow._get_tuple_element,
    Opcode.BITCAST: Dataflow._forward_operand,
    Opcode.DOMAIN: Dataflow._forward_operand,
    Opcode.OPT_BARRIER: Dataflow._forward_operand,
    Opcode.ADD_DEPENDENCY: Dataflow._forward_operand,
    Opcode.COPY: Dataflow._copy,
    Opcode.CALL: Dataflow._call,
    Opcode.WHILE: Dataflow._while,
    Opcode.CONDITIONAL: Dataflow._conditional,
}
