"""Custom calls nothing implements compile to a step that raises when reached: a module whose
such calls sit in a branch valid input never takes runs (Equinox's ``error_if``, Diffrax's
``throw=True``), and a run that reaches one fails without touching its inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import runtime
from runtime import CustomCallError
from runtime.cli import memory_summary

DATA = Path(__file__).parent / "data"

# the branch holding the unknown call runs only when some x is negative; the aliased output
# makes the run copy-protect x (not donated) and write the protected copy in place
GUARDED = """HloModule guarded, input_output_alias={ {0}: (0, {}, may-alias) }

ok {
  p = (f32[4]) parameter(0)
  v = f32[4] get-tuple-element(p), index=0
  ROOT t = (f32[4]) tuple(v)
}

fail {
  p = (f32[4]) parameter(0)
  v = f32[4] get-tuple-element(p), index=0
  c = f32[4] custom-call(v), custom_call_target="no_such_target"
  ROOT t = (f32[4]) tuple(c)
}

smaller {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] minimum(a, b)
}

ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] add(x, x)
  inf = f32[] constant(inf)
  lowest = f32[] reduce(x, inf), dimensions={0}, to_apply=smaller
  zero = f32[] constant(0)
  bad = pred[] compare(lowest, zero), direction=LT
  arg = (f32[4]) tuple(y)
  r = (f32[4]) conditional(bad, arg, arg), true_computation=fail, false_computation=ok
  out = f32[4] get-tuple-element(r), index=0
  ROOT root = (f32[4], f32[4]) tuple(out, y)
}
"""


@pytest.mark.parametrize("fusion", [True, False])
def test_an_unknown_call_in_a_branch_not_taken_runs(fusion):
    exe = runtime.compile(GUARDED, fusion=fusion)
    x = np.array([1, 2, 3, 4], np.float32)
    out, y = exe(x)
    np.testing.assert_array_equal(out, 2 * x)
    np.testing.assert_array_equal(y, 2 * x)


@pytest.mark.parametrize("fusion", [True, False])
def test_reaching_it_raises_located_and_leaves_the_inputs_intact(fusion):
    exe = runtime.compile(GUARDED, fusion=fusion)
    good = np.array([1, 2, 3, 4], np.float32)
    exe(good)
    record = exe.last_run
    bad = np.array([1, -2, 3, 4], np.float32)
    x = runtime.device_put(bad)
    with pytest.raises(CustomCallError) as info:
        exe.run(x)
    error = info.value
    assert (error.instruction, error.target, error.line) == ("c", "no_such_target", 12)
    assert "reached at run time" in str(error) and "no implementation is registered" in str(error)
    assert error._render_traceback_()[1].strip().startswith("c = f32[4] custom-call(v)")
    assert exe.last_run is record                     # a failed run records nothing
    np.testing.assert_array_equal(np.asarray(x), bad)  # undonated input untouched, still alive
    out, y = exe.run(runtime.device_put(good))         # and the executable still runs
    np.testing.assert_array_equal(np.asarray(out), 2 * good)


def test_analyze_and_the_summaries_name_the_unimplemented_calls():
    analysis = runtime.analyze(GUARDED)
    [call] = analysis.unimplemented_custom_calls
    assert (call.instruction, call.target, call.location.line) == ("c", "no_such_target", 12)
    assert call.summary() == "c (line 12): no_such_target, no implementation registered"
    text = memory_summary(analysis, analysis.buffer_assignment)
    assert "1 custom call(s) without an implementation" in text and call.summary() in text
    runtime.register_custom_call("no_such_target", lambda out, ins: None)
    assert runtime.analyze(GUARDED).unimplemented_custom_calls == []


def load(name: str) -> tuple[list[np.ndarray], list[np.ndarray], np.lib.npyio.NpzFile]:
    data = np.load(DATA / f"{name}.npz")
    valid = [data[f"valid_{k}"] for k in range(len([f for f in data.files if f.startswith("valid_")]))]
    invalid = [data[f"invalid_{k}"] for k in range(len(valid))]
    return valid, invalid, data


def check_jax_module(name: str, text_kind: str, fusion: bool) -> None:
    """JAX's text (or XLA's optimised module) runs valid inputs to XLA's outputs and fails
    invalid ones, where XLA's run failed in the Python callback, at the callback."""
    valid, invalid, data = load(name)
    text = (DATA / f"{name}.{text_kind}").read_text()
    exe = runtime.compile(text, fusion=fusion)
    calls = exe.analysis.unimplemented_custom_calls
    assert calls and {c.target for c in calls} == {"xla_ffi_python_cpu_callback"}
    assert all("jax.pure_callback" in c.summary() for c in calls)
    got = exe(*valid)
    np.testing.assert_allclose(got, data["xla"], rtol=2e-6, atol=1e-6)
    assert str(data["xla_failure"]).startswith("_EquinoxRuntimeError")
    arguments = [runtime.device_put(a) for a in invalid]
    with pytest.raises(CustomCallError, match="through jax.pure_callback") as info:
        exe.run(*arguments)
    assert info.value.target == "xla_ffi_python_cpu_callback"
    assert info.value.instruction in {c.instruction for c in calls}
    assert "runtime.compile(jax.jit(f).lower" in info.value.hint
    for argument, value in zip(arguments, invalid):
        np.testing.assert_array_equal(np.asarray(argument), value)


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("text_kind", ["hlo", "optimised.hlo"])
def test_equinox_error_if(text_kind, fusion):
    check_jax_module("eqx_error_if", text_kind, fusion)


@pytest.mark.slow
@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("text_kind", ["hlo", "optimised.hlo"])
def test_diffrax_solve_that_throws(text_kind, fusion):
    check_jax_module("diffrax_throw", text_kind, fusion)


def test_hlo_run_lists_them_and_fails_located_when_one_is_reached(tmp_path, capsys):
    from runtime.cli import main
    path = tmp_path / "guarded.hlo"
    path.write_text(GUARDED)
    assert main(["run", str(path), "[1,2,3,4]"]) == 0
    out = capsys.readouterr().out
    assert "1 custom call(s) without an implementation" in out
    assert "  c (line 12): no_such_target, no implementation registered" in out
    assert main(["run", str(path), "[1,-2,3,4]"]) == 1
    assert f"{path}:12:" in capsys.readouterr().err
