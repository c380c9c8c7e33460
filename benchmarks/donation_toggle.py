"""How long the donation panel takes to answer a toggle that makes a new donation set.

For each module (HLO text, optimised as ``runtime.compile`` does): the panel (no kernel, so
the change runs in the handler) is built with nothing optional donated, then ``--toggles``
parameters are flipped one after another, each making a donation set not seen before; each
click is timed until the panel shows the new peak (its summary), until it is fully redrawn
(peak, total allocated, rows, memory table, timeline data), and the ``reassign`` inside it
on its own. Then one flip back (a set seen
before). Wall-clock and process CPU seconds: on a shared machine the wall clock mostly says
how busy the other jobs were. ``--model-step`` adds the 249-parameter synthetic training step
of the notebook tests. Nothing is asserted.

    python benchmarks/donation_toggle.py ../shared/models/vit_tiny_train_step.hlo --model-step
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import runtime  # noqa: E402
from hlo_magic.donation import DonationModel  # noqa: E402
from hlo_magic.widgets import DONATE, KEEP, DonationPanel  # noqa: E402
from runtime.pipeline import buffer_assignment, optimise  # noqa: E402


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = clocks()
    return wall - start[0], cpu - start[1]


def measure(name: str, text: str, toggles: int, seed: int) -> None:
    plan = buffer_assignment(optimise(runtime.parse(text)))
    model = DonationModel(plan)
    panel = DonationPanel(model, background=False)
    reassigned: list[tuple[float, float]] = []
    answered: list[tuple[float, float]] = []
    shown: list[tuple[float, float]] = []
    original = model.plan
    panel.summary.observe(lambda _: shown.append(since(start)), names="value")

    def timed_plan(donated: frozenset[int]):
        start = clocks()
        try:
            return original(donated)
        finally:
            reassigned.append(since(start))

    model.plan = timed_plan                          # type: ignore[method-assign]
    numbers = sorted(model.donatable)
    random.Random(seed).shuffle(numbers)
    for number in numbers[:toggles]:
        start = clocks()
        panel.toggles[number].value = DONATE
        answered.append(since(start))
    new_sets = shown[:]
    last = numbers[min(toggles, len(numbers)) - 1]
    start = clocks()
    panel.toggles[last].value = KEEP                 # back to a set seen before
    seen = since(start)
    print(f"{name}: {len(model.parameters)} parameters, {len(model.donatable)} donatable")
    for what, times in (("new set, peak shown", new_sets), ("new set, whole panel", answered),
                        ("reassign alone", reassigned)):
        walls, cpus = [t[0] for t in times], [t[1] for t in times]
        print(f"  {what:22s} wall median {statistics.median(walls):.3f} s "
              f"(max {max(walls):.3f}), CPU median {statistics.median(cpus):.3f} s "
              f"(max {max(cpus):.3f}) over {len(times)}")
    print(f"  {'set seen before':22s} wall {seen[0]:.3f} s, CPU {seen[1]:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", type=Path, help="HLO text files")
    parser.add_argument("--model-step", action="store_true",
                        help="also the notebook tests' 249-parameter training step")
    parser.add_argument("--toggles", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    texts = [(path.name, path.read_text()) for path in args.modules]
    if args.model_step:
        from tests.notebook.hlo_texts import model_step
        texts.append(("model_step(83)", model_step(83)))
    for name, text in texts:
        measure(name, text, args.toggles, args.seed)


if __name__ == "__main__":
    main()
