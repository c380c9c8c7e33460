"""The timeline's front end (``hlo_magic/static/timeline.js``) in headless Chromium without
JupyterLab: a page renders it with a stand-in for the widget model holding the data Python
computed for a transformer training step (and the annotated view of the same plan, linked),
and the test zooms, pans, finds, clicks, hovers, saves the figure and follows the links."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import hlo_magic
import runtime
from hlo_magic.annotated import annotate
from hlo_magic.formatting import format_bytes
from hlo_magic.timeline_data import timeline_data
from runtime.pipeline import run as run_pipeline

from ..conftest import CORPUS
from .conftest import CHROMIUM

pytestmark = pytest.mark.browser

MODULE = Path(__file__).with_name("data") / "train_step.hlo"
STATIC = Path(hlo_magic.__file__).parent / "static"
VIEW = "document.getElementById('out').hloTimeline"
LINK = "k1"

# A stand-in for the anywidget model: get/set/save_changes/on/off, and `changed` records what
# the front end sent back to Python.
PAGE = """<!doctype html><html><head><style>{css}</style></head>
<body style="width:1200px;margin:0">
<div class="hlo-magic-static hlo-magic-static-0123abcd" id="copy">the static copy</div>
<div id="out"></div>{annotated}<script type="module">
const raw = Uint8Array.from(atob("{columns}"), (c) => c.charCodeAt(0));
const state = {{ meta: {meta}, columns: new DataView(raw.buffer), selected: "", height: 460,
                 static_id: "0123abcd", link: "{link}" }};
const handlers = {{}};
window.changed = [];
window.model = {{
  get: (key) => state[key],
  set: (key, value) => {{ state[key] = value; window.changed.push([key, value]); }},
  save_changes() {{}},
  on(event, f) {{ (handlers[event] ||= []).push(f); }},
  off() {{}},
  fromPython(key, value) {{
    state[key] = value;
    (handlers["change:" + key] || []).forEach((f) => f());
  }},
}};
const source = "{js}";
const module = await import("data:text/javascript;base64," + source);
module.default.render({{ model: window.model, el: document.getElementById("out") }});
window.ready = true;
</script></body></html>"""


@pytest.fixture(scope="module")
def plan():
    return run_pipeline(runtime.parse(MODULE.read_text()), alignment=128)


def open_page(request, plan):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed")
    browser = request.getfixturevalue("browser")
    data = timeline_data(plan)
    html = PAGE.format(css=(STATIC / "timeline.css").read_text(), link=LINK,
                       annotated=annotate(plan, link=LINK).to_html(),
                       columns=base64.b64encode(data.numeric.tobytes()).decode(),
                       meta=json.dumps(data.meta()),
                       js=base64.b64encode((STATIC / "timeline.js").read_bytes()).decode())
    page = browser.new_page(viewport={"width": 1250, "height": 700}, accept_downloads=True)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_content(html)
    page.wait_for_function("window.ready === true && "
                           "document.querySelector('.hlo-tl-status').textContent !== ''")
    request.addfinalizer(page.close)
    request.addfinalizer(lambda: not errors or pytest.fail(f"errors on the page: {errors}"))
    return page


@pytest.fixture
def page(plan, request):
    return open_page(request, plan)


def view(page, expression: str):
    """``expression`` over the front end's state, read after the next frame is drawn."""
    return page.evaluate(f"new Promise((done) => requestAnimationFrame(() => "
                         f"requestAnimationFrame(() => {{ const v = {VIEW}; "
                         f"done({expression}); }})))")


def test_status_and_overview_name_the_peak_and_what_is_live_there(page, plan):
    status = page.inner_text(".hlo-tl-status")
    assert status.startswith(f"{len([b for b in plan.buffers() if b.size])} buffers, "
                             f"{len(plan.allocations)} allocations")
    assert f"peak {format_bytes(plan.peak)} at step {plan.peak_step}" in status
    details = page.inner_text(".hlo-tl-details")
    live = plan.live_at_peak()
    assert f"{len(live)} buffers live, largest first" in details
    assert live[0].name in details


def test_wheel_zooms_steps_and_shows_aggregated_buffers_one_by_one(page):
    box = page.locator(".hlo-tl-canvas").bounding_box()
    before = view(page, "[v.x0, v.x1, v.aggregated, v.drawn.length]")
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 300)
    for _ in range(8):
        page.mouse.wheel(0, -100)
    after = view(page, "[v.x0, v.x1, v.aggregated, v.drawn.length]")
    assert after[1] - after[0] < (before[1] - before[0]) / 3
    page.keyboard.down("Shift")
    for _ in range(8):
        page.mouse.wheel(0, -100)
    page.keyboard.up("Shift")
    zoomed = view(page, "[v.y0, v.y1, v.mapTop, v.aggregated]")
    assert zoomed[1] - zoomed[0] < zoomed[2] / 3
    assert before[2] > 0 and zoomed[3] < before[2] / 2    # fewer lumped: drawn one by one
    # the drag pans the step axis by the distance moved
    x0 = view(page, "v.x0")
    page.mouse.move(box["x"] + 600, box["y"] + 300)
    page.mouse.down()
    page.mouse.move(box["x"] + 500, box["y"] + 300, steps=5)
    page.mouse.up()
    assert view(page, "v.x0") > x0
    page.click(".hlo-tl-reset")
    assert view(page, "[v.x0, v.y0]") == [-0.5, 0]


def test_find_zooms_to_the_buffer_pins_it_and_tells_python(page, plan):
    target = plan.live_at_peak()[-1]           # the smallest buffer live at the peak
    page.fill(".hlo-tl-search", target.name)
    page.press(".hlo-tl-search", "Enter")
    rect = view(page, f"v.rectOf({json.dumps(target.name)})")
    assert rect["visible"] and rect["width"] > 20 and rect["height"] > 5
    assert ["selected", target.name] in page.evaluate("window.changed")
    details = page.inner_text(".hlo-tl-details")
    assert target.name in details and f"{target.offset} B" in details
    page.mouse.move(rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2)
    tooltip = page.inner_text(".hlo-tl-tooltip")
    assert f"steps {target.live.start}\u2013{target.live.end}" in tooltip


def test_python_selects_and_clicks_pin(page, plan):
    buffers = sorted((b for b in plan.buffers() if b.size), key=lambda b: -b.size)
    page.evaluate(f"window.model.fromPython('selected', {json.dumps(buffers[1].name)})")
    assert buffers[1].name in page.inner_text(".hlo-tl-details")
    page.click(".hlo-tl-reset")
    rect = view(page, f"v.rectOf({json.dumps(buffers[0].name)})")
    page.mouse.click(rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2)
    assert page.evaluate("window.changed").pop() == ["selected", buffers[0].name]
    # Peak lists what is live at the peak step
    page.click(".hlo-tl-peak")
    assert "the peak" in page.inner_text(".hlo-tl-details")


def test_a_whole_model_with_hundreds_of_buffers(request):
    """ViT-tiny's training step from the shared models (over 700 buffers):
    every buffer live at the peak can be found, and hovering it shows its own details."""
    models = CORPUS.parent / "models"
    text = (models / "vit_tiny_train_step.hlo").read_text()     # missing models fail here
    plan = run_pipeline(runtime.parse(text), alignment=128)
    assert len(plan.buffers()) > 500
    page = open_page(request, plan)
    live = plan.live_at_peak()
    for target in (live[0], live[len(live) // 2], live[-1]):
        page.fill(".hlo-tl-search", target.name)
        page.press(".hlo-tl-search", "Enter")
        rect = view(page, f"v.rectOf({json.dumps(target.name)})")
        assert rect["visible"], (target.name, rect)
        page.mouse.move(rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2)
        tooltip = page.inner_text(".hlo-tl-tooltip")
        assert tooltip.startswith(target.name + "\n"), tooltip
        assert f"steps {target.live.start}\u2013{target.live.end}" in tooltip
        assert f"{target.offset} B" in tooltip
    page.click(".hlo-tl-reset")
    assert view(page, "v.aggregated") > 0        # at full view, most buffers are lumped


def test_parameters_and_outputs_share_a_band_each_by_default_and_can_be_expanded(page, plan):
    params = [a for a in plan.allocations if a.kind == "parameter"]
    outputs = [a for a in plan.allocations if a.kind == "output"]
    assert len(params) > 20 and len(outputs) > 1
    bands = view(page, "v.bands.map((b) => b.label)")
    assert len(bands) == len(plan.allocations) - len(params) - len(outputs) + 2
    assert f"{len(params)} parameters (" in bands[0]
    assert sum(f"{len(outputs)} outputs (" in b for b in bands) == 1
    (arena,) = [a.index for a in plan.allocations if a.kind == "temp"]
    share = view(page, f"v.bandHeight[v.allocBand[{arena}]] / v.mapTop")
    assert share > 0.3                        # one sqrt band per parameter left it ~3 %
    # every parameter buffer still sits on its own bytes inside the shared band
    rects = view(page, "v.meta.names.map((n, i) => [v.alloc[i], v.bottomOf(i)])")
    for kind in ("parameter", "output"):
        bottoms = sorted(y for a, y in rects if plan.allocations[int(a)].kind == kind)
        assert len(set(bottoms)) == len(bottoms)
    page.click(".hlo-tl-collapse")
    assert view(page, "v.bands.length") == len(plan.allocations)
    assert view(page, f"v.bandHeight[v.allocBand[{arena}]] / v.mapTop") < share / 2


def test_the_table_lists_what_is_live_at_the_peak_sortable_and_filterable(page, plan):
    live = plan.live_at_peak()
    title = page.inner_text(".hlo-tl-table-bar")
    assert title.startswith(f"{len(live)} buffers live at step {plan.peak_step} (")
    assert title.endswith("the peak")
    rows = page.locator(".hlo-tl-table-body tbody tr")
    assert rows.count() == min(len(live), 200)
    first = rows.first.inner_text().split("\t")
    assert first[0] == live[0].name and first[2] == live[0].buffer.first.shape.to_text(False)
    page.click(".hlo-tl-table th[data-sort='name']")
    names = [r.split("\t")[0] for r in rows.all_inner_texts()]
    assert names == sorted(b.name for b in live)[:200]
    page.fill(".hlo-tl-filter", live[-1].name)
    assert live[-1].name in rows.first.inner_text()
    assert rows.count() < len(live)
    page.locator(".hlo-tl-table a", has_text=live[-1].name).first.click()
    assert view(page, "v.meta.names[v.selected]") == live[-1].name


def test_find_hides_the_tooltip_and_peak_drops_the_old_highlight(page, plan):
    page.click(".hlo-tl-reset")
    big = plan.live_at_peak()[0]
    rect = view(page, f"v.rectOf({json.dumps(big.name)})")
    page.mouse.move(rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2)
    assert page.locator(".hlo-tl-tooltip").is_visible()
    page.fill(".hlo-tl-search", plan.live_at_peak()[-1].name)
    page.click(".hlo-tl-find")
    assert not page.locator(".hlo-tl-tooltip").is_visible()
    assert view(page, "v.selected") >= 0
    page.click(".hlo-tl-peak")
    assert view(page, "v.selected") == -1
    assert page.evaluate("window.changed").pop() == ["selected", ""]


def test_in_place_buffers_sit_beside_their_operand_and_aliased_has_its_own_swatch(page, plan):
    handed = plan.temp_arena.reuse
    assert handed
    for later, earlier in list(handed.items())[:10]:
        a, b = (plan.placement(x).name for x in (earlier, later))
        edges = view(page, f"[v.rect(v.byName.get({json.dumps(a)})), "
                           f"v.rect(v.byName.get({json.dumps(b)}))]")
        assert edges[0]["x"] + edges[0]["w"] <= edges[1]["x"] + 1e-6, (a, b, edges)
    swatches = page.locator(".hlo-tl-legend .hlo-tl-swatch")
    styles = [swatches.nth(k).get_attribute("style") for k in range(swatches.count())]
    assert len(set(styles)) == len(styles)


def test_the_live_view_hides_its_static_copy(page):
    assert not page.locator("#copy").is_visible()


def test_a_collective_is_marked_at_its_step_and_says_its_kind_and_bytes_on_hover(request):
    """A partitioned module's collectives: a band at each one's step; hovering the live-bytes
    strip (or the marker above it) there shows the collective's kind and bytes."""
    spmd = Path(__file__).parents[1] / "spmd" / "data" / "mesh2x2_gather_scatter_permute.opt.hlo"
    plan = run_pipeline(runtime.parse(spmd.read_text()), alignment=128)
    page = open_page(request, plan)
    marks = timeline_data(plan).meta()["collectives"]
    assert [m["kind"] for m in marks] == ["reduce-scatter", "collective-permute", "all-gather"]
    box = page.locator(".hlo-tl-canvas").bounding_box()
    for mark, y in zip(marks, (67, 17, 67)):      # the strip's middle, the marker above it
        x = view(page, f"v.sx({mark['step']})")
        page.mouse.move(box["x"] + x, box["y"] + y)
        tooltip = page.inner_text(".hlo-tl-tooltip")
        assert tooltip.startswith(f"step {mark['step']}: "), tooltip
        assert mark["text"] in tooltip and "sends" in mark["text"]
    assert view(page, "v.collectivesAt(0).length") == 0


def _download(page, button: str, folder: Path) -> Path:
    with page.expect_download() as download:
        page.click(button)
    path = folder / download.value.suggested_filename
    download.value.save_as(path)
    return path


# Rasterises an SVG text at the canvas's size and counts the pixels that differ from the canvas
# (on the same background) by more than a quarter of the range in some channel.
COMPARE = """async (svg) => {
  const v = %s, c = v.canvas;
  const img = new Image();
  img.src = "data:image/svg+xml;base64," + btoa(unescape(encodeURIComponent(svg)));
  await img.decode();
  const draw = (source) => {
    const out = document.createElement("canvas");
    out.width = c.width; out.height = c.height;
    const g = out.getContext("2d");
    g.fillStyle = v.colours().bg; g.fillRect(0, 0, c.width, c.height);
    g.drawImage(source, 0, 0, c.width, c.height);
    return g.getImageData(0, 0, c.width, c.height).data;
  };
  const a = draw(c), b = draw(img);
  let differ = 0;
  for (let k = 0; k < a.length; k += 4) {
    if (Math.max(Math.abs(a[k] - b[k]), Math.abs(a[k + 1] - b[k + 1]),
                 Math.abs(a[k + 2] - b[k + 2])) > 64) differ += 1;
  }
  return differ / (a.length / 4);
}""" % VIEW


def test_save_png_and_svg_write_the_figure_as_shown(page, plan, tmp_path):
    target = plan.live_at_peak()[1]
    page.fill(".hlo-tl-search", target.name)          # a zoomed view with a selection
    page.press(".hlo-tl-search", "Enter")
    png = _download(page, ".hlo-tl-png", tmp_path)
    assert png.name == f"{plan.module.name}-memory-timeline.png"
    width, height = view(page, "[v.canvas.width, v.canvas.height]")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == width
    assert int.from_bytes(data[20:24], "big") == height
    svg = _download(page, ".hlo-tl-svg", tmp_path)
    assert svg.suffix == ".svg"
    text = svg.read_text()
    assert text.startswith("<svg xmlns=") and text.count("<path") > view(page, "v.drawn.length")
    assert page.evaluate(COMPARE, text) < 0.03         # the same picture, up to text rendering


def _row_in_view(page, name: str) -> bool:
    return page.evaluate("""(name) => {
      const row = document.querySelector(`.hlo-annotated tr[data-instruction="${name}"]`);
      const box = document.querySelector(".hlo-annotated-body").getBoundingClientRect();
      const r = row.getBoundingClientRect();
      return row.classList.contains("hlo-annotated-current") && r.top >= box.top &&
             r.bottom <= box.bottom;
    }""", name)


def test_the_timeline_and_the_annotated_view_point_at_each_other(page, plan):
    page.click(".hlo-tl-reset")
    big = plan.live_at_peak()[0]
    rect = view(page, f"v.rectOf({json.dumps(big.name)})")
    page.mouse.click(rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2)
    assert _row_in_view(page, big.buffer.first.instruction.name)
    assert page.locator(".hlo-annotated-current").count() == 1
    # a row of the table of buffers live at the peak
    small = plan.live_at_peak()[-1]
    page.fill(".hlo-tl-filter", small.name)
    page.locator(".hlo-tl-table a", has_text=small.name).first.click()
    assert _row_in_view(page, small.buffer.first.instruction.name)
    # and back: a buffer named in the annotated view selects it in the timeline
    other = next(b for b in plan.live_at_peak()[2:] if "{" not in b.name)   # not folded
    span = page.locator(f".hlo-annotated [data-buffer='{other.name}'] >> visible=true").first
    span.scroll_into_view_if_needed()
    # its tooltip keeps the slot's whole text (the cell may cut it) and says what a click does
    assert span.get_attribute("title") == (f"{span.text_content()} \u2014 click: show this "
                                           "buffer in the memory timeline")
    assert span.text_content().startswith(f"#{other.allocation} ")
    span.click()
    assert view(page, "v.meta.names[v.selected]") == other.name
    assert page.evaluate("window.changed").pop() == ["selected", other.name]
