"""Parse + verify time of the HLO front end, printed (not asserted: machines are noisy).

Two figures: the largest module of the shared corpus, and a generated module of 10,000
instructions that looks like an XLA-optimised dump (layouts on every shape, metadata on every
instruction, fusions calling fused computations, reductions with a reducer, dots, elementwise
chains). The target for the generated module is under 0.5 s.

    python benchmarks/parse.py [--corpus DIR] [--instructions N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import runtime  # noqa: E402

TARGET_S = 0.5

_HEADER = """HloModule bench, is_scheduled=true, entry_computation_layout={(f32[64,128]{1,0}, f32[128,64]{1,0})->f32[64,64]{1,0}}

FileNames
1 "model.py"

FunctionNames
1 "step"

FileLocations
1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=4 end_column=30}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%region_add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}

%fused_computation (p0: f32[64,64], p1: f32[64]) -> f32[64,64] {
  %p0 = f32[64,64]{1,0} parameter(0)
  %p1 = f32[64]{0} parameter(1)
  %bc = f32[64,64]{1,0} broadcast(%p1), dimensions={0}
  %sub = f32[64,64]{1,0} subtract(%p0, %bc)
  ROOT %ex = f32[64,64]{1,0} exponential(%sub)
}
"""


def _meta(op: str, k: int) -> str:
    return (f', metadata={{op_type="{op}" op_name="jit(step)/layer_{k // 40}/{op}" '
            f'source_file="model.py" source_line={10 + k % 500} stack_frame_id=1}}')


def generated_module(instructions: int) -> str:
    """An entry computation of ``instructions`` instructions in repeating blocks of eleven."""
    lines = ["ENTRY %main (x: f32[64,128], w: f32[128,64]) -> f32[64,64] {",
             "  %x = f32[64,128]{1,0} parameter(0)",
             "  %w = f32[128,64]{1,0} parameter(1)",
             "  %zero = f32[] constant(0)",
             "  %acc.0 = f32[64,64]{1,0} dot(%x, %w), lhs_contracting_dims={1}, "
             "rhs_contracting_dims={0}" + _meta("dot_general", 0)]
    k = 0
    while len(lines) - 1 < instructions - 11:
        a, n = f"%acc.{k}", k + 1
        block = [
            f"%t.{n} = f32[64,64]{{0,1}} transpose({a}), dimensions={{1,0}}" + _meta("transpose", k),
            f"%m.{n} = f32[64,64]{{1,0}} multiply({a}, %t.{n})" + _meta("mul", k),
            f"%r.{n} = f32[64]{{0}} reduce(%m.{n}, %zero), dimensions={{1}}, "
            f"to_apply=%region_add" + _meta("reduce_sum", k),
            f"%f.{n} = f32[64,64]{{1,0}} fusion(%m.{n}, %r.{n}), kind=kLoop, "
            f"calls=%fused_computation" + _meta("softmax", k),
            f"%c.{n} = f32[] constant({n % 7}.5)" + _meta("constant", k),
            f"%b.{n} = f32[64,64]{{1,0}} broadcast(%c.{n}), dimensions={{}}" + _meta("broadcast", k),
            f"%cmp.{n} = pred[64,64]{{1,0}} compare(%f.{n}, %b.{n}), direction=GT" + _meta("gt", k),
            f"%s.{n} = f32[64,64]{{1,0}} select(%cmp.{n}, %f.{n}, %b.{n})" + _meta("select", k),
            f"%rs.{n} = f32[4096]{{0}} reshape(%s.{n})" + _meta("reshape", k),
            f"%back.{n} = f32[64,64]{{1,0}} reshape(%rs.{n})" + _meta("reshape", k),
            f"%acc.{n} = f32[64,64]{{1,0}} add(%back.{n}, {a})" + _meta("add", k),
        ]
        lines += ["  " + b for b in block]
        k = n
    lines.append(f"  ROOT %out = f32[64,64]{{1,0}} copy(%acc.{k})")
    lines.append("}")
    return _HEADER + "\n" + "\n".join(lines) + "\n"


def best_seconds(text: str, repeat: int) -> tuple[float, runtime.HloModule]:
    best, module = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        module = runtime.parse(text)
        best = min(best, time.perf_counter() - start)
    return best, module  # type: ignore[return-value]


def _count(module: runtime.HloModule) -> int:
    return sum(len(c.instructions) for c in module.computations)


def main(argv: list[str] | None = None) -> int:
    default_corpus = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=Path(os.environ.get("HLO_CORPUS", default_corpus)))
    ap.add_argument("--instructions", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    files = sorted(args.corpus.glob("*.hlo"), key=lambda p: p.stat().st_size)
    if files:
        largest = files[-1]
        seconds, module = best_seconds(largest.read_text(), args.repeat)
        print(f"largest corpus module  {largest.name:<32} {_count(module):>6} instructions "
              f"{largest.stat().st_size / 1e3:>8.1f} kB  parse+verify {seconds:.3f} s")
    else:
        print(f"no corpus at {args.corpus}; skipping the corpus figure")
    text = generated_module(args.instructions)
    seconds, module = best_seconds(text, args.repeat)
    verdict = "within" if seconds < TARGET_S else "OVER"
    print(f"generated module       {'(layouts, metadata, fusions)':<32} {_count(module):>6} "
          f"instructions {len(text) / 1e3:>8.1f} kB  parse+verify {seconds:.3f} s "
          f"({verdict} the {TARGET_S} s target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
