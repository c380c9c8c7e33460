"""Which instructions must run even when nobody reads their result, and in text order."""

from __future__ import annotations

from ..hlo.ir import HloComputation, HloInstruction
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import COMPUTATION_ATTRIBUTES, OPCODES

#: opcodes that may run a computation (only those can inherit a side effect from one)
_CALLING = frozenset(name for name, spec in OPCODES.items() if spec.attrs & COMPUTATION_ATTRIBUTES)

#: computation -> whether it contains a side effect: ``has_side_effect``'s memo, which callers
#: asking about one module several times share (edits that add only copies, tuples and
#: get-tuple-elements, as copy insertion's, leave it valid)
SideEffects = dict[HloComputation, bool]


def has_side_effect(inst: HloInstruction, memo: SideEffects | None = None) -> bool:
    """The opcode row says so, a custom-call is marked ``custom_call_has_side_effect=true``,
    or a computation it runs contains such an instruction."""
    if OPCODES[inst.opcode].side_effect:
        return True
    if inst.opcode == Opcode.CUSTOM_CALL and inst.attrs.get("custom_call_has_side_effect") is True:
        return True
    if inst.opcode not in _CALLING:
        return False
    memo = memo if memo is not None else {}
    return any(_computation_has_side_effect(c, memo) for c in inst.called_computations)


def _computation_has_side_effect(comp: HloComputation, memo: SideEffects) -> bool:
    if comp not in memo:
        memo[comp] = False
        memo[comp] = any(has_side_effect(i, memo) for i in comp.instructions)
    return memo[comp]
