"""Compile times in fresh processes: cold (empty PoCL kernel cache) and warm (the cache a
previous process left).

A child process (``--child FILE...``) imports the compiler and initialises the device (not
timed: XLA's figures do not include loading jaxlib or creating its client either), then times
``runtime.compile`` of each file in turn and prints one JSON object. ``measure`` runs a child
against a new, empty cache directory, then others against the same directory.
Usage: python benchmarks/compile_times.py FILE.hlo...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def child(files: list[str]) -> dict[str, float]:
    """Seconds per ``runtime.compile``, in a process that has loaded the compiler's code and
    found its device (a notebook after ``import``; XLA's figures start from a live client)."""
    sys.path.insert(0, str(REPO))
    import runtime
    from runtime import compiler
    from runtime.execution import executable  # noqa: F401
    from runtime.buffers import assignment  # noqa: F401
    from runtime.codegen import families, lower  # noqa: F401
    from runtime import pipeline  # noqa: F401
    runtime.get_device()
    seconds = {}
    for f in files:
        text = Path(f).read_text()
        start = time.perf_counter()
        runtime.compile(text)
        seconds[f] = time.perf_counter() - start
    return seconds


def _run_child(files: list[str], cache: Path) -> dict[str, float]:
    env = dict(os.environ, POCL_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, __file__, "--child", *files], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(files: list[str], per_process: bool = True,
            warm_repeats: int = 3) -> tuple[dict[str, float], dict[str, float]]:
    """(cold, warm) compile seconds per file; ``per_process``: one fresh process per file,
    else all files in one process each time. The warm figure is the best of
    ``warm_repeats`` fresh processes (a shared machine's busy moments are not compile time)."""
    cold: dict[str, float] = {}
    warm: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="hlo-bench-pocl-") as tmp:
        cache = Path(tmp)
        groups = [[f] for f in files] if per_process else [files]
        for group in groups:
            cold.update(_run_child(group, cache))
        for _ in range(warm_repeats):
            for group in groups:
                for f, seconds in _run_child(group, cache).items():
                    warm[f] = min(seconds, warm.get(f, seconds))
    return cold, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.files)))
        return
    cold, warm = measure(args.files)
    for f in args.files:
        print(f"{Path(f).name:40} cold {cold[f]:7.3f} s   warm {warm[f]:7.3f} s")


if __name__ == "__main__":
    main()
