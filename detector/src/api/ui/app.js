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

// ---- the wire format: one binary frame per answer (frame.rs) --------------
// "FWM1", u32 header length, a JSON header whose `cols` lists the columns,
// then each column (little-endian), each padded to 8 bytes. Columns become
// typed arrays over the response buffer: nothing is parsed per GPU.

const MAGIC = 0x314d5746; // "FWM1" read as a little-endian u32
const KINDS = { u8: Uint8Array, u32: Uint32Array };
const LITTLE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const utf8 = new TextDecoder();

// `url`, or a fetch of it already under way (see index.html).
async function getFrame(url, started) {
  const r = await (started || fetch(url, { cache: 'no-store' }));
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  const buf = await r.arrayBuffer();
  const dv = new DataView(buf);
  if (buf.byteLength < 8 || dv.getUint32(0, true) !== MAGIC) throw new Error(`${url}: not a map frame`);
  if (!LITTLE) throw new Error('big-endian browsers are not supported');
  const hlen = dv.getUint32(4, true);
  const head = JSON.parse(utf8.decode(new Uint8Array(buf, 8, hlen)));
  let off = (8 + hlen + 7) & ~7;
  for (const c of head.cols) {
    const T = KINDS[c.type];
    head[c.name] = new T(buf, off, c.len);
    off = (off + c.len * T.BYTES_PER_ELEMENT + 7) & ~7;
  }
  return head;
}

// GPU ids from the frame's back-to-back UTF-8: one decode, then slices
// (ASCII, the usual case) or one decode per id. Only search and lookups by
// id need them all (layout.gpu_ids, built on first use); hover and the
// panel decode one (fw.idOf).
function gpuIds(bytes, ends) {
  const n = ends.length, out = new Array(n);
  const all = utf8.decode(bytes);
  if (all.length === bytes.length) {
    for (let i = 0, from = 0; i < n; i++) { out[i] = all.slice(from, ends[i]); from = ends[i]; }
  } else {
    for (let i = 0, from = 0; i < n; i++) { out[i] = utf8.decode(bytes.subarray(from, ends[i])); from = ends[i]; }
  }
  return out;
}

fw.idOf = (i) => {
  const l = fw.layout, e = l.gpu_id_end;
  return utf8.decode(l.gpu_id_bytes.subarray(i ? e[i - 1] : 0, e[i]));
};

// ---- layout: group index ranges and geometry ---------------------------

function indexLayout(l) {
  const n = l.n;
  let ids = null;
  Object.defineProperty(l, 'gpu_ids', { get: () => ids || (ids = gpuIds(l.gpu_id_bytes, l.gpu_id_end)) });
  fw.layout = l; fw.n = n; fw.layoutVersion = l.layout_version;
  fw.st = new Uint8Array(n).fill(255); fw.risk = new Uint8Array(n); fw.job = new Uint32Array(n);
  fw.match = new Uint8Array(n).fill(1);
  fw.gpuRack = new Uint32Array(n); fw.gpuCluster = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    const r = l.host_rack[l.gpu_host[i]];
    fw.gpuRack[i] = r; fw.gpuCluster[i] = l.rack_cluster[r];
  }
  // Built on first use (search, tests, incidents), not before the first draw.
  fw.idLower = null; fw.hostLower = null; fw.byIdMap = null;
}

// The filter menus (a few thousand options at 100,000 GPUs), filled after
// the first draw is on screen.
function fillFilters() {
  const l = fw.layout;
  fillOptions($('f-cluster'), l.clusters, 'all clusters');
  fillOptions($('f-model'), l.models, 'all models');
  fillRacks();
}

fw.indexOf = (uuid) => {
  if (!fw.byIdMap) fw.byIdMap = new Map(fw.layout.gpu_ids.map((id, i) => [id, i]));
  return fw.byIdMap.get(uuid);
};

// Cluster → racks → hosts → first cell, from the sorted cell order. Each
// rack's hosts are split once into columns of MAX_HOSTS_PER_COL with the
// sums the sizing needs, so trying a cell size costs a pass over racks,
// not hosts.
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
  for (const cl of out) {
    for (const rk of cl.racks) {
      rk.cols = [];
      rk.cells = 0; // widest host, in cells
      for (let k = 0; k < rk.hosts.length; k += MAX_HOSTS_PER_COL) {
        const hosts = rk.hosts.slice(k, k + MAX_HOSTS_PER_COL);
        let rows = 0;
        for (const ho of hosts) { rows += Math.ceil(ho.count / HOST_COLS); rk.cells = Math.max(rk.cells, Math.min(ho.count, HOST_COLS)); }
        rk.cols.push({ hosts, rows });
      }
    }
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
  let x = 0, y = 0, rowH = 0;
  for (const c of G) {
    // Size the racks, then wrap them into rows inside the cluster.
    const boxes = c.racks.map((r) => {
      let h = 0;
      for (const col of r.cols) h = Math.max(h, col.rows * p + (col.hosts.length - 1) * hostGap);
      const colW = r.cells * p, n = r.cols.length;
      return { cols: r.cols, colW, w: n * (colW + rackPad * 2) + (n - 1) * rackGap, h: h + rackPad * 2 };
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
          for (const h of col.hosts) {
            for (let j = 0; j < h.count; j++) {
              fw.cx[h.first + j] = px + rackPad + (j % HOST_COLS) * p;
              fw.cy[h.first + j] = hy + ((j / HOST_COLS) | 0) * p;
            }
            hy += Math.ceil(h.count / HOST_COLS) * p + hostGap;
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
  fw.hit = null; // built on the first pointer event (hitTable)
  fullDraw();
  placeMark();
}

// The pixel → cell table for hit-testing, built when first needed.
function hitTable() {
  if (fw.hit) return fw.hit;
  const { W, H, s } = fw, hit = new Int32Array(W * H).fill(-1);
  for (let i = 0; i < fw.n; i++) {
    const x0 = fw.cx[i], y0 = fw.cy[i];
    if (x0 + s > W || y0 + s > H) continue;
    for (let y = y0; y < y0 + s; y++) hit.fill(i, y * W + x0, y * W + x0 + s);
  }
  fw.hit = hit;
  return hit;
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
  if (d.full) {
    // Every cell, in cell order.
    fw.st.set(state); fw.risk.set(risk); fw.job.set(job);
  } else {
    for (let k = 0; k < idx.length; k++) {
      const i = idx[k];
      fw.st[i] = state[k]; fw.risk[i] = risk[k]; fw.job[i] = job[k];
    }
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

// The next frame, i.e. the canvas as drawn is on screen (headless
// chromium renders frames too); a timer in case frames are throttled.
const nextFrame = () => new Promise((r) => {
  requestAnimationFrame(() => setTimeout(() => r('frame'), 0));
  setTimeout(() => r('timer'), 500);
});

// Layout and every cell (fetched in parallel, from the same snapshot
// unless the layout changed in between), then the first full draw. Timed
// for the bench: ms since navigation start of each step. The first time,
// index.html has already started both fetches.
async function firstLoad() {
  const t0 = performance.now();
  let l, d, tl = 0, td = 0;
  for (let tries = 0; ; tries++) {
    const early = window.__fwFirst || [];
    window.__fwFirst = null;
    [l, d] = await Promise.all([
      getFrame('/v1/map', early[0]).then((x) => { tl = performance.now(); return x; }),
      getFrame('/v1/map/states?since=0', early[1]).then((x) => { td = performance.now(); return x; }),
    ]);
    if (l.layout_version === d.layout_version || tries === 2) break;
  }
  if (l.layout_version !== d.layout_version) throw new Error('the layout keeps changing; retrying');
  const t1 = performance.now();
  indexLayout(l);
  applyStates(d);
  recomputeMatch();
  const t2 = performance.now();
  relayout();
  const t3 = performance.now();
  const first = fw.perf.firstDrawMs === null;
  if (first) {
    Object.assign(fw.perf, {
      startMs: t0, layoutAtMs: tl, statesAtMs: td, fetchedAtMs: t1,
      indexMs: t2 - t1, drawMs: t3 - t2, firstDrawMs: t3 - t1, navToFirstDrawMs: t3,
      layoutBytes: l.gpu_id_bytes.buffer.byteLength, statesBytes: d.state.buffer.byteLength,
    });
  }
  const how = await nextFrame();
  if (first) Object.assign(fw.perf, { navToPaintMs: performance.now(), paintedBy: how });
  fillFilters();
}

async function poll() {
  try {
    if (!fw.layout) {
      await firstLoad();
    } else {
      const t0 = performance.now();
      const d = await getFrame(`/v1/map/states?since=${fw.version}`);
      const t1 = performance.now();
      if (d.layout_version !== fw.layoutVersion) {
        await firstLoad();
      } else if (d.full) {
        applyStates(d);
        recomputeMatch();
        fullDraw();
      } else if (d.n) {
        applyStates(d);
        paintChanged(d.idx);
        const t2 = performance.now();
        for (const f of fw.onUpdate) f();
        const t3 = performance.now();
        fw.perf.updates.push({ cells: d.n, fetchMs: t1 - t0, drawMs: t2 - t1, panelMs: t3 - t2, totalMs: t3 - t0 });
        if (fw.perf.updates.length > 200) fw.perf.updates.shift();
        fw.ready = true;
        $('status').textContent = `${fw.n.toLocaleString()} GPUs · v${fw.version}`;
        setTimeout(poll, POLL_MS);
        return;
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

// Lower-cased ids and host names for search, built on the first search.
function lowerIds() {
  if (!fw.idLower) {
    fw.idLower = fw.layout.gpu_ids.map((x) => x.toLowerCase());
    fw.hostLower = fw.layout.host_names.map((x) => x.toLowerCase());
  }
  return fw.idLower;
}

function matches(i) {
  const f = fw.filters, l = fw.layout;
  if (f.cluster !== '' && fw.gpuCluster[i] !== +f.cluster) return false;
  if (f.rack !== '' && fw.gpuRack[i] !== +f.rack) return false;
  if (f.model !== '' && l.gpu_model[i] !== +f.model) return false;
  if (f.job !== '' && fw.jobs[fw.job[i]] !== f.job) return false;
  if (f.state !== '' && fw.st[i] !== +f.state) return false;
  if (f.q !== '' && !lowerIds()[i].includes(f.q) && !fw.hostLower[l.gpu_host[i]].includes(f.q)) return false;
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
  if (!fw.layout || !fw.buf || x < 0 || y < 0 || x >= fw.W || y >= fw.H) return -1;
  const hit = hitTable();
  // Tiny cells: also accept a pointer a pixel or two off.
  for (const [dx, dy] of [[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [-1, -1], [2, 0], [0, 2]]) {
    const xx = x + dx, yy = y + dy;
    if (xx >= 0 && yy >= 0 && xx < fw.W && yy < fw.H && hit[yy * fw.W + xx] >= 0) return hit[yy * fw.W + xx];
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
    gpu: fw.idOf(i), host: l.host_names[l.gpu_host[i]], rack: l.rack_names[fw.gpuRack[i]],
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
  const i = fw.layout ? fw.indexOf(uuid) : undefined;
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
