"""The ``hlo`` command line: ``hlo check FILE.hlo``, ``hlo run FILE.hlo [ARG ...]`` and
``hlo memory FILE.hlo`` (the buffer assignment without building a kernel or needing a device).

``hlo memory --png`` draws with ``hlo_magic.timeline``, which imports matplotlib but never
IPython: the command line sits on top of both layers, and nothing else in ``runtime`` looks up.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

import numpy as np

from .buffers.donation_spec import resolve_donation
from .errors import HloArgumentError, HloError


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise SystemExit(f"hlo: cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SystemExit(f"hlo: {path} is not UTF-8 text") from None


def _print_error(path: str, err: HloError) -> None:
    """Compiler-style: ``FILE:LINE:COL: ...`` first, so editors can jump to it."""
    lines = err._render_traceback_()
    if err.location is not None:
        lines[0] = f"{path}:{err.location.line}:{err.location.column}" + (
            f" ({err.computation})" if err.computation else "")
    else:
        lines.insert(0, path)
    print("\n".join(lines), file=sys.stderr)


def cmd_check(args: argparse.Namespace) -> int:
    from . import parse
    text = _read(args.file)
    try:
        module = parse(text)
    except HloError as e:
        _print_error(args.file, e)
        return 1
    for w in module.warnings:
        print(f"{args.file}: warning: {w}", file=sys.stderr)
    n = sum(len(c.instructions) for c in module.computations)
    print(f"{args.file}: OK: module {module.name}, {len(module.computations)} computations, "
          f"{n} instructions")
    return 0


def parse_argument(text: str):
    """A command-line argument: a number, a nested list, or ``@file.npy``."""
    if text.startswith("@"):
        try:
            return np.load(text[1:], allow_pickle=False)
        except (OSError, ValueError) as e:
            raise HloArgumentError(f"cannot load {text[1:]}: {e}") from None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise HloArgumentError(f"argument {text!r} is not a number, a nested list or @file.npy") \
            from None
    if not isinstance(value, (int, float, bool, list, tuple)):
        raise HloArgumentError(f"argument {text!r} is not a number, a nested list or @file.npy")
    return value


class CompileProgress:
    """Kernel-build progress on stderr, shown only once a compile has taken over a second."""

    def __init__(self, stream=sys.stderr) -> None:
        self.start = time.perf_counter()
        self.stream = stream
        self.shown = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != "build" or time.perf_counter() - self.start < 1.0:
            return
        self.shown = True
        print(f"\rcompiling: {done}/{total} kernels built", end="", file=self.stream, flush=True)
        if done == total:
            print(file=self.stream)


def _print_outputs(result, index: tuple[int, ...] = ()) -> None:
    if isinstance(result, tuple):
        for k, r in enumerate(result):
            _print_outputs(r, index + (k,))
        return
    a = np.asarray(result)
    label = "output" + ("{" + ",".join(map(str, index)) + "}" if index else "")
    print(f"{label} = {a.dtype}{list(a.shape)}")
    print(np.array2string(a, threshold=64, edgeitems=3))


def _check_inputs(args: argparse.Namespace) -> None:
    """ARGs, ``--random`` and ``--zeros`` are three ways to give the inputs: one at a time."""
    if args.made_up is not None and args.args:
        raise HloArgumentError(f"--{args.made_up} makes every argument; got "
                               f"{len(args.args)} argument(s) as well: give one or the other")
    if args.seed is not None and args.made_up != "random":
        raise HloArgumentError("--seed is the seed of --random inputs; give --random as well")


def _arguments(exe, args: argparse.Namespace) -> list:
    """The run's arguments: the command line's, or made up with ``--random``/``--zeros``."""
    if args.made_up == "random":
        return exe.random_arguments(0 if args.seed is None else args.seed)
    if args.made_up == "zeros":
        return exe.zeros_arguments()
    return [parse_argument(a) for a in args.args]


def cmd_run(args: argparse.Namespace) -> int:
    from . import compile as compile_module
    from .execution import mpi
    text = _read(args.file)
    processes = mpi.launched_processes()
    progress = CompileProgress() if processes == 1 else None
    try:
        _check_inputs(args)
        if args.inputs is not None and (args.args or args.made_up):
            raise HloArgumentError("--inputs gives every argument; give ARGs, --random or "
                                   "--zeros instead, not as well")
        exe = compile_module(text, device=args.device, progress=progress,
                             elided_constants=args.elided)
        if processes > 1:
            return _run_mpi_process(exe, args)
        outputs = _run_devices(exe, args)
    except HloError as e:
        _print_error(args.file, e)
        return 1
    if args.outputs is not None:
        _save_outputs(args.outputs, outputs, exe.device_count)
    for device, result in enumerate(outputs):
        if len(outputs) > 1:
            print(f"device {device}:")
        _print_outputs(result)
    print()
    print(summary(exe))
    return 0


def _device_arguments(exe, args: argparse.Namespace, device: int) -> list:
    """Device ``device``'s arguments: from ``--inputs`` (``arg_I_pP``, else ``arg_I``), else
    the command line's or made-up ones (the same on every device)."""
    if args.inputs is None:
        return _arguments(exe, args)
    with np.load(args.inputs) as inputs:
        values = []
        for i, name in enumerate(exe.parameter_names):
            for key in (f"arg_{i}_p{device}", f"arg_{i}"):
                if key in inputs.files:
                    values.append(inputs[key])
                    break
            else:
                raise HloArgumentError(f"{args.inputs} has no arg_{i}_p{device} or arg_{i} for "
                                       f"parameter {i} ({name}) of device {device}")
        return values


def _run_devices(exe, args: argparse.Namespace) -> list:
    """Every device's outputs, run in this process (``run_spmd`` for several)."""
    if exe.device_count == 1:
        return [exe.run(*_device_arguments(exe, args, 0), donate=args.donate)]
    per_device = [_device_arguments(exe, args, p) for p in range(exe.device_count)]
    return exe.run_spmd(per_device, donate=args.donate, timeout=args.timeout)


def _run_mpi_process(exe, args: argparse.Namespace) -> int:
    """This process's device under mpiexec; rank 0 gathers every device's outputs. A failure
    prints the error naming the device and aborts the job, so no process waits for it."""
    from .execution import mpi
    comm = mpi.world()
    try:
        result = mpi.run_partition(exe, _device_arguments(exe, args, comm.rank), comm,
                                   donate=args.donate, timeout=args.timeout)
    except mpi.DeviceFailed as e:
        if comm.rank == 0:          # the failed device printed its own error
            print(f"{args.file}: {e}", file=sys.stderr)
        return 1
    except HloError as e:
        if exe.device_count != comm.size:      # every process found the same: rank 0 says it
            if comm.rank == 0:
                _print_error(args.file, e)
            return 1
        print(f"device {comm.rank} of {comm.size} (MPI rank {comm.rank}) failed:",
              file=sys.stderr)
        _print_error(args.file, e)
        return 1
    gathered = comm.gather(_host_tree(result), root=0)
    if comm.rank == 0:
        if args.outputs is not None:
            _save_outputs(args.outputs, gathered, exe.device_count)
        for device, outputs in enumerate(gathered):
            print(f"device {device}:")
            _print_outputs(outputs)
        print()
        print(summary(exe))
    return 0


def _host_tree(result):
    if isinstance(result, tuple):
        return tuple(_host_tree(r) for r in result)
    return np.asarray(result)


def _leaves(result) -> list:
    if isinstance(result, tuple):
        return [leaf for r in result for leaf in _leaves(r)]
    return [np.asarray(result)]


def _save_outputs(path: str, outputs: list, devices: int) -> None:
    """``out_J`` (one device) or ``out_J_pP`` (each device P) for each output leaf J."""
    arrays = {}
    for device, result in enumerate(outputs):
        for j, leaf in enumerate(_leaves(result)):
            arrays[f"out_{j}" if devices == 1 else f"out_{j}_p{device}"] = leaf
    np.savez(path, **arrays)


def cmd_memory(args: argparse.Namespace) -> int:
    from . import analyze, reassign
    text = _read(args.file)
    try:
        analysis = analyze(text, alignment=args.alignment)
        names = [p.name for p in analysis.source.entry_computation.parameters]
        donated = tuple(sorted(resolve_donation([] if args.donate == "none" else args.donate,
                                                names, what="--donate")))
        plan = analysis.buffer_assignment
        if args.donate:
            plan = reassign(plan, frozenset(donated))
    except HloError as e:
        _print_error(args.file, e)
        return 1
    print(memory_summary(analysis, plan, donated if args.donate else None))
    if args.png:
        from hlo_magic.timeline import figure_png, plot_memory
        Path(args.png).write_bytes(figure_png(plot_memory(plan)))
        print(f"timeline figure: {args.png}")
    return 0


def memory_summary(analysis, plan, donated: tuple[int, ...] | None = None,
                   largest: int = 10) -> str:
    """The memory plan in XLA's vocabulary, allocations by kind, the largest, inserted copies."""
    s = plan.memory_stats
    module = analysis.module
    n = sum(len(c.instructions) for c in module.computations)
    lines = [f"module {analysis.name}: {n} instructions after the passes, alignment "
             f"{analysis.alignment} B, " + (f"donated {list(donated) or 'none'}"
                                            if donated is not None else
                                            "donation as the header declares it"),
             f"memory: argument {s.argument} B, output {s.output} B, alias {s.alias} B, "
             f"temp {s.temp} B; total {s.total} B; live-range peak {s.peak} B at "
             f"{plan.peak_instruction.name}"]
    kinds: dict[str, list[int]] = {}
    for a in plan.allocations:
        kinds.setdefault(a.kind, []).append(a.size)
    lines.append("allocations: " + ", ".join(f"{len(v)} {k} ({sum(v)} B)"
                                             for k, v in kinds.items()))
    for a in sorted(plan.allocations, key=lambda a: -a.size)[:largest]:
        names = ", ".join(b.name for b in a.buffers[:3]) + (", ..." if len(a.buffers) > 3 else "")
        lines.append(f"  #{a.index} {a.kind} {a.size} B: {names}")
    if len(plan.allocations) > largest:
        lines.append(f"  ... {len(plan.allocations) - largest} smaller allocation(s)")
    for c in plan.copies:
        lines.append(f"inserted copy: {c}")
    lines += unimplemented_lines(analysis)
    return "\n".join(lines)


def unimplemented_lines(analysis) -> list[str]:
    """The custom calls nothing implements: the module runs until one of them is reached."""
    calls = analysis.unimplemented_custom_calls
    if not calls:
        return []
    return [f"{len(calls)} custom call(s) without an implementation (a run that reaches one "
            "fails with CustomCallError):", *(f"  {call.summary()}" for call in calls)]


def cmd_devices(args: argparse.Namespace) -> int:
    """Every OpenCL device, which one runs modules and why the others do not."""
    from .opencl.device import device_reasons, devices
    from .opencl.device_probe import host_isa
    try:
        reasons = device_reasons(args.device)
    except HloError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"host CPU vector ISA: {host_isa()}")
    for dev in devices():
        print(f"{dev.spec:6} {dev}  [{dev.platform_version}]")
        print(f"       {reasons[dev.spec]}")
    return 0


def summary(exe) -> str:
    """A few lines: where it ran, the memory plan in XLA's vocabulary, what donation did."""
    a = exe.buffer_assignment
    s = exe.memory_stats
    lines = [f"module {exe.name} on {exe.device}: compiled in {exe.compile_seconds:.2f} s, "
             f"{len(exe.program.kernel_names)} kernel(s)",
             *([f"elided constants filled with {exe.elided_constants}: the outputs are not "
                "the model's"] if exe.elided_constants else []),
             f"memory: argument {s.argument} B, output {s.output} B, alias {s.alias} B, "
             f"temp {s.temp} B; live-range peak {s.peak} B",
             "allocations: " + ", ".join(f"#{x.index} {x.kind} {x.size} B" for x in a.allocations)]
    for c in a.copies:
        lines.append(f"inserted copy: {c}")
    lines += unimplemented_lines(exe.analysis)
    run = exe.last_run
    if run is not None:
        lines.append(f"run {run.name}: donated {list(run.donated)}, copy-protected "
                     f"{list(run.copied)}" + (f", unusable donations {run.unusable}"
                                              if run.unusable else ""))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hlo", description="Check, run and plan the memory of "
                                                        "XLA HLO modules.")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="parse and verify a module; exit 1 on error")
    c.add_argument("file", help="an .hlo text file")
    c.set_defaults(func=cmd_check)
    r = sub.add_parser("run", help="compile and run a module; print the results and a "
                                   "buffer-assignment summary")
    r.add_argument("file", help="an .hlo text file")
    r.add_argument("args", nargs="*", metavar="ARG",
                   help="one per entry parameter: a number, a nested list like [[1,2],[3,4]], "
                        "or @file.npy")
    made_up = r.add_mutually_exclusive_group()
    made_up.add_argument("--random", dest="made_up", action="store_const", const="random",
                         help="run on seeded random inputs of the parameters' shapes and "
                              "dtypes (small normal floats, small non-negative integers) "
                              "instead of ARGs")
    made_up.add_argument("--zeros", dest="made_up", action="store_const", const="zeros",
                         help="run on all-zeros inputs instead of ARGs")
    r.add_argument("--seed", type=int, default=None, metavar="N",
                   help="the seed of --random inputs (default 0)")
    r.add_argument("--device", default=None, help="OpenCL device: cpu, gpu, gpu:1, pocl, ... "
                                                  "(default: $HLO_DEVICE or the best CPU device; "
                                                  "see hlo devices)")
    r.add_argument("--donate", default="", metavar="IDX|NAME,...",
                   help="parameters to donate, by number or name, or 'all' (updated in place "
                        "where aliased)")
    r.add_argument("--elided", choices=("zeros", "random"), default=None,
                   help="run a module whose constants were printed elided as {...} with these "
                        "values (for timing and memory: the outputs are not the model's)")
    r.add_argument("--inputs", default=None, metavar="IN.npz",
                   help="the arguments from an .npz: arg_I (argument I), or arg_I_pP (device "
                        "P's) for a multi-device module; under mpiexec -n N each process runs "
                        "device P = its rank")
    r.add_argument("--outputs", default=None, metavar="OUT.npz",
                   help="write the outputs to an .npz: out_J, or out_J_pP for every device of "
                        "a multi-device module (gathered by rank 0 under mpiexec)")
    r.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="how long a device waits for the others at a collective (default 300)")
    r.set_defaults(func=cmd_run)
    m = sub.add_parser("memory", help="print the buffer assignment without building kernels "
                                      "or needing an OpenCL device")
    m.add_argument("file", help="an .hlo text file")
    m.add_argument("--donate", default="", metavar="IDX|NAME,...",
                   help="parameters to donate (by number or name), 'all' or 'none': the plan "
                        "for that choice (default: donation as the module's header declares "
                        "it, XLA's view)")
    m.add_argument("--png", default=None, metavar="FILE",
                   help="also save the memory timeline figure (needs matplotlib)")
    m.add_argument("--alignment", type=int, default=None, metavar="BYTES",
                   help="buffer alignment (default 128, PoCL's)")
    m.set_defaults(func=cmd_memory)
    d = sub.add_parser("devices", help="list the OpenCL devices, which one is used and why")
    d.add_argument("--device", default=None, help="the spec to resolve, as for run "
                                                  "(default: $HLO_DEVICE or the rule's choice)")
    d.set_defaults(func=cmd_devices)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
