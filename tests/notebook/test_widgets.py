"""The donation panel without a browser: set toggle values, assert the model and the figure."""

from __future__ import annotations

import pytest
from IPython.utils.capture import capture_output

import runtime
from hlo_magic.donation import DonationModel
from hlo_magic.widgets import DONATE, KEEP, DonationPanel
from runtime.pipeline import buffer_assignment

from .hlo_texts import ADD_MUL


@pytest.fixture
def panel() -> DonationPanel:
    return DonationPanel(DonationModel(buffer_assignment(runtime.parse(ADD_MUL))))


def packed(panel: DonationPanel) -> dict[str, tuple]:
    """The packing map's buffer rectangles: name -> (x, y, width, height, hatch)."""
    ax = panel.figure.axes[1]
    return {p.get_gid(): (p.get_x(), p.get_y(), p.get_width(), p.get_height(), p.get_hatch())
            for p in ax.patches
            if p.get_gid() and not p.get_gid().startswith("allocation-")}


def test_one_toggle_per_parameter_and_blocked_ones_say_why(panel):
    assert [t.value for t in panel.toggles.values()] == [KEEP, KEEP]
    x, y = panel.toggles[0], panel.toggles[1]
    assert not x.disabled and x.tooltip == "module says: output {0} (may-alias)"
    assert y.disabled and y.tooltip.startswith("cannot donate: no input_output_alias or "
                                               "buffer_donor entry names this parameter")
    assert panel.summary.value == "<b>peak 528 B (nothing donated)</b>"


def test_donating_redraws_the_summary_report_and_figure(panel):
    before_png = panel.plot.value
    assert packed(panel)["m"] == (2.5, 272, 2, 128, "")     # m: its own output allocation
    panel.toggles[0].value = DONATE
    assert panel.model.donated == frozenset({0}) and panel.model.peak == 400
    assert panel.change.value == "donating x saves 128 B: peak 528 B -> 400 B; runs in place"
    assert panel.summary.value == "<b>peak 528 B \u2192 400 B, \u221224 % (donating x)</b>"
    assert "donated: output {0} written in place" in panel.report.value
    rects = packed(panel)
    assert "m" not in rects and rects["x"] == (-0.5, 0, 5, 128, "///")
    assert bytes(panel.plot.value) != bytes(before_png)
    assert bytes(panel.plot.value).startswith(b"\x89PNG")
    panel.toggles[0].value = KEEP
    assert panel.model.donated == frozenset() and panel.model.peak == 528
    assert panel.change.value.startswith("keeping x costs 128 B")
    assert packed(panel)["x"][4] == ""


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
