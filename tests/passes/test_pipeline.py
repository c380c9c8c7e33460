"""The pipeline: its stages in order, reassignment through it, and no device needed."""

import subprocess
import sys
from pathlib import Path

import runtime
from runtime import pipeline
from runtime.target import Target
from runtime import reassign

REPO = Path(__file__).resolve().parents[2]

ALIASED = """HloModule m, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY e {
  p = f32[256] parameter(0)
  q = f32[256] parameter(1)
  ROOT r = f32[256] add(p, q)
}"""


def test_the_lists_name_the_stages_in_order():
    assert [name for name, *_ in pipeline.OPTIMISATION] == [
        "manual-regions", "spmd-collectives", "one-device-collectives", "constant-divisors",
        "algebraic-rewrites", "cholesky-host-calls", "complex-lowering",
        "stochastic-convert", "dynamic-padding", "dead-tuple-elements", "float-normalization",
        "inline-calls",
        "simplify",
        "transpose-folding", "dot-operand-layouts",
        "split-topk", "convolution-layout",
        "contraction-upcast", "tree-reductions", "fusion", "cse", "multi-output-fusion", "split-reductions"]
    assert [name for name, _ in pipeline.COMMON_PREPARATION] == [
        "dce", "flatten-call-graph", "call-layouts", "operand-layouts"]
    assert [name for name, _ in pipeline.PREPARATION] == [
        "apply-donation", "schedule", "copy-insertion"]


def test_reassign_runs_the_preparation_again():
    ba = pipeline.run(runtime.parse(ALIASED), Target.for_kind("cpu"))
    assert ba.memory_stats.alias == 1024
    undonated = reassign(ba, frozenset())
    assert undonated.memory_stats.alias == 0 and undonated.not_donated
    assert reassign(undonated, None).memory_stats == ba.memory_stats


def test_the_pipeline_and_lowering_need_no_opencl():
    code = ("import sys\nfrom runtime.hlo.parser import parse\nfrom runtime.pipeline "
            "import run\nfrom runtime.target import Target\nfrom runtime.codegen.lower import "
            f"lower\nt = Target.for_kind('cpu')\nlower(run(parse({ALIASED!r}), t), t)\n"
            "assert 'pyopencl' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env={"PYTHONPATH": str(REPO)},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
