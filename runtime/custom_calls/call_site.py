"""One custom-call instruction as its implementation sees it, fixed at compile time.

The operands and the result become trees of leaves (nested tuples, as the seed's ``p0``
example nests them), each leaf an array's place in the buffer assignment and its shape with
its real layout. Tokens (ordering-only values, no bytes) are ``None`` leaves. The
``backend_config`` becomes ``opaque`` bytes and, for typed FFI, decoded attributes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Union

from ..analysis.in_place import InPlacePair, in_place_pairs
from ..buffers.slices import BufferRef
from ..errors import CustomCallError, HloUnsupportedError, SourceLocation
from ..hlo.attributes import BackendConfig
from ..hlo.dtypes import PACKED
from ..hlo.ir import HloInstruction
from ..hlo.shape import ArrayShape, Shape, ShapeIndex, subshape
from .conventions import DEFAULT_API_VERSION
from .mlir_attributes import parse_attributes


@dataclass(frozen=True)
class Leaf:
    """An array leaf of an operand or of the result: where its bytes are and what they hold."""

    ref: BufferRef
    shape: ArrayShape
    index: ShapeIndex

    @property
    def nbytes(self) -> int:
        return self.shape.byte_size


Tree = Union[Leaf, None, tuple]


def leaves(tree: Tree) -> Iterator[Leaf]:
    """The array leaves of a tree in pre-order (XLA's order for GPU ``buffers``)."""
    if isinstance(tree, tuple):
        for element in tree:
            yield from leaves(element)
    elif tree is not None:
        yield tree


@dataclass(frozen=True)
class CallSite:
    target: str
    instruction: str
    location: SourceLocation | None
    api_version: str
    opaque: bytes
    attrs: dict
    operands: tuple[Tree, ...]
    result: Tree
    aliases: tuple[InPlacePair, ...]
    constraints: tuple[Shape | None, ...]

    def operand_leaves(self) -> list[Leaf]:
        return [leaf for tree in self.operands for leaf in leaves(tree)]

    def result_leaves(self) -> list[Leaf]:
        return list(leaves(self.result))

    def all_leaves(self) -> list[Leaf]:
        """Operand leaves in pre-order, then result leaves: XLA's GPU ``buffers`` order."""
        return self.operand_leaves() + self.result_leaves()

    def buffer_refs(self) -> tuple[BufferRef, ...]:
        return tuple(leaf.ref for leaf in self.all_leaves())

    def error(self, message: str, hint: str | None = None) -> CustomCallError:
        return CustomCallError(f"custom call {self.target!r} ({self.instruction}): {message}",
                               target=self.target, instruction=self.instruction,
                               location=self.location, hint=hint)


def call_site(inst: HloInstruction, ref: Callable[[HloInstruction, ShapeIndex], BufferRef]
              ) -> CallSite:
    """The call site of ``inst``, with buffer references from ``ref(instruction, index)``."""
    target = str(inst.custom_call_target)
    api_version = str(inst.attrs.get("api_version", DEFAULT_API_VERSION))
    config = inst.attrs.get("backend_config")
    opaque = config.opaque if isinstance(config, BackendConfig) else b""
    attrs: dict = {}
    if api_version == "API_VERSION_TYPED_FFI" and isinstance(config, BackendConfig):
        attrs = parse_attributes(config.text, location=_config_location(inst, config),
                                 instruction=inst.name)
    constraints: tuple[Shape | None, ...] = inst.optional_attr(
        "operand_layout_constraints", tuple) or (None,) * len(inst.operands)
    return CallSite(
        target=target, instruction=inst.name, location=inst.location, api_version=api_version,
        opaque=opaque, attrs=attrs,
        operands=tuple(_tree(inst, op, op.shape, (), ref) for op in inst.operands),
        result=_tree(inst, inst, inst.shape, (), ref),
        aliases=tuple(in_place_pairs(inst)), constraints=constraints)


def _tree(call: HloInstruction, owner: HloInstruction, shape: Shape, index: ShapeIndex,
          ref: Callable[[HloInstruction, ShapeIndex], BufferRef]) -> Tree:
    if shape.is_tuple:
        return tuple(_tree(call, owner, element, index + (k,), ref)
                     for k, element in enumerate(shape.elements))
    assert isinstance(shape, ArrayShape)
    if shape.is_token:
        return None
    _check_viewable(call, shape)
    return Leaf(ref(owner, index), shape, index)


def _check_viewable(call: HloInstruction, shape: ArrayShape) -> None:
    """A leaf must be plain bytes of a numpy dtype, one element after another."""
    layout = shape.layout
    packed = shape.element_type.name in PACKED or (
        layout is not None and 0 < layout.element_size_bits < 8)
    if not shape.is_array or shape.element_type.numpy_name is None or packed or (
            layout is not None and layout.is_tiled):
        raise HloUnsupportedError(
            f"custom call {call.name} passes {shape.to_text()}, which has no plain numpy/OpenCL "
            "view (opaque, packed sub-byte and tiled layouts are not supported)",
            instruction=call.name, location=call.location)


def _config_location(inst: HloInstruction, config: BackendConfig) -> SourceLocation | None:
    """Where the backend_config text starts on the instruction's line, for carets."""
    loc = inst.location
    if loc is None:
        return None
    key = loc.source_line.find("backend_config")
    at = loc.source_line.find(config.text, key) if key >= 0 else -1
    return SourceLocation(loc.line, at + 1, loc.source_line) if at >= 0 else loc


def operand_leaf_shape(site: CallSite, operand_number: int, index: ShapeIndex,
                       actual: ArrayShape) -> ArrayShape:
    """The layout the implementation expects for an operand leaf: the
    ``operand_layout_constraints`` entry when there is one, else the operand's own."""
    constraint = site.constraints[operand_number]
    if constraint is None:
        return actual
    wanted = subshape(constraint, index)
    return wanted if isinstance(wanted, ArrayShape) else actual


__all__ = ["Leaf", "Tree", "CallSite", "call_site", "leaves", "operand_leaf_shape"]
