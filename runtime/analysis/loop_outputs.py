"""The outputs of a loop kernel and the one index space a work-item computes them over.

A loop kernel (``codegen.families.loop`` and its vector forms) computes element i of every output in
one work-item, from elements i of what it reads. A multi-output loop fusion's outputs are of
two kinds:

* *plain*: stored at the kernel's own index, so each has the kernel's shape and layout;
* *windows*: a dynamic-update-slice of a fusion parameter computed in that parameter's bytes
  (``in_place``), which writes only its update: element i of the space is element i of the
  update, stored at the update's place in the operand. A scan step storing what it computes
  into the loop's stacked outputs is one kernel this way (XLA's in-place dynamic-update-slice
  fusion), where it was a kernel per stacked output, each reading the value back.

A window belongs to the space when its update has the space's dimensions but for size-1 ones,
in the space's memory order, so element i of the space (in physical order) is element i of
the update.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..hlo.ir import HloInstruction
from ..hlo.opcode_enum import Opcode
from ..hlo.shape import ArrayShape, Layout, ShapeIndex


@dataclass(frozen=True)
class LoopOutput:
    value: HloInstruction                  # what is stored: an output, or a window's update
    index: ShapeIndex                      # which output of the kernel
    window: HloInstruction | None = None   # the dynamic-update-slice writing ``value`` in place


def loop_outputs(inst: HloInstruction, in_place: Collection[ShapeIndex]
                 ) -> tuple[ArrayShape, list[LoopOutput]] | None:
    """The index space of a multi-output loop fusion with window outputs (its plain outputs'
    shape, else its first window's update in the layout of what it updates), and its outputs;
    None for any other instruction, or when the outputs do not share one space (a single
    array result is the loop families' own case). ``in_place``:
    the outputs the fusion writes into an operand's bytes (``in_place.kernel_outputs`` gives
    them)."""
    if inst.opcode != Opcode.FUSION or not inst.shape.is_tuple:
        return None
    root = inst.calls.root_instruction
    if root.opcode != Opcode.TUPLE or not root.operands:
        return None
    outputs = []
    for k, value in enumerate(root.operands):
        if (k,) in in_place and value.opcode == Opcode.DYNAMIC_UPDATE_SLICE:
            outputs.append(LoopOutput(value.operands[1], (k,), value))
        else:
            outputs.append(LoopOutput(value, (k,)))
    plain = [o.value.shape for o in outputs if o.window is None]
    windows = [o.window for o in outputs if o.window is not None]
    if not windows:
        return None
    space = plain[0] if plain else _update_space(windows[0])
    if not isinstance(space, ArrayShape) or space.element_count == 0 or any(
            not isinstance(s, ArrayShape) or s.dims != space.dims
            or s.minor_to_major != space.minor_to_major for s in plain):
        return None
    if not all(o.window is None or window_fits(space, o.window) for o in outputs):
        return None
    return space, outputs


def _update_space(window: HloInstruction) -> ArrayShape:
    """A window's update laid out as the operand it is written into."""
    update: ArrayShape = window.operands[1].array_shape
    target: ArrayShape = window.array_shape
    return ArrayShape(update.element_type, update.dims,
                      layout=Layout(target.minor_to_major))


def window_fits(space: ArrayShape, window: HloInstruction) -> bool:
    """Whether ``window``'s update is ``space`` but for size-1 dimensions, in the memory order
    of the operand it is written into."""
    to_space = window_dimensions(space, window.operands[1].array_shape)
    if to_space is None:
        return False
    target: ArrayShape = window.array_shape
    return [to_space[d] for d in target.minor_to_major if d in to_space] == \
        [d for d in space.minor_to_major if space.dims[d] != 1]


def window_dimensions(space: ArrayShape, update: ArrayShape) -> dict[int, int] | None:
    """For each dimension of ``update`` larger than 1, the dimension of ``space`` it is
    (the k-th such dimension of one is the k-th of the other); None when their sizes differ."""
    kept = [d for d, n in enumerate(update.dims) if n != 1]
    ours = [d for d, n in enumerate(space.dims) if n != 1]
    if [update.dims[d] for d in kept] != [space.dims[d] for d in ours]:
        return None
    return dict(zip(kept, ours))
