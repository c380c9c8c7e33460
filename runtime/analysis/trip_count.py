"""The trip count of a counted while loop, known before it runs (XLA's while-loop trip count
analysis), and the values its counter takes.

A host-driven loop reads its predicate back from the device once per iteration, which drains
the queue: the device idles while the host waits and then enqueues the next body. A loop
whose count is known runs its body that many times without reading anything. JAX's ``scan``
and ``fori_loop`` are such loops: one element of the loop state (the induction variable)
starts at a constant, the body computes its next value from it alone, and the condition
compares it alone with a constant. The condition and the induction step are evaluated here
on the host (integer and pred scalars only, through the kLoop fusions that hold them after
fusion), iteration by iteration, up to ``LIMIT``; anything else is unknown (None) and the
loop reads its predicate back (once an iteration, or once a chunk of iterations where
``codegen.predication`` lets the body's kernels test it themselves). A conditional in such
a loop's body whose branch is integer arithmetic on one induction variable (a sampler's
``cond`` on the step number) is evaluated the same way (``selector_values``), so it reads
nothing back either.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..hlo.ir import HloComputation, HloInstruction
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape

# beyond this many iterations the count is left unknown (evaluating it costs host time)
LIMIT = 1 << 16

_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "LT": lambda a, b: a < b, "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b,
    "GE": lambda a, b: a >= b, "EQ": lambda a, b: a == b, "NE": lambda a, b: a != b,
}


def _divide(a: int, b: int) -> int:
    """HLO's integer division: toward zero; x / 0 = -1 (all ones unsigned, after wrapping)."""
    if b == 0:
        return -1
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _remainder(a: int, b: int) -> int:
    """HLO's integer remainder: the dividend's sign; x % 0 = x."""
    return a if b == 0 else a - _divide(a, b) * b


_ARITHMETIC: dict[Opcode, Callable[[int, int], int]] = {
    Opcode.ADD: lambda a, b: a + b, Opcode.SUBTRACT: lambda a, b: a - b,
    Opcode.MULTIPLY: lambda a, b: a * b, Opcode.DIVIDE: _divide, Opcode.REMAINDER: _remainder,
    Opcode.MAXIMUM: max, Opcode.MINIMUM: min,
    Opcode.AND: lambda a, b: a & b, Opcode.OR: lambda a, b: a | b, Opcode.XOR: lambda a, b: a ^ b,
}
_UNARY: dict[Opcode, Callable[[int], int]] = {
    Opcode.NEGATE: lambda a: -a, Opcode.ABS: abs,
    Opcode.NOT: lambda a: ~a,   # pred's ``not``: _evaluate
}
# a copy of the counter: copy insertion copies the incremented counter into the body's result
# where the old one is still read after the increment (a scan writing step i's output)
_SCALAR_OPS = frozenset(_ARITHMETIC) | frozenset(_UNARY) | {
    Opcode.COMPARE, Opcode.CONVERT, Opcode.COPY, Opcode.SELECT}


def trip_count(loop: HloInstruction) -> int | None:
    """How many times ``loop``'s body runs, or None when that is not known before it runs."""
    values = counter_values(loop)
    return None if values is None else len(values)


def counter_values(loop: HloInstruction) -> tuple[int, ...] | None:
    """The counter's value as each iteration of ``loop`` starts, or None when the loop is not
    counted."""
    condition: HloComputation = loop.condition
    body: HloComputation = loop.body
    state = condition.parameter(0)
    counter = _read_element(condition.root_instruction, state)
    if counter is None or body.root is None or body.root.opcode != Opcode.TUPLE:
        return None
    step = body.root.operands[counter]
    if _read_element(step, body.parameter(0)) != counter:
        return None
    start = _initial(loop.operands[0], counter)
    if start is None:
        return None
    x = start
    values: list[int] = []
    for _ in range(LIMIT + 1):
        if not _evaluate(condition.root_instruction, {id(state): x}):
            return tuple(values)
        values.append(x)
        following = _evaluate(step, {id(body.parameter(0)): x})
        if following == x:
            return None
        x = following
    return None


def selector_values(loop: HloInstruction, selector: HloInstruction,
                    count: int) -> tuple[int, ...] | None:
    """The value, at each of the ``count`` iterations of counted ``loop``, of an instruction
    of its body that is integer scalar arithmetic on one induction variable of the loop state
    (a conditional's branch; JAX's ``fori_loop`` carries its index beside the trip counter),
    else None."""
    state = loop.body.parameter(0)
    element = _read_element(selector, state)
    if element is None:
        return None
    values = _induction(loop, element, count)
    if values is None:
        return None
    return tuple(_evaluate(selector, {id(state): v}) for v in values)


def _induction(loop: HloInstruction, element: int, count: int) -> list[int] | None:
    """The values loop-state element ``element`` takes as each of ``count`` iterations
    starts, where it starts at a constant and the body computes its next value from it
    alone."""
    body: HloComputation = loop.body
    state = body.parameter(0)
    if body.root is None or body.root.opcode != Opcode.TUPLE:
        return None
    step = body.root.operands[element]
    x = _initial(loop.operands[0], element)
    if _read_element(step, state) != element or x is None:
        return None
    values = []
    for _ in range(count):
        values.append(x)
        x = _evaluate(step, {id(state): x})
    return values


def _read_element(inst: HloInstruction, state: HloInstruction) -> int | None:
    """The one element of the tuple ``state`` that scalar ``inst`` reads (through scalar
    arithmetic and kLoop fusions of it), or None when it reads anything else."""
    read: set[int] = set()
    if not _reads(inst, state, read) or len(read) != 1:
        return None
    return read.pop()


def _reads(inst: HloInstruction, state: HloInstruction | None, read: set[int]) -> bool:
    """Whether ``inst`` is integer scalar arithmetic over elements of ``state`` (their
    indices go to ``read``), or with ``state`` None over a fused computation's parameters."""
    if not _integral_scalar(inst):
        return False
    if inst.opcode == Opcode.GET_TUPLE_ELEMENT and inst.operands[0] is state:
        read.add(int(inst.index))
        return True
    if inst.opcode == Opcode.PARAMETER:
        return state is None
    if inst.opcode == Opcode.CONSTANT:
        return inst.literal is not None and not inst.literal.elided
    if inst.opcode == Opcode.FUSION:
        fused: HloComputation = inst.calls
        return (all(_reads(op, state, read) for op in inst.operands)
                and _reads(fused.root_instruction, None, set()))
    return inst.opcode in _SCALAR_OPS and all(_reads(op, state, read) for op in inst.operands)


def _integral_scalar(inst: HloInstruction) -> bool:
    shape = inst.shape
    return (isinstance(shape, ArrayShape) and shape.rank == 0
            and (shape.element_type.is_integer or shape.element_type.is_pred))


def _initial(init: HloInstruction, counter: int) -> int | None:
    """The constant the loop state's element ``counter`` starts at (through the copies and
    tuples copy insertion puts around loop state, and the operand-less kLoop fusions of a
    constant XLA's optimised text starts its counters from: ``copy_fusion = s32[] fusion()``)."""
    state = _source(init)
    if state.opcode != Opcode.TUPLE:
        return None
    value = _source(state.operands[counter])
    read: set[int] = set()
    if not _reads(value, state, read) or read:
        return None
    return _evaluate(value, {})


def _source(value: HloInstruction) -> HloInstruction:
    """What ``value`` forwards: through copies and elements of tuples built in place."""
    while True:
        if value.opcode == Opcode.COPY:
            value = value.operands[0]
        elif value.opcode == Opcode.GET_TUPLE_ELEMENT and value.operands[0].opcode == Opcode.TUPLE:
            index = int(value.index)
            value = value.operands[0].operands[index]
        else:
            return value


def _evaluate(inst: HloInstruction, values: dict[int, int]) -> int:
    """``inst``'s value when the loop state's counter is ``values``' one entry (keyed by the
    state's id; a fused computation's parameters are keyed by theirs)."""
    if inst.opcode == Opcode.GET_TUPLE_ELEMENT:
        return values[id(inst.operands[0])]
    if inst.opcode == Opcode.PARAMETER:
        return values[id(inst)]
    if inst.opcode == Opcode.CONSTANT:
        assert inst.literal is not None   # _reads admitted only constants with values
        return int(np.asarray(inst.literal.data).reshape(()))
    args = [_evaluate(op, values) for op in inst.operands]
    if inst.opcode == Opcode.FUSION:
        fused: HloComputation = inst.calls
        return _evaluate(fused.root_instruction, {id(p): a for p, a in zip(fused.parameters, args)})
    if inst.opcode == Opcode.COMPARE:
        return int(_COMPARE[str(inst.direction)](*args))
    if inst.opcode == Opcode.SELECT:
        return _wrap(args[1] if args[0] else args[2], inst.array_shape)
    if inst.opcode in _ARITHMETIC:
        result = _ARITHMETIC[inst.opcode](*args)
    elif inst.opcode == Opcode.NOT and inst.array_shape.element_type.is_pred:
        result = 1 - args[0]
    elif inst.opcode in _UNARY:
        result = _UNARY[inst.opcode](args[0])
    else:
        result = args[0]
    return _wrap(result, inst.array_shape)


def _wrap(value: int, shape: ArrayShape) -> int:
    """``value`` in the element type's two's-complement range (HLO integers wrap)."""
    et = shape.element_type
    if et.is_pred:
        return int(value != 0)
    bits = et.bits
    value &= (1 << bits) - 1
    if et.is_signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


__all__ = ["trip_count", "counter_values", "selector_values", "LIMIT"]
