"""What a valid module still needs before it can be compiled and run.

A module can be well-formed and verified yet carry no runnable program: XLA's printer elides
constants with more than ten elements as ``{...}`` (XLA parses them back as zeros, silently
computing something else), and an unbounded dimension ``?`` has no size to allocate. The
parser keeps such modules (they print and analyse fine); ``check_runnable`` is the gate the
compiler calls first, so the refusal names the instruction and its line.
"""

from __future__ import annotations

from typing import Iterator

from ..errors import HloUnsupportedError
from .ir import HloInstruction, HloModule
from .literal import Literal


def check_runnable(module: HloModule) -> None:
    """Raise ``HloUnsupportedError`` at the first instruction whose values cannot exist."""
    for inst in module.instructions():
        if inst.literal is not None and any(lit.elided for lit in _array_literals(inst.literal)):
            raise _unsupported(inst, (
                f"constant {inst.name} was printed elided as {{...}}, so its values are unknown; "
                "XLA would silently run it as zeros. Print the module with its constants "
                "(XLA: print_large_constants) and load that text instead"))
        for _, leaf in inst.shape.leaves():
            if leaf.is_unbounded:
                raise _unsupported(inst, (
                    f"{inst.opcode} {inst.name} has the unbounded shape {leaf.to_text(False)}: a "
                    "dimension written '?' has no size to allocate; give it a bound (<=N)"))


def _array_literals(literal: Literal) -> Iterator[Literal]:
    if literal.shape.is_tuple:
        for element in literal.elements:
            yield from _array_literals(element)
    else:
        yield literal


def _unsupported(inst: HloInstruction, message: str) -> HloUnsupportedError:
    return HloUnsupportedError(message, location=inst.location, instruction=inst.name,
                               computation=inst.parent.name if inst.parent else None)
