"""The operations of tier 0's generic elementwise kernels: one numbered case per (operation,
element types), its C statement built from the very templates the specialised kernels use.

A tier-0 kernel interprets an op program (``op_program``) whose instructions name a case by
number. Each case is one statement over the register file ``r`` (a union holding one value of
any compute type), ``I`` (the instruction's words: case, destination, three sources, an
auxiliary word) and, for loads, stores and iotas, the index map at ``I[5]`` (``t0_map``); a
``move`` sets a reduction's accumulator.
The arithmetic comes from ``elemental.arithmetic`` and ``templates`` (convert, compare,
bitcast-convert, select's ``?:``), loads and stores from ``cltypes``: the generic kernels and
the specialised ones evaluate one expression per element in the same order and types, so
their results are the same bits. Case numbers are fixed by the enumeration order below,
independent of the kernel (every kernel holds a subset, ``kernels.KERNEL_CLASSES``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ...errors import HloUnsupportedError
from ...hlo.dtypes import ELEMENT_TYPES, PRED, S32, S64, ElementType
from ...hlo.opcodes import OPCODES
from .. import cltypes, templates as E
from ..elemental import ARITHMETIC_OPCODES, arithmetic

# the element types tier 0 computes (narrower floats and packed integers: tier 1 only)
TYPES: tuple[ElementType, ...] = tuple(ELEMENT_TYPES[n] for n in (
    "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64"))

# the register union's member for each compute type
MEMBER = {"char": "c", "uchar": "uc", "short": "s", "ushort": "us", "int": "i", "uint": "ui",
          "long": "l", "ulong": "ul", "float": "f", "double": "d"}

COMPARISON_TYPES = (None, "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")
DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")


@dataclass(frozen=True)
class Case:
    key: tuple
    statement: str
    types: frozenset[str]          # every element type it touches
    arithmetic: str | None         # the element type whose arithmetic it is, if any


def register(slot: str, et: ElementType) -> str:
    """Register ``slot``'s value as ``et``'s compute type."""
    return f"r[{slot}].{MEMBER[cltypes.compute_type(et)]}"


def _dst(et: ElementType) -> str:
    return register("I[1]", et)


def _map() -> str:
    return "t0_map(P, I[5], m0, k0, e)"


def _cases() -> list[Case]:
    cases: list[Case] = []

    def add(key: tuple, statement: str, types, arith: ElementType | None = None) -> None:
        cases.append(Case(key, statement, frozenset(t.name for t in types),
                          arith.name if arith is not None else None))

    for et in TYPES:
        st = cltypes.storage_type(et)
        add(("load", et.name), f"{_dst(et)} = "
            f"{cltypes.load(et, f'((__global const {st}*)B[I[2]])', _map())};", [et])
        add(("store", et.name), "{ " + cltypes.store(
            et, f"((__global {st}*)B[I[2]])", _map(), register("I[3]", et)) + " }", [et])
        add(("select", et.name), f"{_dst(et)} = ({register('I[2]', PRED)}) ? "
            f"{register('I[3]', et)} : {register('I[4]', et)};", [et, PRED])
        for index_et in (S32, S64):
            index = f"(({cltypes.compute_type(index_et)}){_map()})"
            add(("iota", et.name, index_et.name),
                f"{_dst(et)} = {E.convert(index_et, et, index)};", [et])
    # a reduction's accumulator takes its new value (any type: the whole union is copied)
    add(("move",), "r[I[1]] = r[I[2]];", [])
    for ctype in dict.fromkeys(cltypes.compute_type(et) for et in TYPES):
        bits = f"as_{ctype}(({cltypes.C_UNSIGNED[ctype]})I[5])" if ctype in ("float", "double") \
            else f"(({ctype})I[5])"
        add(("const", ctype), f"r[I[1]].{MEMBER[ctype]} = {bits};",
            [et for et in TYPES if cltypes.storage_type(et) == ctype][:1])
    for src in TYPES:
        for dst in TYPES:
            add(("convert", src.name, dst.name),
                f"{_dst(dst)} = {E.convert(src, dst, register('I[2]', src))};", [src, dst])
            if src.bits == dst.bits and src is not dst:
                add(("bitcast-convert", src.name, dst.name), f"{_dst(dst)} = "
                    f"{E.bitcast_convert(src, dst, register('I[2]', src))};", [src, dst])
        for kind in COMPARISON_TYPES:
            for direction in DIRECTIONS:
                try:
                    expr = E.compare(direction, kind, src, register("I[2]", src),
                                     register("I[3]", src))
                except HloUnsupportedError:
                    break
                add(("compare", direction, kind, src.name), f"{_dst(PRED)} = {expr};",
                    [src, PRED], src)
    for opcode in sorted(ARITHMETIC_OPCODES):
        arity = OPCODES[opcode].min_operands       # elementwise: a fixed arity
        for et in TYPES:
            out = E.unary_result_type(opcode, et) if arity == 1 else et
            args = [register(f"I[{2 + k}]", et) for k in range(arity)]
            try:
                expr = arithmetic(opcode, et, out, args)
            except HloUnsupportedError:
                continue
            add(("arith", str(opcode), et.name, out.name), f"{_dst(out)} = {expr};", [et, out], et)
    return cases


@cache
def all_cases() -> tuple[Case, ...]:
    """Every case, in case-number order."""
    return tuple(_cases())


@cache
def case_numbers() -> dict[tuple, int]:
    return {c.key: n for n, c in enumerate(all_cases())}
