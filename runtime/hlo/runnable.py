"""What a valid module still needs before it can be compiled and run.

A module can be well-formed and verified yet carry no runnable program: XLA's printer elides
constants with more than ten elements as ``{...}`` (XLA parses them back as zeros, silently
computing something else), and an unbounded dimension ``?`` has no size to allocate. The
parser keeps such modules (they print and analyse fine); ``check_runnable`` is the gate the
compiler calls first, so the refusal names the instruction and its line.

Running a module with elided constants is still useful for its timing and memory, so
``compile(..., elided_constants="zeros"|"random")`` opts in: ``fill_elided_constants`` gives
each elided constant values (zeros, or reproducible random values seeded by the
instruction's name, made as ``sample_values`` makes run inputs), and the executable says that
its outputs are not the model's.
"""

from __future__ import annotations

import zlib
from typing import Iterator

import numpy as np

from ..errors import HloUnsupportedError
from .ir import HloInstruction, HloModule
from .literal import Literal
from .sample_values import sample_array


ELIDED_FILLS = ("zeros", "random")


def check_runnable(module: HloModule, *, elided_constants: str | None = None) -> None:
    """Raise ``HloUnsupportedError`` at the first instruction whose values cannot exist;
    elided constants pass when ``elided_constants`` says how to fill them."""
    for inst in module.instructions():
        if elided_constants is None and has_elided_values(inst):
            raise _unsupported(inst, (
                f"constant {inst.name} was printed elided as {{...}}, so its values are unknown; "
                "XLA would silently run it as zeros. Print the module with its constants "
                "(XLA: print_large_constants) and load that text instead, or run it for "
                "timing and memory only with elided_constants='zeros' or 'random' "
                "(--elided on the command line and in %%hlo)"))
        for _, leaf in inst.shape.leaves():
            if leaf.is_unbounded:
                raise _unsupported(inst, (
                    f"{inst.opcode} {inst.name} has the unbounded shape {leaf.to_text(False)}: a "
                    "dimension written '?' has no size to allocate; give it a bound (<=N)"))


def has_elided_values(inst: HloInstruction) -> bool:
    return inst.literal is not None and any(lit.elided for lit in _array_literals(inst.literal))


def has_elided_constants(module: HloModule) -> bool:
    return any(has_elided_values(inst) for inst in module.instructions())


def fill_elided_constants(module: HloModule, fill: str) -> int:
    """Give every elided constant of ``module`` values, in place (call it on a clone: clones
    share literals, so each filled literal is a new object). Returns how many were filled."""
    if fill not in ELIDED_FILLS:
        raise ValueError(f"elided_constants={fill!r}: expected one of {ELIDED_FILLS}")
    filled = 0
    for inst in module.instructions():
        if inst.literal is not None and has_elided_values(inst):
            inst.literal = _filled(inst.literal, fill, zlib.crc32(inst.name.encode()))
            filled += 1
    return filled


def _filled(literal: Literal, fill: str, seed: int) -> Literal:
    if literal.shape.is_tuple:
        return Literal(literal.shape, elements=tuple(
            _filled(e, fill, seed + k) for k, e in enumerate(literal.elements)))
    if not literal.elided:
        return literal
    rng = np.random.default_rng(seed) if fill == "random" else None
    return Literal(literal.shape, sample_array(literal.shape.element_type, literal.shape.dims,
                                               rng, f"constant {literal.shape.to_text(False)}"))


def _array_literals(literal: Literal) -> Iterator[Literal]:
    if literal.shape.is_tuple:
        for element in literal.elements:
            yield from _array_literals(element)
    else:
        yield literal


def _unsupported(inst: HloInstruction, message: str) -> HloUnsupportedError:
    return HloUnsupportedError(message, location=inst.location, instruction=inst.name,
                               computation=inst.parent.name if inst.parent else None)
