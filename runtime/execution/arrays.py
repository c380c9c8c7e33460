"""Device arrays: values in device buffers, and copies between numpy and the device.

A ``DeviceArray`` is one array in one device buffer, in its shape's physical (layout) order;
``device_put`` uploads a numpy array row-major, ``numpy()`` reads it back. Donating it to a run
deletes it (its buffer became the run's output).
"""

from __future__ import annotations

import numpy as np

from ..errors import DonatedBufferError, HloArgumentError
from ..hlo.dtypes import from_numpy
from ..hlo.packing import from_storage, to_storage
from ..hlo.shape import ArrayShape, physical_order
from ..opencl.device import allocate_buffer, get_device, opencl


def to_physical(array: np.ndarray, shape: ArrayShape) -> np.ndarray:
    return np.ascontiguousarray(array.transpose(physical_order(shape))) if shape.rank > 1 \
        else np.ascontiguousarray(array)


def from_physical(raw: np.ndarray, shape: ArrayShape) -> np.ndarray:
    order = physical_order(shape)
    phys_dims = tuple(shape.dims[d] for d in order)
    a = raw.reshape(phys_dims)
    return np.ascontiguousarray(a.transpose(np.argsort(order))) if shape.rank > 1 else a


class DeviceArray:
    """An array resident on an OpenCL device: a ``cl.Buffer`` plus its HLO shape."""

    def __init__(self, buffer, shape: ArrayShape, device) -> None:
        self._buffer = buffer
        self.hlo_shape = shape
        self.device = device
        self._deleted_by: str | None = None
        self._lease = None          # set when an executable may reuse the buffer afterwards

    @property
    def shape(self) -> tuple[int, ...]:
        return self.hlo_shape.dims

    @property
    def dtype(self) -> np.dtype:
        return self.hlo_shape.element_type.numpy

    @property
    def nbytes(self) -> int:
        return self.hlo_shape.byte_size

    @property
    def size(self) -> int:
        return self.hlo_shape.element_count

    @property
    def ndim(self) -> int:
        return self.hlo_shape.rank

    def is_deleted(self) -> bool:
        return self._deleted_by is not None

    def _check_alive(self) -> None:
        if self._deleted_by is not None:
            raise DonatedBufferError(
                f"this DeviceArray ({self.hlo_shape.to_text(False)}) was donated to run "
                f"{self._deleted_by} and its buffer now belongs to that run's output",
                hint="pass a fresh array, or do not donate this argument")

    @property
    def buffer(self):
        self._check_alive()
        return self._buffer

    def block_until_ready(self) -> DeviceArray:
        self._check_alive()
        self.device.queue.finish()
        return self

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        self._check_alive()
        out = read_buffer(self.device, self._buffer, 0, self.hlo_shape)
        return out.astype(dtype) if dtype is not None else out

    def numpy(self) -> np.ndarray:
        return self.__array__()

    def delete(self, by: str = "delete()") -> None:
        self._deleted_by = by
        self._buffer = None
        if self._lease is not None:
            self._lease.returnable = False

    def __repr__(self) -> str:
        state = f", donated to {self._deleted_by}" if self._deleted_by else ""
        return f"DeviceArray({self.hlo_shape.to_text(False)}, device={self.device}{state})"


def read_buffer(device, buffer, offset: int, shape: ArrayShape) -> np.ndarray:
    cl = opencl()
    raw = np.empty(shape.byte_size, dtype=np.uint8)
    if shape.byte_size:
        cl.enqueue_copy(device.queue, raw, buffer, src_offset=offset, is_blocking=True)
    return from_physical(from_storage(raw, shape.element_type, shape.element_count), shape)


def upload(device, array: np.ndarray, shape: ArrayShape, what: str):
    cl = opencl()
    buf = allocate_buffer(device, shape.byte_size, what)
    if shape.byte_size:
        host = to_storage(to_physical(array, shape), shape.element_type)
        cl.enqueue_copy(device.queue, buf, host, is_blocking=True)
    return buf


def device_put(array, device=None) -> DeviceArray:
    """Copy a numpy array (or anything ``np.asarray`` accepts) to the device, row-major."""
    dev = get_device(device)
    a = np.asarray(array)
    try:
        et = from_numpy(a.dtype)
    except KeyError:
        raise HloArgumentError(f"numpy dtype {a.dtype} has no HLO element type") from None
    shape = ArrayShape(et, tuple(a.shape))
    return DeviceArray(upload(dev, a, shape, "device_put"), shape, dev)
