// forewarn fleet map: the layout and live cell states from /v1/map, drawn
// on one canvas (cells written into one ImageData; no DOM node per GPU),
// hit-tested through a pixel → cell table, filtered in typed arrays.
// live.js keeps the cells up to date and handles filters and the mouse;
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
