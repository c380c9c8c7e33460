"""Bounded dynamic shapes as XLA's dynamic padder computes them: data stored at the static
bound, each dynamic dimension's size a value beside it.

``set-dimension-size(x, s)`` gives ``x`` the size ``s`` in one dimension (as given:
``get-dimension-size`` reads it back unclamped, as in XLA, and a reduce reads the elements
whose index is below it, all of them for a size past the bound, none for a negative one);
elementwise operations keep their operands' sizes; ``get-dimension-size`` is the size (or
the static bound); a reduce over a dynamic dimension reads the padding as its init value
(XLA pads the operand with it), so it combines the first ``size`` elements only; a reduce
keeps the sizes of the dimensions it does not reduce. An entry output with a dynamic
dimension is stored compact in its buffer at the bound, as XLA's ``SliceToDynamic`` writes
it, and the entry's root gains the sizes (``compact_outputs``), so that a run returns it at
its runtime shape as XLA does. ``dynamic-reshape`` lays the operand's elements inside its
sizes, in logical row-major order, into the result's sizes (``dynamic_reshape``); a
``reshape`` merging the dynamic dimensions into its one dynamic dimension is one with their
sizes' product. A dot sums the first ``size`` products of a dynamic contraction and keeps the
sizes of the other dimensions. Everything else that reads a dynamic value (another reshape, slice, a tuple that
is not the entry's root...), a dynamic parameter, and dynamic shapes outside the entry
computation are refused at their line. Afterwards no shape is dynamic and no
``set-dimension-size``/``get-dimension-size``/``dynamic-reshape`` is left.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from ..errors import HloUnsupportedError
from ..hlo.dtypes import ElementType
from ..hlo.ir import HloComputation, HloInstruction, HloModule
from ..hlo.opcode_enum import Opcode
from ..hlo.opcodes import OPCODES
from ..hlo.shape import ArrayShape, Shape, ShapeIndex, TupleShape, physical_order
from ..target import CPU, Target
from .dynamic_reshape import S32, Sizes, dynamic_reshape, inside_first, reshape_sizes
from .names import FreshNames
from .part_builder import PartBuilder, array, dims_of, expand_in_place, type_of

_DYNAMIC_OPCODES = (Opcode.SET_DIMENSION_SIZE, Opcode.GET_DIMENSION_SIZE, Opcode.DYNAMIC_RESHAPE)


def pad_dynamic_shapes_in_place(module: HloModule, target: Target = CPU) -> None:
    names: FreshNames | None = None
    for comp in module.computations:
        if not any(_is_dynamic(i) for i in comp.instructions):
            continue
        if comp is not module.entry:
            inst = next(i for i in comp.instructions if _is_dynamic(i))
            raise _refuse(inst, f"has a dynamic shape inside computation {comp.name}; dynamic "
                                "shapes are supported in the entry computation only")
        names = names or FreshNames(module)
        padder = _Padder(module, comp)
        expand_in_place(comp, names, padder.expand)
        padder.compact_outputs(names)


def dynamic_output_dims(result: Shape) -> list[tuple[ShapeIndex, int]]:
    """The dynamic dimensions of an entry's declared ``result`` (its leaf, its dimension), in
    the order of the sizes array the pass appends to the entry's outputs."""
    return [(index, d) for index, leaf in result.leaves() if isinstance(leaf, ArrayShape)
            for d, flag in enumerate(leaf.dynamic) if flag]


def _is_dynamic(inst: HloInstruction) -> bool:
    return inst.opcode in _DYNAMIC_OPCODES or _shape_is_dynamic(inst.shape)


def _shape_is_dynamic(shape: Shape) -> bool:
    if isinstance(shape, TupleShape):
        return any(_shape_is_dynamic(e) for e in shape.elements)
    return isinstance(shape, ArrayShape) and shape.is_dynamic


def _static(shape: Shape) -> Shape:
    if isinstance(shape, TupleShape):
        return TupleShape(tuple(_static(e) for e in shape.elements))
    assert isinstance(shape, ArrayShape)
    return ArrayShape(shape.element_type, shape.dims, (False,) * len(shape.dims), shape.layout)


def _refuse(inst: HloInstruction, why: str) -> HloUnsupportedError:
    return HloUnsupportedError(f"{inst.opcode} {inst.name} {why}", instruction=inst.name,
                               location=inst.location)


class _Padder:
    """The expansion of one entry computation, with the sizes of the values built so far."""

    def __init__(self, module: HloModule, comp: HloComputation) -> None:
        self.module = module
        self.comp = comp
        self.root = comp.root
        self.result = comp.root_instruction.shape     # as declared: the expansion clears it
        self.sizes: dict[int, Sizes] = {}
        self.assigns: dict[str, HloComputation] = {}

    def expand(self, build: PartBuilder, inst: HloInstruction) -> HloInstruction | None:
        return self._value(build, inst)

    def compact_outputs(self, names: FreshNames) -> None:
        """Each output with a dynamic dimension compact, as XLA returns it: the elements of its
        runtime shape first, in row-major order (stored row-major at the bound, its padding
        after them); zeros past the sizes of a value declared static. When the result declares
        a dynamic dimension, the root becomes a tuple of the outputs and an ``s32[k]`` array of
        their sizes (``dynamic_output_dims``'s order, clamped to the bounds), which the
        executable reads back to give each such output its runtime shape."""
        comp = self.comp
        build = PartBuilder(comp, comp.instructions, names)
        root = comp.root_instruction
        build.of = root
        is_tuple = root.opcode == Opcode.TUPLE
        if is_tuple:
            comp.instructions.remove(root)      # back after the outputs it holds
            assert isinstance(self.result, TupleShape)
            outputs = [self._output(build, e, self.result.elements[k])
                       for k, e in enumerate(root.operands)]
        else:
            outputs = [self._output(build, root, self.result)]
        dynamic = dynamic_output_dims(self.result)
        if not dynamic:
            if is_tuple:
                root.operands = outputs
                comp.instructions.append(root)
            comp.root = root if is_tuple else outputs[0]
            return
        sizes = build.concatenate([self._clamped(build, outputs[index[0] if index else 0], d)
                                   for index, d in dynamic], 0)
        elements = outputs + [sizes]
        comp.root = build.add(Opcode.TUPLE, TupleShape(tuple(e.shape for e in elements)),
                              elements)
        if not is_tuple:        # the one output is element 0 now
            self.module.input_output_alias = [
                replace(a, output_index=(0,) + tuple(a.output_index))
                for a in self.module.input_output_alias]
        if self.module.entry_computation_layout is not None:
            params, _ = self.module.entry_computation_layout
            self.module.entry_computation_layout = (params, comp.root.shape)

    def _output(self, build: PartBuilder, x: HloInstruction, declared: Shape) -> HloInstruction:
        """``x`` as the entry returns it: compact inside the sizes of its declared dynamic
        dimensions (row-major: a prefix already when only dimension 0 is dynamic and ``x`` is
        row-major), zero past the others' (a dynamic value returned as a static shape)."""
        sizes = self.sizes.get(id(x), {})
        flags = declared.dynamic if isinstance(declared, ArrayShape) else ()
        for d, size in sorted(sizes.items()):
            if not flags[d]:
                x = self._zero_past(build, x, d, size)
        kept = {d: size for d, size in sizes.items() if flags[d]}
        if any(flags) and (any(d > 0 for d in kept)
                           or physical_order(x.array_shape) != tuple(range(len(flags)))):
            x = build.reshape(inside_first(build, x, kept, lambda et: self._assign(build, et)),
                              dims_of(x))
        self.sizes[id(x)] = kept
        return x

    def _clamped(self, build: PartBuilder, x: HloInstruction, d: int) -> HloInstruction:
        """The size of ``x``'s dimension ``d`` within ``[0, bound]``, as an ``s32[1]``."""
        bound = dims_of(x)[d]
        size = self.sizes.get(id(x), {}).get(d)
        if size is None:
            return build.constant(np.array([bound], np.int32), S32)
        low = build.binary(Opcode.MAXIMUM, size, build.constant(np.array(0, np.int32), S32))
        high = build.binary(Opcode.MINIMUM, low, build.constant(np.array(bound, np.int32), S32))
        return build.reshape(high, (1,))

    def _value(self, build: PartBuilder, inst: HloInstruction) -> HloInstruction | None:
        if inst.opcode == Opcode.SET_DIMENSION_SIZE:
            return self._set_size(build, inst)
        if inst.opcode == Opcode.GET_DIMENSION_SIZE:
            (x,) = inst.operands
            d = inst.dimensions[0]
            size = self.sizes.get(id(x), {}).get(d)
            return size if size is not None else build.constant(np.array(dims_of(x)[d], np.int32), S32)
        if inst.opcode == Opcode.DYNAMIC_RESHAPE:
            return self._dynamic_reshape(build, inst)
        dynamic = [self.sizes[id(op)] for op in inst.operands if id(op) in self.sizes]
        if not dynamic:
            if _shape_is_dynamic(inst.shape) and inst.opcode != Opcode.TUPLE:
                raise _refuse(inst, f"has the dynamic shape {inst.shape} without a "
                                    "set-dimension-size giving its size")
            if inst.opcode == Opcode.TUPLE and inst is not self.root \
                    and _shape_is_dynamic(inst.shape):
                raise _refuse(inst, "holds a dynamic shape; only the entry's root tuple may")
            inst.shape = _static(inst.shape)
            return None
        if OPCODES[inst.opcode].elementwise:
            merged: Sizes = {}
            for sizes in dynamic:
                merged.update(sizes)
            inst.shape = _static(inst.shape)
            self.sizes[id(inst)] = merged
            return None
        reader = _READERS.get(inst.opcode)
        if reader is not None:
            return reader(self, build, inst)
        if inst.opcode == Opcode.TUPLE and inst is self.root:
            inst.shape = _static(inst.shape)
            return None
        raise _refuse(inst, "reads a value with a dynamic dimension; only elementwise "
                            "operations, reduce, dot, a merging reshape, dynamic-reshape, "
                            "get-dimension-size and the entry's outputs may")

    def _set_size(self, build: PartBuilder, inst: HloInstruction) -> HloInstruction:
        x, size = inst.operands
        value = build.add(Opcode.COPY, _static(x.shape), [x])
        self.sizes[id(value)] = {**self.sizes.get(id(x), {}), inst.dimensions[0]: size}
        return value

    def _reduce(self, build: PartBuilder, inst: HloInstruction) -> HloInstruction:
        n = len(inst.operands) // 2
        reduced = set(inst.dimensions)
        inputs = [self._padded(build, x, init, reduced)
                  for x, init in zip(inst.operands[:n], inst.operands[n:])]
        kept = [d for d in range(len(dims_of(inst.operands[0]))) if d not in reduced]
        result_sizes = {kept.index(d): size for sizes in
                        (self.sizes.get(id(x), {}) for x in inst.operands[:n])
                        for d, size in sizes.items() if d not in reduced}
        if result_sizes and n > 1:
            raise _refuse(inst, "reduces several operands keeping a dynamic dimension")
        value = build.add(Opcode.REDUCE, _static(inst.shape), inputs + inst.operands[n:])
        value.attrs.update(inst.attrs)
        if result_sizes:
            self.sizes[id(value)] = result_sizes
        return value

    def _dynamic_reshape(self, build: PartBuilder, inst: HloInstruction) -> HloInstruction:
        operand_sizes = self.sizes.get(id(inst.operands[0]), {})
        result_sizes = inst.operands[1:] if inst.opcode == Opcode.DYNAMIC_RESHAPE else \
            reshape_sizes(build, inst, operand_sizes)
        value, dynamic = dynamic_reshape(build, inst, result_sizes, operand_sizes,
                                         lambda et: self._assign(build, et))
        if dynamic:
            self.sizes[id(value)] = dynamic
        return value

    def _assign(self, build: PartBuilder, et: ElementType) -> HloComputation:
        """A scatter's combiner keeping the update, one per element type."""
        comp = self.assigns.get(et.name)
        if comp is None:
            comp = HloComputation(build.names.fresh(f"assign_{et.name}"))
            params = [HloInstruction(build.names.fresh("p"), Opcode.PARAMETER, array(et, ()),
                                     parameter_number=k, parent=comp) for k in range(2)]
            comp.instructions = list(params)
            comp.root = params[1]
            self.module.computations.insert(0, comp)
            self.assigns[et.name] = comp
        return comp

    def _dot(self, build: PartBuilder, inst: HloInstruction) -> HloInstruction:
        """Both operands zero past each dynamic contracting size (either operand's), so the
        contraction sums the first ``size`` products only (``0 * 0``: padding that holds an
        infinity or a NaN adds nothing); the result keeps the sizes of the batch and free
        dimensions."""
        lhs, rhs = inst.operands
        ls, rs = self.sizes.get(id(lhs), {}), self.sizes.get(id(rhs), {})
        lc, rc = inst.lhs_contracting_dims, inst.rhs_contracting_dims
        lb = inst.lhs_batch_dims if "lhs_batch_dims" in inst.attrs else ()
        rb = inst.rhs_batch_dims if "rhs_batch_dims" in inst.attrs else ()
        for l, r in zip(lc, rc):
            size = ls.get(l, rs.get(r))
            if size is not None:
                lhs = self._zero_past(build, lhs, l, ls.get(l, size))
                rhs = self._zero_past(build, rhs, r, rs.get(r, size))
        value = build.add(Opcode.DOT, _static(inst.shape), [lhs, rhs])
        value.attrs.update(inst.attrs)
        free = [(ls, d) for d in range(len(dims_of(lhs))) if d not in lb and d not in lc] + \
            [(rs, d) for d in range(len(dims_of(rhs))) if d not in rb and d not in rc]
        kept = [ls.get(l, rs.get(r)) for l, r in zip(lb, rb)] + [side.get(d) for side, d in free]
        sizes = {i: size for i, size in enumerate(kept) if size is not None}
        if sizes:
            self.sizes[id(value)] = sizes
        return value

    def _zero_past(self, build: PartBuilder, x: HloInstruction, d: int,
                   size: HloInstruction) -> HloInstruction:
        zero = build.constant(np.zeros((), type_of(x).numpy), type_of(x))
        return self._mask(build, x, d, size, zero)

    def _padded(self, build: PartBuilder, x: HloInstruction, fill: HloInstruction,
                dims: set[int]) -> HloInstruction:
        """``x`` with ``fill`` (a scalar) past the size of each of ``dims`` that is dynamic."""
        for d, size in sorted(self.sizes.get(id(x), {}).items()):
            if d in dims:
                x = self._mask(build, x, d, size, fill)
        return x

    def _mask(self, build: PartBuilder, x: HloInstruction, d: int, size: HloInstruction,
              fill: HloInstruction) -> HloInstruction:
        shape = dims_of(x)
        index = build.add(Opcode.IOTA, array(S32, shape), iota_dimension=d)
        inside = build.compare(index, build.broadcast(size, shape, ()), "LT")
        return build.select(inside, x, build.broadcast(fill, shape, ()))


# the readers of dynamic values that are neither elementwise nor the entry's root tuple
_READERS: dict[Opcode, Callable[[_Padder, PartBuilder, HloInstruction], HloInstruction]] = {
    Opcode.REDUCE: _Padder._reduce,
    Opcode.RESHAPE: _Padder._dynamic_reshape,
    Opcode.DOT: _Padder._dot,
}
