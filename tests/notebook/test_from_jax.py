"""``hlo_magic.from_jax`` and ``%hlo_jax``: a jitted function, a ``Lowered`` or a ``Compiled``
and its real arguments give the ``%%hlo`` report and run, donating what JAX donates."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from IPython.core.error import UsageError

import runtime
from hlo_magic import from_jax

jax = pytest.importorskip("jax")


def sgd(params, grads, lr, unused, *, scale=1.0):
    """A training-step shape: a dict of weights replaced by new ones (donated), a static
    keyword argument baked into the program, an argument JAX prunes as unused."""
    new = {k: params[k] - lr * scale * grads[k] for k in params}
    return new, sum(jax.numpy.sum(g * g) for g in grads.values())


STEP = jax.jit(sgd, donate_argnums=0, static_argnames="scale")
PARAMS = {"b": np.arange(3, dtype=np.float32), "w": np.ones((2, 3), np.float32)}
GRADS = {"b": np.full(3, 0.5, np.float32), "w": np.arange(6, dtype=np.float32).reshape(2, 3)}
UNUSED = np.zeros(7, np.float32)


def expected():
    new, norm = STEP(jax.tree_util.tree_map(np.copy, PARAMS), GRADS, 0.1, UNUSED, scale=2.0)
    return [np.asarray(new["b"]), np.asarray(new["w"]), np.asarray(norm)]


def check_outputs(result):
    for got, want in zip(result.outputs, expected(), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_jitted_function_runs_on_its_arguments_donating_what_jax_donates():
    result = from_jax(STEP, PARAMS, GRADS, 0.1, UNUSED, scale=2.0)
    check_outputs(result)
    names = result.executable.parameter_names
    assert len(names) == 5                       # b, w, the two grads, lr; UNUSED pruned
    assert result.donated == {0, 1} and result.run.donated == (0, 1)
    assert result.warnings == ()
    assert result.assignment.memory_stats.alias == PARAMS["b"].nbytes + PARAMS["w"].nbytes
    assert "donating params" in result.report_text()
    np.testing.assert_array_equal(PARAMS["b"], np.arange(3))      # the caller's arrays stay


def test_the_annotated_view_names_the_python_lines_of_the_function():
    """JAX's debug information comes with the text, so the report shows where each
    instruction came from: the two lines of ``sgd`` that compute something."""
    result = from_jax(STEP, PARAMS, GRADS, 0.1, UNUSED, scale=2.0)
    lines = {line.location.where: line.location.function
             for line in result.annotated().by_python_line()}
    first = sgd.__code__.co_firstlineno
    assert lines.keys() == {f"test_from_jax.py:{first + 3}", f"test_from_jax.py:{first + 4}"}
    assert all(function.startswith("sgd") for function in lines.values()), lines


def test_a_lowered_and_a_compiled_take_the_non_static_arguments():
    lowered = STEP.lower(PARAMS, GRADS, 0.1, UNUSED, scale=2.0)
    from_lowered = from_jax(lowered, PARAMS, GRADS, 0.1, UNUSED)
    from_compiled = from_jax(lowered.compile(), PARAMS, GRADS, 0.1, UNUSED)
    for result in (from_lowered, from_compiled):
        check_outputs(result)
        assert result.donated == {0, 1} and result.warnings == ()
    opcodes = {i.opcode for i in from_compiled.executable.module.instructions()}
    assert "fusion" in opcodes                   # XLA's optimised text
    assert "fusion" not in {i.opcode for i in from_lowered.executable.module.instructions()}
    with pytest.raises(runtime.HloArgumentError, match=r"the program was lowered for "
                                                       r"PyTreeDef.*non-static arguments only"):
        from_jax(lowered, PARAMS, GRADS, 0.1)


def test_a_donated_argument_no_output_can_take_is_a_warning():
    total = jax.jit(lambda x, y: (x * y).sum(), donate_argnums=0)
    x = np.arange(4, dtype=np.float32)
    with pytest.warns(UserWarning, match="donated buffers were not usable"):
        result = from_jax(total, x, x)
    assert float(result.outputs) == float((x * x).sum())
    assert result.warnings == (
        "donate_argnums: parameter 0 (x.1) cannot be donated, so its buffer is kept: no "
        "input_output_alias or buffer_donor entry names this parameter, so no output can "
        "live in its buffer",)


def test_what_from_jax_does_not_take():
    with pytest.raises(TypeError, match=r"not function: wrap it in jax.jit"):
        from_jax(sgd, PARAMS)
    with pytest.raises(TypeError, match=r"jax.stages.Compiled, not str$"):
        from_jax("HloModule m", PARAMS)


def test_without_jax_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(ImportError, match=r"from_jax needs JAX \(pip install jax\)"):
        from_jax(STEP, PARAMS)


def test_hlo_jax_evaluates_the_call_in_the_notebook(ip):
    ip.user_ns.update(step=STEP, params=PARAMS, grads=GRADS, rest=(0.1, UNUSED),
                      options={"scale": 2.0})
    result = ip.run_line_magic("hlo_jax", "step(params, grads, *rest, **options)")
    check_outputs(result)
    assert result.donated == {0, 1}
    assert ip.run_line_magic("hlo_jax", "step(params, grads, 0.1, UNUSED, scale=2.0)"
                             .replace("UNUSED", "rest[1]")).donated == {0, 1}
    with pytest.raises(UsageError, match=r"%hlo_jax 'step': expected a call such as f\(x, y\)"):
        ip.run_line_magic("hlo_jax", "step")
    ip.user_ns["plain"] = sgd
    with pytest.raises(UsageError, match=r"%hlo_jax plain\(params\): expected a jitted "
                                         r"function .* wrap it in jax.jit"):
        ip.run_line_magic("hlo_jax", "plain(params)")


def make_modules():
    """``notebooks/modules/make_modules.py``: the JAX programs the shipped modules came from."""
    import importlib.util

    from ..conftest import REPO
    path = REPO / "notebooks" / "modules" / "make_modules.py"
    spec = importlib.util.spec_from_file_location("make_modules", path)
    made = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(made)
    return made


def tutorial_programs():
    """The JAX programs the tutorials' shipped modules were printed from, with inputs."""
    made = make_modules()
    rng = np.random.default_rng(0)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)     # noqa: E731
    return [(made.mlp_forward, (f32(8, 32), f32(32, 64), f32(64), f32(64, 10), f32(10)), ()),
            (made.attention, (f32(2, 16, 32), f32(2, 16, 32), f32(2, 16, 32)), ()),
            (made.sgd_tanh, (f32(16, 32), f32(16, 32)), (0,)),
            (made.transformer_train_step, made.transformer_inputs(rng), (0,))]


@pytest.mark.parametrize("case", range(4), ids=["mlp_forward", "attention", "sgd_tanh",
                                                "transformer_train_step"])
def test_the_tutorials_jax_programs(case):
    fn, args, donate = tutorial_programs()[case]
    jitted = jax.jit(fn, donate_argnums=donate)
    result = from_jax(jitted, *args)
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    got = result.outputs if isinstance(result.outputs, tuple) else (result.outputs,)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-5)
    donated_leaves = len(jax.tree_util.tree_leaves([args[i] for i in donate]))
    assert result.donated == frozenset(range(donated_leaves)) and result.warnings == ()


@pytest.mark.slow
def test_a_whole_model():
    """ViT-tiny's AdamW step (the function ``notebooks/modules/vit_tiny_train_step.hlo`` was
    printed from: 243 parameters, all state donated) on real arguments, against JAX."""
    made = make_modules()
    rng = np.random.default_rng(0)
    shapes = made.vit_params()
    normal = lambda scale: jax.tree_util.tree_map(           # noqa: E731
        lambda s: (scale * rng.standard_normal(s.shape)).astype(np.float32), shapes)
    args = (normal(0.05), normal(1e-3), jax.tree_util.tree_map(np.abs, normal(1e-4)),
            np.int32(3), rng.standard_normal((made.VIT_BATCH, made.VIT_IMAGE, made.VIT_IMAGE, 3),
                                             dtype=np.float32),
            rng.integers(0, made.VIT_CLASSES, made.VIT_BATCH).astype(np.int32))
    step = jax.jit(made.vit_tiny_train_step, donate_argnums=(0, 1, 2, 3))
    result = from_jax(step, *args)
    assert len(result.executable.parameter_shapes) == 243 and result.warnings == ()
    assert result.donated == frozenset(range(3 * 80 + 1))
    want = jax.tree_util.tree_leaves(jax.jit(made.vit_tiny_train_step)(*args))
    assert len(result.outputs) == len(want) == 243
    for k, (got, w) in enumerate(zip(result.outputs, want)):
        w = np.asarray(w)
        np.testing.assert_allclose(got, w, rtol=0, atol=1e-4 * max(np.abs(w).max(), 1e-3),
                                   err_msg=f"output {k}")


def test_a_typed_prng_key_is_passed_as_its_key_data():
    from hlo_magic.jax_programs import jax_program
    noisy = jax.jit(lambda key, x: x + jax.random.uniform(key, x.shape))
    key, x = jax.random.key(3), np.zeros(4, np.float32)
    program = jax_program(noisy, (key, x), {})
    np.testing.assert_array_equal(program.arguments[0], np.asarray(jax.random.key_data(key)))
    assert program.arguments[0].dtype == np.uint32
    raw = jax.random.PRNGKey(3)
    np.testing.assert_allclose(from_jax(noisy, raw, x).outputs, np.asarray(noisy(raw, x)))
