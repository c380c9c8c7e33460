"""Buffer assignment: allocations, slices, statistics, the report and the soundness checker."""

from .assignment import (
    Allocation, AssignedBuffer, BufferAssignment, MemoryStats, TempArena, assign_buffers,
)
from .checker import UnsoundAssignment, check_assignment
from .donation import UnusedDonor
from .slices import BufferSlice

__all__ = [
    "Allocation", "AssignedBuffer", "BufferAssignment", "BufferSlice", "MemoryStats", "TempArena",
    "assign_buffers", "UnsoundAssignment", "check_assignment", "UnusedDonor",
]
