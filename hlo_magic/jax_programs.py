"""``from_jax``: the ``%%hlo`` report and run for a JAX program, with its real arguments.

A JAX user has a jitted function and its arguments, not HLO text and one notebook variable
per parameter. ``from_jax(f, *args, **kwargs)`` lowers ``f`` as ``jax.jit`` would call it,
takes the HLO text JAX prints before optimisation (the text ``runtime.compile`` takes from a
``Lowered``, with its Python callbacks), and runs it on the arguments: the pytree leaves of
the call's non-static arguments, minus the ones JAX pruned as unused, are the entry's
parameters in order. A ``Lowered`` is taken as it is, and a ``Compiled`` gives XLA's
optimised text (its Python callbacks cannot run: the lowering is gone); both are called with
the non-static arguments only, as JAX calls them.

Donation comes from ``donate_argnums``/``donate_argnames``: JAX marks each donated leaf
(``args_info``), and the text's ``input_output_alias`` says which outputs may take those
buffers; a donated leaf no output can take is a warning in the report (JAX warns too). The
caller's arrays are copied to the device, so donating never deletes them.

jax is imported only here, when called; JAX's own private fields are read in one place each
(``_dynamic``, ``_kept``) with a checked fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import runtime

from .outcome import make_result
from .result import HloResult

DONATION = "donate_argnums"     # how the report names the donation JAX was asked for


@dataclass(frozen=True)
class JaxProgram:
    """What ``from_jax`` compiles and runs: the source (a ``Lowered``, or optimised text),
    the run's arguments in entry-parameter order and the donated parameter numbers."""

    source: Any
    arguments: list
    donated: frozenset[int]


def from_jax(fn_or_lowered: Any, *args: Any, **kwargs: Any) -> HloResult:
    """The report ``%%hlo`` gives, for a jitted function, a ``jax.stages.Lowered`` or a
    ``jax.stages.Compiled`` run on ``args``/``kwargs`` (the function's own arguments; the
    non-static ones only for a ``Lowered`` or ``Compiled``), donating what JAX donates.

    Example: ``from_jax(jax.jit(step, donate_argnums=0), params, batch)``."""
    return report(jax_program(fn_or_lowered, args, kwargs))


def report(program: JaxProgram, *, device=None, alignment: int | None = None,
           progress=None, **display: Any) -> HloResult:
    """Compile ``program`` (kernels built at the run, telling ``progress``) and run it;
    ``display`` are ``make_result``'s display settings (``%hlo_jax`` passes its own)."""
    exe = runtime.compile(program.source, device=device, alignment=alignment, lazy=True)
    exe.progress = progress
    return make_result(exe, program.donated, entry_arguments(exe, program.arguments),
                       named=program.donated, named_by=DONATION, **display)


def jax_program(fn_or_lowered: Any, args: tuple, kwargs: dict) -> JaxProgram:
    """Lower (if needed) and line the call's arguments up with the entry's parameters."""
    jax = _jax()
    problem = not_a_program(fn_or_lowered)
    if problem:
        raise TypeError(problem)
    if isinstance(fn_or_lowered, jax.stages.Compiled):
        staged, source = fn_or_lowered, fn_or_lowered.as_text()
    elif isinstance(fn_or_lowered, jax.stages.Lowered):
        staged = source = fn_or_lowered
    else:
        staged = source = fn_or_lowered.lower(*args, **kwargs)
        args, kwargs = _dynamic(fn_or_lowered, args, kwargs)
    leaves, tree = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)))
    if tree != staged.in_tree:
        raise runtime.HloArgumentError(
            f"the arguments have the structure {tree}, but the program was lowered for "
            f"{staged.in_tree} (a Lowered or Compiled takes the non-static arguments only)")
    avals = jax.tree_util.tree_leaves(staged.in_avals)
    donated = [info.donated for info in jax.tree_util.tree_leaves(staged.args_info)]
    kept = _kept(staged, len(leaves))
    values = [_host_value(jax, leaves[i], avals[i], donated[i]) for i in kept]
    return JaxProgram(source, values, frozenset(n for n, i in enumerate(kept) if donated[i]))


def _host_value(jax: Any, leaf: Any, aval: Any, donated: bool) -> np.ndarray:
    """A leaf as the numpy array of its parameter: in the aval's dtype (JAX converts a
    Python float to f32, or an f64 array without x64), a typed PRNG key as its key data;
    a donated leaf gets its own copy, as the run may pass the same array again elsewhere."""
    if jax.dtypes.issubdtype(aval.dtype, jax.dtypes.prng_key):
        return np.array(jax.random.key_data(leaf), copy=donated or None)
    return np.array(leaf, dtype=aval.dtype, copy=donated or None)


def entry_arguments(exe: runtime.Executable, values: list) -> list:
    """JAX passes a program with very many arguments as one tuple (``tuple_args``)."""
    shapes = exe.parameter_shapes
    if len(shapes) == 1 and shapes[0].is_tuple and len(values) != 1:
        return [tuple(values)]
    return values


def not_a_program(obj: Any) -> str | None:
    """Why ``obj`` is not something ``from_jax`` takes (None when it is one)."""
    try:
        jax = _jax()
    except ImportError as error:
        return str(error)
    jitted = callable(obj) and all(callable(getattr(obj, m, None)) for m in ("lower", "trace"))
    if jitted or isinstance(obj, (jax.stages.Compiled, jax.stages.Lowered)):
        return None
    return ("expected a jitted function (jax.jit(f)), a jax.stages.Lowered or a "
            f"jax.stages.Compiled, not {type(obj).__name__}"
            + (": wrap it in jax.jit" if callable(obj) else ""))


def _jax():
    try:
        import jax
    except ImportError:
        raise ImportError("from_jax needs JAX (pip install jax); without it, paste the text "
                          "jax.jit(f).lower(...).as_text(dialect='hlo') prints into %%hlo"
                          ) from None
    return jax


def _dynamic(jitted: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The call's arguments without the static ones (``static_argnums``/``argnames``), which
    JAX bakes into the program instead of passing."""
    info = getattr(jitted, "_jit_info", None)
    numbers = {n % len(args) for n in getattr(info, "static_argnums", ()) if -len(args) <= n
               < len(args)}
    names = set(getattr(info, "static_argnames", ()))
    return (tuple(a for k, a in enumerate(args) if k not in numbers),
            {k: v for k, v in kwargs.items() if k not in names})


def _kept(staged: Any, leaves: int) -> list[int]:
    """The argument leaves that are entry parameters, in order: JAX drops unused ones
    (``keep_unused=False``) and records which it kept on the lowering or the executable."""
    lowering = getattr(staged, "_lowering", None)
    kept = getattr(lowering, "compile_args", {}).get("kept_var_idx") if lowering else \
        getattr(getattr(staged, "_executable", None), "_kept_var_idx", None)
    return sorted(kept) if kept is not None else list(range(leaves))
