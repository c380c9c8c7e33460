// hlo-magic's interactive memory timeline (anywidget front end, no dependencies).
//
// Top: bytes live at each schedule step, stacked by kind, the peak marked. Below: the memory
// map, one rectangle per buffer at (live range, offset within its allocation), allocations
// stacked bottom-up. Rectangles smaller than MIN_PX on screen are aggregated into grey cells
// until zoomed in. Wheel zooms the step axis (shift+wheel the byte axis), drag pans, hover
// shows a buffer's details, click pins them (and syncs `selected` to Python), double-click
// zooms to a buffer, the search box finds buffers by name. Parameters share one band by
// default, and so do outputs (a model has hundreds of each; one band each would leave the temp
// arena a thin strip).
// Below: the buffers live at the chosen step (the peak at first), sortable and filterable.
// "Save PNG" and "Save SVG" download the figure as drawn (the view's zoom, bands and
// selection): the PNG is the canvas itself, the SVG the same drawing calls recorded by
// SvgContext. The annotated view of the same result (`link`, hlo_magic/annotated.py) is linked
// both ways: selecting a buffer here outlines and scrolls to its instruction's row there, and
// a buffer named in a row there selects it here.

const MIN_PX = 2;          // rectangles thinner than this are aggregated
const CELL = 4;            // aggregation cell size in CSS pixels
const LEFT = 170, RIGHT = 12, TOP = 22, STRIP = 90, GAP = 22, BOTTOM = 26;
const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
const TAKES_OVER = 1, HANDS_OVER = 2;   // "in_place" bits (timeline_data.py)
const TABLE_ROWS = 200;                  // rows of the live-buffers table drawn at once

function formatBytes(n) {
  let v = n, u = 0;
  while (Math.abs(v) >= 1024 && u < UNITS.length - 1) { v /= 1024; u += 1; }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${UNITS[u]}`;
}

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

// --- a canvas context that writes SVG -----------------------------------------------------------
// Only the calls the timeline makes: paths of lines and rectangles, fills, strokes, dashes,
// clips, alpha and text. Text is measured by a real canvas with the same font.
const SVG_ANCHOR = { left: "start", start: "start", center: "middle", right: "end", end: "end" };
const SVG_BASELINE = { top: "hanging", middle: "central", bottom: "text-after-edge",
                       alphabetic: "alphabetic" };

class SvgContext {
  constructor(width, height, background) {
    this.width = width; this.height = height;
    this.parts = [`<rect width="${width}" height="${height}" fill="${esc(background)}"/>`];
    this.clips = [];
    this.state = { fillStyle: "#000", strokeStyle: "#000", globalAlpha: 1, lineWidth: 1,
                   font: "10px sans-serif", textAlign: "start", textBaseline: "alphabetic",
                   dash: [], clip: "" };
    this.stack = [];
    this.path = "";
    this.measurer = document.createElement("canvas").getContext("2d");
  }

  save() { this.stack.push({ ...this.state }); }
  restore() { if (this.stack.length) this.state = this.stack.pop(); }
  setLineDash(dash) { this.state.dash = dash; }
  setTransform() {}
  clearRect() {}
  beginPath() { this.path = ""; }
  moveTo(x, y) { this.path += `M${x.toFixed(2)} ${y.toFixed(2)}`; }
  lineTo(x, y) { this.path += `L${x.toFixed(2)} ${y.toFixed(2)}`; }
  closePath() { this.path += "Z"; }
  rect(x, y, w, h) { this.path += SvgContext.box(x, y, w, h); }
  static box(x, y, w, h) { return `M${x.toFixed(2)} ${y.toFixed(2)}h${w.toFixed(2)}v${h.toFixed(2)}h${(-w).toFixed(2)}Z`; }

  clip() {
    const id = `c${this.clips.length}`, outer = this.state.clip;
    this.clips.push(`<clipPath id="${id}"${outer ? ` clip-path="url(#${outer})"` : ""}><path d="${this.path}"/></clipPath>`);
    this.state.clip = id;
  }

  paint(d, fill) {
    const s = this.state, clip = s.clip ? ` clip-path="url(#${s.clip})"` : "";
    const alpha = s.globalAlpha < 1 ? ` opacity="${s.globalAlpha}"` : "";
    const how = fill ? `fill="${esc(s.fillStyle)}"`
      : `fill="none" stroke="${esc(s.strokeStyle)}" stroke-width="${s.lineWidth}"` +
        (s.dash.length ? ` stroke-dasharray="${s.dash.join(" ")}"` : "");
    this.parts.push(`<path d="${d}" ${how}${alpha}${clip}/>`);
  }

  fill() { if (this.path) this.paint(this.path, true); }
  stroke() { if (this.path) this.paint(this.path, false); }
  fillRect(x, y, w, h) { this.paint(SvgContext.box(x, y, w, h), true); }
  strokeRect(x, y, w, h) { this.paint(SvgContext.box(x, y, w, h), false); }
  measureText(text) { this.measurer.font = this.state.font; return this.measurer.measureText(text); }

  fillText(text, x, y) {
    const s = this.state, clip = s.clip ? ` clip-path="url(#${s.clip})"` : "";
    this.measurer.font = s.font;       // the font as the canvas parsed it
    const alpha = s.globalAlpha < 1 ? ` opacity="${s.globalAlpha}"` : "";
    this.parts.push(`<text x="${x.toFixed(2)}" y="${y.toFixed(2)}" style="font:${esc(this.measurer.font)}" ` +
      `fill="${esc(s.fillStyle)}" text-anchor="${SVG_ANCHOR[s.textAlign] || "start"}" ` +
      `dominant-baseline="${SVG_BASELINE[s.textBaseline] || "alphabetic"}"${alpha}${clip}>${esc(text)}</text>`);
  }

  toString() {
    return `<svg xmlns="http://www.w3.org/2000/svg" width="${this.width}" height="${this.height}" ` +
      `viewBox="0 0 ${this.width} ${this.height}"><defs>${this.clips.join("")}</defs>${this.parts.join("")}</svg>`;
  }
}

for (const key of ["fillStyle", "strokeStyle", "globalAlpha", "lineWidth", "font", "textAlign", "textBaseline"]) {
  Object.defineProperty(SvgContext.prototype, key, {
    get() { return this.state[key]; }, set(value) { this.state[key] = value; } });
}

function download(blob, name) {
  const url = URL.createObjectURL(blob), link = document.createElement("a");
  link.href = url; link.download = name;
  document.body.appendChild(link); link.click(); link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

function toFloat64(value) {
  // ipywidgets hands binary traits over as a DataView (or ArrayBuffer); copy for alignment.
  if (value instanceof DataView) {
    return new Float64Array(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength));
  }
  if (value instanceof ArrayBuffer) return new Float64Array(value.slice(0));
  return new Float64Array(value.buffer ? value.buffer.slice(0) : value);
}

class Timeline {
  constructor(model, el) {
    this.model = model;
    this.el = el;
    this.root = document.createElement("div");
    this.root.className = "hlo-timeline";
    this.root.innerHTML = `
      <div class="hlo-tl-bar">
        <input class="hlo-tl-search" type="search" placeholder="find a buffer by name" spellcheck="false">
        <button class="hlo-tl-find" type="button">Find</button>
        <button class="hlo-tl-peak" type="button">Peak</button>
        <button class="hlo-tl-reset" type="button">Reset zoom</button>
        <button class="hlo-tl-png" type="button" title="the figure as shown, as a PNG file">Save PNG</button>
        <button class="hlo-tl-svg" type="button" title="the figure as shown, as an SVG file">Save SVG</button>
        <label>band heights <select class="hlo-tl-scale">
          <option value="sqrt">\u221a bytes (every allocation visible)</option>
          <option value="bytes">bytes</option></select></label>
        <label title="one band for every parameter allocation and one for every output allocation (uncheck: one band each)">
          <input class="hlo-tl-collapse" type="checkbox" checked> parameters, outputs in one band each</label>
        <span class="hlo-tl-status"></span>
      </div>
      <div class="hlo-tl-main">
        <div class="hlo-tl-plot"><canvas class="hlo-tl-canvas"></canvas>
          <div class="hlo-tl-tooltip" hidden></div></div>
        <div class="hlo-tl-details"></div>
      </div>
      <div class="hlo-tl-table"></div>
      <div class="hlo-tl-help">wheel: zoom steps \u00b7 shift+wheel: zoom bytes \u00b7 drag: pan \u00b7
        hover: details \u00b7 click: pin \u00b7 double-click: zoom to a buffer \u00b7 click the live-bytes strip: what is live at that step</div>`;
    el.appendChild(this.root);
    this.q = (sel) => this.root.querySelector(sel);
    this.canvas = this.q(".hlo-tl-canvas");
    this.tooltip = this.q(".hlo-tl-tooltip");
    this.details = this.q(".hlo-tl-details");
    this.status = this.q(".hlo-tl-status");
    this.search = this.q(".hlo-tl-search");
    this.scaleMode = this.q(".hlo-tl-scale");
    this.collapse = this.q(".hlo-tl-collapse");
    this.table = this.q(".hlo-tl-table");
    this.sortKey = "size"; this.sortDown = true; this.filter = "";
    this.load();
    this.bind();
    this.resize = new ResizeObserver(() => this.draw());
    this.resize.observe(this.q(".hlo-tl-plot"));
    el.hloTimeline = this;             // for tests and the curious: rectOf(name), select(name)
  }

  load() {
    const meta = this.model.get("meta");
    this.meta = meta;
    const flat = toFloat64(this.model.get("columns"));
    const n = meta.names.length;
    this.n = n;
    const col = (name) => flat.subarray(meta.columns.indexOf(name) * n, (meta.columns.indexOf(name) + 1) * n);
    this.size = col("size"); this.alloc = col("allocation"); this.offset = col("offset");
    this.start = col("start"); this.end = col("end"); this.kind = col("kind");
    this.inPlace = meta.columns.includes("in_place") ? col("in_place") : new Float64Array(n);
    this.byName = new Map(meta.names.map((name, i) => [name, i]));
    this.steps = meta.steps.length;
    this.total = new Float64Array(this.steps);
    for (const series of meta.live) for (let s = 0; s < this.steps; s++) this.total[s] += series[s];
    this.layoutBands();
    this.resetView();
    this.size_ = [this.canvas.clientWidth, this.model.get("height")];
    this.selected = -1;
    this.step = -1;
    this.tableStep = meta.peak_step;
    this.showOverview();
    this.drawTable();
  }

  layoutBands() {
    // bands of allocations: one each, or every parameter allocation in one band and every
    // output allocation in another (stacked at running offsets, so each buffer keeps its own
    // bytes); allocBand/allocBase map into them
    const sqrt = this.scaleMode.value === "sqrt";
    const allocations = this.meta.allocations;
    const grouped = new Map();                 // kind -> its allocations, where they share
    for (const [kind, plural] of [["parameter", "parameters"], ["output", "outputs"]]) {
      const members = allocations.filter((a) => a.kind === kind);
      if (this.collapse.checked && members.length > 1) grouped.set(kind, { members, plural, band: -1 });
    }
    this.bands = []; this.allocBand = []; this.allocBase = [];
    for (const a of allocations) {
      const group = grouped.get(a.kind);
      if (group) {
        if (group.band < 0) {
          group.band = this.bands.length;
          const bytes = group.members.reduce((sum, p) => sum + p.size, 0);
          this.bands.push({ bytes, label: `${group.members.length} ${group.plural} (${formatBytes(bytes)})`, used: 0 });
        }
        const band = this.bands[group.band];
        this.allocBand.push(group.band); this.allocBase.push(band.used);
        band.used += a.size;
        continue;
      }
      this.allocBand.push(this.bands.length); this.allocBase.push(0);
      this.bands.push({ bytes: a.size, label: a.label, used: a.size });
    }
    this.bandBase = []; this.bandScale = []; this.bandHeight = [];
    let base = 0;
    for (const band of this.bands) {
      const bytes = Math.max(band.bytes, 1);
      const height = sqrt ? Math.sqrt(bytes) : bytes;
      this.bandBase.push(base); this.bandScale.push(height / bytes); this.bandHeight.push(height);
      base += height;
    }
    this.mapTop = Math.max(base, 1);
  }

  bottomOf(i) {      // where buffer i's bytes start on the map's byte axis
    const a = this.alloc[i], band = this.allocBand[a];
    return this.bandBase[band] + (this.allocBase[a] + this.offset[i]) * this.bandScale[band];
  }

  resetView() {
    this.x0 = -0.5; this.x1 = this.steps - 0.5;
    this.y0 = 0; this.y1 = this.mapTop;
  }

  // --- geometry -----------------------------------------------------------------------------
  // sizes are read once per draw: reading clientWidth per rectangle forces a layout each time
  get width() { return this.size_[0]; }
  get height() { return this.size_[1]; }
  get mapY0() { return TOP + STRIP + GAP; }               // top of the map in pixels
  get mapY1() { return this.height - BOTTOM; }            // bottom of the map
  sx(step) { return LEFT + (step - this.x0) / (this.x1 - this.x0) * (this.width - LEFT - RIGHT); }
  stepAt(px) { return this.x0 + (px - LEFT) / (this.width - LEFT - RIGHT) * (this.x1 - this.x0); }
  sy(y) { return this.mapY1 - (y - this.y0) / (this.y1 - this.y0) * (this.mapY1 - this.mapY0); }
  yAt(py) { return this.y0 + (this.mapY1 - py) / (this.mapY1 - this.mapY0) * (this.y1 - this.y0); }

  rect(i) {
    // a buffer that takes over its operand's bytes in place starts mid-step, where the
    // operand ends: side by side, not drawn over each other as if they collided
    const band = this.allocBand[this.alloc[i]];
    const yb = this.bottomOf(i);
    const yt = yb + this.size[i] * this.bandScale[band];
    const flags = this.inPlace[i];
    const x = this.sx(this.start[i] - (flags & TAKES_OVER ? 0 : 0.5));
    const x2 = this.sx(this.end[i] + (flags & HANDS_OVER ? 0 : 0.5));
    const y = this.sy(yt), y2 = this.sy(yb);
    return { x, y, w: x2 - x, h: y2 - y };
  }

  rectOf(name) {
    const i = this.byName.get(name);
    if (i === undefined) return null;
    const r = this.rect(i), box = this.canvas.getBoundingClientRect();
    const x = Math.max(r.x, LEFT), x2 = Math.min(r.x + r.w, this.width - RIGHT);
    const y = Math.max(r.y, this.mapY0), y2 = Math.min(r.y + r.h, this.mapY1);
    return { x: box.left + x, y: box.top + y, width: x2 - x, height: y2 - y,
             visible: x2 - x >= MIN_PX && y2 - y >= MIN_PX };
  }

  // --- drawing ------------------------------------------------------------------------------
  colours() {
    const style = getComputedStyle(this.root);
    const pick = (name, fallback) => (style.getPropertyValue(name) || "").trim() || fallback;
    return { fg: pick("--jp-ui-font-color1", "#333"), muted: pick("--jp-ui-font-color2", "#777"),
             grid: pick("--jp-border-color2", "#ddd"), bg: pick("--jp-layout-color0", "#fff"),
             select: pick("--jp-brand-color1", "#1976d2"), warn: pick("--jp-error-color1", "#d32f2f") };
  }

  redraw() {
    // wheel and drag events come faster than frames: draw once per frame
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => { this.pending = 0; this.draw(); });
  }

  draw() {
    const ratio = window.devicePixelRatio || 1;
    this.size_ = [this.canvas.clientWidth, this.model.get("height")];
    const width = this.width, height = this.height;
    if (!width) return;
    this.canvas.style.height = `${height}px`;
    this.canvas.width = Math.round(width * ratio);
    this.canvas.height = Math.round(height * ratio);
    const g = this.canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);
    this.paint(g);
    this.status.textContent = this.statusText();
  }

  paint(g) {
    // a canvas font cannot name a CSS variable: the theme's family, resolved
    g.font = `11px ${getComputedStyle(this.root).fontFamily || "sans-serif"}`;
    const c = this.colours();
    this.c = c;
    this.drawStrip(g, c);
    this.drawMap(g, c);
    this.drawAxis(g, c);
    this.drawCollectives(g);
    this.drawPeak(g, c);
  }

  // --- export: what the view shows, on the theme's background ---------------------------------
  fileName(ext) { return `${this.meta.module}-memory-timeline.${ext}`; }

  svgText() {
    const svg = new SvgContext(this.width, this.height, this.colours().bg);
    this.paint(svg);
    return svg.toString();
  }

  pngBlob() {
    const out = document.createElement("canvas");
    out.width = this.canvas.width; out.height = this.canvas.height;
    const g = out.getContext("2d");
    g.fillStyle = this.colours().bg;
    g.fillRect(0, 0, out.width, out.height);
    g.drawImage(this.canvas, 0, 0);
    return new Promise((resolve) => out.toBlob(resolve, "image/png"));
  }

  async savePng() { download(await this.pngBlob(), this.fileName("png")); }
  saveSvg() { download(new Blob([this.svgText()], { type: "image/svg+xml" }), this.fileName("svg")); }

  // --- the annotated view of the same result ------------------------------------------------
  annotatedViews() {
    const link = this.model.get("link");
    return link ? [...document.querySelectorAll(`.hlo-annotated[data-hlo-link="${CSS.escape(link)}"]`)] : [];
  }

  markAnnotated() {
    // the buffers its rows name become links to this view (only while this view is live)
    for (const view of this.annotatedViews()) {
      view.classList.add("hlo-annotated-live");
      for (const span of view.querySelectorAll("[data-buffer]")) {
        if (this.byName.has(span.dataset.buffer)) span.title = `${span.textContent} \u2014 click: show this buffer in the memory timeline`;
      }
    }
  }

  revealInstruction(i) {
    // outline the row of the instruction that defines buffer i, open what folds it, and scroll
    // the annotated view's own box to it (the page stays where the user is)
    const name = this.meta.instructions[i];
    for (const view of this.annotatedViews()) {
      for (const row of view.querySelectorAll(".hlo-annotated-current")) row.classList.remove("hlo-annotated-current");
      const row = view.querySelector(`tr[data-instruction="${CSS.escape(name)}"]`);
      if (!row) continue;
      row.classList.add("hlo-annotated-current");
      for (let up = row.parentElement; up && up !== view; up = up.parentElement) {
        if (up.tagName === "DETAILS") up.open = true;
      }
      const box = view.querySelector(".hlo-annotated-body") || view;
      box.scrollTop += row.getBoundingClientRect().top - box.getBoundingClientRect().top - box.clientHeight / 3;
    }
  }

  onAnnotatedClick(e) {
    const span = e.target.closest && e.target.closest("[data-buffer]");
    const view = span && span.closest(".hlo-annotated");
    if (!view || !this.annotatedViews().includes(view) || !this.byName.has(span.dataset.buffer)) return;
    e.preventDefault();
    this.select(span.dataset.buffer, true);
    this.root.scrollIntoView({ block: "nearest" });
  }

  statusText() {
    const m = this.meta;
    return `${m.names.length} buffers, ${m.allocations.length} allocations, ${this.steps} steps; ` +
           `peak ${m.peak_text} at step ${m.peak_step} (${m.steps[m.peak_step]})` +
           (this.aggregated ? `; ${this.aggregated} small buffers aggregated (zoom in)` : "");
  }

  drawStrip(g, c) {
    const top = TOP, bottom = TOP + STRIP, peak = Math.max(this.meta.peak, 1) * 1.1;
    const yOf = (v) => bottom - v / peak * STRIP;
    const first = Math.max(0, Math.floor(this.x0)), last = Math.min(this.steps - 1, Math.ceil(this.x1));
    const lower = new Float64Array(this.steps);
    g.save();
    g.beginPath(); g.rect(LEFT, top, this.width - LEFT - RIGHT, STRIP); g.clip();
    this.meta.live.forEach((series, k) => {
      if (!series.some((v) => v)) return;
      g.fillStyle = this.meta.kind_colours[k];
      g.globalAlpha = 0.85;
      g.beginPath();
      g.moveTo(this.sx(first - 0.5), yOf(lower[first]));
      for (let s = first; s <= last; s++) {
        g.lineTo(this.sx(s - 0.5), yOf(lower[s] + series[s]));
        g.lineTo(this.sx(s + 0.5), yOf(lower[s] + series[s]));
      }
      for (let s = last; s >= first; s--) {
        g.lineTo(this.sx(s + 0.5), yOf(lower[s]));
        g.lineTo(this.sx(s - 0.5), yOf(lower[s]));
      }
      g.closePath();
      g.fill();
      for (let s = first; s <= last; s++) lower[s] += series[s];
    });
    g.restore();
    g.globalAlpha = 1;
    if (this.step >= 0) {
      g.fillStyle = c.select; g.globalAlpha = 0.25;
      g.fillRect(this.sx(this.step - 0.5), top, Math.max(this.sx(this.step + 0.5) - this.sx(this.step - 0.5), 2), STRIP);
      g.globalAlpha = 1;
    }
    g.strokeStyle = c.grid; g.strokeRect(LEFT, top, this.width - LEFT - RIGHT, STRIP);
    g.fillStyle = c.fg; g.textAlign = "right"; g.textBaseline = "middle";
    g.fillText("live bytes", LEFT - 6, top + STRIP / 2);
    g.fillText(formatBytes(this.meta.peak), LEFT - 6, yOf(this.meta.peak));
    g.fillText("0", LEFT - 6, bottom);
  }

  drawMap(g, c) {
    const x0 = LEFT, x1 = this.width - RIGHT, y0 = this.mapY0, y1 = this.mapY1;
    g.save();
    g.beginPath(); g.rect(x0, y0, x1 - x0, y1 - y0); g.clip();
    // allocation bands
    g.strokeStyle = c.grid; g.setLineDash([4, 3]); g.lineWidth = 1;
    for (let a = 0; a < this.bandBase.length; a++) {
      const yt = this.sy(this.bandBase[a] + this.bandHeight[a]), yb = this.sy(this.bandBase[a]);
      if (yb < y0 || yt > y1 || yb - yt < 3) continue;
      g.strokeRect(x0 + 0.5, yt + 0.5, x1 - x0 - 1, yb - yt - 1);
    }
    g.setLineDash([]);
    // buffers: large ones as rectangles, small ones into aggregation cells
    const cols = Math.ceil((x1 - x0) / CELL) + 1, rows = Math.ceil((y1 - y0) / CELL) + 1;
    const cells = new Uint32Array(cols * rows);
    this.drawn = [];
    let aggregated = 0;
    for (let i = 0; i < this.n; i++) {
      const r = this.rect(i);
      if (r.x > x1 || r.x + r.w < x0 || r.y > y1 || r.y + r.h < y0) continue;
      if (r.w < MIN_PX || r.h < MIN_PX) {
        aggregated += 1;
        const cx0 = Math.max(0, Math.floor((r.x - x0) / CELL)), cx1 = Math.min(cols - 1, Math.floor((r.x + r.w - x0) / CELL));
        const cy0 = Math.max(0, Math.floor((r.y - y0) / CELL)), cy1 = Math.min(rows - 1, Math.floor((r.y + r.h - y0) / CELL));
        for (let cy = cy0; cy <= cy1; cy++) for (let cx = cx0; cx <= cx1; cx++) cells[cy * cols + cx] += 1;
        continue;
      }
      g.fillStyle = this.meta.kind_colours[this.kind[i]];
      g.globalAlpha = 0.9;
      g.fillRect(r.x, r.y, r.w, r.h);
      g.globalAlpha = 1;
      if (r.w > 4 && r.h > 4) { g.strokeStyle = "rgba(0,0,0,0.55)"; g.strokeRect(r.x + 0.5, r.y + 0.5, r.w - 1, r.h - 1); }
      if (this.meta.kinds[this.kind[i]] === "aliased" && r.w > 6 && r.h > 6) this.hatch(g, r);
      this.drawn.push(i);
    }
    g.fillStyle = "rgba(128,128,128,1)";
    // one path per shade (1..8 buffers in a cell): a few fills instead of one per cell
    const shades = Array.from({ length: 8 }, () => []);
    for (let key = 0; key < cells.length; key++) if (cells[key]) shades[Math.min(cells[key], 8) - 1].push(key);
    shades.forEach((keys, k) => {
      if (!keys.length) return;
      g.globalAlpha = 0.3 + 0.08 * (k + 1);
      g.beginPath();
      for (const key of keys) g.rect(x0 + (key % cols) * CELL, y0 + Math.floor(key / cols) * CELL, CELL, CELL);
      g.fill();
    });
    g.globalAlpha = 1;
    this.cells = cells; this.cellCols = cols; this.aggregated = aggregated;
    // names inside rectangles wide and tall enough
    g.fillStyle = "#000"; g.textAlign = "center"; g.textBaseline = "middle";
    for (const i of this.drawn) {
      const r = this.rect(i), name = this.meta.names[i];
      const vx0 = Math.max(r.x, x0), vx1 = Math.min(r.x + r.w, x1), vy0 = Math.max(r.y, y0), vy1 = Math.min(r.y + r.h, y1);
      if (vy1 - vy0 >= 13 && vx1 - vx0 >= 6.5 * name.length + 6) g.fillText(name, (vx0 + vx1) / 2, (vy0 + vy1) / 2);
    }
    if (this.selected >= 0) {
      const r = this.rect(this.selected);
      g.strokeStyle = c.select; g.lineWidth = 2.5;
      const pad = r.w < 6 || r.h < 6 ? 3 : 0;
      g.strokeRect(r.x - pad, r.y - pad, r.w + 2 * pad, r.h + 2 * pad);
      g.lineWidth = 1;
    }
    g.restore();
    g.strokeStyle = c.grid; g.strokeRect(x0, y0, x1 - x0, y1 - y0);
    // band labels on the left, where a band is tall enough
    g.fillStyle = c.fg; g.textAlign = "right"; g.textBaseline = "middle";
    let lastY = Infinity;
    for (let a = this.bandBase.length - 1; a >= 0; a--) {
      const yt = this.sy(this.bandBase[a] + this.bandHeight[a]), yb = this.sy(this.bandBase[a]);
      const mid = (Math.max(yt, y0) + Math.min(yb, y1)) / 2;
      if (Math.min(yb, y1) - Math.max(yt, y0) < 12 || Math.abs(mid - lastY) < 12) continue;
      const label = this.bands[a].label;
      g.fillText(label.length > 27 ? label.slice(0, 26) + "\u2026" : label, LEFT - 6, mid);
      lastY = mid;
    }
  }

  hatch(g, r) {
    g.save(); g.beginPath(); g.rect(r.x, r.y, r.w, r.h); g.clip();
    g.strokeStyle = "rgba(255,255,255,0.8)";
    for (let d = -r.h; d < r.w; d += 8) { g.beginPath(); g.moveTo(r.x + d, r.y + r.h); g.lineTo(r.x + d + r.h, r.y); g.stroke(); }
    g.restore();
  }

  drawAxis(g, c) {
    // ticks at 1, 2, 5 x 10^k steps; zoomed in far enough, each step also names its instruction
    const y = this.mapY1, span = this.x1 - this.x0, width = this.width - LEFT - RIGHT;
    const perStep = width / span, named = perStep >= 70;
    const raw = span / Math.max(2, Math.floor(width / 80));
    const magnitude = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
    const step = named ? 1 : [1, 2, 5, 10].map((m) => m * magnitude).find((v) => v >= raw);
    g.fillStyle = c.fg; g.textAlign = "center"; g.textBaseline = "top";
    for (let s = Math.ceil(Math.max(this.x0, 0) / step) * step; s <= Math.min(this.x1, this.steps - 1); s += step) {
      const x = this.sx(s);
      g.fillRect(x, y, 1, 4);
      let label = String(s);
      if (named) {
        const room = Math.floor((perStep - 8) / 6.5) - label.length - 1;
        const name = this.meta.steps[s];
        label += " " + (name.length > room ? name.slice(0, Math.max(room - 1, 1)) + "\u2026" : name);
      }
      const half = g.measureText(label).width / 2;
      if (x - half >= LEFT - 4 && x + half <= this.width) g.fillText(label, x, y + 5);
    }
    g.textAlign = "right";
    g.fillStyle = c.muted;
    g.fillText("step (program order, not time)", LEFT - 6, y + 5);
  }

  drawCollectives(g) {
    // a partitioned module's collectives: a band over each one's step, a marker above the
    // strip; hovering the strip at that step says its kind and bytes (stepHtml)
    const marks = this.meta.collectives || [];
    g.save();
    g.beginPath(); g.rect(LEFT, 0, this.width - LEFT - RIGHT, this.mapY1); g.clip();
    g.fillStyle = this.meta.collective_colour;
    for (const mark of marks) {
      const x0 = this.sx(mark.step - 0.5), w = Math.max(this.sx(mark.step + 0.5) - x0, 2);
      g.globalAlpha = 0.18; g.fillRect(x0, TOP, w, this.mapY1 - TOP);
      g.globalAlpha = 1;
      const x = x0 + w / 2;
      g.beginPath(); g.moveTo(x - 4, TOP - 8); g.lineTo(x + 4, TOP - 8); g.lineTo(x, TOP - 1); g.fill();
    }
    g.restore();
  }

  collectivesAt(step) {
    return (this.meta.collectives || []).filter((mark) => mark.step === step);
  }

  drawPeak(g, c) {
    const step = this.meta.peak_step, x = this.sx(step);
    if (x < LEFT || x > this.width - RIGHT) return;
    g.strokeStyle = c.warn; g.setLineDash([3, 3]);
    g.beginPath(); g.moveTo(x, TOP); g.lineTo(x, this.mapY1); g.stroke(); g.setLineDash([]);
    g.fillStyle = c.warn; g.textBaseline = "bottom";
    const text = `peak ${this.meta.peak_text} at step ${step} (${this.meta.steps[step]})`;
    const right = x > LEFT + (this.width - LEFT - RIGHT) * 0.6;
    g.textAlign = right ? "right" : "left";
    g.fillText(text, x + (right ? -4 : 4), TOP - 4);
  }

  // --- what is under the pointer ------------------------------------------------------------
  hit(px, py) {
    if (py >= this.mapY0 && py <= this.mapY1 && px >= LEFT && px <= this.width - RIGHT) {
      for (let k = this.drawn.length - 1; k >= 0; k--) {
        const i = this.drawn[k], r = this.rect(i);
        if (px >= r.x && px <= r.x + r.w && py >= r.y && py <= r.y + r.h) return { buffer: i };
      }
      const cx = Math.floor((px - LEFT) / CELL), cy = Math.floor((py - this.mapY0) / CELL);
      if (this.cells[cy * this.cellCols + cx]) return { cell: this.cellMembers(cx, cy) };
      const y = this.yAt(py);
      for (let a = 0; a < this.bandBase.length; a++) {
        if (y >= this.bandBase[a] && y < this.bandBase[a] + this.bandHeight[a]) return { band: a, step: this.nearestStep(px) };
      }
      const step = this.nearestStep(px);
      return this.collectivesAt(step).length ? { step, strip: true } : null;
    }
    if (py >= TOP - 10 && py <= TOP + STRIP && px >= LEFT && px <= this.width - RIGHT) return { step: this.nearestStep(px), strip: true };
    return null;
  }

  cellMembers(cx, cy) {
    // the aggregated (too small to draw) buffers that touch one cell: found on hover only
    const left = LEFT + cx * CELL, top = this.mapY0 + cy * CELL, members = [];
    for (let i = 0; i < this.n; i++) {
      const r = this.rect(i);
      if ((r.w < MIN_PX || r.h < MIN_PX) && r.x <= left + CELL && r.x + r.w >= left && r.y <= top + CELL && r.y + r.h >= top) members.push(i);
    }
    return members;
  }

  nearestStep(px) { return Math.min(this.steps - 1, Math.max(0, Math.round(this.stepAt(px)))); }

  bufferHtml(i) {
    const m = this.meta, a = m.allocations[this.alloc[i]];
    const start = this.start[i], end = this.end[i];
    const note = m.notes[i] ? `<div class="hlo-tl-note">${m.notes[i].split("\n").map(esc).join("<br>")}</div>` : "";
    return `<div class="hlo-tl-name">${esc(m.names[i])}</div><table>
      <tr><th>instruction</th><td>${esc(m.instructions[i])} (${esc(m.opcodes[i])})</td></tr>
      <tr><th>shape</th><td>${esc(m.shapes[i])}</td></tr>
      ${m.sources && m.sources[i] ? `<tr><th>source</th><td>${esc(m.sources[i])}</td></tr>` : ""}
      <tr><th>size</th><td>${formatBytes(this.size[i])} (${this.size[i]} B)</td></tr>
      <tr><th>allocation</th><td>${esc(a.label)}</td></tr>
      <tr><th>kind</th><td>${esc(m.kind_labels[this.kind[i]])}</td></tr>
      <tr><th>offset</th><td>${this.offset[i]} B</td></tr>
      <tr><th>live</th><td>steps ${start}\u2013${end} (${esc(m.steps[start])} \u2192 ${esc(m.steps[end])})</td></tr>
      </table>${note}`;
  }

  cellHtml(members) {
    const sorted = [...members].sort((p, q) => this.size[q] - this.size[p]);
    const total = sorted.reduce((s, i) => s + this.size[i], 0);
    const list = sorted.slice(0, 6).map((i) => `${esc(this.meta.names[i])} (${formatBytes(this.size[i])})`).join("<br>");
    return `<div class="hlo-tl-name">${members.length} small buffer(s), ${formatBytes(total)}</div>` +
           `<div>${list}${members.length > 6 ? "<br>\u2026" : ""}</div><div class="hlo-tl-note">zoom in to see them one by one</div>`;
  }

  stepHtml(step) {
    const m = this.meta;
    return `<div class="hlo-tl-name">step ${step}: ${esc(m.steps[step])} (${esc(m.step_opcodes[step])})</div>` +
           `<div>${formatBytes(this.total[step])} live${step === m.peak_step ? " \u2014 the peak" : ""}</div>` +
           this.collectivesAt(step).map((mark) => `<div class="hlo-tl-note">${esc(mark.text)}</div>`).join("");
  }

  liveAt(step) {
    const live = [];
    for (let i = 0; i < this.n; i++) if (this.start[i] <= step && step <= this.end[i]) live.push(i);
    return live.sort((p, q) => this.size[q] - this.size[p]);
  }

  // --- the side panel -----------------------------------------------------------------------
  showOverview() {
    const m = this.meta;
    const swatch = (k, j) => k === "aliased"      // hatched, as the map draws it
      ? `repeating-linear-gradient(135deg, ${m.kind_colours[j]} 0 3px, #fff 3px 5px)` : m.kind_colours[j];
    const legend = m.kinds.map((k, j) => `<span class="hlo-tl-swatch" style="background:${swatch(k, j)}"></span>${esc(m.kind_labels[j])}`).join("<br>");
    this.details.innerHTML = `<div class="hlo-tl-name">${esc(m.module)}</div>` +
      this.liveHtml(m.peak_step, 10) +
      `<div class="hlo-tl-legend">${legend}<br><span class="hlo-tl-swatch" style="background:grey"></span>small buffers, aggregated</div>` +
      `<div class="hlo-tl-note">Hover a buffer for its details; click to pin them here.</div>`;
  }

  liveHtml(step, shown) {
    const live = this.liveAt(step);
    const rows = live.slice(0, shown).map((i) =>
      `<tr><td><a href="#" data-buffer="${i}">${esc(this.meta.names[i])}</a></td><td>${formatBytes(this.size[i])}</td></tr>`).join("");
    return this.stepHtml(step) +
      `<div>${live.length} buffers live, largest first:</div><table class="hlo-tl-live">${rows}</table>` +
      (live.length > shown ? `<div>\u2026 ${live.length - shown} more</div>` : "");
  }

  showStep(step) {
    this.step = step;
    this.tableStep = step;
    this.details.innerHTML = this.liveHtml(step, 25);
    this.drawTable();
    this.draw();
  }

  unselect() {
    // the Peak button and a click on the strip drop the old highlight (and Python's copy)
    this.selected = -1;
    if (this.model.get("selected")) { this.model.set("selected", ""); this.model.save_changes(); }
  }

  // --- the table of buffers live at a step ---------------------------------------------------
  drawTable() {
    const m = this.meta, step = this.tableStep;
    const columns = [["name", "buffer"], ["size", "size"], ["shape", "shape"], ["kind", "kind"],
                     ["instruction", "instruction"]];
    const sourced = m.sources && m.sources.some((text) => text);      // metadata was printed
    if (sourced) columns.push(["source", "source (op_name, line)"]);
    const value = {
      name: (i) => m.names[i], size: (i) => this.size[i], shape: (i) => m.shapes[i],
      kind: (i) => m.kind_labels[this.kind[i]], instruction: (i) => `${m.instructions[i]} (${m.opcodes[i]})`,
      source: (i) => (m.sources && m.sources[i]) || "" };
    const query = this.filter.trim().toLowerCase();
    let live = this.liveAt(step);
    const count = live.length;
    if (query) live = live.filter((i) => columns.some(([key]) => String(value[key](i)).toLowerCase().includes(query)));
    const get = value[this.sortKey], sign = this.sortDown ? -1 : 1;
    live.sort((p, q) => { const a = get(p), b = get(q); return (a < b ? -1 : a > b ? 1 : 0) * sign; });
    const head = columns.map(([key, label]) => `<th data-sort="${key}" class="hlo-tl-sortable">${esc(label)}` +
      `${key === this.sortKey ? (this.sortDown ? " \u25bc" : " \u25b2") : ""}</th>`).join("");
    const rows = live.slice(0, TABLE_ROWS).map((i) => `<tr><td><a href="#" data-buffer="${i}">${esc(m.names[i])}</a></td>` +
      `<td>${formatBytes(this.size[i])}</td><td>${esc(m.shapes[i])}</td><td>${esc(value.kind(i))}</td>` +
      `<td>${esc(value.instruction(i))}</td>${sourced ? `<td>${esc(value.source(i))}</td>` : ""}</tr>`).join("");
    const shown = query ? `${live.length} of ${count}` : `${count}`;
    const more = live.length > TABLE_ROWS ? `<div class="hlo-tl-note">\u2026 ${live.length - TABLE_ROWS} more (filter or sort to see them)</div>` : "";
    const title = `${shown} buffers live at step ${step} (${esc(m.steps[step])})${step === m.peak_step ? ", the peak" : ""}`;
    const focused = document.activeElement && document.activeElement.classList.contains("hlo-tl-filter");
    this.table.innerHTML = `<div class="hlo-tl-table-bar"><b>${title}</b> ` +
      `<input class="hlo-tl-filter" type="search" placeholder="filter" spellcheck="false" value="${esc(this.filter)}"></div>` +
      `<div class="hlo-tl-table-body"><table><thead><tr>${head}</tr></thead><tbody>${rows}</tbody></table>${more}</div>`;
    const input = this.table.querySelector(".hlo-tl-filter");
    if (focused) { input.focus(); input.setSelectionRange(input.value.length, input.value.length); }
  }

  select(target, zoom) {
    const i = typeof target === "number" ? target : this.byName.get(target);
    if (i === undefined || i < 0) return false;
    this.selected = i;
    this.tooltip.hidden = true;     // the pointer no longer points at what the tooltip says
    this.details.innerHTML = this.bufferHtml(i);
    if (zoom) this.zoomTo(i);
    this.draw();
    this.revealInstruction(i);
    if (this.model.get("selected") !== this.meta.names[i]) {
      this.model.set("selected", this.meta.names[i]);
      this.model.save_changes();
    }
    return true;
  }

  zoomTo(i) {
    const len = this.end[i] - this.start[i] + 1;
    const padX = Math.max(2, len);
    this.x0 = Math.max(-0.5, this.start[i] - 0.5 - padX);
    this.x1 = Math.min(this.steps - 0.5, this.end[i] + 0.5 + padX);
    const yb = this.bottomOf(i);
    const h = this.size[i] * this.bandScale[this.allocBand[this.alloc[i]]];
    const padY = 2 * h;                 // the buffer takes a fifth of the height
    this.y0 = Math.max(0, yb - padY); this.y1 = Math.min(this.mapTop, yb + h + padY);
  }

  find(text) {
    const query = text.trim().toLowerCase();
    if (!query) return;
    const names = this.meta.names;
    let matches = names.map((n, i) => [n, i]).filter(([n]) => n.toLowerCase().includes(query));
    const exact = matches.find(([n]) => n.toLowerCase() === query);
    if (!matches.length) { this.details.innerHTML = `<div>no buffer named like \u201c${esc(text)}\u201d</div>`; return; }
    this.select(exact ? exact[1] : matches[0][1], true);
    if (matches.length > 1) {
      const more = matches.slice(0, 20).map(([n, i]) => `<a href="#" data-buffer="${i}">${esc(n)}</a>`).join(", ");
      this.details.innerHTML += `<div class="hlo-tl-note">${matches.length} matches: ${more}${matches.length > 20 ? ", \u2026" : ""}</div>`;
    }
  }

  // --- events -------------------------------------------------------------------------------
  bind() {
    const canvas = this.canvas;
    const local = (e) => { const b = canvas.getBoundingClientRect(); return [e.clientX - b.left, e.clientY - b.top]; };
    let drag = null;
    canvas.addEventListener("wheel", (e) => {
      const [px, py] = local(e);
      e.preventDefault();
      const factor = Math.pow(1.2, Math.sign(e.deltaY || e.deltaX));
      if (e.shiftKey && py >= this.mapY0) {
        const y = this.yAt(py);
        this.y0 = Math.max(0, y - (y - this.y0) * factor); this.y1 = Math.min(this.mapTop, y + (this.y1 - y) * factor);
      } else {
        const s = this.stepAt(px);
        this.x0 = Math.max(-0.5, s - (s - this.x0) * factor); this.x1 = Math.min(this.steps - 0.5, s + (this.x1 - s) * factor);
      }
      this.redraw();
    }, { passive: false });
    canvas.addEventListener("mousedown", (e) => {
      const [px, py] = local(e);
      drag = { px, py, x0: this.x0, x1: this.x1, y0: this.y0, y1: this.y1, moved: false, inMap: py >= this.mapY0 };
    });
    window.addEventListener("mouseup", (e) => {
      if (!drag) return;
      const wasClick = !drag.moved;
      drag = null;
      if (wasClick && e.target === canvas) this.click(...local(e));
    });
    canvas.addEventListener("mousemove", (e) => {
      const [px, py] = local(e);
      if (drag && (Math.abs(px - drag.px) > 3 || Math.abs(py - drag.py) > 3 || drag.moved)) {
        drag.moved = true;
        const dx = (px - drag.px) / (this.width - LEFT - RIGHT) * (drag.x1 - drag.x0);
        const wx = drag.x1 - drag.x0;
        this.x0 = Math.min(Math.max(-0.5, drag.x0 - dx), this.steps - 0.5 - wx); this.x1 = this.x0 + wx;
        if (drag.inMap) {
          const dy = (py - drag.py) / (this.mapY1 - this.mapY0) * (drag.y1 - drag.y0), wy = drag.y1 - drag.y0;
          this.y0 = Math.min(Math.max(0, drag.y0 + dy), this.mapTop - wy); this.y1 = this.y0 + wy;
        }
        this.tooltip.hidden = true;
        this.redraw();
        return;
      }
      this.hover(px, py);
    });
    canvas.addEventListener("mouseleave", () => { this.tooltip.hidden = true; });
    canvas.addEventListener("dblclick", (e) => {
      const h = this.hit(...local(e));
      if (h && h.buffer !== undefined) this.select(h.buffer, true);
    });
    this.q(".hlo-tl-find").addEventListener("click", () => this.find(this.search.value));
    this.search.addEventListener("keydown", (e) => { if (e.key === "Enter") this.find(this.search.value); });
    this.q(".hlo-tl-peak").addEventListener("click", () => { this.unselect(); this.resetView(); this.showStep(this.meta.peak_step); });
    this.collapse.addEventListener("change", () => { this.layoutBands(); this.resetView(); this.draw(); });
    this.table.addEventListener("click", (e) => {
      const link = e.target.closest("[data-buffer]"), sort = e.target.closest("[data-sort]");
      if (link) { e.preventDefault(); this.select(Number(link.dataset.buffer), true); }
      if (sort) {
        const key = sort.dataset.sort;
        this.sortDown = key === this.sortKey ? !this.sortDown : key === "size";
        this.sortKey = key;
        this.drawTable();
      }
    });
    this.table.addEventListener("input", (e) => {
      if (!e.target.classList.contains("hlo-tl-filter")) return;
      this.filter = e.target.value;
      this.drawTable();
    });
    this.q(".hlo-tl-reset").addEventListener("click", () => { this.resetView(); this.draw(); });
    this.q(".hlo-tl-png").addEventListener("click", () => this.savePng());
    this.q(".hlo-tl-svg").addEventListener("click", () => this.saveSvg());
    this.onDocumentClick = (e) => this.onAnnotatedClick(e);
    document.addEventListener("click", this.onDocumentClick);
    this.scaleMode.addEventListener("change", () => { this.layoutBands(); this.resetView(); this.draw(); });
    this.details.addEventListener("click", (e) => {
      const link = e.target.closest("[data-buffer]");
      if (link) { e.preventDefault(); this.select(Number(link.dataset.buffer), true); }
    });
    this.onSelected = () => {
      const name = this.model.get("selected");
      if (name && (this.selected < 0 || this.meta.names[this.selected] !== name)) this.select(name, true);
    };
    this.model.on("change:selected", this.onSelected);
    this.onData = () => { this.load(); this.draw(); };
    this.model.on("change:meta", this.onData);
    this.model.on("change:columns", this.onData);
    this.model.on("change:height", () => this.draw());
  }

  hover(px, py) {
    const h = this.hit(px, py);
    let html = "";
    if (h && h.buffer !== undefined) html = this.bufferHtml(h.buffer);
    else if (h && h.cell) html = this.cellHtml(h.cell);
    else if (h && h.strip) html = this.stepHtml(h.step);
    else if (h && h.band !== undefined) html = `<div class="hlo-tl-name">${esc(this.bands[h.band].label)}</div><div>step ${h.step}: nothing here</div>`;
    if (!html) { this.tooltip.hidden = true; return; }
    this.tooltip.innerHTML = html;
    this.tooltip.hidden = false;
    const box = this.tooltip.getBoundingClientRect();
    const left = px + 14 + box.width > this.width ? px - box.width - 10 : px + 14;
    const top = py + 14 + box.height > this.height ? Math.max(0, py - box.height - 10) : py + 14;
    this.tooltip.style.left = `${Math.max(0, left)}px`;
    this.tooltip.style.top = `${top}px`;
  }

  click(px, py) {
    const h = this.hit(px, py);
    if (h && h.buffer !== undefined) this.select(h.buffer, false);
    else if (h && h.strip) { this.unselect(); this.showStep(h.step); }
    else if (h && h.cell) { this.details.innerHTML = this.cellHtml(h.cell); }
  }

  dispose() {
    this.resize.disconnect();
    document.removeEventListener("click", this.onDocumentClick);
    for (const view of this.annotatedViews()) view.classList.remove("hlo-annotated-live");
    this.model.off("change:selected", this.onSelected);
    this.model.off("change:meta", this.onData);
    this.model.off("change:columns", this.onData);
  }
}

function hideStaticCopy(id) {
  // the static copy displayed just before this widget (fallback.py): a live view replaces it
  if (!id) return;
  for (const copy of document.querySelectorAll(`.hlo-magic-static-${id}`)) {
    (copy.closest(".jp-OutputArea-child, .output_area") || copy).style.display = "none";
  }
}

export default {
  render({ model, el }) {
    const view = new Timeline(model, el);
    requestAnimationFrame(() => {
      hideStaticCopy(model.get("static_id"));
      view.draw();
      view.markAnnotated();
      if (model.get("selected")) view.select(model.get("selected"), true);
    });
    return () => view.dispose();
  },
};
