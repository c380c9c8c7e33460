"""XLA's value-changing algebraic rewrites of float arithmetic, made so our answer is XLA's.

XLA's algebraic simplifier rewrites some float expressions into others that are equal in
real arithmetic but not in floating point: a different rounding, a different overflow
(``(A/B)/C`` is ``A/(B*C)``, which is 0 where ``B*C`` overflows), a different sign of zero
(``-0 + 0`` is ``-0`` once ``A + 0`` is ``A``) or a different domain (``log(pow(A, B))`` is
``B*log(|A|)``, finite for a negative ``A``). Pre-optimisation text (JAX's) still carries
the original form; computed as written it differs from XLA, and a ``floor``, a compare or an
overflow downstream can make that a different answer (a sum of a broadcast's seven copies
is ``x*7`` in XLA). These are the rewrites the CPU pipelines of jaxlib 0.10.2 and 0.12 both
make, under XLA's conditions (one-use operands where XLA asks for them);
``constant_divisors`` makes the division by a constant. The
rewrites newer XLA only makes under fast math (``exp(A)*exp(B)``, ``log(exp(A))``,
``sqrt(A*A)``, reassociating constants) are left out: the two versions answer differently.

Only f16, f32 and f64 are rewritten, the floats XLA computes in their own type; bf16 and the
8-bit floats are computed in f32 (``ElementType.arithmetic_type``), where XLA's rewrites
see other instructions, and complex values are left as written. Instructions ordered by
control edges are left alone, and so are fusion bodies (XLA's optimised text). ``RULES``
maps an opcode to its rewrites, tried in XLA's order; a rewrite returns the instruction
computing the value (the argument itself, changed in place keeping its name and layout, an
operand, or a new instruction), or None.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..analysis.reducers import reducer_opcode
from ..hlo.ir import HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape
from ..target import CPU, Target
from .names import FreshNames
from .part_builder import PartBuilder, expand_in_place, type_of

Uses = dict[int, int]
Rule = Callable[[PartBuilder, HloInstruction, Uses], "HloInstruction | None"]

_MAX_REWRITES = 4     # rewrites of one instruction in a row (XLA visits a new one again)


def rewrite_float_algebra_in_place(module: HloModule, target: Target = CPU) -> None:
    names: FreshNames | None = None
    # XLA simplified before it fused: a fusion body of its optimised text is already XLA's
    # arithmetic, and an operand used once there may have had other users outside
    fused = {id(c) for inst in module.instructions() if inst.opcode == Opcode.FUSION
             for c in inst.called_computations}
    for comp in module.computations:
        if id(comp) in fused \
                or not any(_rewritable(i) and i.opcode in RULES for i in comp.instructions):
            continue
        uses: Uses = {}
        for inst in comp.instructions:
            for op in inst.operands:
                uses[id(op)] = uses.get(id(op), 0) + 1
        ordered = {id(p) for inst in comp.instructions for p in inst.control_predecessors}

        def expand(build: PartBuilder, inst: HloInstruction) -> HloInstruction | None:
            if inst.control_predecessors or id(inst) in ordered:
                return None
            value = None
            for _ in range(_MAX_REWRITES):
                rule = RULES.get(inst.opcode) if _rewritable(inst) else None
                new = rule(build, inst, uses) if rule is not None else None
                if new is None:
                    break
                value = new
                if new is not inst:
                    break
            if value is inst:
                build.out.append(inst)
            return value

        names = names or FreshNames(module)
        expand_in_place(comp, names, expand)


def _rewritable(inst: HloInstruction) -> bool:
    if not isinstance(inst.shape, ArrayShape):
        return False
    et = inst.shape.element_type
    return et.is_float and et.arithmetic_type is None


def _all(inst: HloInstruction, value: float) -> bool:
    """``inst`` is a constant, or a broadcast of one, every element ``value`` (XLA's IsAll)."""
    while inst.opcode == Opcode.BROADCAST:
        inst = inst.operands[0]
    if inst.opcode != Opcode.CONSTANT or inst.literal is None or inst.literal.data is None:
        return False
    return bool(np.all(inst.literal.numpy() == value))


def _become(inst: HloInstruction, opcode: Opcode,
            operands: list[HloInstruction]) -> HloInstruction:
    """``inst`` itself computing ``opcode(operands)``: its name, shape and layout kept."""
    inst.opcode = opcode
    inst.operands = operands
    return inst


def _same_shape(inst: HloInstruction, other: HloInstruction) -> HloInstruction | None:
    """``other`` in place of ``inst`` where its shape, layout included, is the same."""
    return other if other.shape == inst.shape else None


def _scalar_like(build: PartBuilder, value: float, like: HloInstruction) -> HloInstruction:
    return build.full(value, type_of(like), like.array_shape.dims)


# --- divide ---------------------------------------------------------------------------------
def _divide(build: PartBuilder, inst: HloInstruction, uses: Uses) -> HloInstruction | None:
    a, b = inst.operands
    if _all(b, 1):                                                  # A/1 => A
        return _same_shape(inst, a)
    if b.opcode == Opcode.POWER:                                    # A/pow(B,C) => A*pow(B,-C)
        base, exponent = b.operands
        power = build.binary(Opcode.POWER, base, build.unary(Opcode.NEGATE, exponent))
        return _become(inst, Opcode.MULTIPLY, [a, power])
    if b.opcode in (Opcode.SQRT, Opcode.RSQRT) and uses.get(id(b), 0) == 1:
        # A/sqrt(B) => A*rsqrt(B), A/rsqrt(B) => A*sqrt(B), the root's operand used once
        other = Opcode.RSQRT if b.opcode == Opcode.SQRT else Opcode.SQRT
        return _become(inst, Opcode.MULTIPLY, [a, build.unary(other, b.operands[0])])
    if b.opcode == Opcode.BROADCAST and uses.get(id(b.operands[0]), 0) == 1 \
            and not (b.operands[0].opcode == Opcode.CONSTANT and a.opcode != Opcode.CONSTANT):
        # A/broadcast(B) => A*broadcast(1/B), B used once (a constant B is constant_divisors')
        x = b.operands[0]
        reciprocal = build.binary(Opcode.DIVIDE, _scalar_like(build, 1, x), x)
        spread = build.add(Opcode.BROADCAST, b.shape, [reciprocal],
                           dimensions=b.ints_attr("dimensions"))
        return _become(inst, Opcode.MULTIPLY, [a, spread])
    if a.opcode == Opcode.DIVIDE and b.opcode == Opcode.DIVIDE:
        # (A/B)/(C/D) => (A*D)/(B*C)
        (p, q), (r, s) = a.operands, b.operands
        return _become(inst, Opcode.DIVIDE, [build.binary(Opcode.MULTIPLY, p, s),
                                                    build.binary(Opcode.MULTIPLY, q, r)])
    if a.opcode == Opcode.DIVIDE:                                   # (A/B)/C => A/(B*C)
        p, q = a.operands
        return _become(inst, Opcode.DIVIDE, [p, build.binary(Opcode.MULTIPLY, q, b)])
    if b.opcode == Opcode.DIVIDE:                                   # A/(B/C) => (A*C)/B
        q, r = b.operands
        return _become(inst, Opcode.DIVIDE, [build.binary(Opcode.MULTIPLY, a, r), q])
    return None


# --- power ----------------------------------------------------------------------------------
def _power(build: PartBuilder, inst: HloInstruction, uses: Uses) -> HloInstruction | None:
    a, b = inst.operands
    if _all(b, 1):                                                  # pow(A,1) => A
        return _same_shape(inst, a)
    if _all(b, 2):                                                  # pow(A,2) => A*A
        return _become(inst, Opcode.MULTIPLY, [a, a])
    if _all(b, 3):                                                  # pow(A,3) => A*(A*A)
        return _become(inst, Opcode.MULTIPLY, [a, build.binary(Opcode.MULTIPLY, a, a)])
    if _all(b, -1):                                                 # pow(A,-1) => 1/A
        return _become(inst, Opcode.DIVIDE, [_scalar_like(build, 1, inst), a])
    return None


# --- log ------------------------------------------------------------------------------------
def _log(build: PartBuilder, inst: HloInstruction, uses: Uses) -> HloInstruction | None:
    (a,) = inst.operands
    if a.opcode == Opcode.POWER:
        # log(pow(A,B)) => B == 0 ? 0 : log(|A|)*B
        base, exponent = a.operands
        zero = _scalar_like(build, 0, inst)
        log = build.unary(Opcode.LOG, build.unary(Opcode.ABS, base))
        return _become(inst, Opcode.SELECT, [build.compare(exponent, zero, "EQ"), zero,
                                                    build.binary(Opcode.MULTIPLY, log, exponent)])
    if a.opcode in (Opcode.SQRT, Opcode.RSQRT):
        # log(sqrt(A)) => log(A)*0.5, log(rsqrt(A)) => log(A)*-0.5
        half = _scalar_like(build, 0.5 if a.opcode == Opcode.SQRT else -0.5, inst)
        return _become(inst, Opcode.MULTIPLY,
                       [build.unary(Opcode.LOG, a.operands[0]), half])
    return None


# --- identities: they keep what the operation would change (a -0, a denormal) --------------
def _add(build: PartBuilder, inst: HloInstruction, uses: Uses) -> HloInstruction | None:
    a, b = inst.operands
    if _all(b, 0):                                                  # A+0 => A
        return _same_shape(inst, a)
    if _all(a, 0):                                                  # 0+A => A
        return _same_shape(inst, b)
    return None


def _subtract(build: PartBuilder, inst: HloInstruction, uses: Uses) -> HloInstruction | None:
    a, b = inst.operands
    return _same_shape(inst, a) if _all(b, 0) else None            # A-0 => A


def _multiply(build: PartBuilder, inst: HloInstruction, uses: Uses) -> HloInstruction | None:
    a, b = inst.operands
    if _all(b, 1):                                                  # A*1 => A
        return _same_shape(inst, a)
    if _all(a, 1):                                                  # 1*A => A
        return _same_shape(inst, b)
    return None


# --- reduce ---------------------------------------------------------------------------------
def _reduce(build: PartBuilder, inst: HloInstruction, uses: Uses) -> HloInstruction | None:
    """A sum over dimensions only a broadcast added is a multiplication by their count:
    ``init + x*N`` (no ``init`` when it is 0), broadcast over the added dimensions kept."""
    if len(inst.operands) != 2 or reducer_opcode(inst.to_apply) != Opcode.ADD:
        return None
    b, init = inst.operands
    if b.opcode != Opcode.BROADCAST:
        return None
    x = b.operands[0]
    mapping = b.ints_attr("dimensions")
    reduced = set(inst.ints_attr("dimensions"))
    if reduced & set(mapping):
        return None
    kept = [d - sum(r < d for r in reduced) for d in mapping]   # x's dimensions in the result
    if kept != sorted(kept):
        return None
    count = int(np.prod([b.array_shape.dims[d] for d in reduced]))
    if len(kept) == len(inst.array_shape.dims):
        value = build.add(Opcode.MULTIPLY, inst.shape, [x, _scalar_like(build, count, inst)])
    else:
        product = build.binary(Opcode.MULTIPLY, x, _scalar_like(build, count, x))
        value = build.add(Opcode.BROADCAST, inst.shape, [product], dimensions=tuple(kept))
    if _all(init, 0):
        return value
    start = build.add(Opcode.BROADCAST, inst.shape, [init], dimensions=())
    return build.add(Opcode.ADD, inst.shape, [start, value])


# --- dot ------------------------------------------------------------------------------------
def _dot(build: PartBuilder, inst: HloInstruction, uses: Uses) -> HloInstruction | None:
    """A dot contracting nothing (an outer product) is XLA's product of two broadcasts: no
    accumulator, so ``-0`` stays ``-0`` (a batched one is left as it is)."""
    if len(inst.operands) != 2:
        return None
    lhs, rhs = inst.operands
    if any(inst.ints_attr(k) for k in ("lhs_contracting_dims", "rhs_contracting_dims",
                                       "lhs_batch_dims", "rhs_batch_dims")) \
            or type_of(lhs) != type_of(inst) or type_of(rhs) != type_of(inst):
        return None
    n, m = len(lhs.array_shape.dims), len(rhs.array_shape.dims)
    left = build.add(Opcode.BROADCAST, inst.shape, [lhs], dimensions=tuple(range(n)))
    right = build.add(Opcode.BROADCAST, inst.shape, [rhs], dimensions=tuple(range(n, n + m)))
    return build.add(Opcode.MULTIPLY, inst.shape, [left, right])


RULES: dict[Opcode, Rule] = {
    Opcode.DOT: _dot,
    Opcode.REDUCE: _reduce,
    Opcode.DIVIDE: _divide,
    Opcode.POWER: _power,
    Opcode.LOG: _log,
    Opcode.ADD: _add,
    Opcode.SUBTRACT: _subtract,
    Opcode.MULTIPLY: _multiply,
}
