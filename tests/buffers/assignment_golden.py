"""Golden buffer assignments of the corpus: one hash of the full assignment dump per module.

The dump is ``BufferAssignment.to_text()`` (every allocation, value, offset, size, live range,
inserted copy, the schedule and the statistics) and the text of the assigned module of each corpus ``.hlo`` and ``.opt.hlo`` after
the optimisation passes with fusion on, for each device kind's target, at 128-byte alignment.
A refactor must leave them byte-for-byte the same; a deliberate change to fusion, scheduling
or aliasing regenerates the file and says so in its commit:

    PYTHONPATH=$PWD python -m tests.buffers.assignment_golden --write       # regenerate
    PYTHONPATH=$PWD python -m tests.buffers.assignment_golden --dump DIR    # texts, to diff
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import runtime
from runtime.buffers.assignment import BufferAssignment
from runtime.pipeline import run
from runtime.target import Target

from ..corpus_data import CORPUS, load_index

GOLDEN = Path(__file__).with_name("data") / "assignment_golden.json"
KINDS = ("cpu", "gpu")
ALIGNMENT = 128


def corpus_files() -> list[str]:
    return [entry["files"][key] for entry in load_index()
            for key in ("hlo", "opt_hlo") if entry["files"].get(key)]


def assignment(name: str, kind: str) -> BufferAssignment:
    module = runtime.parse((CORPUS / name).read_text())
    return run(module, Target.for_kind(kind), alignment=ALIGNMENT)


def dump(name: str, kind: str) -> str:
    """The assignment's report, then the assigned module (fusions and copies included)."""
    ba = assignment(name, kind)
    return ba.to_text() + "\n" + ba.module.to_text()


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def key(name: str, kind: str) -> str:
    return f"{name}@{kind}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN.name}")
    parser.add_argument("--dump", type=Path, help="write each assignment's text into this folder")
    args = parser.parse_args()
    hashes: dict[str, str] = {}
    for name in corpus_files():
        for kind in KINDS:
            text = dump(name, kind)
            hashes[key(name, kind)] = digest(text)
            if args.dump:
                args.dump.mkdir(parents=True, exist_ok=True)
                (args.dump / f"{key(name, kind)}.txt").write_text(text)
    if args.write:
        GOLDEN.write_text(json.dumps(hashes, indent=0, sort_keys=True) + "\n")
    old = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}
    changed = sorted(k for k in hashes if old.get(k) != hashes[k])
    print(f"{len(hashes)} assignments, {len(changed)} differ from {GOLDEN.name}: {changed}")


if __name__ == "__main__":
    main()
