"""Host views of device buffers for host custom calls.

Each allocation a call touches is mapped once (``enqueue_map_buffer``, blocking, so every
earlier command on the in-order queue has finished), over the span of the leaves that lie in
it; every leaf is then a numpy view at its offset, in its PHYSICAL layout presented as the
logical array (a column-major ``{0,1}`` matrix is a view with Fortran strides). On PoCL's CPU
device a mapping is the buffer's own memory, so nothing is copied either way. Mapping an
allocation once, rather than once per leaf, also makes an in-place call's operand and output
views share memory, as in XLA where both are one pointer.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ..opencl.device import opencl
from ..errors import DeviceError
from ..hlo.shape import physical_order
from ..hlo.shape import ArrayShape
from .call_site import Leaf


def logical_view(raw: np.ndarray, shape: ArrayShape) -> np.ndarray:
    """The array ``shape`` describes, viewing the bytes ``raw`` (uint8) in its layout."""
    order = physical_order(shape)
    physical = raw.view(shape.element_type.numpy).reshape([shape.dims[d] for d in order])
    return physical.transpose(np.argsort(order)) if shape.rank > 1 else physical


def array_in_layout(values: np.ndarray, shape: ArrayShape) -> np.ndarray:
    """A fresh array holding ``values`` in ``shape``'s layout (strides and all)."""
    out = logical_view(np.empty(shape.byte_size, dtype=np.uint8), shape)
    out[...] = values
    return out


class MappedLeaves:
    """A context manager: maps the allocations holding ``leaves``; ``view(leaf)`` is valid
    until exit, which unmaps (also when the call fails)."""

    def __init__(self, device, bindings: list[Any], leaves: list[Leaf]) -> None:
        self._device = device
        self._bindings = bindings
        spans: dict[int, list[int]] = defaultdict(lambda: [2 ** 63, 0])
        for leaf in leaves:
            if leaf.nbytes:
                span = spans[leaf.ref.allocation]
                span[0] = min(span[0], leaf.ref.offset)
                span[1] = max(span[1], leaf.ref.offset + leaf.nbytes)
        self._spans = dict(spans)
        # allocation -> (its first mapped byte, pyopencl's mapped array: its base is the map)
        self._maps: dict[int, tuple[int, Any]] = {}

    def __enter__(self) -> MappedLeaves:
        cl = opencl()
        flags = cl.map_flags.READ | cl.map_flags.WRITE
        try:
            for allocation, (start, end) in self._spans.items():
                mapped, _ = cl.enqueue_map_buffer(self._device.queue, self._bindings[allocation],
                                                  flags, start, (end - start,), np.uint8,
                                                  is_blocking=True)
                self._maps[allocation] = (start, mapped)
        except cl.Error as error:
            self.__exit__()
            raise DeviceError(f"cannot map allocation {allocation} ({end - start} bytes) into "
                              f"host memory for a host custom call on {self._device}: "
                              f"{error}") from error
        return self

    def view(self, leaf: Leaf) -> np.ndarray:
        if not leaf.nbytes:
            return np.empty(leaf.shape.dims, dtype=leaf.shape.element_type.numpy)
        start, mapped = self._maps[leaf.ref.allocation]
        at = leaf.ref.offset - start
        return logical_view(mapped[at:at + leaf.nbytes], leaf.shape)

    def __exit__(self, *exc) -> None:
        for _, mapped in self._maps.values():
            mapped.base.release(self._device.queue)
        self._maps.clear()


__all__ = ["MappedLeaves", "logical_view", "array_in_layout"]
