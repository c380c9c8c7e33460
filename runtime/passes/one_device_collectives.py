"""Collectives of a one-replica, one-partition module written as the plain HLO they compute.

With one device every replica group has one member, so XLA's CPU backend runs an all-reduce,
all-gather, reduce-scatter, all-to-all or collective-broadcast as the identity (a copy of its
operands), a collective-permute as a copy when its ``source_target_pairs`` send device 0 to
itself and as zeros otherwise (nothing is received), and ``replica-id``/``partition-id`` as
``u32`` 0. The async forms follow: an ``-start`` becomes the tuple XLA gives it (operands,
result, zeroed context scalars; all-reduce-start is its result alone) and its ``-done`` the
result. What each opcode computes is its ``one_device`` column in ``hlo/opcodes.py``.

After this pass no collective is left, so nothing below (fusion, buffer assignment, the
kernel families) knows about them, and the copies give every result its own buffer, as the
collectives' had. A module whose header asks for more than one replica or partition is
left alone: its collectives are exchanges between devices (``spmd_collectives``, which runs
first).
"""

from __future__ import annotations

import re

from ..errors import HloUnsupportedError, HloVerifyError
from ..hlo.ir import HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ArrayShape, Shape, TupleShape, compatible
from ..target import CPU, Target
from .names import FreshNames
from .part_builder import PartBuilder, expand_in_place
from .spmd_collectives import done_value, is_multi_device

_PAIR = re.compile(r"\{\s*(-?\d+)\s*,\s*(-?\d+)\s*\}")


def rewrite_one_device_collectives_in_place(module: HloModule, target: Target = CPU) -> None:
    if is_multi_device(module):
        return      # spmd_collectives made its collectives host steps
    if not any(OPCODES[i.opcode].one_device is not None for i in module.instructions()):
        return
    names = FreshNames(module)
    for comp in module.computations:
        if any(OPCODES[i.opcode].one_device is not None for i in comp.instructions):
            expand_in_place(comp, names, _expand)


def _expand(build: PartBuilder, inst: HloInstruction) -> HloInstruction | None:
    kind = OPCODES[inst.opcode].one_device
    if kind is None:
        return None
    value = _value(build, inst, kind)
    if not compatible(value.shape, inst.shape):
        raise _unsupported(inst, f"with one device it computes {value.shape.to_text(False)}, "
                                 f"but its shape is {inst.shape.to_text(False)}")
    return value


def _value(build: PartBuilder, inst: HloInstruction, kind: str) -> HloInstruction:
    """The instruction computing ``inst``'s one-device value (appended to the rebuilt list)."""
    if kind == "zero":
        return _zeros(build, inst.shape)
    if kind == "value":
        return inst.operands[0]
    if kind == "done":
        return done_value(inst, _unsupported)
    if kind.endswith("-start"):
        if not isinstance(inst.shape, TupleShape) or len(inst.shape.elements) < 2:
            raise _unsupported(inst, "an async start's shape is a tuple of its operands, its "
                                     "result and context scalars")
        operands = _operands(build, inst)
        result = _value(build, inst, kind.removesuffix("-start"))
        context = [_zeros(build, shape) for shape in inst.shape.elements[2:]]
        return build.add(Opcode.TUPLE, TupleShape((operands.shape, result.shape,
                                              *(c.shape for c in context))),
                         [operands, result, *context])
    if kind == "identity":
        if inst.opcode == Opcode.ALL_TO_ALL and "dimensions" not in inst.attrs \
                and len(inst.operands) != 1:
            raise HloVerifyError(
                f"all-to-all {inst.name}: its tuple form exchanges one operand per member of a "
                f"replica group, and a one-device module's groups have one member, but it has "
                f"{len(inst.operands)} operands (XLA's verifier refuses it too)",
                instruction=inst.name, location=inst.location,
                computation=inst.parent.name if inst.parent else None,
                expected="1 operand", got=f"{len(inst.operands)} operands")
        return _copies(build, inst)
    assert kind == "permute", kind
    if len(inst.operands) != 1:
        raise _unsupported(inst, "the in-place form of collective-permute (with start "
                                 "indices) is not supported")
    pairs = {(int(a), int(b)) for a, b in _PAIR.findall(str(inst.attrs.get("source_target_pairs",
                                                                             "")))}
    if (0, 0) in pairs:
        return _copies(build, inst)
    return _zeros(build, _leaf_result_shape(inst, 0))


def _operands(build: PartBuilder, inst: HloInstruction) -> HloInstruction:
    """An async start's first element: its operand, or the tuple of its operands."""
    if len(inst.operands) == 1:
        return inst.operands[0]
    return build.add(Opcode.TUPLE, TupleShape(tuple(op.shape for op in inst.operands)),
                     list(inst.operands))


def _copies(build: PartBuilder, inst: HloInstruction) -> HloInstruction:
    """A copy of each operand, in the layout of its place in ``inst``'s result (a tuple of
    them when there are several)."""
    if not inst.operands:
        raise _unsupported(inst, "it has no operands")
    copies = []
    for i, op in enumerate(inst.operands):
        if not isinstance(op.shape, ArrayShape):
            raise _unsupported(inst, f"operand {op.name} is not an array")
        copies.append(build.add(Opcode.COPY, _leaf_result_shape(inst, i, op.shape), [op]))
    if len(copies) == 1 and not isinstance(_result_part(inst), TupleShape):
        return copies[0]
    return build.add(Opcode.TUPLE, TupleShape(tuple(c.shape for c in copies)), copies)


def _leaf_result_shape(inst: HloInstruction, i: int, operand: Shape | None = None) -> Shape:
    """The result shape of operand ``i``'s value: from ``inst``'s written result (its layout)
    when that has the operand's element type and dimensions, else the operand's own (the
    caller then reports the mismatch)."""
    part = _result_part(inst)
    written: Shape | None = part
    if isinstance(part, TupleShape):
        written = part.elements[i] if i < len(part.elements) else None
    own = operand if operand is not None else inst.operands[i].shape
    if written is not None and compatible(written, own):
        return written
    return own


def _result_part(inst: HloInstruction) -> Shape:
    """``inst``'s result shape; for an async start, the result element of its tuple."""
    spec = OPCODES[inst.opcode]
    if spec.one_device is not None and spec.one_device.endswith("-start"):
        assert isinstance(inst.shape, TupleShape)
        return inst.shape.elements[1]
    return inst.shape


def _zeros(build: PartBuilder, shape: Shape) -> HloInstruction:
    if not isinstance(shape, ArrayShape):
        raise _unsupported(build.of, f"its zeros would have the non-array shape {shape}")
    return build.full(0, shape.element_type, shape.dims)


def _unsupported(inst: HloInstruction | None, why: str) -> HloUnsupportedError:
    assert inst is not None
    return HloUnsupportedError(
        f"{inst.opcode} {inst.name} in a one-device module: {why}", instruction=inst.name,
        computation=inst.parent.name if inst.parent else None, location=inst.location)
