"""The HLO front end: IR, parser, printer, shape inference and verifier."""

from .dtypes import ELEMENT_TYPES, ElementType, element_type, from_numpy
from .ir import AliasEntry, BufferDonor, HloComputation, HloInstruction, HloModule
from .literal import Literal
from .parser import parse, parse_shape
from .shape import ArrayShape, Layout, Shape, ShapeIndex, TupleShape

__all__ = [
    "ELEMENT_TYPES", "ElementType", "element_type", "from_numpy", "AliasEntry", "BufferDonor",
    "HloComputation", "HloInstruction", "HloModule", "Literal", "parse", "parse_shape",
    "ArrayShape", "Layout", "Shape", "ShapeIndex", "TupleShape",
]
