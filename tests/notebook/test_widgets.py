"""The donation panel without a browser: set toggle values, press its buttons, assert the
model, the rows, the summary and the interactive timeline's data."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from IPython.utils.capture import capture_output

import runtime
from hlo_magic.donation import DonationModel
from hlo_magic.widgets import BUSY, DONATE, KEEP, DonationPanel
from runtime.pipeline import buffer_assignment

from .hlo_texts import ADD_MUL, model_step


@pytest.fixture
def panel() -> DonationPanel:
    return DonationPanel(DonationModel(buffer_assignment(runtime.parse(ADD_MUL))))


def drawn(panel: DonationPanel) -> dict[str, tuple[int, str]]:
    """The timeline's buffers as sent to the browser: name -> (allocation, note)."""
    data = panel.timeline.data
    columns = np.frombuffer(panel.timeline.columns).reshape(len(data.numeric), -1)
    assert (columns == data.numeric).all() and panel.timeline.meta["names"] == data.names
    return {n: (int(a), note) for n, a, note in zip(data.names, data.column("allocation"),
                                                    data.notes)}


def test_one_toggle_per_parameter_and_blocked_ones_say_why(panel):
    assert [t.value for t in panel.toggles.values()] == [KEEP, KEEP]
    x, y = panel.toggles[0], panel.toggles[1]
    assert not x.disabled and x.tooltip == "module says: output {0} (may-alias)"
    assert y.disabled and y.tooltip.startswith("cannot donate: no input_output_alias or "
                                               "buffer_donor entry names this parameter")
    assert panel.statuses[1].value.startswith("cannot alias: no input_output_alias")
    assert panel.summary.value == "<b>peak 528 B, total allocated 528 B (nothing donated)</b>"


def test_donating_redraws_the_summary_rows_and_timeline(panel):
    assert drawn(panel)["m"] == (3, "")                         # m: its own output allocation
    panel.toggles[0].value = DONATE
    assert panel.model.donated == frozenset({0}) and panel.model.peak == 400
    assert panel.sentence == (
        "donating x saves 128 B of peak (528 B -> 400 B) and 128 B of total allocated "
        "(528 B -> 400 B); output {0} is live at the peak (step 4, t) in its own buffer; "
        "runs in place")
    assert panel.summary.value == ("<b>peak 528 B \u2192 400 B, \u221224 %; total allocated "
                                   "528 B \u2192 400 B, \u221224 % (donating x)</b>")
    assert panel.statuses[0].value == "donated: output {0} written in place"
    assert "m" not in drawn(panel) and drawn(panel)["x"] == (0, "also holds: m")
    assert panel.timeline.assignment is panel.model.assignment
    panel.toggles[0].value = KEEP
    assert panel.model.donated == frozenset() and panel.model.peak == 528
    assert panel.sentence.startswith("keeping x costs 128 B of peak")
    assert drawn(panel)["m"] == (3, "")


def test_donate_all_and_none_set_every_toggle(panel):
    panel.donate_all.click()
    assert panel.model.donated == frozenset({0}) and panel.toggles[0].value == DONATE
    assert panel.sentence.startswith("donating all 1 donatable parameter saves 128 B")
    panel.donate_none.click()
    assert panel.model.donated == frozenset() and panel.toggles[0].value == KEEP
    assert panel.sentence.startswith("keeping every optional parameter costs 128 B")


def test_a_background_panel_answers_at_once_and_says_it_is_busy():
    model = DonationModel(buffer_assignment(runtime.parse(ADD_MUL)))
    release = threading.Event()
    real = model.set_donated

    def slow(number, donate):
        release.wait(10)
        return real(number, donate)
    model.set_donated = slow
    panel = DonationPanel(model, background=True)
    panel.toggles[0].value = DONATE              # returns before the plan is made
    assert panel.busy.value == BUSY and model.donated == frozenset()
    release.set()
    panel.wait()
    assert model.donated == frozenset({0}) and panel.busy.value == ""
    assert panel.statuses[0].value == "donated: output {0} written in place"


def test_errors_on_the_worker_show_in_the_panel():
    model = DonationModel(buffer_assignment(runtime.parse(ADD_MUL)))
    panel = DonationPanel(model, background=True)

    def fail(number, donate):
        raise runtime.HloArgumentError("the model refused")
    model.set_donated = fail
    panel.toggles[0].value = DONATE
    panel.wait()
    assert panel.messages.outputs[-1]["text"] == "HloArgumentError: the model refused\n"
    assert panel.busy.value == ""


def test_a_toggle_on_a_model_sized_module_reuses_plans_seen_before():
    model = DonationModel(runtime.compile(model_step(), lazy=True).buffer_assignment)
    panel = DonationPanel(model)
    assert len(panel.toggles) == 249 and panel.rows.layout.overflow == "auto"
    panel.toggles[0].value = DONATE
    panel.toggles[0].value = KEEP
    plans = dict(model._plans)
    panel.toggles[0].value = DONATE
    assert model._plans == plans and model.donated == frozenset({0})     # no new plan made
    assert model.assignment is plans[frozenset({0})]


def test_the_panel_displays_as_its_root_widget(panel):
    bundle = panel._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.root.model_id


def test_handler_errors_show_in_the_panel_under_ipython(panel, shell, monkeypatch):
    def fail(number, donate):
        raise runtime.HloArgumentError("the model refused")
    monkeypatch.setattr(panel.model, "set_donated", fail)
    monkeypatch.setattr("ipywidgets.widgets.widget_output.get_ipython", lambda: shell)
    with capture_output() as cap:
        panel.toggles[0].value = DONATE
    assert "HloArgumentError: the model refused" in cap.stdout
    assert "Traceback" not in cap.stdout


def test_handler_errors_propagate_in_plain_python(panel, monkeypatch):
    def fail(number, donate):
        raise runtime.HloArgumentError("the model refused")
    monkeypatch.setattr(panel.model, "set_donated", fail)
    monkeypatch.setattr("ipywidgets.widgets.widget_output.get_ipython", lambda: None)
    with pytest.raises(runtime.HloArgumentError, match="the model refused"):
        panel.toggles[0].value = DONATE


def test_a_cell_result_opens_the_panel_at_its_donation(ip):
    result = ip.run_cell_magic("hlo", "--donate 0 -q -o r", ADD_MUL) or ip.user_ns["r"]
    panel = result.panel()
    assert panel.model.donated == frozenset({0})
    assert panel.toggles[0].value == DONATE and panel.model.peak == 400


def test_clicks_queued_behind_a_slow_change_are_not_undone_on_screen():
    model = DonationModel(runtime.compile(model_step(3), lazy=True).buffer_assignment)
    release = threading.Event()
    real = model.set_donated

    def slow(number, donate):
        release.wait(10)
        return real(number, donate)
    model.set_donated = slow
    panel = DonationPanel(model, background=True)
    seen = []
    panel.toggles[3].observe(lambda change: seen.append(change["new"]), names="value")
    panel.toggles[0].value = DONATE
    panel.toggles[3].value = DONATE               # queued while the first one is replanned
    release.set()
    panel.wait()
    assert model.donated == frozenset({0, 3})
    assert seen == [DONATE] and panel.toggles[0].value == DONATE
