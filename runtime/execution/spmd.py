"""Running every partition of a multi-device module in one process (``Executable.run_spmd``).

The module compiles once; each device (``replica * num_partitions + partition``) runs it as
its own copy of the executable (``Executable._partition_copy``: its own kernel objects, temp
arena and per-run state, the built programs shared) on a thread of its own, all on the
executable's OpenCL device and queue. The partitions run independently and meet only at
collectives, through an ``InProcessCommunicator``: each round every device leaves its value
under the collective's name and waits until all have; a device that reaches another
collective, finishes without reaching it, or fails ends the round for all with an error
naming it, and a round that does not complete within ``timeout`` seconds is an error too,
never a hang. The same ``Communicator`` interface (``custom_calls.collectives``) is what an
MPI-backed run will give each process.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import DeviceError, HloArgumentError, HloUnsupportedError
from .arrays import DeviceArray

if TYPE_CHECKING:
    from .executable import Executable

DEFAULT_TIMEOUT = 300.0


class _PartitionAborted(Exception):
    """A device stopped waiting because another one failed (that one's error is raised)."""


class _Rendezvous:
    """The state the devices of one ``run_spmd`` share: one dict of values per round."""

    def __init__(self, size: int, timeout: float) -> None:
        self.size = size
        self.timeout = timeout
        self.cond = threading.Condition()
        self.rounds: list[int] = [0] * size         # the next round of each device
        self.values: dict[int, dict[int, tuple[str, Any]]] = {}
        self.readers: dict[int, int] = {}
        self.gone: dict[int, bool] = {}             # device -> it failed (else it finished)

    def exchange(self, rank: int, key: str, value: Any) -> list[Any]:
        with self.cond:
            number = self.rounds[rank]
            self.rounds[rank] += 1
            entries = self.values.setdefault(number, {})
            entries[rank] = (key, value)
            self.cond.notify_all()
            done = self.cond.wait_for(lambda: len(entries) == self.size or bool(self.gone),
                                      self.timeout)
            if len(entries) < self.size:
                self._give_up(rank, key, entries, done)
            self.readers[number] = self.readers.get(number, 0) + 1
            if self.readers[number] == self.size:
                del self.values[number], self.readers[number]
        keys = {k for k, _ in entries.values()}
        if len(keys) > 1:
            reached = ", ".join(f"device {d} {entries[d][0]}" for d in sorted(entries))
            raise HloUnsupportedError(
                f"the devices reached different collectives at the same point ({reached}): "
                "they took different paths through the program, which XLA does not allow",
                instruction=key)
        return [entries[d][1] for d in range(self.size)]

    def _give_up(self, rank: int, key: str, entries: dict, in_time: bool) -> None:
        missing = sorted(set(range(self.size)) - set(entries))
        if any(self.gone.get(d) for d in missing):
            raise _PartitionAborted()
        if not in_time:
            raise DeviceError(f"device {rank} waited {self.timeout:g} s at collective {key} for "
                              f"device(s) {missing}, which did not reach it")
        raise HloUnsupportedError(
            f"device {rank} reached collective {key}, but device(s) "
            f"{[d for d in missing if d in self.gone]} finished without reaching it: the "
            "devices took different paths through the program", instruction=key)

    def leave(self, rank: int, failed: bool) -> None:
        with self.cond:
            self.gone[rank] = failed
            self.cond.notify_all()


class InProcessCommunicator:
    """Device ``rank``'s side of a ``_Rendezvous`` (the ``Communicator`` interface)."""

    def __init__(self, rendezvous: _Rendezvous, rank: int) -> None:
        self._rendezvous = rendezvous
        self.rank = rank
        self.size = rendezvous.size

    def exchange(self, key: str, value: Any) -> list[Any]:
        return self._rendezvous.exchange(self.rank, key, value)


def run_spmd(exe: Executable, args: Sequence[Sequence[Any]], donate: Any = (),
             timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
    """Run every device's program; see ``Executable.run_spmd``."""
    size = exe.device_count
    if not isinstance(args, (list, tuple)) or len(args) != size or \
            not all(isinstance(a, (list, tuple)) for a in args):
        raise HloArgumentError(
            f"{exe.name} runs on {size} devices: run_spmd takes a list of {size} argument "
            f"lists (args[p] for device p = replica * num_partitions + partition), got "
            f"{_describe(args)}")
    _check_donated_arrays_are_private(exe, args, donate)
    exe.build()
    rendezvous = _Rendezvous(size, timeout)
    copies = [exe._partition_copy(InProcessCommunicator(rendezvous, p)) for p in range(size)]
    outs: list[Any] = [None] * size
    errors: list[BaseException | None] = [None] * size

    def device(p: int) -> None:
        try:
            outs[p] = copies[p].run(*args[p], donate=donate)
        except BaseException as error:   # raised in the caller's thread below
            errors[p] = error
        finally:
            rendezvous.leave(p, failed=errors[p] is not None)

    threads = [threading.Thread(target=device, args=(p,), name=f"{exe.name} device {p}")
               for p in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p, error in enumerate(errors):
        if error is not None and not isinstance(error, _PartitionAborted):
            error.add_note(f"(on device {p} of {size}, run by run_spmd)")
            raise error
    exe.last_run = copies[-1].last_run
    return outs


def _check_donated_arrays_are_private(exe: Executable, args: Sequence[Sequence[Any]],
                                      donate: Any) -> None:
    """A donated device array is updated in place by its device, so no other device may be
    given it (numpy arguments are uploaded once per device, so they may be shared)."""
    donated = exe._donation_set(donate)
    users: dict[int, set[int]] = {}
    for p, device_args in enumerate(args):
        for a in device_args:
            if isinstance(a, DeviceArray):
                users.setdefault(id(a), set()).add(p)
    for p, device_args in enumerate(args):
        for i in sorted(donated):
            if i < len(device_args) and isinstance(device_args[i], DeviceArray):
                others = sorted(users[id(device_args[i])] - {p})
                if others:
                    raise HloArgumentError(
                        f"argument {i} of device {p} is donated, but the same device array is "
                        f"also passed to device(s) {others}; give each device its own array")


def _describe(args: Any) -> str:
    if isinstance(args, (list, tuple)):
        return f"a {type(args).__name__} of {len(args)}"
    return type(args).__name__
