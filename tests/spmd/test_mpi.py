"""A multi-device module across processes: ``mpiexec -n N hlo run MODULE --inputs IN.npz
--outputs OUT.npz`` runs device ``rank`` in each process (``runtime.execution.mpi``), rank 0
writes every device's outputs; the same flags without mpiexec run every device in one
process. MPI is the ``mpich`` wheel's, mpi4py the project's dependency: a missing mpiexec
fails these tests."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from runtime.errors import DeviceError
from runtime.execution.mpi import DeviceFailed, MpiCommunicator

from ..corpus_data import compare_scaled
from .spmd_data import GENERATED as DATA, SHARED, TOLERANCE, names

BIN = Path(sys.executable).parent


def _hlo(tmp_path: Path, name: str, processes: int, inputs: Path | None = None,
         root: Path = DATA):
    out = tmp_path / f"{name}.out.npz"
    command = [str(BIN / "hlo"), "run", str(root / f"{name}.opt.hlo"),
               "--inputs", str(inputs or root / f"{name}.npz"), "--outputs", str(out),
               "--timeout", "60"]
    if processes:
        command = [str(BIN / "mpiexec"), "-n", str(processes), *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    return done, out


@pytest.mark.parametrize("root, name, processes", [
    (DATA, "mesh2x2_tp_dp_mlp", 4), (DATA, "fsdp4_mlp_sgd", 4), (DATA, "alltoall4_moe", 4),
    (DATA, "mesh2x2_constraint_out_shardings", 4), (DATA, "mesh2x4_jit_constraints", 8),
    (DATA, "mesh2x2_tp_dp_mlp", 0), *((SHARED, name, 2) for name in names(SHARED))])
def test_every_device_matches_xla_across_processes(tmp_path, root, name, processes):
    done, out = _hlo(tmp_path, name, processes, root=root)
    assert done.returncode == 0, done.stderr[-3000:]
    want = np.load(root / f"{name}.npz")
    got = np.load(out)
    keys = sorted(k for k in want.files if k.startswith("out_") and "_p" in k)
    assert keys and sorted(got.files) == keys
    problems = [p for key in keys for p in compare_scaled(key, got[key], want[key], TOLERANCE)]
    assert not problems, problems


def test_a_job_of_the_wrong_size_is_refused_before_running(tmp_path):
    done, out = _hlo(tmp_path, "mesh2x2_tp_dp_mlp", 2)
    assert done.returncode != 0
    assert "runs on 4 devices" in done.stderr and "mpiexec -n 4" in done.stderr
    assert done.stderr.count("HloArgumentError") == 1        # said once, by rank 0
    assert not out.exists()


def test_a_failing_device_ends_every_process(tmp_path):
    """Device 2 gets an argument of the wrong shape: it says so, naming itself, and sends its
    error in place of its first collective value, so the others stop there and the job ends
    at once rather than waiting for it."""
    inputs = dict(np.load(DATA / "fsdp4_mlp_sgd.npz"))
    inputs["arg_0_p2"] = inputs["arg_0_p2"][:1]
    bad = tmp_path / "bad.npz"
    np.savez(bad, **inputs)
    began = time.monotonic()
    done, out = _hlo(tmp_path, "fsdp4_mlp_sgd", 4, bad)
    assert done.returncode != 0 and time.monotonic() - began < 60
    assert "device 2 of 4 (MPI rank 2) failed" in done.stderr
    assert "HloArgumentError: argument 0" in done.stderr
    assert "device 2 of 4 failed, so device 0 stopped at " in done.stderr   # rank 0's word
    assert not out.exists()


class _Comm:
    """An MPI communicator stand-in: rank 0 of 2, whose allgather gives ``peers``' keys."""

    rank, size = 0, 2

    def __init__(self, peer_key: str | None, delay: float = 0.0) -> None:
        self.peer_key, self.delay, self.aborted = peer_key, delay, False

    def allgather(self, entry):
        time.sleep(self.delay)
        return [entry, (self.peer_key, entry[1])]

    def Abort(self, code: int) -> None:
        self.aborted = True


def test_devices_at_different_collectives_are_an_error():
    with pytest.raises(DeviceError, match="device 1: all-reduce.2"):
        MpiCommunicator(_Comm("all-reduce.2")).exchange("all-gather.1", np.zeros(2))
    assert MpiCommunicator(_Comm("x")).exchange("x", 3) == [3, 3]


def test_a_failed_device_stops_the_others_at_their_next_collective():
    comm = _Comm("(a failure)")
    with pytest.raises(DeviceFailed, match="device 1 of 2 failed, so device 0 stopped at x"):
        MpiCommunicator(comm).exchange("x", 1)


def test_a_device_that_gets_no_answer_aborts_the_job():
    comm = _Comm("x", delay=0.5)
    MpiCommunicator(comm, timeout=0.1).exchange("x", 1)
    assert comm.aborted
