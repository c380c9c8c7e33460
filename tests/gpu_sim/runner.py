"""Runs test cases on the default device and prints one JSON line per case on stdout.

Meant to run inside the Oclgrind simulator (``oclgrind --data-races python -m
tests.gpu_sim.runner CASE ...``), where the only OpenCL device is Oclgrind's simulated GPU,
so every case goes through the runtime's GPU strategy. Before each case a marker line goes to
stderr, so the parent can attribute Oclgrind's reports (written to stderr while a kernel
runs) to the case that caused them.

Cases:

- ``corpus:NAME:KIND[:unfused]``: a corpus program (KIND ``hlo`` or ``opt_hlo``; ``unfused``
  compiles without the fusion passes, one kernel per instruction) against XLA's reference; a
  program whose header aliases or donates parameters runs once more with every argument
  donated, as device arrays.
- ``custom-call:opencl``: an OpenCL custom call's launcher between generated kernels.
- ``rng:xla-golden``: every rng-bit-generator configuration against XLA's bits.
- ``reruns:rebound-buffers``: released buffers reallocated between runs.
- ``scatter:repeated-indices``: scatters with repeated indices, shared out among work-items.
- ``packed:shared-bytes``: 4- and 2-bit codes whose bytes are written by neighbouring
  work-items of different work-groups (an in-place update at an odd offset, a transpose): a
  plain read-modify-write of a byte is a data race the simulator reports.
- ``chain:work-groups``: chained launches of small kernels, one work-group running the
  stages with barriers between them, and while loops run on the device the same way.
- ``workgroup:argminmax``: JAX's argmax and argmin as a work-group a row.
- ``workgroup:dot``, ``workgroup:reduce``: the work-group-tiled dot and the work-group row
  reduction against numpy (``workgroup_cases``); ``workgroup:small-tiles``: both again with
  smaller work-group shapes than the simulator's limits give.
- ``faulty:invalid-access``, ``faulty:race``: deliberately faulty kernels, for testing the
  parent's parsing of Oclgrind's reports.
"""

from __future__ import annotations

import json
import re
import sys
import time
import traceback

import numpy as np

import runtime
from runtime.target import Target

from ..corpus_data import Program, flatten, load_index, mismatches
from . import workgroup_cases

MARKER = "=== hlo-magic case "

# Summing neighbours through a user OpenCL kernel next to generated kernels: the launcher
# binds operand and output buffers in XLA's GPU order and enqueues the user's kernel.
_CUSTOM_CALL_KERNEL = """__kernel void neighbours(__global const float* x,
                                 __global const float* y, __global float* out) {
  size_t i = get_global_id(0);
  out[i] = x[i] + x[(i + 1) % 256] + y[i];
}
"""
_CUSTOM_CALL_HLO = """HloModule opencl_custom_call
ENTRY e {
  x = f32[256] parameter(0)
  y = f32[256] parameter(1)
  e = f32[256] exponential(x)
  c = f32[256] custom-call(e, y), custom_call_target="gpu_sim_neighbours"
  ROOT r = f32[256] multiply(c, y)
}
"""


def run_corpus(name: str, kind: str, fusion: bool) -> list[str]:
    entry = next(e for e in load_index() if e["name"] == name)
    program = Program(entry)
    exe = runtime.compile(program.text(kind), fusion=fusion)
    problems = mismatches(program, flatten(exe(*program.inputs())))
    if entry["input_output_alias"] or entry["buffer_donor"]:
        arrays = [runtime.device_put(a, exe.device) for a in program.inputs()]
        outputs = exe.run(*arrays, donate="all")
        if not exe.last_run.donated:
            problems.append(f"donating every argument donated none: {exe.last_run!r}")
        problems += [f"donated run: {p}" for p in mismatches(program, flatten(_numpy(outputs)))]
    return problems


def run_opencl_custom_call() -> list[str]:
    runtime.register_custom_call("gpu_sim_neighbours", _CUSTOM_CALL_KERNEL, platform="opencl",
                                 kernel="neighbours")
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(256).astype(np.float32) for _ in range(2))
    got = runtime.compile(_CUSTOM_CALL_HLO)(x, y)
    e = np.exp(x)
    want = (e + np.roll(e, -1) + y) * y
    if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        return [f"custom call: {int((~np.isclose(got, want, 1e-5, 1e-6)).sum())} of 256 off"]
    return []


# Deliberate faults, to prove that the parent process notices Oclgrind's reports: a read past
# the end of a buffer, and every work-item writing one element (a write-write race).
_FAULTY_KERNELS = {
    "invalid-access": "__kernel void faulty(__global const float* x, __global float* out) {\n"
                      "  size_t i = get_global_id(0);\n  out[i] = x[i + 1];\n}\n",
    "race": "__kernel void faulty(__global const float* x, __global float* out) {\n"
            "  size_t i = get_global_id(0);\n  out[i] = x[i];\n  out[0] = (float)i;\n}\n",
}
_FAULTY_HLO = """HloModule faulty
ENTRY e {
  x = f32[64] parameter(0)
  ROOT r = f32[64] custom-call(x), custom_call_target="gpu_sim_faulty"
}
"""


def run_faulty(fault: str) -> list[str]:
    runtime.register_custom_call("gpu_sim_faulty", _FAULTY_KERNELS[fault], platform="opencl",
                                 kernel="faulty", local_size=64)
    runtime.compile(_FAULTY_HLO)(np.arange(64, dtype=np.float32))
    return []


def run_rng_golden() -> list[str]:
    """Every rng-bit-generator algorithm, output type and shape of the XLA golden file
    (``tests/codegen``), as one module calling ``rng-bit-generator`` directly."""
    from ..codegen.golden_cases import RNG_CASES
    from ..codegen.test_rng import GOLDEN

    params, roots = [], []
    for c, (_, alg, et, shape, _) in enumerate(RNG_CASES):
        dims = ",".join(map(str, shape))
        params.append(f"  s{c} = u64[2] parameter({c})")
        roots.append(f"  r{c} = (u64[2], {et}[{dims}]) rng-bit-generator(s{c}), algorithm={alg}")
    leaves = [f"  {w}{c} = {t} get-tuple-element(r{c}), index={i}"
              for c, (_, _, et, shape, _) in enumerate(RNG_CASES)
              for w, t, i in (("n", "u64[2]", 0), ("b", f"{et}[{','.join(map(str, shape))}]", 1))]
    outputs = ", ".join(f"n{c}, b{c}" for c in range(len(RNG_CASES)))
    text = "\n".join(["HloModule rng_golden", "ENTRY e {", *params, *roots, *leaves,
                      f"  ROOT t = tuple({outputs})", "}"])
    states = [np.array(key, np.uint32).view(np.uint64) for *_, key in RNG_CASES]
    got = flatten(runtime.compile(text)(*states))
    problems = []
    for c, (name, *_rest) in enumerate(RNG_CASES):
        for what, value in (("state", got[2 * c]), ("bits", got[2 * c + 1])):
            want = GOLDEN[f"rng/{name}/{what}"]
            if not np.array_equal(value.astype(want.dtype).reshape(want.shape), want):
                problems.append(f"{name} {what}: got {value.ravel()[:8]}, want {want.ravel()[:8]}")
    return problems


def run_rebound_buffers() -> list[str]:
    """Two donating corpus programs back to back: a run's released buffers are reallocated
    for the next one's arguments, a sequence that once left kernels bound to released memory
    (argument caching compared raw buffer handles across runs)."""
    return [problem for name, kind in (("donate_inplace_update", "hlo"),
                                       ("donate_buffer_donor", "opt_hlo"))
            for problem in run_corpus(name, kind, fusion=True)]


def run_repeated_scatter() -> list[str]:
    """Scatters whose indices repeat, their output elements shared out among work-items (each
    applying its elements' updates in the sequential order), against that loop's bits: the
    cases of ``tests/codegen/test_scatter``."""
    from ..codegen.test_scatter import repeated_index_cases

    problems = []
    for name, (text, args, want) in repeated_index_cases().items():
        exe = runtime.compile(text)
        if not re.search(r"\bown\d+ = ", exe.program.source):
            problems.append(f"{name}: the updates were not shared out among work-items")
        got = np.asarray(exe(*args))
        if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            problems.append(f"{name}: {int((got != want).sum())} of {got.size} values differ "
                            "from the sequential loop's")
    return problems


def run_packed_shared_bytes() -> list[str]:
    """Packed stores (``codegen.cltypes``: two atomic operations on the aligned word) where
    work-items either side of a work-group boundary write the two halves of one byte."""
    import ml_dtypes

    n = 4099
    text = (f"HloModule m, input_output_alias={{ {{}}: (0, {{}}, must-alias) }}\n"
            f"ENTRY e {{\n  p = s4[{n}] parameter(0)\n  u = s4[{n - 2}] parameter(1)\n"
            f"  i = s32[] constant(1)\n  ROOT d = s4[{n}] dynamic-update-slice(p, u, i)\n}}\n")
    rng = np.random.default_rng(0)
    update = rng.integers(-8, 8, n - 2).astype(ml_dtypes.int4)
    base = rng.integers(-8, 8, n).astype(ml_dtypes.int4)
    want = base.copy()
    want[1:-1] = update
    got = np.asarray(runtime.compile(text).run(base.copy(), update, donate=(0,)))
    problems = [] if np.array_equal(got.astype(np.int8), want.astype(np.int8)) else \
        [f"in-place s4 update: {int((got != want).sum())} of {n} codes differ"]
    transpose = ("HloModule t\nENTRY e {\n  p = u2[37,29]{1,0} parameter(0)\n"
                 "  ROOT t = u2[29,37]{1,0} transpose(p), dimensions={1,0}\n}\n")
    codes = rng.integers(0, 4, (37, 29)).astype(ml_dtypes.uint2)
    got = np.asarray(runtime.compile(transpose)(codes))
    if not np.array_equal(got.astype(np.uint8), codes.T.astype(np.uint8)):
        problems.append("u2 transpose: codes differ")
    return problems


def run_argminmax() -> list[str]:
    """JAX's argmax and argmin as a work-group a row (a tree of keys in local memory) against
    the reducer applied in sequence, both outputs bit for bit: the rows of
    ``tests/codegen/test_argminmax`` (NaNs, ties, signed zeros, rows of -inf)."""
    from ..codegen.test_argminmax import argminmax_module, rows_of, sequential

    problems = []
    for direction in ("GT", "LT"):
        for n in (1000, 40):
            x = rows_of(8, n)
            exe = runtime.compile(argminmax_module(8, n, direction))
            if "barrier(CLK_LOCAL_MEM_FENCE)" not in exe.program.source:
                problems.append(f"{direction} over {n}: a work-group kernel was not generated")
            got_values, got_indices = (np.asarray(r) for r in exe(x))
            want_values, want_indices = sequential(
                x, np.broadcast_to(np.arange(n, dtype=np.int32), x.shape), direction, -np.inf)
            if not (np.array_equal(got_indices, want_indices)
                    and np.array_equal(got_values.view(np.uint32), want_values.view(np.uint32))):
                problems.append(f"{direction} over {n}: got {got_indices}, want {want_indices}")
    return problems


def run_chains() -> list[str]:
    """Chained launches (``codegen.launch_chaining``) of the CPU target's kernels, in
    work-groups of one work-item and of sixteen (where the barriers between stages matter),
    against the same kernels launched one by one: the cases of
    ``tests/codegen/test_launch_chaining``; and loops run on the device
    (``codegen.device_loops``) against the host's, the cases of
    ``tests/codegen/test_device_loops``."""
    from ..codegen.test_device_loops import CASES as LOOP_CASES
    from ..codegen.test_device_loops import _run as run_loop
    from ..codegen.test_launch_chaining import chain_cases, chained_launches, run_chained

    problems = []
    for name in LOOP_CASES:           # loops on the device (``codegen.device_loops``)
        _, want = run_loop(name, "host")
        for variant in ("device", "device-16-items"):
            _, got = run_loop(name, variant)
            for g, w in zip(got, want):
                if g.tobytes() != w.tobytes():
                    problems.append(f"loop {name} {variant}: values differ from the host loop's")
    for name in chain_cases():
        _, want = run_chained(name, "unchained")
        for variant in ("chained", "chained-16-items"):
            exe, got = run_chained(name, variant)
            if not chained_launches(exe):
                problems.append(f"{name} {variant}: no launches were chained")
            for g, w in zip(got, want):
                if g.tobytes() != w.tobytes():
                    problems.append(f"{name} {variant}: {int((g != w).sum())} of {g.size} "
                                    "values differ from the unchained launches'")
    return problems


def _numpy(result):
    if isinstance(result, tuple):
        return tuple(_numpy(r) for r in result)
    return result.numpy()


_NAMED_CASES = {
    "custom-call:opencl": run_opencl_custom_call,
    "rng:xla-golden": run_rng_golden,
    "reruns:rebound-buffers": run_rebound_buffers,
    "scatter:repeated-indices": run_repeated_scatter,
    "packed:shared-bytes": run_packed_shared_bytes,
    "chain:work-groups": run_chains,
    "workgroup:argminmax": run_argminmax,
    "workgroup:dot": lambda: workgroup_cases.run(workgroup_cases.DOT_CASES),
    "workgroup:reduce": lambda: workgroup_cases.run(workgroup_cases.REDUCE_CASES),
    "workgroup:small-tiles": workgroup_cases.run_small_work_groups,
    "faulty:invalid-access": lambda: run_faulty("invalid-access"),
    "faulty:race": lambda: run_faulty("race"),
}


def run_case(case: str) -> list[str]:
    if case in _NAMED_CASES:
        return _NAMED_CASES[case]()
    source, name, kind, *mode = case.split(":")
    assert source == "corpus" and mode in ([], ["unfused"]), case
    return run_corpus(name, kind, fusion=not mode)


def _record_lowerings() -> tuple[set[str], set[str]]:
    """Wraps every kernel-producing lowering rule of the GPU target (dedicated opcode families,
    fusion roots, fusion strategies, the loop kernels, host control flow) so the process
    can report which of them produced plan steps: (registered, used). Forwarding, copies and
    the unsupported-opcode rules produce no kernels and are left alone."""
    from dataclasses import replace

    from runtime.codegen import lower, registry  # noqa: F401  (lower imports the families)

    registered: set[str] = set()
    used: set[str] = set()

    def wrap(key: str, rule):
        registered.add(key)

        def recording(ctx, inst, *more):
            steps = rule(ctx, inst, *more)
            if steps:
                used.add(key)
            return steps
        return recording

    for key, entries in registry.registrations().items():
        if key == registry.LOOP:
            continue
        for i, entry in enumerate(entries):
            module = entry.rule.__module__
            if entry.target not in (None, "gpu"):
                continue            # a rule for another target never runs here
            if module.endswith("families.control") and key not in ("while", "conditional"):
                continue
            if key.startswith("fusion-root:"):
                name = "fusion root " + key.split(":", 1)[1]
            elif key == registry.FUSION and module != "runtime.codegen.families.loop":
                name = f"fusion strategy {module}.{entry.rule.__name__}"
            elif key == registry.ANY:
                name = "loop kernel"
            else:
                name = key
            registry._RULES[key][i] = replace(entry, rule=wrap(name, entry.rule))
    return registered, used


def main(cases: list[str]) -> None:
    device = runtime.get_device()
    registered, used = _record_lowerings()
    print(json.dumps({"device": str(device), "strategy": Target.for_device(device).kind}),
          flush=True)
    for case in cases:
        print(f"{MARKER}{case}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            problems = run_case(case)
        except Exception:
            problems = [traceback.format_exc()]
        print(json.dumps({"case": case, "seconds": round(time.perf_counter() - start, 3),
                          "problems": problems}), flush=True)
    print(json.dumps({"lowerings_registered": sorted(registered),
                      "lowerings_used": sorted(used)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
