"""JAX's Python callbacks run the lowering's own functions when the module is compiled from
the ``jax.stages.Lowered`` (or given its callbacks); from text alone they are unimplemented
calls that say so."""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from runtime import CustomCallError

jax = pytest.importorskip("jax")
from jax.experimental import io_callback  # noqa: E402

X = np.arange(3, dtype=np.float32)


def all_three(seen: list):
    def f(x):
        spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
        y = jax.pure_callback(np.sin, spec, x)
        jax.debug.callback(lambda v: seen.append(np.asarray(v)), y)
        return io_callback(lambda v: v * 3, spec, y, ordered=False) + 1
    return f


@pytest.mark.parametrize("fusion", [True, False])
def test_pure_io_and_debug_callbacks_run_from_the_lowering(fusion):
    seen: list = []
    lowered = jax.jit(all_three(seen)).lower(X)
    exe = runtime.compile(lowered, fusion=fusion)
    assert exe.analysis.unimplemented_custom_calls == []
    np.testing.assert_allclose(exe(X), np.sin(X) * 3 + 1, rtol=1e-6)
    np.testing.assert_allclose(seen[-1], np.sin(X), rtol=1e-6)     # kept after the call
    assert runtime.analyze(lowered).unimplemented_custom_calls == []


def test_text_with_the_lowerings_callbacks_runs_optimised_text_too():
    lowered = jax.jit(all_three([])).lower(X)
    callbacks = lowered._lowering.compile_args["host_callbacks"]
    for text in (lowered.as_text("hlo"), lowered.compile().as_text()):
        exe = runtime.compile(text, python_callbacks=callbacks)
        np.testing.assert_allclose(exe(X), np.sin(X) * 3 + 1, rtol=1e-6)


def test_text_alone_names_each_jax_api():
    text = jax.jit(all_three([])).lower(X).as_text("hlo")
    calls = runtime.analyze(text).unimplemented_custom_calls
    assert [c.summary().split(", ", 1)[1] for c in calls] == [
        f"a Python function through {api}, not available from HLO text"
        for api in ("jax.pure_callback", "jax.debug.callback", "jax.experimental.io_callback")]
    with pytest.raises(CustomCallError, match=r"through jax.pure_callback \(backend_config "
                                              r"index 0\); that function lived") as info:
        runtime.compile(text)(X)
    assert info.value.line is not None and "runtime.compile(jax.jit(f).lower" in info.value.hint


def guarded(message: str):
    def check(v):
        raise ValueError(message)

    def f(x):
        spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return jax.lax.cond(x[0] > 0, lambda v: jax.pure_callback(check, spec, v),
                            lambda v: v * 2, x)
    return f


def test_a_callback_that_raises_fails_the_run_with_its_exception():
    exe = runtime.compile(jax.jit(guarded("positive")).lower(X))
    np.testing.assert_array_equal(exe(X), 2 * X)
    x = runtime.device_put(X + 1)
    with pytest.raises(CustomCallError, match="ValueError: positive") as info:
        exe.run(x)
    assert isinstance(info.value.__cause__, ValueError)
    np.testing.assert_array_equal(np.asarray(x), X + 1)


def test_same_text_other_callbacks_is_another_executable():
    first = jax.jit(guarded("first")).lower(X)
    second = jax.jit(guarded("second")).lower(X)
    assert first.as_text("hlo") == second.as_text("hlo")
    for lowered, message in ((first, "first"), (second, "second")):
        with pytest.raises(CustomCallError, match=message):
            runtime.compile(lowered)(X + 1)


def test_given_callbacks_must_return_the_results_exact_shapes():
    text = jax.jit(all_three([])).lower(X).as_text("hlo")
    seen: list = []
    fine = [lambda v: (v + 1,), seen.append, lambda v: (v * 2,)]    # None for no results
    np.testing.assert_array_equal(runtime.compile(text, python_callbacks=fine)(X),
                                  (X + 1) * 2 + 1)
    np.testing.assert_array_equal(seen[0], X + 1)
    wrong = [lambda v: (np.zeros(4, np.float32),), print, lambda v: (v,)]
    with pytest.raises(CustomCallError, match=r"returned float32\[4\] for result 0, which is "
                                              r"float32\[3\]"):
        runtime.compile(text, python_callbacks=wrong)(X)
