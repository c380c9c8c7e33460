"""One device a process: a multi-device module's partitions across processes, through MPI.

Under ``mpiexec -n N`` each process runs device ``rank`` (``replica * num_partitions +
partition``) of the module as ``run_spmd`` runs one of its threads, and exchanges collective
data through ``MpiCommunicator``: one ``allgather`` of (collective, value) a collective, so
every process learns every device's value, and a process that reached another collective (or
the end of its run) is caught by the keys it sent. mpi4py and the MPI it loads (the ``mpich``
wheel) come from pip. A device that fails sends its error in place of its next collective
value, so every other device stops at its own next collective with ``DeviceFailed`` naming
the failed device and its error, and all exit; a device that gets no answer within
``timeout`` seconds (one stuck, or dead without its launcher noticing) aborts the job. A
module whose device count is not the number of processes is refused before running.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import DeviceError, HloArgumentError
from .spmd import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from .executable import Executable

# environment variables an MPI launcher sets to the number of processes (MPICH's Hydra,
# Open MPI, Slurm): mpi4py (and MPI) is imported only when one of them is above 1
_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS")

_END = "(the end of its run)"
_FAILED = "(a failure)"


class DeviceFailed(DeviceError):
    """Another device of the job failed (its error is in the message): this one stopped at
    its next collective instead of waiting for that device."""


def launched_processes() -> int:
    """How many processes the MPI launcher started (1 without one)."""
    for name in _SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 1:
            return int(value)
    return 1


def world() -> Any:
    """``MPI.COMM_WORLD`` (imports mpi4py, which starts MPI)."""
    try:
        from mpi4py import MPI
    except ImportError as error:    # an install without the project's dependencies
        raise DeviceError(f"running under an MPI launcher needs mpi4py: {error}",
                          hint="pip install mpi4py mpich") from None
    return MPI.COMM_WORLD


class MpiCommunicator:
    """``custom_calls.collectives.Communicator`` over an MPI communicator."""

    def __init__(self, comm: Any, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.comm = comm
        self.rank: int = comm.rank
        self.size: int = comm.size
        self.timeout = timeout

    def exchange(self, key: str, value: Any) -> list[Any]:
        entries = self._allgather(key, value)
        failed = [(r, v) for r, (k, v) in enumerate(entries) if k == _FAILED and r != self.rank]
        if failed:
            rank, error = failed[0]
            raise DeviceFailed(f"device {rank} of {self.size} failed, so device {self.rank} "
                               f"stopped at {key}: {error}")
        keys = sorted({k for k, _ in entries})
        if len(keys) > 1:
            where = "; ".join(f"device {r}: {k}" for r, (k, _) in enumerate(entries))
            raise DeviceError(f"device {self.rank} reached {key}, but the devices disagree "
                              f"on the collective: {where}")
        return [v for _, v in entries]

    def fail(self, error: BaseException) -> None:
        """Tell the other devices, at their next collective, that this one failed."""
        self._allgather(_FAILED, f"{type(error).__name__}: {error}")

    def finish(self) -> None:
        """Every device ends its run here: a device still waiting at a collective meets this
        one's end there and reports it."""
        self.exchange(_END, None)

    def _allgather(self, key: str, value: Any) -> list[tuple[str, Any]]:
        watchdog = threading.Timer(self.timeout, self._give_up, args=(key,))
        watchdog.daemon = True
        watchdog.start()
        try:
            entries: list[tuple[str, Any]] = self.comm.allgather((key, value))
        finally:
            watchdog.cancel()
        return entries

    def _give_up(self, key: str) -> None:
        print(f"device {self.rank} of {self.size}: no answer from every device at {key} "
              f"within {self.timeout:g} s; aborting the job", file=sys.stderr, flush=True)
        self.comm.Abort(1)


def run_partition(exe: Executable, args: Sequence[Any], comm: Any, donate: Any = (),
                  timeout: float = DEFAULT_TIMEOUT) -> Any:
    """Device ``comm.rank``'s outputs, its collectives exchanged with the other processes."""
    count = exe.device_count
    if comm.size != count:
        raise HloArgumentError(
            f"{exe.name} runs on {count} devices (replica_count x num_partitions), but the "
            f"MPI job has {comm.size} processes: start it with mpiexec -n {count}")
    communicator = MpiCommunicator(comm, timeout)
    try:
        outputs = exe._partition_copy(communicator).run(*args, donate=donate)
    except DeviceFailed:
        raise                   # the failed device told everyone already
    except Exception as error:  # noqa: BLE001 - any failure is told, then raised as it was
        communicator.fail(error)
        raise
    communicator.finish()
    return outputs
