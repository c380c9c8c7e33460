"""Regenerate ``data/eqx_error_if.*`` and ``data/diffrax_throw.*``: Equinox and Diffrax
programs whose error checks JAX lowers to ``jax.pure_callback`` custom calls
(``xla_ffi_python_cpu_callback``) inside a ``conditional`` branch that valid input never
takes.

Needs Python 3.12 with jax 0.12, equinox and diffrax (``/work/venv312``); the tests never
import them, they read what this writes. For each program: the text JAX prints
(``jax.jit(f).lower(*args).as_text('hlo')``, ``NAME.hlo``), the module XLA optimised
(``.compile()``, printed with its large constants: ``as_text()`` elides them as ``{...}``,
``NAME.optimised.hlo``), and ``NAME.npz`` with valid inputs, XLA's outputs for them and
inputs that make the error branch run. Run from the repository root:
``/work/venv312/bin/python tests/custom_calls/make_jax_callbacks.py``.
"""

from __future__ import annotations

from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlib._hlo as hlo
import numpy as np

jax.config.update("jax_platforms", "cpu")

OUT = Path(__file__).parent / "data"


def error_if(x):
    """``eqx.error_if``: sqrt of x, refusing negative entries."""
    checked = eqx.error_if(x, x < 0, "negative input")
    return jnp.sqrt(checked) * 2


def decay(y0, k):
    """dy/dt = -k y over [0, 1] with Tsit5 and an adaptive step; ``throw=True`` (the default)
    checks the solve's result code through a callback, which fails past ``max_steps``."""
    term = diffrax.ODETerm(lambda t, y, args: -args * y)
    solution = diffrax.diffeqsolve(
        term, diffrax.Tsit5(), t0=0.0, t1=1.0, dt0=0.1, y0=y0, args=k,
        stepsize_controller=diffrax.PIDController(rtol=1e-5, atol=1e-6),
        saveat=diffrax.SaveAt(t1=True), max_steps=16)
    return solution.ys


PROGRAMS = {
    "eqx_error_if": (error_if, (np.array([0.0, 1.0, 2.25, 9.0], np.float32),),
                     (np.array([1.0, -1.0, 4.0, 0.0], np.float32),)),
    "diffrax_throw": (decay, (np.array([1.0, 2.0, 3.0], np.float32), np.float32(0.5)),
                      (np.array([1.0, 2.0, 3.0], np.float32), np.float32(500.0))),
}


def optimised_text(compiled) -> str:
    options = hlo.HloPrintOptions.short_parsable()
    options.print_large_constants = True
    return compiled.runtime_executable().hlo_modules()[0].to_string(options)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, (fn, valid, invalid) in PROGRAMS.items():
        lowered = jax.jit(fn).lower(*valid)
        compiled = lowered.compile()
        text = lowered.as_text("hlo")
        optimised = optimised_text(compiled)
        assert "xla_ffi_python_cpu_callback" in text and "{...}" not in optimised
        (OUT / f"{name}.hlo").write_text(text)
        (OUT / f"{name}.optimised.hlo").write_text(optimised)
        outputs = np.asarray(compiled(*valid))
        try:
            compiled(*invalid)
        except Exception as error:          # XLA's run fails in the callback: what we mimic
            lines = [line for line in str(error).splitlines() if "EquinoxRuntimeError:" in line]
            failure = lines[-1].strip() if lines else str(error).splitlines()[0]
        else:
            raise AssertionError(f"{name}: the invalid inputs did not fail")
        np.savez(OUT / f"{name}.npz", **{f"valid_{k}": v for k, v in enumerate(valid)},
                 **{f"invalid_{k}": v for k, v in enumerate(invalid)}, xla=outputs,
                 xla_failure=np.array(failure), jax_version=np.array(jax.__version__))
        print(f"{name}: {len(text)} + {len(optimised)} characters; invalid input: {failure}")


if __name__ == "__main__":
    main()
