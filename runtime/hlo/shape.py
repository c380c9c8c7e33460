"""Shapes, layouts and shape indices.

Shapes are immutable values: two instructions with equal shapes compare equal, which is what
shape inference and the verifier need. ``Layout`` keeps the minor-to-major order and the
optional tail after ``:`` (tiling, element size, memory space) verbatim, so XLA's dumps
round-trip; the element size in bits and the memory space are parsed out because buffer sizes
and memory colours depend on them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar, Iterator, Literal, Union

from .dtypes import ElementType, TOKEN

ShapeIndex = tuple[int, ...]

_ELEMENT_BITS = re.compile(r"E\((\d+)\)")
_MEMORY_SPACE = re.compile(r"(?<![A-Z])S\((\d+)\)")


@dataclass(frozen=True)
class Layout:
    minor_to_major: tuple[int, ...]
    tail: str = ""

    @property
    def element_size_bits(self) -> int:
        m = _ELEMENT_BITS.search(self.tail)
        return int(m.group(1)) if m else 0

    @property
    def memory_space(self) -> int:
        m = _MEMORY_SPACE.search(self.tail)
        return int(m.group(1)) if m else 0

    @property
    def is_tiled(self) -> bool:
        return "T(" in self.tail

    def to_text(self) -> str:
        body = ",".join(str(d) for d in self.minor_to_major)
        return "{" + body + (":" + self.tail if self.tail else "") + "}"


def default_layout(rank: int) -> Layout:
    return Layout(tuple(range(rank - 1, -1, -1)))


@dataclass(frozen=True)
class ArrayShape:
    """An array (or scalar, token, opaque) shape. ``dims[i] == -1`` marks an unbounded ``?``."""

    element_type: ElementType
    dims: tuple[int, ...]
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None

    def __post_init__(self) -> None:
        if len(self.dynamic) != len(self.dims):
            object.__setattr__(self, "dynamic", (False,) * len(self.dims))

    # a Literal, so that ``if shape.is_tuple`` narrows a ``Shape`` for the type checker
    is_tuple: ClassVar[Literal[False]] = False

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_token(self) -> bool:
        return self.element_type is TOKEN

    @property
    def is_array(self) -> bool:
        return self.element_type.is_array_type

    @property
    def is_dynamic(self) -> bool:
        return any(self.dynamic)

    @property
    def is_unbounded(self) -> bool:
        return any(d < 0 for d in self.dims)

    @property
    def element_count(self) -> int:
        return math.prod(self.dims) if not self.is_unbounded else -1

    @property
    def minor_to_major(self) -> tuple[int, ...]:
        """The layout's order, or row-major when the shape prints no layout."""
        if self.layout is not None and len(self.layout.minor_to_major) == self.rank:
            return self.layout.minor_to_major
        return tuple(range(self.rank - 1, -1, -1))

    @cached_property
    def byte_size(self) -> int:
        """Bytes of the buffer: 2- and 4-bit types packed (``dtypes.PACKED``), as XLA's CPU
        backend stores them, and any type whose layout says ``E(bits)`` for fewer than 8.
        Kept (the shape is frozen): every analysis of a module asks for each value's size."""
        if not self.is_array:
            return 0
        if self.is_unbounded:
            raise ValueError(f"shape {self.to_text()} has an unbounded dimension and no size")
        count = self.element_count
        packed_bits = self.layout.element_size_bits if self.layout is not None else 0
        packed_bits = packed_bits or self.element_type.storage_bits
        if packed_bits < 8:
            return (count * packed_bits + 7) // 8
        return count * self.element_type.unpacked_bytes

    def with_layout(self, layout: Layout | None) -> ArrayShape:
        return ArrayShape(self.element_type, self.dims, self.dynamic, layout)

    def without_layout(self) -> ArrayShape:
        return ArrayShape(self.element_type, self.dims, self.dynamic, None)

    def to_text(self, with_layout: bool = True) -> str:
        dims = ",".join(_dim_text(d, dyn) for d, dyn in zip(self.dims, self.dynamic))
        text = f"{self.element_type.name}[{dims}]"
        if with_layout and self.layout is not None and self.is_array and self.rank > 0:
            text += self.layout.to_text()
        elif with_layout and self.layout is not None and self.layout.tail and self.rank == 0:
            text += self.layout.to_text()
        return text

    def __str__(self) -> str:
        return self.to_text()

    def leaves(self, prefix: ShapeIndex = ()) -> Iterator[tuple[ShapeIndex, ArrayShape]]:
        yield prefix, self

    def subshapes(self, prefix: ShapeIndex = ()) -> Iterator[tuple[ShapeIndex, Shape]]:
        yield prefix, self


def _dim_text(d: int, dynamic: bool) -> str:
    if d < 0:
        return "?"
    return f"<={d}" if dynamic else str(d)


@dataclass(frozen=True)
class TupleShape:
    elements: tuple[Shape, ...] = field(default_factory=tuple)

    is_tuple: ClassVar[Literal[True]] = True
    rank: ClassVar[int] = 0

    @property
    def is_token(self) -> bool:
        return False

    @property
    def is_array(self) -> bool:
        return False

    @property
    def byte_size(self) -> int:
        """XLA sizes a tuple as its table of element pointers."""
        return 8 * len(self.elements)

    def to_text(self, with_layout: bool = True) -> str:
        return "(" + ", ".join(e.to_text(with_layout) for e in self.elements) + ")"

    def __str__(self) -> str:
        return self.to_text()

    def without_layout(self) -> TupleShape:
        return TupleShape(tuple(e.without_layout() for e in self.elements))

    def leaves(self, prefix: ShapeIndex = ()) -> Iterator[tuple[ShapeIndex, ArrayShape]]:
        for i, e in enumerate(self.elements):
            yield from e.leaves(prefix + (i,))

    def subshapes(self, prefix: ShapeIndex = ()) -> Iterator[tuple[ShapeIndex, Shape]]:
        """Every node, pre-order: the tuple itself first, then each element's subtree."""
        yield prefix, self
        for i, e in enumerate(self.elements):
            yield from e.subshapes(prefix + (i,))


Shape = Union[ArrayShape, TupleShape]


def subshape(shape: Shape, index: ShapeIndex) -> Shape:
    """The shape at ``index``; raises IndexError-free ValueError for a bad index."""
    for i in index:
        if not shape.is_tuple or not 0 <= i < len(shape.elements):
            raise ValueError(f"shape index {{{','.join(map(str, index))}}} is not valid "
                             f"for shape {shape}")
        shape = shape.elements[i]
    return shape


def leaf_shape(shape: Shape, index: ShapeIndex) -> ArrayShape:
    """The array at ``index`` (a leaf: an output of a multi-output kernel, a buffer); raises
    ValueError, as ``subshape`` does, when the index is bad or names a tuple."""
    leaf = subshape(shape, index)
    if isinstance(leaf, TupleShape):
        raise ValueError(f"shape index {index_text(index)} of {shape} is a tuple, not an array")
    return leaf


def is_valid_index(shape: Shape, index: ShapeIndex) -> bool:
    try:
        subshape(shape, index)
    except ValueError:
        return False
    return True


def index_text(index: ShapeIndex) -> str:
    return "{" + ",".join(str(i) for i in index) + "}"


def compatible(a: Shape, b: Shape) -> bool:
    """Equal ignoring layouts (what XLA's verifier compares by default)."""
    if isinstance(a, TupleShape) and isinstance(b, TupleShape):
        return len(a.elements) == len(b.elements) and all(
            compatible(x, y) for x, y in zip(a.elements, b.elements))
    if isinstance(a, ArrayShape) and isinstance(b, ArrayShape):
        return a.element_type is b.element_type and a.dims == b.dims
    return False


def compatible_ignoring_fp_precision(a: Shape, b: Shape) -> bool:
    if isinstance(a, TupleShape) and isinstance(b, TupleShape):
        return len(a.elements) == len(b.elements) and all(
            compatible_ignoring_fp_precision(x, y) for x, y in zip(a.elements, b.elements))
    if not (isinstance(a, ArrayShape) and isinstance(b, ArrayShape)):
        return False
    same_type = a.element_type is b.element_type or (a.element_type.is_float and b.element_type.is_float)
    return same_type and a.dims == b.dims


def physical_order(shape: ArrayShape) -> tuple[int, ...]:
    """Logical dimensions from major to minor: the order of the bytes in memory."""
    return tuple(reversed(shape.minor_to_major))
