// forewarn fleet map, second half: live cell states (polling
// /v1/map/states), filters and search, hover and click, and the start.
// Loaded after app.js (the page's state `fw`, the wire format, the layout
// and drawing) and before panel.js; classic scripts share one global
// scope, so the functions here call app.js's directly.

'use strict';

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
