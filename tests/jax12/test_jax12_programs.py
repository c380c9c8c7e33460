"""Programs written with Equinox, Optax, Diffrax, Flax and Haiku, as the newest JAX prints
them (``data/``, written by ``make_programs.py`` with jax 0.12.0.1 on Python 3.12: its texts
carry layouts such as ``{0,1}`` and constructs older JAX did not print), against XLA CPU's
outputs: JAX's text and XLA's optimised text, through the fusion passes and without them.
Outputs are compared by the corpus's helper, scaled by each output's largest magnitude.
Libraries: equinox 0.13.8, optax 0.2.8, diffrax 0.7.2, optimistix 0.1.0, flax 0.12.12,
dm-haiku 0.0.17;
regenerate with ``/path/to/py312/bin/python tests/jax12/make_programs.py [NAME ...]``."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import runtime

from ..corpus_data import flatten, output_differences

DATA = Path(__file__).parent / "data"
NAMES = sorted(p.name.removesuffix(".npz") for p in DATA.glob("*.npz"))
# programs whose compile and run take more than a few seconds (hundreds of kernels)
SLOW = {"diffrax_neural_ode", "eqx_gru_scan", "eqx_lstm_scan", "eqx_mlp_adam", "flax_cnn",
        "flax_transformer_block", "haiku_lstm", "optax_chain", "optax_lbfgs", "diffrax_adaptive",
        "eqx_conv_embed", "fft_and_random", "flax_bn_dropout", "haiku_bn_conv",
        "lax_scans_and_sorts", "linalg_lapack", "nnx_embed_attention", "optax_adafactor_rmsprop",
        "scatter_gather_modes", "complex_programs", "diffrax_kvaerno", "eqx_while_kinds",
        "linen_decode_cache", "linen_rnn", "optax_ctc", "optimistix_solvers", "sort_search_edges"}
# programs of many small steps that run fused only, like the slow ones (their unfused builds
# took minutes of the suite; tests/passes covers their passes unfused)
FUSED_ONLY = {"uint8_image_bits", "binning_quantize", "x64_program", "remat_sharding_barrier",
              "int_narrow_edges", "segment_edges", "orthogonal_init"}
RTOL = 1e-4
# out_9 of the transformer block is its key projection's bias gradient, zero in exact
# arithmetic (softmax ignores a shift shared by every key's score): XLA's values, up to
# 1.6e-7, are rounding noise, which no scale of their own can bound
ATOL = {"flax_transformer_block": 1e-6}
def _case(name: str, kind: str, fusion: bool):
    marks = [pytest.mark.slow] if name in SLOW else []
    return pytest.param(name, kind, fusion, marks=marks,
                        id=f"{name}-{kind}-{'fused' if fusion else 'unfused'}")


# the slow programs run fused only (what a user runs; one kernel per instruction costs
# minutes of builds for hundreds of kernels): the fast ones check the unfused path too
CASES = [_case(name, kind, fusion) for name in NAMES for kind in ("hlo", "opt.hlo")
         for fusion in (True, False) if fusion or name not in SLOW | FUSED_ONLY]


def _typed(a: np.ndarray) -> np.ndarray:
    """NumPy stores bfloat16 arrays as two-byte voids (``|V2``): view them as bfloat16."""
    return a.view(ml_dtypes.bfloat16) if a.dtype == np.dtype("V2") else a


def _load(name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    data = np.load(DATA / f"{name}.npz")

    def numbered(prefix: str) -> list[np.ndarray]:
        return [_typed(data[f"{prefix}{i}"])
                for i in range(sum(k.startswith(prefix) for k in data.files))]
    return numbered("arg_"), numbered("out_")


def test_the_programs_are_present():
    assert len(NAMES) >= 10
    assert all((DATA / f"{name}.{kind}").is_file() for name in NAMES for kind in ("hlo", "opt.hlo"))


@pytest.mark.parametrize("name,kind,fusion", CASES)
def test_program_matches_xla(name, kind, fusion):
    args, want = _load(name)
    exe = runtime.compile((DATA / f"{name}.{kind}").read_text(), fusion=fusion)
    problems = output_differences(flatten(exe(*args)), want, RTOL, ATOL.get(name, 0.0))
    assert not problems, "\n".join(problems)
