"""The donation panel: a thin ipywidgets view over ``DonationModel``.

One row per entry parameter with a keep/donate toggle (disabled, with the reason as its
tooltip, where no output can live in the parameter's buffer) and what this plan does with its
buffer; "donate all" and "donate none"; a summary of the peak and the total allocated (a
donation may shrink one and not the other), a line that says what the last change did and why,
the memory table and the interactive timeline of the current plan (``MemoryTimeline``, whose
data is replaced, so nothing flickers). A change replans the module (``reassign``, no device:
about 0.16 s of CPU for ViT-tiny's training step and 0.09 s for a 250-parameter test module
on a 2-core AMD EPYC, the redraw under 0.1 s more, after the new peak is shown; a plan seen
before is kept): in a kernel that work runs on a worker thread, one change after another,
while the panel says "reassigning"; so a click is answered at once and the kernel stays free.
The toggles are set back to the model's state only after the last queued change, so clicks
made meanwhile are not undone on screen. Without a kernel (tests, scripts) it runs in the
handler. Errors show in the ``messages`` Output: in the handler through its ``capture`` (so
IPython's ``showtraceback`` and our short ``_render_traceback_`` apply), from the worker as
the error's own text.
"""

from __future__ import annotations

import html
import threading
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable


import ipywidgets as w

from runtime import HloError
from runtime.gc_pause import gc_paused

from .donation import DonationModel, ParameterInfo, outputs_by_parameter
from .fallback import StaticCopy, display_with_static_copy
from .formatting import format_bytes
from .render import to_html
from .report import Table, memory_table, parameter_status
from .timeline_widget import MemoryTimeline

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KEEP, DONATE = "keep", "donate"
BUSY = "\u23f3 reassigning\u2026"
CHANGE_CLASS = "hlo-donation-change"     # the line saying what the last change did


class DonationPanel:
    """``DonationPanel(model)``; display it, or read ``panel.model`` and ``panel.timeline``.
    ``background``: replan on a worker thread (default: when running in a kernel)."""

    def __init__(self, model: DonationModel, *, max_buffers: int = 40, max_rows: int = 25,
                 background: bool | None = None) -> None:
        self.model = model
        self.max_buffers = max_buffers
        self.max_rows = max_rows           # parameter rows in the static copy
        self.background = _in_kernel() if background is None else background
        self._worker = ThreadPoolExecutor(1) if self.background else None
        self._pending: list[Future] = []
        self._params = {p.number: p for p in model.parameters}
        self.toggles: dict[int, w.ToggleButtons] = {}
        self.statuses: dict[int, w.Label] = {}
        rows = [self._row(p) for p in model.parameters]
        self.donate_all = w.Button(description="donate all", layout=w.Layout(width="auto"),
                                   disabled=not model.donatable,
                                   tooltip="donate every parameter an output can live in")
        self.donate_none = w.Button(description="donate none", layout=w.Layout(width="auto"),
                                    disabled=not model.donatable,
                                    tooltip="keep every parameter that is not must-alias")
        self.busy = w.Label(value="")
        self.summary = w.HTML()
        # HTML, not a Label: a Label keeps to one line and cuts a model's long sentence (the
        # "why" at its end) with an ellipsis
        self.change = w.HTML().add_class(CHANGE_CLASS)
        self.sentence = ""
        self._say("toggle a parameter to see what donating it does")
        self.report = w.HTML()
        self.messages = w.Output()
        self.timeline = MemoryTimeline(model.assignment, max_buffers=max_buffers)
        title = html.escape(model.assignment.module.name)
        self.rows = w.VBox(rows, layout=w.Layout(max_height="24em", overflow="auto",
                                                 flex="0 0 auto"))
        self.root = w.VBox([w.HTML(f"<b>Donation: {title}</b>"),
                            w.HBox([self.donate_all, self.donate_none, self.busy]),
                            self.rows, self.summary, self.change, self.messages, self.report,
                            self.timeline])
        self._local = threading.local()     # .syncing: this thread sets toggles, not a click
        self._on_toggle = self.messages.capture(clear_output=True)(self._toggled)
        for toggle in self.toggles.values():
            toggle.observe(self._clicked, names="value")
        self.donate_all.on_click(self.messages.capture(clear_output=True)(
            lambda _: self._request(lambda: self.model.donate_all(True))))
        self.donate_none.on_click(self.messages.capture(clear_output=True)(
            lambda _: self._request(lambda: self.model.donate_all(False))))
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
        status = w.Label(value="", layout=w.Layout(flex="1 1 0", min_width="0"))
        self.statuses[param.number] = status
        return w.HBox([label, toggle, status], layout=w.Layout(flex_flow="row nowrap",
                                                               align_items="center",
                                                               flex="0 0 auto"))

    def _clicked(self, change: dict) -> None:
        if not getattr(self._local, "syncing", False):
            self._on_toggle(change)

    def _toggled(self, change: dict) -> None:
        number = next(n for n, t in self.toggles.items() if t is change["owner"])
        donate = change["new"] == DONATE
        self._request(lambda: self.model.set_donated(number, donate))

    def _request(self, change: Callable[[], str]) -> None:
        """Apply ``change`` (a model call returning the sentence) and redraw: at once without
        a worker, else queued on it while the panel says it is busy."""
        if self._worker is None:
            self._apply(change)
            return
        self.busy.value = BUSY
        self._pending.append(self._worker.submit(self._apply_in_background, change))

    def _apply(self, change: Callable[[], str], queued: bool = False) -> None:
        # the sentence and the new peak go out first, the collector paused until they have:
        # a replan leaves a plan's worth of objects (kept, not garbage) and the collection
        # they trigger can traverse every plan kept so far (ViT-tiny's: 0.16-0.21 s)
        with gc_paused():
            self._say(change())
            self._show_summary()
        # a queued change (this one running, more waiting) leaves the toggles as clicked
        self.redraw(sync_toggles=not queued or sum(not f.done() for f in self._pending) <= 1)

    def _apply_in_background(self, change: Callable[[], str]) -> None:
        try:
            self._apply(change, queued=True)
        except HloError as error:
            self.messages.append_stderr(f"{type(error).__name__}: {error}\n")
        except Exception:                    # our bug: its whole traceback, in the panel
            self.messages.append_stderr(traceback.format_exc())
        finally:
            self._pending = [f for f in self._pending if not f.done()]
            if len(self._pending) <= 1:
                self.busy.value = ""

    def wait(self) -> None:
        """Block until every queued change is applied (tests, scripts)."""
        for future in list(self._pending):
            future.result()

    def redraw(self, sync_toggles: bool = True) -> None:
        """Toggles, summary, statuses, memory table and timeline for the model's current plan
        (each widget sends only a value that changed)."""
        model = self.model
        if sync_toggles:
            self._local.syncing = True          # setting a toggle here is not a click
            try:
                for number, toggle in self.toggles.items():
                    toggle.value = DONATE if number in model.donated else KEEP
            finally:
                self._local.syncing = False
        self._show_summary()
        outputs_of = outputs_by_parameter(model.assignment)
        for number in self.toggles:
            self.statuses[number].value = parameter_status(self._params[number], model.donated,
                                                           model.assignment, None, outputs_of)
        self.report.value = to_html([memory_table(model.assignment)])
        if self.timeline.assignment is not model.assignment:
            self.timeline.show(model.assignment)

    def _say(self, sentence: str) -> None:
        """Show what the last change did (``sentence``, plain text), wrapped to the panel."""
        self.sentence = sentence
        self.change.value = f'<div style="line-height:1.4">{html.escape(sentence)}</div>'

    def _show_summary(self) -> None:
        self.summary.value = f"<b>{html.escape(self.model.summary())}</b>"

    def static_copy(self) -> StaticCopy:
        """The panel as it stands, without buttons: summary, last change, each parameter's
        status (the first ``max_rows``), the memory table and the timeline's figure."""
        model = self.model
        rows = [(str(p.number), p.name, p.shape_text, format_bytes(p.size),
                 self.toggles[p.number].value, self.statuses[p.number].value)
                for p in model.parameters]
        table = Table("Parameters", ("#", "name", "shape", "size", "choice", "this plan"),
                      rows[:self.max_rows], omitted=max(0, len(rows) - self.max_rows),
                      omitted_what="parameters")
        body = (f"<b>Donation: {html.escape(model.assignment.module.name)}</b><br>"
                f"{self.summary.value}<br>{html.escape(self.sentence)}"
                + to_html([table, memory_table(model.assignment)]))
        return StaticCopy(self.timeline.static_id, body, model.summary(), self.timeline.png())

    def _repr_mimebundle_(self, **kwargs) -> dict:
        return self.root._repr_mimebundle_(**kwargs)

    def _ipython_display_(self) -> None:
        display_with_static_copy(self.static_copy(), {**self.root._repr_mimebundle_(),
                                                      "text/plain": self.model.summary()})


def _in_kernel() -> bool:
    """Whether a Jupyter kernel runs this (a worker thread's widget updates reach a browser)."""
    from IPython import get_ipython
    return getattr(get_ipython(), "kernel", None) is not None
