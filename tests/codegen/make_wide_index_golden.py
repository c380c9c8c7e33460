"""Regenerate ``data/wide_index_golden.npz``: XLA CPU's results for ``wide_index_cases``.

Needs jax (with 64-bit types enabled, so s64 and u64 indices reach XLA unnarrowed); the tests
only read the file. Run from the repository root:
``python tests/codegen/make_wide_index_golden.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "benchmarks"))

from wide_index_cases import CASES  # noqa: E402
from xla_cpu import compile_hlo  # noqa: E402

jax.config.update("jax_enable_x64", True)


def main() -> None:
    out: dict[str, np.ndarray] = {}
    for name, (text, runs) in CASES.items():
        program = compile_hlo(text)
        for r, args in enumerate(runs):
            results = program.executable.execute([jax.device_put(a) for a in args])
            for k, value in enumerate(results):
                out[f"{name}/{r}/{k}"] = np.asarray(value)
    path = Path(__file__).parent / "data" / "wide_index_golden.npz"
    np.savez_compressed(path, **out)
    print(f"wrote {len(out)} arrays to {path}")


if __name__ == "__main__":
    main()
