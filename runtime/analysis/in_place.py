"""When an instruction may write its result over one of its operands' bytes.

Two kinds of permission, both from hlo-reference §8.3/8.4:

* *must* share (in-place ops): dynamic-update-slice operand 0, scatter inputs, and declared
  ``output_to_operand_aliasing`` on custom-calls and fusions, plus fusions whose root is such an
  op on a fusion parameter. Their values are merged into one buffer.
* *may* share (operand reuse): an elementwise result may take the bytes of an operand that
  dies at that instruction, when both have the same physical shape. The executor's kernels
  compute element i from element i of each operand only in that case, which is what makes the
  overwrite safe. A fusion qualifies for an operand only if every use of that parameter inside
  the fused computation reads it at its own element (elementwise ops, reshapes that only add
  or drop size-1 dimensions, the update of a window output: ``loop_outputs``).
  A step that copies all its operands out before it writes any result (a multi-device
  collective's host step, whose custom-call carries a ``collective`` attribute saying so)
  may give any dying operand's bytes to any result of the same physical shape, as XLA's
  CPU backend runs all-reduce, all-to-all and collective-permute in place.

Being conservative costs a few bytes; being wrong is a silent wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..hlo.attributes import OperandAliasing
from ..hlo.ir import HloComputation, HloInstruction
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ArrayShape, Shape, ShapeIndex, subshape
from .loop_outputs import LoopOutput, loop_outputs

if TYPE_CHECKING:
    from .dataflow import Dataflow, HloValue


@dataclass(frozen=True)
class InPlacePair:
    """Output ``output_index`` is written into operand ``operand_number`` at ``operand_index``."""

    operand_number: int
    operand_index: ShapeIndex
    output_index: ShapeIndex


def _dynamic_update_slice_pairs(inst: HloInstruction) -> list[InPlacePair]:
    return [InPlacePair(0, (), ())]


def _scatter_pairs(inst: HloInstruction) -> list[InPlacePair]:
    inputs = (len(inst.operands) - 1) // 2
    if inputs == 1:
        return [InPlacePair(0, (), ())]
    return [InPlacePair(k, (), (k,)) for k in range(inputs)]


def _declared_pairs(inst: HloInstruction) -> list[InPlacePair]:
    declared = inst.attrs.get("output_to_operand_aliasing")
    if not isinstance(declared, OperandAliasing):
        return []
    return [InPlacePair(e.operand_number, e.operand_index, e.output_index)
            for e in declared.entries]


def _fusion_pairs(inst: HloInstruction) -> list[InPlacePair]:
    """Declared pairs, else XLA's look inside: an output produced by an in-place op whose
    in-place operand is a fusion parameter read by nothing else (except a dynamic-slice of
    the very window a dynamic-update-slice writes)."""
    if "output_to_operand_aliasing" in inst.attrs:
        return _declared_pairs(inst)
    fused = inst.attrs.get("calls")
    if not isinstance(fused, HloComputation) or fused.root is None:
        return []
    root = fused.root
    outputs = ([((k,), op) for k, op in enumerate(root.operands)] if root.opcode == Opcode.TUPLE
               else [((), root)])
    users: dict[int, list[HloInstruction]] | None = None    # built for in-place producers only
    pairs = []
    for output_index, producer in outputs:
        rule = _IN_PLACE_RULES.get(producer.opcode)
        if rule is None or producer.opcode == Opcode.FUSION:
            continue
        users = users if users is not None else fused.users()
        for pair in rule(producer):
            operand = producer.operands[pair.operand_number]
            if (pair.output_index == () and operand.opcode == Opcode.PARAMETER
                    and all(u is producer or _reads_same_slice(u, producer)
                            for u in users[id(operand)])
                    and sum(op is operand for op in producer.operands) == 1
                    and same_physical_shape(operand.shape, producer.shape)
                    and same_physical_shape(operand.shape, subshape(inst.shape, output_index))):
                assert operand.parameter_number is not None
                pairs.append(InPlacePair(operand.parameter_number, (), output_index))
    return pairs


def _reads_same_slice(user: HloInstruction, update: HloInstruction) -> bool:
    """A dynamic-slice reading exactly the window a dynamic-update-slice then writes (the
    read-modify-write XLA emits for scatter): each element is read before it is written."""
    if user.opcode != Opcode.DYNAMIC_SLICE or update.opcode != Opcode.DYNAMIC_UPDATE_SLICE:
        return False
    same_indices = len(user.operands) == len(update.operands) - 1 and all(
        a is b for a, b in zip(user.operands[1:], update.operands[2:]))
    return (same_indices and user.operands[0] is update.operands[0]
            and user.ints_attr("dynamic_slice_sizes") == update.operands[1].array_shape.dims)


_IN_PLACE_RULES: dict[Opcode, Callable[[HloInstruction], list[InPlacePair]]] = {
    Opcode.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice_pairs,
    Opcode.SCATTER: _scatter_pairs,
    Opcode.CUSTOM_CALL: _declared_pairs,
    Opcode.FUSION: _fusion_pairs,
}


def in_place_pairs(inst: HloInstruction) -> list[InPlacePair]:
    rule = _IN_PLACE_RULES.get(inst.opcode)
    return rule(inst) if rule is not None else []


def same_physical_shape(a: Shape, b: Shape) -> bool:
    """Same element type, dimensions and memory order: the bytes mean the same elements."""
    if not isinstance(a, ArrayShape) or not isinstance(b, ArrayShape):
        return False
    tail_a = a.layout.tail if a.layout is not None else ""
    tail_b = b.layout.tail if b.layout is not None else ""
    return (a.element_type is b.element_type and a.dims == b.dims
            and a.minor_to_major == b.minor_to_major and tail_a == tail_b)


def reads_elementwise(user: HloInstruction, operand_number: int) -> bool:
    """Whether element i of ``user``'s result depends only on element i of that operand
    (a copy qualifies: writing a copy over its own source changes nothing). In a loop fusion
    with window outputs (``loop_outputs``), element i of the kernel's space is element i of
    each window's update too."""
    if OPCODES[user.opcode].elementwise:
        return True
    if user.opcode == Opcode.FUSION:
        fused = user.attrs.get("calls")
        found = kernel_outputs(user)
        windows = {id(o.window) for o in found[1] if o.window is not None} if found else set()
        return (isinstance(fused, HloComputation)
                and parameter_read_at_own_index(fused, operand_number, windows))
    return False


def parameter_read_at_own_index(fused: HloComputation, number: int,
                                windows: Collection[int]) -> bool:
    """Whether every read of parameter ``number`` inside ``fused`` is at the element being
    computed (``_keeps_index``); ``windows``: the ids of its window outputs'
    dynamic-update-slices."""
    params = [p for p in fused.parameters if p.parameter_number == number]
    if not params:
        return False
    users = fused.users()
    stack = [params[0]]
    seen: set[HloInstruction] = set()
    while stack:
        inst = stack.pop()
        for user in users[id(inst)]:
            if user in seen:
                continue
            seen.add(user)
            if not _keeps_index(user, inst, windows):
                return False
            stack.append(user)
    return True


def _keeps_index(user: HloInstruction, operand: HloInstruction, windows: Collection[int]) -> bool:
    """Whether ``user`` reads ``operand`` at its own element: an elementwise op, a root
    tuple, a reshape adding or dropping size-1 dimensions (same logical element), or a
    window output's dynamic-update-slice reading it as its update."""
    if user.opcode == Opcode.TUPLE or OPCODES[user.opcode].elementwise:
        return True
    if user.opcode == Opcode.RESHAPE:
        return [n for n in user.array_shape.dims if n != 1] == \
            [n for n in operand.array_shape.dims if n != 1]
    return id(user) in windows and all(
        op is not operand for k, op in enumerate(user.operands) if k != 1)


def kernel_outputs(inst: HloInstruction) -> tuple[ArrayShape, list[LoopOutput]] | None:
    """``loop_outputs`` of ``inst``, its windows being the outputs it computes in place."""
    if inst.opcode != Opcode.FUSION or not inst.shape.is_tuple:
        return None
    return loop_outputs(inst, {pair.output_index for pair in in_place_pairs(inst)})


@runtime_checkable
class ReadsOperandsFirst(Protocol):
    """An instruction attribute (``passes.spmd_collectives.Collective``) saying whether its
    step reads every operand in full before it writes any byte of its result."""

    @property
    def reads_operands_first(self) -> bool: ...


def reads_operands_first(inst: HloInstruction) -> bool:
    """Whether ``inst``'s step has its operands copied out before it writes its result."""
    spec = inst.attrs.get("collective")
    return (inst.opcode == Opcode.CUSTOM_CALL and isinstance(spec, ReadsOperandsFirst)
            and spec.reads_operands_first)


def may_hand_off(flow: Dataflow, earlier: Collection[HloValue], later: HloValue) -> bool:
    """Whether ``later``'s defining instruction may write ``later`` over the bytes of the
    ``earlier`` values (one piece of data under several names) in the very step that reads
    them for the last time."""
    if not later.writes:
        return False
    user = later.instruction
    slots = [(k, idx) for k in range(len(user.operands))
             for idx, v in flow.value_set(user.operands[k]).items() if v in earlier]
    if not slots:
        return False
    for pair in in_place_pairs(user):
        in_place_slot = (pair.operand_number, pair.operand_index)
        if pair.output_index == later.index and slots == [in_place_slot]:
            return True
    if reads_operands_first(user):
        return all(same_physical_shape(v.shape, later.shape) for v in earlier)
    if not _one_index_space(user, later) \
            or not all(same_physical_shape(v.shape, later.shape) for v in earlier):
        return False
    return all(idx == () and same_physical_shape(user.operands[k].shape, later.shape)
               and reads_elementwise(user, k) for k, idx in slots)


def _one_index_space(user: HloInstruction, later: HloValue) -> bool:
    """Whether ``later`` is ``user``'s array result, or a plain output of a multi-output loop
    fusion whose plain outputs all share its shape and layout, and whose other outputs are
    windows of that space (``loop_outputs``): one work-item computes element i of every output
    from elements i of the operands, and loads them all before it stores any
    (``codegen.families.loop``, ``vector_loop``, ``row_vector_loop``)."""
    if later.index == ():
        return True
    if user.opcode != Opcode.FUSION or len(later.index) != 1:
        return False
    if all(isinstance(s, ArrayShape) and same_physical_shape(s, later.shape)
           for s in user.tuple_shape.elements):
        return True
    found = kernel_outputs(user)
    return found is not None and any(o.index == later.index and o.window is None
                                     for o in found[1])
