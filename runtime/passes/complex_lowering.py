"""Complex numbers computed as pairs of reals: every c64 (c128) value becomes an f32 (f64)
array with a trailing dimension of two, real part first.

That is the same bytes as the complex array (numpy, XLA and OpenCL all store a complex number
as its real part followed by its imaginary part), so nothing below this pass (fusion, buffer
assignment, the kernel families) needs a complex type: a complex multiply is four real
multiplies and two adds that fusion puts in one kernel, a complex dot (or convolution) four
real ones, an FFT a few dots against constant DFT matrices (``fft_lowering``). The entry
computation keeps its complex parameters and result, so the interface (argument checks,
donation, outputs) is unchanged: a ``bitcast`` to and from the pair form, which reads the
same buffer, stands between them and the arithmetic. Custom calls (LAPACK's complex
routines) read and write complex buffers the same way.

The arithmetic takes the numerically careful forms: multiply ``(ac - bd, ad + bc)``, divide
by Smith's algorithm, abs as ``max * sqrt(1 + (min/max)^2)``, expm1 and log1p exact near 0,
the principal square root and logarithm. A module whose complex values only pass through (parameters, tuples, custom calls)
is left as written. Complex operations with no rule here (sorting, the inverse
trigonometric functions, reductions and windows other than sums and products, scatters other
than adds and overwrites) raise ``HloUnsupportedError`` naming the instruction.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import HloUnsupportedError
from ..hlo.attributes import SliceDim, SliceSpec, Window, WindowDim
from ..hlo.dtypes import ElementType, complex_component
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.literal import Literal
from ..hlo.shape import ArrayShape, Layout, Shape, TupleShape, default_layout, leaf_shape
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..target import CPU, Target
from .fft_lowering import lower_fft
from .names import FreshNames
from .part_builder import PartBuilder, array, dims_of, type_of

Parts = tuple[HloInstruction, HloInstruction]


def lower_complex_in_place(module: HloModule, target: Target = CPU) -> None:
    if not any(_involves_complex(i) and not OPCODES[i.opcode].complex_pass_through
               for i in module.instructions()):
        return
    _unfuse_complex_fusions(module)
    names = FreshNames(module)
    reducers: dict[tuple[str, str], HloComputation] = {}
    # what each computation reduces with, read before the callees are lowered
    kinds = {comp: _reducer(comp) for comp in module.computations}
    for comp in list(module.computations):
        if any(_involves_complex(i) for i in comp.instructions):
            _Lowering(module, comp, names, reducers, kinds).run()


def _unfuse_complex_fusions(module: HloModule) -> None:
    """XLA's fusions holding complex values (a module printed after XLA's passes) become
    calls: their bodies are lowered like any computation, inlined, and fused again by this
    pipeline (a fused complex dot is four dots, which no single kernel family computes)."""
    for inst in module.instructions():
        if inst.opcode == Opcode.FUSION and (_involves_complex(inst) or any(
                _involves_complex(i) for i in inst.calls.instructions)):
            inst.opcode = Opcode.CALL
            inst.attrs = {"to_apply": inst.calls,
                          **{k: v for k, v in inst.attrs.items() if k == "metadata"}}


def _has_complex(shape: Shape) -> bool:
    return any(leaf.element_type.is_complex for _, leaf in shape.leaves())


def _involves_complex(inst: HloInstruction) -> bool:
    return _has_complex(inst.shape) or any(_has_complex(o.shape) for o in inst.operands)


def pair_shape(shape: Shape) -> Shape:
    """The pair form of ``shape``: complex leaves get a trailing dimension of 2, the most minor."""
    if isinstance(shape, TupleShape):
        return TupleShape(tuple(pair_shape(s) for s in shape.elements))
    assert isinstance(shape, ArrayShape)
    if not shape.element_type.is_complex:
        return shape
    layout = default_layout(shape.rank + 1)
    if shape.layout is not None and shape.layout.minor_to_major != \
            default_layout(shape.rank).minor_to_major:
        layout = Layout((shape.rank,) + tuple(shape.layout.minor_to_major))
    return ArrayShape(complex_component(shape.element_type), shape.dims + (2,), layout=layout)


class _Lowering:
    """Rebuilds one computation's instruction list with every complex value in pair form."""

    def __init__(self, module: HloModule, comp: HloComputation, names: FreshNames,
                 reducers: dict[tuple[str, str], HloComputation],
                 kinds: dict[HloComputation, str | None]) -> None:
        self.module = module
        self.comp = comp
        self.out: list[HloInstruction] = []
        self.b = PartBuilder(comp, self.out, names)
        self.names = names
        self.reducers = reducers
        self.kinds = kinds
        self.new: dict[HloInstruction, HloInstruction] = {}
        self.complex_of: dict[HloInstruction, HloInstruction] = {}   # pair form -> complex
        # shapes as written (rules change kept instructions' shapes in place)
        self.written = {inst: inst.shape for inst in comp.instructions}
        self.involved = {inst for inst in comp.instructions if _involves_complex(inst)}

    def run(self) -> None:
        comp = self.comp
        for inst in list(comp.instructions):
            self.b.of = inst
            operands = [self.new.get(o, o) for o in inst.operands]
            if inst not in self.involved:
                self.keep(inst, operands)
            elif inst.opcode == Opcode.PARAMETER:
                self._parameter(inst)
            else:
                rule = RULES.get(inst.opcode)
                if rule is None:
                    raise HloUnsupportedError(
                        f"{inst.opcode} on complex values is not supported",
                        location=inst.location, instruction=inst.name)
                start = len(self.out)
                result = rule(self, inst, operands)
                result = self.laid_out(result, pair_shape(self.written[inst]))
                added = self.out[start:]
                if any(r is result for r in added) and not any(r is inst for r in added):
                    result.name = inst.name     # the replacement answers to the user's name
                self.new[inst] = result
        root = self.new.get(comp.root_instruction, comp.root_instruction)
        if comp.is_entry and _has_complex(self.written[comp.root_instruction]):
            self.b.of = comp.root
            root = self.to_complex(root, self.written[comp.root_instruction])
        comp.instructions = self.out
        comp.root = root
        comp.signature = None       # the shapes written for it were complex

    def keep(self, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
        inst.operands = operands
        preds = inst.control_predecessors
        if preds:
            inst.attrs["control-predecessors"] = tuple(self.new.get(p, p) for p in preds)
        self.out.append(inst)
        return inst

    def _parameter(self, inst: HloInstruction) -> None:
        self.out.append(inst)
        if self.comp.is_entry:
            self.new[inst] = self.to_pair(inst)
        else:
            inst.shape = pair_shape(inst.shape)

    # --- between the forms ------------------------------------------------------------------
    def to_pair(self, value: HloInstruction) -> HloInstruction:
        """``value`` (complex, or a tuple holding complex leaves) in pair form: bitcasts."""
        shape = value.shape
        if isinstance(shape, TupleShape):
            leaves = [self.to_pair(self.b.add(Opcode.GET_TUPLE_ELEMENT, s, [value], index=i))
                      for i, s in enumerate(shape.elements)]
            pair = self.b.add(Opcode.TUPLE, pair_shape(shape), leaves)
        elif shape.element_type.is_complex:
            pair = self.b.add(Opcode.BITCAST, pair_shape(shape), [value])
        else:
            return value
        self.complex_of[pair] = value
        return pair

    def to_complex(self, pair: HloInstruction, shape: Shape) -> HloInstruction:
        """The complex form (``shape``) of pair-form ``pair``: the value ``to_pair`` started
        from, or bitcasts."""
        known = self.complex_of.get(pair)
        if known is not None:
            return known
        if isinstance(shape, TupleShape):
            leaves = [self.to_complex(self.b.add(Opcode.GET_TUPLE_ELEMENT, pair_shape(s), [pair],
                                                 index=i), s)
                      for i, s in enumerate(shape.elements)]
            return self.b.add(Opcode.TUPLE, shape, leaves)
        if _has_complex(shape):
            return self.b.add(Opcode.BITCAST, shape, [self.laid_out(pair, pair_shape(shape))])
        return pair

    def laid_out(self, value: HloInstruction, shape: Shape) -> HloInstruction:
        """``value`` in ``shape``'s layout: the one the user wrote for the value it replaces
        (the rules build in the default layout), copied where they differ."""
        if not isinstance(shape, ArrayShape) or not isinstance(value.shape, ArrayShape) \
                or shape.layout is None or value.shape.layout is None \
                or shape.layout.minor_to_major == value.shape.layout.minor_to_major:
            return value
        return self.b.add(Opcode.COPY, shape, [value])

    # --- parts ------------------------------------------------------------------------------
    def parts(self, pair: HloInstruction) -> Parts:
        d = dims_of(pair)[:-1]
        return (self.b.reshape(self.b.slice(pair, len(d), 0, 1), d),
                self.b.reshape(self.b.slice(pair, len(d), 1, 2), d))

    def join(self, re: HloInstruction, im: HloInstruction) -> HloInstruction:
        d = dims_of(re)
        return self.b.concatenate([self.b.reshape(re, d + (1,)), self.b.reshape(im, d + (1,))],
                                  len(d))

    def scalar_computation(self, et: ElementType, kind: str) -> HloComputation:
        """A reducer over ``et``: "add" or "assign" (two scalars: their sum, the second), or
        "complex-add" / "complex-multiply" of two complex numbers given as their parts
        ``(ar, ai, br, bi) -> (re, im)``."""
        comp = self.reducers.get((et.name, kind))
        if comp is None:
            comp = HloComputation(self.names.fresh(f"{kind}_{et.name}"))
            scalar = array(et, ())
            count = 4 if kind.startswith("complex") else 2
            params = [HloInstruction(self.names.fresh("p"), Opcode.PARAMETER, scalar,
                                     parameter_number=k, parent=comp) for k in range(count)]
            comp.instructions = list(params)
            b = PartBuilder(comp, comp.instructions, self.names)
            if kind == "add":
                comp.root = b.binary(Opcode.ADD, *params)
            elif kind == "assign":
                comp.root = params[1]
            else:
                x, y = (params[0], params[1]), (params[2], params[3])
                re, im = b.complex_multiply(x, y) if kind == "complex-multiply" else \
                    (b.binary(Opcode.ADD, x[0], y[0]), b.binary(Opcode.ADD, x[1], y[1]))
                comp.root = b.add(Opcode.TUPLE, TupleShape((scalar, scalar)), [re, im])
            self.module.computations.insert(0, comp)
            self.reducers[(et.name, kind)] = comp
        return comp


# --- rules: (lowering, instruction, operands in pair form) -> the replacement ---------------

Rule = Callable[[_Lowering, HloInstruction, list[HloInstruction]], HloInstruction]


def _reshaped(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    """Same opcode and attributes, pair-form shape: ops that act on each part alike."""
    inst.shape = pair_shape(inst.shape)
    return lo.keep(inst, operands)


def _with_attr(name: str, extend: Callable[[HloInstruction], object]) -> Rule:
    def rule(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
        value = extend(inst)
        inst.attrs[name] = value
        return _reshaped(lo, inst, operands)
    return rule


def _rank(inst: HloInstruction) -> int:
    assert isinstance(inst.shape, ArrayShape)
    return inst.shape.rank


def _constant(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    shape = pair_shape(inst.shape)
    assert isinstance(shape, ArrayShape) and inst.literal is not None
    if inst.literal.elided:
        inst.literal = Literal(shape, None, elided=True)
    else:
        data = np.ascontiguousarray(inst.literal.data)
        inst.literal = Literal(shape, data.view(shape.element_type.numpy).reshape(shape.dims))
    return _reshaped(lo, inst, operands)


def _select(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    p, a, b = operands
    pd = dims_of(p)
    if pd:
        operands = [lo.b.broadcast(p, dims_of(a), range(len(pd))), a, b]
    return _reshaped(lo, inst, operands)


def _index_zero(lo: _Lowering, like: HloInstruction) -> HloInstruction:
    return lo.b.constant(np.array(0), type_of(like))


def _dynamic_slice(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    inst.attrs["dynamic_slice_sizes"] = tuple(inst.dynamic_slice_sizes) + (2,)
    return _reshaped(lo, inst, operands + [_index_zero(lo, operands[1])])


def _dynamic_update_slice(lo: _Lowering, inst: HloInstruction,
                          operands: list[HloInstruction]) -> HloInstruction:
    return _reshaped(lo, inst, operands + [_index_zero(lo, operands[2])])


def _pad(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    x, value = operands
    config = inst.padding
    out = []
    for part_x, part_v in zip(lo.parts(x), lo.parts(value)):
        out.append(lo.b.add(Opcode.PAD, array(type_of(part_x), dims_of(inst)), [part_x, part_v],
                            padding=config))
    return lo.join(*out)


def _elementwise(fn: Callable[..., Parts]) -> Rule:
    """A rule from ``fn(builder, *operand parts) -> result parts``."""
    def rule(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
        return lo.join(*fn(lo.b, *(lo.parts(o) for o in operands)))
    return rule


def _to_real(fn: Callable[..., HloInstruction]) -> Rule:
    """A rule whose result is real: ``fn(builder, *operand parts) -> instruction``."""
    def rule(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
        return fn(lo.b, *(lo.parts(o) for o in operands))
    return rule


def _divide(b: PartBuilder, x: Parts, y: Parts) -> Parts:
    """Smith's algorithm: divide by the larger of the divisor's parts, which keeps the
    intermediate products in range."""
    (ar, ai), (br, bi) = x, y
    mul, add, sub, div = (lambda p, q, o=o: b.binary(o, p, q)
                          for o in ("multiply", "add", "subtract", "divide"))
    real_larger = b.compare(b.unary(Opcode.ABS, br), b.unary(Opcode.ABS, bi), "GE")
    # |br| >= |bi|: r = bi/br, d = br + bi r, ((ar + ai r)/d, (ai - ar r)/d)
    r1 = div(bi, br)
    d1 = add(br, mul(bi, r1))
    re1, im1 = div(add(ar, mul(ai, r1)), d1), div(sub(ai, mul(ar, r1)), d1)
    # otherwise: r = br/bi, d = bi + br r, ((ar r + ai)/d, (ai r - ar)/d)
    r2 = div(br, bi)
    d2 = add(bi, mul(br, r2))
    re2, im2 = div(add(mul(ar, r2), ai), d2), div(sub(mul(ai, r2), ar), d2)
    return b.select(real_larger, re1, re2), b.select(real_larger, im1, im2)


def _abs(b: PartBuilder, x: Parts) -> HloInstruction:
    """``max * sqrt(1 + (min/max)^2)``: no overflow where ``re^2 + im^2`` would; 0 for 0,
    infinity when either part is infinite (even with the other NaN)."""
    re, im = (b.unary(Opcode.ABS, p) for p in x)
    et, d = type_of(re), dims_of(re)
    big, small = b.binary(Opcode.MAXIMUM, re, im), b.binary(Opcode.MINIMUM, re, im)
    q = b.binary(Opcode.DIVIDE, small, big)
    one = b.full(1.0, et, d)
    out = b.binary(Opcode.MULTIPLY, big, b.unary(
        Opcode.SQRT, b.binary(Opcode.ADD, one, b.binary(Opcode.MULTIPLY, q, q))))
    zero = b.full(0.0, et, d)
    out = b.select(b.compare(big, zero, "EQ"), zero, out)
    inf = b.full(np.inf, et, d)
    return b.select(b.compare(big, inf, "EQ"), inf, out)


def _sign(b: PartBuilder, x: Parts) -> Parts:
    """``z / |z|``, and 0 for 0."""
    magnitude = _abs(b, x)
    zero = b.full(0.0, type_of(magnitude), dims_of(magnitude))
    is_zero = b.compare(magnitude, zero, "EQ")
    re, im = (b.select(is_zero, zero, b.binary(Opcode.DIVIDE, p, magnitude)) for p in x)
    return re, im


def _exp_unguarded(b: PartBuilder, x: Parts) -> Parts:
    """``e^re (cos im, sin im)`` as written: an overflowed ``e^re`` times ``sin 0`` is NaN,
    which is what XLA's power computes inside."""
    re, im = x
    scale = b.unary(Opcode.EXPONENTIAL, re)
    return (b.binary(Opcode.MULTIPLY, scale, b.unary(Opcode.COSINE, im)),
            b.binary(Opcode.MULTIPLY, scale, b.unary(Opcode.SINE, im)))


def _real_axis_kept(b: PartBuilder, im: HloInstruction, out_im: HloInstruction) -> HloInstruction:
    """XLA's exponential keeps a zero imaginary part zero: ``exp(100+0j)`` is ``inf+0j``, not
    ``e^100 * sin 0 = inf * 0 = NaN``."""
    return b.select(b.compare(im, b.full(0.0, type_of(im), dims_of(im)), "EQ"), im, out_im)


def _exp(b: PartBuilder, x: Parts) -> Parts:
    out_re, out_im = _exp_unguarded(b, x)
    return out_re, _real_axis_kept(b, x[1], out_im)


def _log(b: PartBuilder, x: Parts) -> Parts:
    re, im = x
    return b.unary(Opcode.LOG, _abs(b, x)), b.binary(Opcode.ATAN2, im, re)


def _sqrt(b: PartBuilder, x: Parts) -> Parts:
    """The principal root: ``t = sqrt((|z| + |re|) / 2)``; ``(t, im / 2t)`` for ``re >= 0``,
    else ``(|im| / 2t, copysign(t, im))``; ``(0, im)`` at 0."""
    re, im = x
    et, d = type_of(re), dims_of(re)
    t = b.unary(Opcode.SQRT,
                b.scaled(b.binary(Opcode.ADD, _abs(b, x), b.unary(Opcode.ABS, re)), 0.5))
    two_t = b.scaled(t, 2.0)
    zero = b.full(0.0, et, d)
    nonnegative = b.compare(re, zero, "GE")
    out_re = b.select(nonnegative, t, b.binary(Opcode.DIVIDE, b.unary(Opcode.ABS, im), two_t))
    signed_t = b.select(b.compare(im, zero, "LT"), b.unary(Opcode.NEGATE, t), t)
    out_im = b.select(nonnegative, b.binary(Opcode.DIVIDE, im, two_t), signed_t)
    is_zero = b.compare(t, zero, "EQ")
    return b.select(is_zero, zero, out_re), b.select(is_zero, im, out_im)


def _rsqrt(b: PartBuilder, x: Parts) -> Parts:
    root = _sqrt(b, x)
    one = b.full(1.0, type_of(root[0]), dims_of(root[0]))
    return _divide(b, (one, b.full(0.0, type_of(one), dims_of(one))), root)


def _power(b: PartBuilder, x: Parts, y: Parts) -> Parts:
    """``exp(y log x)`` with XLA's special cases, tried in this order: ``x^0`` and ``1^y``
    are 1 (NaN and infinite ``x`` or ``y`` included); ``0^y`` is 0 for a positive real ``y``
    and NaN otherwise; ``inf^y`` for a real ``y`` is ``inf`` above 0 and 0 below."""
    re, im = _exp_unguarded(b, b.complex_multiply(y, _log(b, x)))
    et, d = type_of(re), dims_of(re)
    zero, one, inf, nan = (b.full(v, et, d) for v in (0.0, 1.0, np.inf, np.nan))

    def both(p: HloInstruction, q: HloInstruction) -> HloInstruction:
        return b.binary(Opcode.AND, p, q)

    y_real = b.compare(y[1], zero, "EQ")
    x_real = b.compare(x[1], zero, "EQ")
    y_positive, y_negative = b.compare(y[0], zero, "GT"), b.compare(y[0], zero, "LT")
    infinite_base = both(both(b.compare(x[0], inf, "EQ"), x_real), y_real)
    re = b.select(both(infinite_base, y_positive), inf,
                  b.select(both(infinite_base, y_negative), zero, re))
    im = b.select(both(infinite_base, b.binary(Opcode.OR, y_positive, y_negative)), zero, im)
    zero_base = both(b.compare(x[0], zero, "EQ"), x_real)
    zero_to_positive = both(y_positive, y_real)
    re = b.select(zero_base, b.select(zero_to_positive, zero, nan), re)
    im = b.select(zero_base, b.select(zero_to_positive, zero, nan), im)
    unit = b.binary(Opcode.OR, both(b.compare(y[0], zero, "EQ"), y_real),
                    both(b.compare(x[0], one, "EQ"), x_real))
    return b.select(unit, one, re), b.select(unit, zero, im)


def _sine(b: PartBuilder, x: Parts) -> Parts:
    """``(sin re cosh im, cos re sinh im)``."""
    re, im = x
    cosh, sinh = _cosh_sinh(b, im)
    return (b.binary(Opcode.MULTIPLY, b.unary(Opcode.SINE, re), cosh),
            b.binary(Opcode.MULTIPLY, b.unary(Opcode.COSINE, re), sinh))


def _cosine(b: PartBuilder, x: Parts) -> Parts:
    """``(cos re cosh im, -sin re sinh im)``."""
    re, im = x
    cosh, sinh = _cosh_sinh(b, im)
    return (b.binary(Opcode.MULTIPLY, b.unary(Opcode.COSINE, re), cosh),
            b.unary(Opcode.NEGATE, b.binary(Opcode.MULTIPLY, b.unary(Opcode.SINE, re), sinh)))


def _cosh_sinh(b: PartBuilder, x: HloInstruction) -> Parts:
    return b.unary(Opcode.COSH, x), b.unary(Opcode.SINH, x)


def _sinh(b: PartBuilder, x: Parts) -> Parts:
    """``(sinh re cos im, cosh re sin im)``."""
    re, im = x
    cosh, sinh = _cosh_sinh(b, re)
    return (b.binary(Opcode.MULTIPLY, sinh, b.unary(Opcode.COSINE, im)),
            b.binary(Opcode.MULTIPLY, cosh, b.unary(Opcode.SINE, im)))


def _cosh(b: PartBuilder, x: Parts) -> Parts:
    """``(cosh re cos im, sinh re sin im)``."""
    re, im = x
    cosh, sinh = _cosh_sinh(b, re)
    return (b.binary(Opcode.MULTIPLY, cosh, b.unary(Opcode.COSINE, im)),
            b.binary(Opcode.MULTIPLY, sinh, b.unary(Opcode.SINE, im)))


def _tanh(b: PartBuilder, x: Parts) -> Parts:
    """``(tanh re + i tan im) / (1 + i tanh re tan im)``: finite for any real part."""
    re, im = x
    t, u = b.unary(Opcode.TANH, re), b.unary(Opcode.TAN, im)
    return _divide(b, (t, u),
                   (b.full(1.0, type_of(re), dims_of(re)), b.binary(Opcode.MULTIPLY, t, u)))


def _tan(b: PartBuilder, x: Parts) -> Parts:
    """``tan z = -i tanh(i z)``."""
    re, im = _tanh(b, (b.unary(Opcode.NEGATE, x[1]), x[0]))
    return im, b.unary(Opcode.NEGATE, re)


def _expm1(b: PartBuilder, x: Parts) -> Parts:
    """``(expm1(re) cos im - 2 sin^2(im/2), e^re sin im)``: exact near 0."""
    re, im = x
    half = b.unary(Opcode.SINE, b.scaled(im, 0.5))
    cos_minus_one = b.scaled(b.binary(Opcode.MULTIPLY, half, half), -2.0)
    out_re = b.binary(Opcode.ADD,
                      b.binary(Opcode.MULTIPLY, b.unary(Opcode.EXPONENTIAL_MINUS_ONE, re),
                               b.unary(Opcode.COSINE, im)),
                      cos_minus_one)
    out_im = b.binary(Opcode.MULTIPLY, b.unary(Opcode.EXPONENTIAL, re), b.unary(Opcode.SINE, im))
    return out_re, _real_axis_kept(b, im, out_im)


def _log1p(b: PartBuilder, x: Parts) -> Parts:
    """``(log1p(2 re + re^2 + im^2) / 2, atan2(im, 1 + re))``: exact near 0."""
    re, im = x
    one = b.full(1.0, type_of(re), dims_of(re))
    grown = b.binary(Opcode.ADD, b.scaled(re, 2.0), b.binary(
        Opcode.ADD, b.binary(Opcode.MULTIPLY, re, re), b.binary(Opcode.MULTIPLY, im, im)))
    return (b.scaled(b.unary(Opcode.LOG_PLUS_ONE, grown), 0.5),
            b.binary(Opcode.ATAN2, im, b.binary(Opcode.ADD, one, re)))


def _negate(b: PartBuilder, x: Parts) -> Parts:
    return b.unary(Opcode.NEGATE, x[0]), b.unary(Opcode.NEGATE, x[1])


def _complex(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    return lo.join(*operands)


def _real(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    return lo.parts(operands[0])[0]


def _imag(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    return lo.parts(operands[0])[1]


def _convert(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    (x,) = operands
    pair = pair_shape(inst.shape)
    assert isinstance(pair, ArrayShape)
    if not _has_complex(inst.operands[0].shape):       # real -> complex: an imaginary part of 0
        re = lo.b.add(Opcode.CONVERT, array(pair.element_type, dims_of(x)), [x])
        return lo.join(re, lo.b.full(0.0, pair.element_type, dims_of(x)))
    if type_of(x) == pair.element_type:
        return x
    return lo.b.add(Opcode.CONVERT, pair, [x])


def _compare(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    direction = str(inst.attrs.get("direction"))
    if direction not in ("EQ", "NE"):
        raise HloUnsupportedError(f"compare direction {direction} is not defined for complex "
                                  f"values (only EQ and NE are)", location=inst.location,
                                  instruction=inst.name)
    (ar, ai), (br, bi) = (lo.parts(o) for o in operands)
    both = lo.b.compare(ar, br, direction), lo.b.compare(ai, bi, direction)
    return lo.b.binary(Opcode.AND if direction == "EQ" else Opcode.OR, *both)


def _dot(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    (ar, ai), (br, bi) = (lo.parts(o) for o in operands)
    pair = pair_shape(inst.shape)
    assert isinstance(pair, ArrayShape)
    shape = array(pair.element_type, pair.dims[:-1])
    attrs: dict[str, Any] = {k: v for k, v in inst.attrs.items() if k.endswith("_dims")}

    def dot(x: HloInstruction, y: HloInstruction) -> HloInstruction:
        return lo.b.add(Opcode.DOT, shape, [x, y], **attrs)
    re = lo.b.binary(Opcode.SUBTRACT, dot(ar, br), dot(ai, bi))
    im = lo.b.binary(Opcode.ADD, dot(ar, bi), dot(ai, br))
    return lo.join(re, im)


def _convolution(lo: _Lowering, inst: HloInstruction,
                 operands: list[HloInstruction]) -> HloInstruction:
    """Four real convolutions with the same window and dimension numbers, as a complex dot's
    four dots: a convolution is linear in each operand, grouped ones included."""
    (ar, ai), (br, bi) = (lo.parts(o) for o in operands)
    pair = pair_shape(inst.shape)
    assert isinstance(pair, ArrayShape)
    shape = array(pair.element_type, pair.dims[:-1])
    attrs: dict[str, Any] = dict(inst.attrs)

    def conv(x: HloInstruction, y: HloInstruction) -> HloInstruction:
        return lo.b.add(Opcode.CONVOLUTION, shape, [x, y], **attrs)
    re = lo.b.binary(Opcode.SUBTRACT, conv(ar, br), conv(ai, bi))
    im = lo.b.binary(Opcode.ADD, conv(ar, bi), conv(ai, br))
    return lo.join(re, im)


def _reduce(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    kind = lo.kinds.get(inst.to_apply) if len(operands) == 2 else None
    if kind not in ("add", "multiply"):
        raise HloUnsupportedError("a reduce over complex values must be a single sum or product "
                                  "(its to_apply an add or multiply of its two parameters)",
                                  location=inst.location, instruction=inst.name)
    x, init = operands
    pair = pair_shape(inst.shape)
    assert isinstance(pair, ArrayShape)
    et = pair.element_type
    if kind == "multiply":
        return _over_parts(lo, inst, operands, Opcode.REDUCE, "complex-multiply",
                           dimensions=inst.dimensions)
    summed = lo.b.add(Opcode.REDUCE, pair, [x, lo.b.full(0.0, et, ())],
                      dimensions=inst.dimensions, to_apply=lo.scalar_computation(et, "add"))
    if _is_zero_constant(init):
        return summed
    return lo.b.binary(Opcode.ADD, summed, lo.b.broadcast(init, pair.dims, (len(pair.dims) - 1,)))


def _over_parts(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction],
                opcode: Opcode, kind: str, **attrs) -> HloInstruction:
    """``opcode`` (reduce, reduce-window) over both parts at once: a variadic form whose
    reducer combines two complex numbers given as parts (``kind``)."""
    x, init = operands
    written = lo.written[inst]
    assert isinstance(written, ArrayShape)
    et = complex_component(written.element_type)
    part = array(et, written.dims)
    both = lo.b.add(opcode, TupleShape((part, part)), [*lo.parts(x), *lo.parts(init)],
                    to_apply=lo.scalar_computation(et, kind), **attrs)
    re, im = (lo.b.add(Opcode.GET_TUPLE_ELEMENT, part, [both], index=k) for k in range(2))
    return lo.join(re, im)


def _reduce_window(lo: _Lowering, inst: HloInstruction,
                   operands: list[HloInstruction]) -> HloInstruction:
    """A sum from a constant zero is one reduce-window of the pair form (the scan family's
    cumulative sums); other sums and products combine both parts in a variadic one."""
    kind = lo.kinds.get(inst.to_apply) if len(operands) == 2 else None
    if kind not in ("add", "multiply"):
        raise HloUnsupportedError("a reduce-window over complex values must be a sum or a "
                                  "product (its to_apply an add or multiply of its two "
                                  "parameters)", location=inst.location, instruction=inst.name)
    window = inst.window
    assert isinstance(window, Window)
    if kind == "multiply" or not _is_zero_constant(inst.operands[1]):
        return _over_parts(lo, inst, operands, Opcode.REDUCE_WINDOW, f"complex-{kind}",
                           window=window)
    pair = pair_shape(inst.shape)
    assert isinstance(pair, ArrayShape)
    return lo.b.add(Opcode.REDUCE_WINDOW, pair,
                    [operands[0], lo.b.full(0.0, pair.element_type, ())],
                    window=Window(window.dims + (WindowDim(1),)),
                    to_apply=lo.scalar_computation(pair.element_type, "add"))


def _reducer(comp: HloComputation) -> str | None:
    """"add" or "multiply" where ``comp`` is just that of its two parameters, "assign" where
    it returns its second (a scatter that overwrites)."""
    root = comp.root
    if root is None or len(comp.parameters) != 2:
        return None
    if root is comp.parameter(1):
        return "assign"
    if root.opcode not in (Opcode.ADD, Opcode.MULTIPLY) \
            or {id(o) for o in root.operands} != {id(p) for p in comp.parameters}:
        return None
    return root.opcode


def _gather(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    """Both parts of each element: the pair dimension is one more offset dimension, the last."""
    inst.attrs["offset_dims"] = tuple(inst.offset_dims) + (_rank(inst),)
    inst.attrs["slice_sizes"] = tuple(inst.slice_sizes) + (2,)
    return _reshaped(lo, inst, operands)


def _scatter(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    """A scatter of one complex array that adds or overwrites: the pair dimension is one more
    window dimension of the updates, the last, and the combiner acts on each part."""
    kind = lo.kinds.get(inst.to_apply) if len(operands) == 3 else None
    if kind not in ("add", "assign"):
        raise HloUnsupportedError("a scatter of complex values must add or overwrite one array "
                                  "(its to_apply an add of its parameters, or its second)",
                                  location=inst.location, instruction=inst.name)
    updates_rank = len(leaf_shape(lo.written[inst.operands[2]], ()).dims)
    inst.attrs["update_window_dims"] = tuple(inst.update_window_dims) + (updates_rank,)
    et = complex_component(leaf_shape(lo.written[inst], ()).element_type)
    inst.attrs["to_apply"] = lo.scalar_computation(et, kind)
    return _reshaped(lo, inst, operands)


def _is_zero_constant(inst: HloInstruction) -> bool:
    return inst.opcode == Opcode.CONSTANT and inst.literal is not None and \
        inst.literal.data is not None and not np.any(inst.literal.data)


def _fft(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    kind = str(inst.fft_type)
    lengths = tuple(inst.fft_length)
    (x,) = operands
    parts = (x, None) if kind == "RFFT" else lo.parts(x)
    re, im = lower_fft(lo.b, kind, lengths, parts)
    if kind == "IRFFT":
        return re
    assert im is not None   # lower_fft: only IRFFT's imaginary part is None
    return lo.join(re, im)


def _custom_call(lo: _Lowering, inst: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
    """Custom calls keep their complex buffers: operands and results cross by bitcast."""
    inst.operands = [lo.to_complex(p, lo.written.get(o, o.shape))
                     for p, o in zip(operands, inst.operands)]
    lo.out.append(inst)
    return lo.to_pair(inst)


RULES: dict[Opcode, Rule] = {
    **{Opcode(op): _reshaped for op in ("tuple", "get-tuple-element", "while", "call", "conditional",
                                "opt-barrier", "copy", "add", "subtract", "negate", "reverse",
                                "concatenate", "reshape", "bitcast", "add-dependency", "domain")},
    Opcode.TRANSPOSE: _with_attr("dimensions", lambda i: tuple(i.dimensions) + (_rank(i),)),
    Opcode.BROADCAST: _with_attr("dimensions", lambda i: tuple(i.dimensions) + (_rank(i),)),
    Opcode.SLICE: _with_attr(Opcode.SLICE, lambda i: SliceSpec(i.slice.dims + (SliceDim(0, 2, 1),))),
    Opcode.CONSTANT: _constant,
    Opcode.SELECT: _select,
    Opcode.DYNAMIC_SLICE: _dynamic_slice,
    Opcode.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice,
    Opcode.PAD: _pad,
    Opcode.MULTIPLY: _elementwise(PartBuilder.complex_multiply),
    Opcode.DIVIDE: _elementwise(_divide),
    Opcode.SIGN: _elementwise(_sign),
    Opcode.EXPONENTIAL: _elementwise(_exp),
    Opcode.LOG: _elementwise(_log),
    Opcode.SQRT: _elementwise(_sqrt),
    Opcode.RSQRT: _elementwise(_rsqrt),
    Opcode.POWER: _elementwise(_power),
    Opcode.SINE: _elementwise(_sine),
    Opcode.COSINE: _elementwise(_cosine),
    Opcode.SINH: _elementwise(_sinh),
    Opcode.COSH: _elementwise(_cosh),
    Opcode.TANH: _elementwise(_tanh),
    Opcode.TAN: _elementwise(_tan),
    Opcode.EXPONENTIAL_MINUS_ONE: _elementwise(_expm1),
    Opcode.LOG_PLUS_ONE: _elementwise(_log1p),
    Opcode.ABS: _to_real(_abs),
    Opcode.COMPLEX: _complex,
    Opcode.REAL: _real,
    Opcode.IMAG: _imag,
    Opcode.CONVERT: _convert,
    Opcode.COMPARE: _compare,
    Opcode.DOT: _dot,
    Opcode.CONVOLUTION: _convolution,
    Opcode.REDUCE: _reduce,
    Opcode.REDUCE_WINDOW: _reduce_window,
    Opcode.FFT: _fft,
    Opcode.CUSTOM_CALL: _custom_call,
    Opcode.GATHER: _gather,
    Opcode.SCATTER: _scatter,
}

