"""The GPU strategy under the Oclgrind simulator: every non-bench corpus program (pre-optimisation
fused and unfused, XLA-optimised fused) matches XLA's reference outputs, and Oclgrind reports no
invalid memory access and no data race.

Oclgrind (Debian package ``oclgrind``, installed by ``scripts/system-deps.sh``) replaces the
OpenCL library of the process it starts; the runtime then sees one GPU device, the simulator,
and compiles with its GPU strategy. Cases run in a few batches, one ``oclgrind --data-races
python -m tests.gpu_sim.runner`` process each (two at a time), because starting Python and
pyopencl costs more than most cases. Without oclgrind these tests fail: CI installs it.
(``--uninitialized`` is not used: Oclgrind 21.10's plugin aborts on LLVM's ``freeze``.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..conftest import corpus_dir
from ..corpus_data import CORPUS, load_index
from .runner import MARKER

REPO = Path(__file__).resolve().parents[2]
BATCHES = 4
PARALLEL = 2
TIMEOUT_S = 900


def _cases() -> list[str]:
    if not (CORPUS / "index.json").is_file():
        return ["corpus:MISSING-CORPUS:hlo"]
    cases = []
    for entry in load_index():
        if entry["bench"]:
            continue
        name = entry["name"]
        cases += [f"corpus:{name}:hlo", f"corpus:{name}:hlo:unfused"]
        if entry["files"]["opt_hlo"]:
            cases.append(f"corpus:{name}:opt_hlo")
    return cases + ["custom-call:opencl", "rng:xla-golden", "reruns:rebound-buffers",
                    "scatter:repeated-indices", "packed:shared-bytes", "chain:work-groups", "workgroup:argminmax",
                    "workgroup:dot", "workgroup:reduce", "workgroup:small-tiles"]


CASES = _cases()

# Oclgrind's reports: an unindented headline ("Invalid read of size 4 at global memory ...",
# "Write-write data race at ...", "Oclgrind - OpenCL runtime error detected") followed by
# tab-indented details. Clang's summary of warnings is the only other output expected.
_EXPECTED_NOISE = re.compile(r"^\d+ warnings? generated\.$")


@dataclass
class CaseResult:
    seconds: float | None = None
    problems: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    @property
    def reports(self) -> list[str]:
        """Oclgrind's report headlines, plus any other unexpected line, on stderr."""
        found = []
        for i, line in enumerate(self.stderr):
            if not line.strip() or line[0].isspace() or _EXPECTED_NOISE.match(line):
                continue
            details = self.stderr[i + 1:i + 4]
            found.append(line + ("" if not details else "\n" + "\n".join(details)))
        return found


@dataclass
class BatchResult:
    cases: dict[str, CaseResult]
    lowerings_registered: set[str]
    lowerings_used: set[str]
    device: str
    strategy: str
    returncode: int
    stderr_tail: str


def run_batch(cases: list[str], cache: str) -> BatchResult:
    """``cache``: an empty hlo-magic cache, so every program is generated (and its lowering
    rules recorded) rather than loaded from the program cache."""
    oclgrind = shutil.which("oclgrind")
    if oclgrind is None:
        pytest.fail("oclgrind is not installed (Debian package oclgrind; scripts/system-deps.sh "
                    "installs it): the GPU strategy cannot be tested")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HLO_CORPUS": str(CORPUS),
           "HLO_MAGIC_CACHE": cache}
    env.pop("HLO_DEVICE", None)
    done = subprocess.run([oclgrind, "--data-races", sys.executable, "-m", "tests.gpu_sim.runner",
                           *cases], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    results = {case: CaseResult() for case in cases}
    registered: set[str] = set()
    used: set[str] = set()
    device = strategy = ""
    for line in done.stdout.splitlines():
        record = json.loads(line)
        if "case" in record:
            results[record["case"]].seconds = record["seconds"]
            results[record["case"]].problems = record["problems"]
        elif "device" in record:
            device, strategy = record["device"], record["strategy"]
        elif "lowerings_used" in record:
            registered = set(record["lowerings_registered"])
            used = set(record["lowerings_used"])
    current: CaseResult | None = None
    for line in done.stderr.splitlines():
        if line.startswith(MARKER):
            current = results.get(line[len(MARKER):])
        elif current is not None:
            current.stderr.append(line)
    return BatchResult(results, registered, used, device, strategy, done.returncode,
                       "\n".join(done.stderr.splitlines()[-30:]))


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> list[BatchResult]:
    corpus_dir()
    batches = [CASES[i::BATCHES] for i in range(BATCHES)]
    caches = [str(tmp_path_factory.mktemp("hlo-magic-cache")) for _ in batches]
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(run_batch, batches, caches))


def _result(batches: list[BatchResult], case: str) -> tuple[BatchResult, CaseResult]:
    for batch in batches:
        if case in batch.cases:
            return batch, batch.cases[case]
    raise AssertionError(f"{case} was not run")


def test_the_simulator_is_a_gpu_and_gets_the_gpu_strategy(simulated):
    for batch in simulated:
        assert batch.device == "oclgrind:gpu (Oclgrind Simulator)", batch.stderr_tail
        assert batch.strategy == "gpu"


@pytest.mark.parametrize("case", CASES)
def test_case_matches_xla_without_reports(simulated, case):
    batch, result = _result(simulated, case)
    assert result.seconds is not None, (
        f"the oclgrind process (exit status {batch.returncode}) ended before {case}:\n"
        f"{batch.stderr_tail}")
    assert not result.problems, "\n".join(result.problems)
    assert not result.reports, "Oclgrind reported:\n" + "\n".join(result.reports)


def test_every_kernel_family_runs_on_the_simulator(simulated):
    """Every GPU-target rule with a dedicated lowering (the work-group dot and row reduction
    among them), the loop kernels (where convolutions go on the GPU target: their
    register-tiled rules are registered for the CPU) and host control flow produced steps in
    at least one case. Fusion roots and strategies
    are reported but not all required."""
    registered = set().union(*(b.lowerings_registered for b in simulated))
    used = set().union(*(b.lowerings_used for b in simulated))
    required = {key for key in registered if not key.startswith(("fusion root ",
                                                                   "fusion strategy "))}
    assert required >= {"loop kernel", "reduce", "sort", "scatter", "rng-bit-generator",
                        "custom-call", "fusion", "while", "conditional"}
    assert required <= used, f"never lowered on the GPU strategy: {sorted(required - used)}"
    assert any(key.startswith("fusion strategy ") for key in used)
    assert {"fusion strategy runtime.codegen.families.workgroup_rows._group_row_fusion",
            "fusion strategy runtime.codegen.families.tiles.output_fusion"} <= used


def test_donated_runs_are_included():
    aliased = [e["name"] for e in load_index() if not e["bench"]
               and (e["input_output_alias"] or e["buffer_donor"])]
    assert aliased and all(f"corpus:{name}:hlo" in CASES for name in aliased)


def test_reports_of_a_faulty_kernel_are_caught(tmp_path):
    """The parsing above must see Oclgrind's reports: a read past a buffer's end and a
    write-write race, each in a user kernel run as an OpenCL custom call."""
    batch = run_batch(["faulty:invalid-access", "faulty:race", "custom-call:opencl"],
                      str(tmp_path))
    invalid = batch.cases["faulty:invalid-access"].reports
    race = batch.cases["faulty:race"].reports
    assert invalid and invalid[0].startswith("Invalid read of size 4"), invalid
    assert race and race[0].startswith("Write-write data race"), race
    assert batch.cases["custom-call:opencl"].reports == []
