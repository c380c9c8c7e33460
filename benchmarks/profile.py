"""Per-kernel times of one run: where a module's time goes.

Runs the module once to warm up, then once more with the queue drained after every plan step
(kernel launch, copy, fill, host step), and prints the instructions whose steps took longest
in all (a loop body's steps summed over its iterations, with their count) and, for a fusion,
its kind and root opcode. Draining after every step removes the overlap between host and
device, so the total is a little above a normal run's; the ranking is what this is for.

    python benchmarks/profile.py FILE.hlo|MODEL_NAME [--top N]

A model name is looked up in the shared models folder (``$HLO_MODELS``), whose recipes give
the inputs; for a file, inputs are drawn from each parameter's shape. Timings are noisy on a
shared machine: say which machine and device they come from.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from programs import file_program, model_bench_programs  # noqa: E402

import runtime  # noqa: E402
from runtime.execution import executable as execute  # noqa: E402


@dataclass
class StepTime:
    instruction: str
    kind: str          # Launch, CopyBytes, FillBytes, HostWhile...
    seconds: float


def profile(exe, args) -> list[StepTime]:
    """One run of ``exe`` on ``args`` (device-resident), timed step by step."""
    exe.run(*args)
    exe.device.queue.finish()
    times: list[StepTime] = []
    runners = dict(execute._STEP_RUNNERS)

    def timed(runner):
        def run(self, step, bindings):
            self.device.queue.finish()
            start = time.perf_counter()
            runner(self, step, bindings)
            self.device.queue.finish()
            times.append(StepTime(step.instruction, type(step).__name__,
                                  time.perf_counter() - start))
        return run

    execute._STEP_RUNNERS.update({k: timed(v) for k, v in runners.items()
                                  if k not in ("HostWhile", "HostConditional")})
    try:
        exe.run(*args)
        exe.device.queue.finish()
    finally:
        execute._STEP_RUNNERS.update(runners)
    return times


def describe(module, name: str) -> str:
    """``fusion kind root-opcode shape`` for a fusion, ``opcode shape`` otherwise."""
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.name == name:
                if inst.opcode == "fusion":
                    callee = inst.attrs["calls"]
                    return (f"fusion {inst.attrs['kind']} {callee.root.opcode} "
                            f"{inst.shape.to_text()} ({len(callee.instructions)} inst)")
                return f"{inst.opcode} {inst.shape.to_text()}"
    return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program", help="an .hlo file or a model name from the models folder")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    if Path(args.program).is_file():
        program = file_program(Path(args.program))
    else:
        found = [p for p in model_bench_programs() if p.name == args.program]
        if not found:
            raise SystemExit(f"no file or model named {args.program!r}")
        program = found[0]
    start = time.perf_counter()
    exe = runtime.compile(program.text)
    print(f"{program.name}: compiled in {time.perf_counter() - start:.1f} s")
    inputs = [runtime.device_put(a) for a in program.inputs()]
    times = profile(exe, inputs)
    total = sum(t.seconds for t in times)
    launches = sum(t.kind == "Launch" for t in times)
    by_kind: dict[str, float] = defaultdict(float)
    for t in times:
        by_kind[t.kind] += t.seconds
    print(f"{len(times)} steps ({launches} kernel launches), {total * 1e3:.1f} ms drained; "
          + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in sorted(by_kind.items())))
    stats = exe.memory_stats
    print(f"device bytes {stats.total:,} (argument {stats.argument:,} output {stats.output:,} "
          f"temp {stats.temp:,} alias {stats.alias:,})")
    per_instruction: dict[str, list[float]] = defaultdict(list)
    for t in times:
        per_instruction[t.instruction].append(t.seconds)
    ranked = sorted(per_instruction.items(), key=lambda item: -sum(item[1]))
    for name, seconds in ranked[:args.top]:
        spent = sum(seconds)
        print(f"{spent * 1e3:9.2f} ms {100 * spent / total:5.1f}% x{len(seconds):<4} {name:<28} "
              f"{describe(exe.buffer_assignment.module, name)}")


if __name__ == "__main__":
    main()
