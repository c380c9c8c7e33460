"""Packed sub-byte arrays: numpy's one element a byte to XLA's bytes, and back.

ml_dtypes (and so the API) keeps one 2- or 4-bit element in each byte; XLA's CPU backend, and
so every device buffer here, packs them: element i of the buffer's physical order in bits
``(i % per_byte) * bits`` of byte ``i // per_byte``, the first element in the low bits (what
``jax.lax.bitcast_convert_type`` of an int4 array to uint8 shows). A type that is not packed
passes through as its bytes.
"""

from __future__ import annotations

import numpy as np

from .dtypes import ElementType


def to_storage(physical: np.ndarray, et: ElementType) -> np.ndarray:
    """The device bytes (uint8) of ``physical``, elements in physical order."""
    flat = np.ascontiguousarray(physical).reshape(-1)
    bits = et.storage_bits
    if bits >= 8:
        return flat.view(np.uint8)
    per_byte = 8 // bits
    codes = flat.view(np.uint8) & np.uint8((1 << bits) - 1)   # ml_dtypes: the code's low bits
    codes = np.concatenate([codes, np.zeros(-len(codes) % per_byte, np.uint8)])
    lanes = codes.reshape(-1, per_byte).astype(np.uint8)
    shifts = np.arange(per_byte, dtype=np.uint8) * np.uint8(bits)
    packed: np.ndarray = np.bitwise_or.reduce(lanes << shifts, axis=1).astype(np.uint8)
    return packed


def from_storage(raw: np.ndarray, et: ElementType, count: int) -> np.ndarray:
    """``count`` elements of ``et`` (one a byte, ml_dtypes' codes) from device bytes ``raw``."""
    bits = et.storage_bits
    if bits >= 8:
        return raw.view(et.numpy)[:count]
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * np.uint8(bits)
    codes = (raw.reshape(-1, 1) >> shifts) & np.uint8((1 << bits) - 1)
    return np.ascontiguousarray(codes.reshape(-1)[:count]).view(et.numpy)
