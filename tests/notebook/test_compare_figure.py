"""``compare``'s live-bytes panel: the two plans' peak labels never overprint each other or
the legend, even where both plans peak at the same step with the same bytes (tutorial 06's
weights kept and donated)."""

from __future__ import annotations

import itertools

import runtime
from hlo_magic import compare

from ..conftest import REPO
from runtime import reassign

STEP = (REPO / "notebooks" / "modules" / "transformer_train_step.hlo").read_text()


def test_the_peak_labels_of_two_plans_with_one_peak_do_not_overlap():
    plan = runtime.analyze(STEP).buffer_assignment
    kept, donated = reassign(plan, frozenset()), reassign(plan, frozenset(range(14)))
    assert (kept.peak, kept.peak_step) == (donated.peak, donated.peak_step)
    fig = compare(kept, donated, labels=("weights kept", "weights donated"))
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    live = fig.axes[0]
    renderer = canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in live.texts]
    assert len(boxes) == 2 and all("peak 309.9 KiB" in t.get_text() for t in live.texts)
    boxes.append(live.get_legend().get_window_extent(renderer))
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)
