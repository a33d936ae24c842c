// forewarn fleet map: the layout and live cell states from /v1/map, drawn
// on one canvas (cells written into one ImageData; no DOM node per GPU),
// hit-tested through a pixel → cell table, filtered in typed arrays.
// panel.js adds the side panel, the riskiest list, incidents and silences.
'use strict';

const STATES = ['healthy', 'watch', 'degraded', 'failing', 'silent'];
// Okabe–Ito, as in style.css.
const RGB = [[0, 158, 115], [240, 228, 66], [230, 159, 0], [213, 94, 0], [204, 121, 167]];
const BG = [20, 23, 27], CLUSTER_BG = [33, 38, 45], RACK_BG = [[42, 48, 56], [48, 55, 64]];
const POLL_MS = 1000;
const HOST_COLS = 4, MAX_HOSTS_PER_COL = 16;

const $ = (id) => document.getElementById(id);
const pack = (c) => (0xff000000 | (c[2] << 16) | (c[1] << 8) | c[0]) >>> 0;
const mix = (c, k) => c.map((v, i) => Math.round(v * k + BG[i] * (1 - k)));
const COL = RGB.map(pack), DIM = RGB.map((c) => pack(mix(c, 0.22)));
const UNKNOWN = pack([90, 90, 90]);

// Everything the page knows; panel.js reads it through window.fw.
const fw = {
  layout: null, n: 0, version: 0, layoutVersion: 0,
  st: new Uint8Array(0), risk: new Uint8Array(0), job: new Uint32Array(0), jobs: [''],
  match: new Uint8Array(0), filters: { cluster: '', rack: '', model: '', job: '', state: '', q: '' },
  gpuRack: null, gpuCluster: null,
  cx: new Int32Array(0), cy: new Int32Array(0), s: 1, W: 0, H: 0, dpr: 1,
  img: null, buf: null, hit: null, labels: [], selected: -1,
  perf: { navToFirstDrawMs: null, layoutMs: null, firstStatesMs: null, firstDrawMs: null, updates: [] },
  onUpdate: [], ready: false,
};
window.fw = fw;
window.__fwPerf = fw.perf;

const canvas = $('map');
const ctx = canvas.getContext('2d', { alpha: false });

async function getJSON(url) {
  const r = await fetch(url, { cache: 'no-store' });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}

// ---- layout: group index ranges and geometry ---------------------------

function indexLayout(l) {
  const n = l.gpu_ids.length;
  fw.layout = l; fw.n = n; fw.layoutVersion = l.layout_version;
  fw.st = new Uint8Array(n).fill(255); fw.risk = new Uint8Array(n); fw.job = new Uint32Array(n);
  fw.match = new Uint8Array(n).fill(1);
  fw.gpuRack = new Uint32Array(n); fw.gpuCluster = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    const r = l.host_rack[l.gpu_host[i]];
    fw.gpuRack[i] = r; fw.gpuCluster[i] = l.rack_cluster[r];
  }
  fw.idLower = l.gpu_ids.map((s) => s.toLowerCase());
  fw.hostLower = l.host_names.map((s) => s.toLowerCase());
  fw.byId = new Map(l.gpu_ids.map((id, i) => [id, i]));
  fillOptions($('f-cluster'), l.clusters, 'all clusters');
  fillOptions($('f-model'), l.models, 'all models');
  fillRacks();
}

// Cluster → racks → hosts → first cell, from the sorted cell order.
function groups() {
  const l = fw.layout, out = [];
  let c = null, r = null, h = null;
  for (let i = 0; i < fw.n; i++) {
    const hi = l.gpu_host[i], ri = l.host_rack[hi], ci = l.rack_cluster[ri];
    if (!c || c.ci !== ci) { c = { ci, racks: [] }; out.push(c); r = null; }
    if (!r || r.ri !== ri) { r = { ri, hosts: [] }; c.racks.push(r); h = null; }
    if (!h || h.hi !== hi) { h = { first: i, count: 0, hi }; r.hosts.push(h); }
    h.count++;
  }
  return out;
}

// Geometry at cell size s (device px); returns the needed height. With
// `place`, records every cell's position, the panels and the labels.
// Racks sit side by side in their cluster (wrapping when the cluster is
// wider than the canvas), hosts stack down their rack in blocks of
// HOST_COLS cells, clusters flow left to right.
function geometry(G, s, W, place) {
  const p = s + (s >= 5 ? 1 : 0);
  const hostGap = s >= 3 ? Math.max(1, (s / 3) | 0) : 0;
  const rackPad = s >= 3 ? 2 : 0, rackGap = s >= 3 ? 3 : 1;
  const cPad = s >= 3 ? 4 : 1, cGap = s >= 3 ? 8 : 3;
  const labelH = s >= 3 ? Math.round(13 * fw.dpr) + 3 : 0;
  const hostH = (h) => Math.ceil(h.count / HOST_COLS) * p;
  let x = 0, y = 0, rowH = 0;
  for (const c of G) {
    // Size the racks, then wrap them into rows inside the cluster.
    const boxes = c.racks.map((r) => {
      const cols = [];
      for (let k = 0; k < r.hosts.length; k += MAX_HOSTS_PER_COL) cols.push(r.hosts.slice(k, k + MAX_HOSTS_PER_COL));
      let colW = 0, h = 0;
      for (const col of cols) {
        let hgt = -hostGap;
        for (const host of col) { hgt += hostH(host) + hostGap; colW = Math.max(colW, Math.min(host.count, HOST_COLS) * p); }
        h = Math.max(h, hgt);
      }
      return { cols, colW, w: cols.length * (colW + rackPad * 2) + (cols.length - 1) * rackGap, h: h + rackPad * 2 };
    });
    const maxW = Math.max(1, W - 2 * cPad);
    let rx = 0, ry = 0, rh = 0, cw = 0;
    for (const b of boxes) {
      if (rx > 0 && rx + b.w > maxW) { ry += rh + rackGap; rx = 0; rh = 0; }
      b.x = rx; b.y = ry;
      rx += b.w + rackGap; rh = Math.max(rh, b.h); cw = Math.max(cw, rx - rackGap);
    }
    const panelW = cw + 2 * cPad, panelH = ry + rh + 2 * cPad;
    if (x > 0 && x + panelW > W) { x = 0; y += rowH + cGap; rowH = 0; }
    if (place) {
      const ox = x, oy = y + labelH;
      fw.panels.push({ x: ox, y: oy, w: panelW, h: panelH, bg: CLUSTER_BG });
      if (labelH) fw.labels.push({ x: ox + 1, y: y + labelH - 4, w: panelW, text: fw.layout.clusters[c.ci] });
      boxes.forEach((b, k) => {
        b.cols.forEach((col, ci) => {
          const px = ox + cPad + b.x + ci * (b.colW + rackPad * 2 + rackGap), py = oy + cPad + b.y;
          fw.panels.push({ x: px, y: py, w: b.colW + rackPad * 2, h: b.h, bg: RACK_BG[k & 1] });
          let hy = py + rackPad;
          for (const h of col) {
            for (let j = 0; j < h.count; j++) {
              fw.cx[h.first + j] = px + rackPad + (j % HOST_COLS) * p;
              fw.cy[h.first + j] = hy + ((j / HOST_COLS) | 0) * p;
            }
            hy += hostH(h) + hostGap;
          }
        });
      });
    }
    x += panelW + cGap;
    rowH = Math.max(rowH, labelH + panelH);
  }
  return y + rowH;
}

// Picks the largest cell size that fits the viewport (or, when even tiny
// cells do not fit, a readable size with the page scrolling), then places.
function relayout() {
  if (!fw.layout) return;
  const dpr = (fw.dpr = window.devicePixelRatio || 1);
  const cssW = canvas.parentElement.clientWidth - 24;
  const top = canvas.getBoundingClientRect().top + window.scrollY;
  const cssAvail = Math.max(260, window.innerHeight - top - 14);
  const W = Math.max(100, Math.floor(cssW * dpr)), avail = Math.floor(cssAvail * dpr);
  const G = groups();
  const minS = Math.max(1, Math.round(2 * dpr)), maxS = Math.round(20 * dpr);
  let s = 0;
  for (let t = maxS; t >= 1; t--) if (geometry(G, t, W, false) <= avail) { s = t; break; }
  if (s < minS) {
    s = minS;
    for (let t = maxS; t > minS; t--) if (geometry(G, t, W, false) <= 4 * avail) { s = t; break; }
  }
  fw.cx = new Int32Array(fw.n); fw.cy = new Int32Array(fw.n);
  fw.panels = []; fw.labels = [];
  const H = Math.max(avail, geometry(G, s, W, true));
  fw.s = s; fw.W = W; fw.H = H;
  canvas.width = W; canvas.height = H;
  canvas.style.height = `${H / dpr}px`;
  fw.img = ctx.createImageData(W, H);
  fw.buf = new Uint32Array(fw.img.data.buffer);
  fw.hit = new Int32Array(W * H).fill(-1);
  for (let i = 0; i < fw.n; i++) {
    const x0 = fw.cx[i], y0 = fw.cy[i];
    if (x0 + s > W) continue;
    for (let y = y0; y < y0 + s; y++) fw.hit.fill(i, y * W + x0, y * W + x0 + s);
  }
  fullDraw();
  placeMark();
}

// ---- drawing -------------------------------------------------------------

// Fills a rectangle of the pixel buffer, clipped to the canvas (a row
// must never spill into the next one).
function rect(x, y, w, h, c) {
  const W = fw.W, buf = fw.buf, x1 = Math.min(W, x + w), y1 = Math.min(fw.H, y + h);
  for (let r = Math.max(0, y); r < y1; r++) buf.fill(c, r * W + x, r * W + x1);
}

function cellColor(i) {
  const st = fw.st[i];
  if (st > 4) return UNKNOWN;
  return fw.match[i] ? COL[st] : DIM[st];
}

function paintCell(i) {
  rect(fw.cx[i], fw.cy[i], fw.s, fw.s, cellColor(i));
}

function drawLabels() {
  ctx.fillStyle = '#c9d1d9';
  ctx.font = `${Math.round(12 * fw.dpr)}px system-ui, sans-serif`;
  ctx.textBaseline = 'alphabetic';
  for (const l of fw.labels) ctx.fillText(l.text, l.x, l.y, l.w);
}

function fullDraw() {
  fw.buf.fill(pack(BG));
  for (const p of fw.panels) rect(p.x, p.y, p.w, p.h, pack(p.bg));
  for (let i = 0; i < fw.n; i++) paintCell(i);
  ctx.putImageData(fw.img, 0, 0);
  drawLabels();
}

// ---- live states -----------------------------------------------------------

function applyStates(d) {
  if (d.jobs_from + d.jobs.length > fw.jobs.length) {
    fw.jobs.length = d.jobs_from;
    for (const j of d.jobs) fw.jobs.push(j);
  }
  const { idx, state, risk, job } = d;
  for (let k = 0; k < idx.length; k++) {
    const i = idx[k];
    fw.st[i] = state[k]; fw.risk[i] = risk[k]; fw.job[i] = job[k];
  }
  fw.version = d.version;
}

// Repaints only the changed cells: few cells are put one by one, many in
// one full put (cheaper than thousands of small puts).
function paintChanged(idx) {
  const f = fw.filters, stateOrJob = f.state !== '' || f.job !== '';
  for (const i of idx) {
    if (stateOrJob) fw.match[i] = matches(i) ? 1 : 0;
    paintCell(i);
  }
  if (idx.length <= 400) {
    for (const i of idx) ctx.putImageData(fw.img, 0, 0, fw.cx[i], fw.cy[i], fw.s, fw.s);
  } else {
    ctx.putImageData(fw.img, 0, 0);
    drawLabels();
  }
}

async function loadLayout() {
  indexLayout(await getJSON('/v1/map'));
  fw.version = 0;
}

// Layout and every cell, then the first full draw (timed for the bench).
async function firstLoad() {
  const t0 = performance.now();
  await loadLayout();
  const t1 = performance.now();
  applyStates(await getJSON('/v1/map/states?since=0'));
  const t2 = performance.now();
  recomputeMatch();
  relayout();
  const t3 = performance.now();
  if (fw.perf.firstDrawMs === null) {
    Object.assign(fw.perf, { layoutMs: t1 - t0, firstStatesMs: t2 - t1, firstDrawMs: t3 - t2, navToFirstDrawMs: t3 });
  }
}

async function poll() {
  try {
    if (!fw.layout) {
      await firstLoad();
    } else {
      const t0 = performance.now();
      const d = await getJSON(`/v1/map/states?since=${fw.version}`);
      const t1 = performance.now();
      if (d.layout_version !== fw.layoutVersion) {
        await firstLoad();
      } else if (d.idx.length) {
        applyStates(d);
        paintChanged(d.idx);
        const t2 = performance.now();
        fw.perf.updates.push({ cells: d.idx.length, fetchMs: t1 - t0, drawMs: t2 - t1, totalMs: t2 - t0 });
        if (fw.perf.updates.length > 200) fw.perf.updates.shift();
      }
    }
    for (const f of fw.onUpdate) f();
    fw.ready = true;
    $('status').textContent = `${fw.n.toLocaleString()} GPUs · v${fw.version}`;
  } catch (e) {
    $('status').textContent = `offline: ${e.message}`;
  }
  setTimeout(poll, POLL_MS);
}

// ---- filters and search ------------------------------------------------------

function fillOptions(sel, names, all, values) {
  const keep = sel.value;
  sel.length = 0;
  sel.add(new Option(all, ''));
  names.forEach((n, k) => sel.add(new Option(n, values ? values[k] : String(k))));
  sel.value = keep;
  if (sel.value !== keep) sel.value = '';
}

function fillRacks() {
  const l = fw.layout, c = $('f-cluster').value;
  const names = [], values = [];
  l.rack_names.forEach((n, k) => {
    if (c === '' || String(l.rack_cluster[k]) === c) {
      names.push(c === '' ? `${l.clusters[l.rack_cluster[k]]}/${n}` : n);
      values.push(String(k));
    }
  });
  fillOptions($('f-rack'), names, 'all racks', values);
}

function matches(i) {
  const f = fw.filters, l = fw.layout;
  if (f.cluster !== '' && fw.gpuCluster[i] !== +f.cluster) return false;
  if (f.rack !== '' && fw.gpuRack[i] !== +f.rack) return false;
  if (f.model !== '' && l.gpu_model[i] !== +f.model) return false;
  if (f.job !== '' && fw.jobs[fw.job[i]] !== f.job) return false;
  if (f.state !== '' && fw.st[i] !== +f.state) return false;
  if (f.q !== '' && !fw.idLower[i].includes(f.q) && !fw.hostLower[l.gpu_host[i]].includes(f.q)) return false;
  return true;
}

function recomputeMatch() {
  let hits = 0, last = -1;
  const any = Object.values(fw.filters).some((v) => v !== '');
  for (let i = 0; i < fw.n; i++) {
    const m = !any || matches(i);
    fw.match[i] = m ? 1 : 0;
    if (m) { hits++; last = i; }
  }
  $('matches').textContent = any ? `${hits.toLocaleString()} match` : '';
  return { hits, last };
}

function onFilter() {
  for (const k of ['cluster', 'rack', 'model', 'job', 'state']) fw.filters[k] = $(`f-${k}`).value;
  fw.filters.q = $('search').value.trim().toLowerCase();
  if (!fw.layout) return;
  const { hits, last } = recomputeMatch();
  fullDraw();
  if (hits === 1 && fw.filters.q !== '') fw.select(last);
  for (const f of fw.onUpdate) f();
}

function setFilter(key, value) {
  $(`f-${key}`).value = value;
  if (key === 'cluster') fillRacks();
  onFilter();
}
fw.setFilter = setFilter;

// ---- hover, click, selection -------------------------------------------------

function cellAtEvent(ev) {
  const r = canvas.getBoundingClientRect();
  const x = Math.floor((ev.clientX - r.left) * fw.dpr), y = Math.floor((ev.clientY - r.top) * fw.dpr);
  if (!fw.hit || x < 0 || y < 0 || x >= fw.W || y >= fw.H) return -1;
  // Tiny cells: also accept a pointer a pixel or two off.
  for (const [dx, dy] of [[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [-1, -1], [2, 0], [0, 2]]) {
    const xx = x + dx, yy = y + dy;
    if (xx >= 0 && yy >= 0 && xx < fw.W && yy < fw.H && fw.hit[yy * fw.W + xx] >= 0) return fw.hit[yy * fw.W + xx];
  }
  return -1;
}

function cellBox(i) {
  // CSS px relative to #mapwrap.
  return { x: canvas.offsetLeft + fw.cx[i] / fw.dpr, y: canvas.offsetTop + fw.cy[i] / fw.dpr, s: fw.s / fw.dpr };
}

function placeMark() {
  const m = $('mark');
  if (fw.selected < 0) { m.hidden = true; return; }
  const b = cellBox(fw.selected), pad = 3;
  Object.assign(m.style, { left: `${b.x - pad}px`, top: `${b.y - pad}px`, width: `${b.s + pad * 2}px`, height: `${b.s + pad * 2}px` });
  m.hidden = false;
}

fw.describe = (i) => {
  const l = fw.layout, st = fw.st[i];
  return {
    gpu: l.gpu_ids[i], host: l.host_names[l.gpu_host[i]], rack: l.rack_names[fw.gpuRack[i]],
    cluster: l.clusters[fw.gpuCluster[i]], model: l.models[l.gpu_model[i]],
    job: fw.jobs[fw.job[i]] || '', risk: fw.risk[i] / 100, state: STATES[st] || 'unknown',
  };
};

canvas.addEventListener('mousemove', (ev) => {
  const i = cellAtEvent(ev), tip = $('tip');
  if (i < 0) { tip.hidden = true; return; }
  const d = fw.describe(i);
  tip.textContent = `${d.gpu} · ${d.host} · job ${d.job || '—'} · risk ${d.risk.toFixed(2)} (${d.state})`;
  const wrap = canvas.parentElement.getBoundingClientRect();
  let x = ev.clientX - wrap.left + 14;
  tip.hidden = false;
  if (x + tip.offsetWidth > wrap.width) x = Math.max(0, ev.clientX - wrap.left - tip.offsetWidth - 14);
  tip.style.left = `${x}px`;
  tip.style.top = `${ev.clientY - wrap.top + 14}px`;
});
canvas.addEventListener('mouseleave', () => { $('tip').hidden = true; });
canvas.addEventListener('click', (ev) => {
  const i = cellAtEvent(ev);
  if (i >= 0) fw.select(i);
});

fw.select = (i) => {
  fw.selected = i;
  placeMark();
  if (fw.openPanel) fw.openPanel(i);
};

// For tests and benchmarks: where a GPU is drawn, and the pixel there.
fw.cellOf = (uuid) => {
  const i = fw.byId ? fw.byId.get(uuid) : undefined;
  if (i === undefined) return null;
  const b = cellBox(i), r = canvas.getBoundingClientRect();
  const px = ctx.getImageData(fw.cx[i], fw.cy[i], 1, 1).data;
  return {
    index: i, state: STATES[fw.st[i]], x: fw.cx[i], y: fw.cy[i], s: fw.s,
    clientX: r.left + (fw.cx[i] + fw.s / 2) / fw.dpr, clientY: r.top + (fw.cy[i] + fw.s / 2) / fw.dpr,
    box: b, pixel: [px[0], px[1], px[2]],
  };
};
fw.colors = Object.fromEntries(STATES.map((s, k) => [s, RGB[k]]));

// ---- start -------------------------------------------------------------------

function init() {
  const sel = $('f-state');
  STATES.forEach((s, k) => sel.add(new Option(s, String(k))));
  for (const k of ['cluster', 'rack', 'model', 'job', 'state']) {
    $(`f-${k}`).addEventListener('change', () => { if (k === 'cluster') fillRacks(); onFilter(); });
  }
  let timer = 0;
  $('search').addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(onFilter, 150); });
  $('f-clear').addEventListener('click', () => {
    for (const k of ['cluster', 'rack', 'model', 'job', 'state']) $(`f-${k}`).value = '';
    $('search').value = '';
    fillRacks();
    onFilter();
  });
  let rz = 0;
  window.addEventListener('resize', () => { clearTimeout(rz); rz = setTimeout(relayout, 120); });
  poll();
}
init();
