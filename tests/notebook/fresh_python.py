"""Running a snippet in a fresh interpreter, for what one process's imports would hide."""

from __future__ import annotations

import subprocess
import sys


def run_python(code: str) -> list[str]:
    """The snippet's stdout lines; its failure fails the test with its stderr."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()
