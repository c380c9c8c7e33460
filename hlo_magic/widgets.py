"""The donation panel: a thin ipywidgets view over ``DonationModel``.

One row per entry parameter with a keep/donate toggle (disabled, with the reason as its
tooltip, where no output can live in the parameter's buffer), a summary label, a line that
says what the last change did, the report's parameter and memory tables, and the memory
figure (an ``Image`` widget whose PNG is replaced, so nothing flickers and nothing is cleared).
A toggle only updates the model and redraws: buffer assignment is recomputed (cheap), the
device is never touched. Handlers run inside the ``messages`` Output's ``capture``, so an
error shows in the panel (through IPython's ``showtraceback``, where our short
``_render_traceback_`` applies) instead of JupyterLab's log console.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING


import ipywidgets as w

from .donation import DonationModel, ParameterInfo
from .formatting import format_bytes
from .render import to_html
from .report import memory_table, parameter_table
from .timeline import figure_png, plot_memory

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KEEP, DONATE = "keep", "donate"


class DonationPanel:
    """``DonationPanel(model)``; display it, or read ``panel.model`` and ``panel.figure``."""

    def __init__(self, model: DonationModel, *, max_buffers: int = 40) -> None:
        self.model = model
        self.max_buffers = max_buffers
        self.toggles: dict[int, w.ToggleButtons] = {}
        rows = [self._row(p) for p in model.parameters]
        self.summary = w.HTML()
        self.change = w.Label(value="toggle a parameter to see what donating it does")
        self.report = w.HTML()
        self.messages = w.Output()
        self.plot = w.Image(format="png", layout=w.Layout(max_width="100%"))
        self.figure: Figure | None = None
        title = html.escape(model.assignment.module.name)
        self.root = w.VBox([w.HTML(f"<b>Donation: {title}</b>"), *rows,
                            self.summary, self.change, self.messages, self.report, self.plot])
        self._on_toggle = self.messages.capture(clear_output=True)(self._toggled)
        for toggle in self.toggles.values():
            toggle.observe(self._on_toggle, names="value")
        self.redraw()

    def _row(self, param: ParameterInfo) -> w.HBox:
        label = w.HTML(f"<code>{param.number}: {html.escape(param.name)}</code> "
                       f"{html.escape(param.shape_text)} "
                       f"({format_bytes(param.size)})",
                       layout=w.Layout(width="22em", flex="0 0 auto"))
        toggle = w.ToggleButtons(options=[KEEP, DONATE],
                                 value=DONATE if param.number in self.model.donated else KEEP,
                                 style={"button_width": "5.5em"},
                                 layout=w.Layout(flex="0 0 auto", width="auto"))
        if param.blocked is not None:
            toggle.disabled = True
            toggle.tooltip = f"cannot donate: {param.blocked}"
        elif param.must_alias:
            toggle.disabled = True
            toggle.tooltip = "must-alias: every run donates it"
        else:
            toggle.tooltip = f"module says: {param.declared()}"
        self.toggles[param.number] = toggle
        reason = w.Label(value=toggle.tooltip, layout=w.Layout(flex="1 1 0", min_width="0"))
        return w.HBox([label, toggle, reason], layout=w.Layout(flex_flow="row nowrap",
                                                               align_items="center"))

    def _toggled(self, change: dict) -> None:
        number = next(n for n, t in self.toggles.items() if t is change["owner"])
        self.change.value = self.model.set_donated(number, change["new"] == DONATE)
        self.redraw()

    def redraw(self) -> None:
        """Summary, report tables and figure for the model's current plan."""
        model = self.model
        self.summary.value = f"<b>{model.summary()}</b>"
        self.report.value = to_html([
            parameter_table(model.parameters, model.donated, model.assignment, None),
            memory_table(model.assignment)])
        self.figure = figure = plot_memory(model.assignment, max_buffers=self.max_buffers)
        self.plot.value = figure_png(figure)

    def _repr_mimebundle_(self, **kwargs) -> dict:
        return self.root._repr_mimebundle_(**kwargs)
