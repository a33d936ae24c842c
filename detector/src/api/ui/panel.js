// forewarn fleet map, the text around the canvas: counts per state, the
// riskiest GPUs, active incidents, silences, and the side panel of one GPU
// (from /v1/gpus/{uuid}). Reads the typed arrays app.js keeps in window.fw.
'use strict';

(() => {
  const fw = window.fw;
  const $ = (id) => document.getElementById(id);
  const STATES = ['healthy', 'watch', 'degraded', 'failing', 'silent'];
  const TOP_N = 10;
  const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const sw = (k) => `<span class="sw" style="background:var(--${STATES[k]})"></span>`;
  const stateBadge = (s) => `<span class="state" style="background:var(--${esc(s)}, #888)">${esc(s)}</span>`;

  // ---- counts per state (chips toggle the state filter) ----------------------
  const chips = STATES.map((s, k) => {
    const b = document.createElement('button');
    b.type = 'button'; b.className = 'chip'; b.dataset.state = s;
    b.innerHTML = `${sw(k)}${s} <b>0</b>`;
    b.addEventListener('click', () => fw.setFilter('state', fw.filters.state === String(k) ? '' : String(k)));
    $('counts').appendChild(b);
    return b;
  });

  function counts() {
    const c = [0, 0, 0, 0, 0];
    for (let i = 0; i < fw.n; i++) if (fw.st[i] < 5) c[fw.st[i]]++;
    chips.forEach((b, k) => {
      b.querySelector('b').textContent = c[k].toLocaleString();
      b.classList.toggle('on', fw.filters.state === String(k));
    });
  }

  // ---- riskiest GPUs: a bounded selection over the risk array --------------
  function riskiest() {
    const top = [];
    for (let i = 0; i < fw.n; i++) {
      const r = fw.risk[i];
      if (r === 0 || (top.length === TOP_N && r <= fw.risk[top[TOP_N - 1]])) continue;
      let k = top.length < TOP_N ? top.length : TOP_N - 1;
      top[k] = i;
      while (k > 0 && fw.risk[top[k - 1]] < r) { top[k] = top[k - 1]; top[k - 1] = i; k--; }
    }
    const ol = $('riskiest');
    const html = top.length
      ? top.map((i) => {
        const d = fw.describe(i);
        return `<li data-i="${i}" title="${esc(d.gpu)}">${sw(fw.st[i])} <b>${d.risk.toFixed(2)}</b> ${esc(d.host)} · ${esc(d.gpu)}</li>`;
      }).join('')
      : '<li class="muted">no GPU at risk</li>';
    if (ol.innerHTML !== html) ol.innerHTML = html;
  }
  $('riskiest').addEventListener('click', (ev) => {
    const li = ev.target.closest('li[data-i]');
    if (li) fw.select(+li.dataset.i);
  });

  // ---- incidents (active alerts, widest scope first) -------------------------
  const SCOPE_RANK = { fleet: 0, cluster: 1, rack: 2, host: 3, job: 3, gpu: 4 };
  let alerts = [];
  async function loadAlerts() {
    try {
      const r = await fetch('/v1/alerts', { cache: 'no-store' });
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      alerts = (await r.json()).items || [];
      alerts.sort((a, b) => (SCOPE_RANK[a.scope] ?? 5) - (SCOPE_RANK[b.scope] ?? 5) || b.risk - a.risk);
      const ul = $('incidents');
      ul.innerHTML = alerts.length
        ? alerts.slice(0, 50).map((a, k) => `<li data-k="${k}" title="${esc(a.summary)}"><span class="tag ${esc(a.severity)}">${esc(a.scope)}</span>${esc(a.summary)}</li>`).join('')
          + (alerts.length > 50 ? `<li class="muted">and ${alerts.length - 50} more</li>` : '')
        : '<li class="muted">none</li>';
    } catch (e) {
      $('incidents').innerHTML = `<li class="muted">alerts unavailable (${esc(e.message)})</li>`;
    }
  }
  // Clicking an incident narrows the map to its scope.
  $('incidents').addEventListener('click', (ev) => {
    const li = ev.target.closest('li[data-k]');
    const a = li && alerts[+li.dataset.k];
    if (!a || !fw.layout) return;
    const lab = a.labels || {};
    if (a.scope === 'gpu' && lab.gpu && fw.indexOf(lab.gpu) !== undefined) { fw.select(fw.indexOf(lab.gpu)); return; }
    if (a.scope === 'host' && lab.host) { $('search').value = lab.host; fw.setFilter('state', ''); return; }
    if (a.scope === 'job' && lab.job) { fillJobs(); fw.setFilter('job', lab.job); return; }
    const ci = fw.layout.clusters.indexOf(lab.cluster);
    if (ci >= 0) fw.setFilter('cluster', String(ci));
    if (a.scope === 'rack' && lab.rack) {
      const ri = fw.layout.rack_names.findIndex((n, k) => n === lab.rack && fw.layout.rack_cluster[k] === ci);
      if (ri >= 0) fw.setFilter('rack', String(ri));
    }
  });

  // ---- silences: only if this server has the API (avoids a 404 per poll) ----
  let silencesApi = null;
  async function loadSilences() {
    const ul = $('silences');
    try {
      if (silencesApi === null) {
        const spec = await (await fetch('/openapi.json', { cache: 'no-store' })).json();
        silencesApi = Boolean(spec.paths && spec.paths['/v1/silences']);
      }
      if (!silencesApi) { ul.innerHTML = '<li class="muted">not available on this server</li>'; return; }
      const r = await fetch('/v1/silences', { cache: 'no-store' });
      if (r.status === 404) { silencesApi = false; ul.innerHTML = '<li class="muted">not available on this server</li>'; return; }
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      const body = await r.json();
      const items = Array.isArray(body) ? body : (body.items || []);
      ul.innerHTML = items.length
        ? items.map((s) => {
          const m = s.matchers ? (Array.isArray(s.matchers) ? s.matchers.map((x) => (typeof x === 'string' ? x : `${x.name}${x.op || '='}${x.value}`)).join(', ') : JSON.stringify(s.matchers)) : '';
          const until = s.ends_at || s.endsAt || s.until || '';
          return `<li title="${esc(s.comment || '')}">${esc(m)}${until ? ` <span class="muted">until ${esc(until)}</span>` : ''}${s.comment ? ` · ${esc(s.comment)}` : ''}</li>`;
        }).join('')
        : '<li class="muted">none</li>';
    } catch (e) {
      ul.innerHTML = `<li class="muted">unavailable (${esc(e.message)})</li>`;
    }
  }

  // ---- job filter options, filled when opened (jobs come and go) ----------
  function fillJobs() {
    const sel = $('f-job'), keep = sel.value;
    const names = fw.jobs.filter((j) => j !== '').sort();
    if (sel.length === names.length + 1) return;
    sel.length = 1;
    for (const j of names) sel.add(new Option(j, j));
    sel.value = keep;
  }
  $('f-job').addEventListener('focus', fillJobs);
  $('f-job').addEventListener('mousedown', fillJobs);

  // ---- the side panel --------------------------------------------------------
  let openIndex = -1, openSeq = 0;

  function sparkline(history) {
    const c = $('p-spark');
    if (!c) return;
    const dpr = window.devicePixelRatio || 1;
    const w = (c.width = Math.round(c.clientWidth * dpr)), h = (c.height = Math.round(c.clientHeight * dpr));
    const g = c.getContext('2d');
    const y = (r) => h - 3 * dpr - r * (h - 6 * dpr);
    g.strokeStyle = '#3a424c'; g.lineWidth = 1;
    for (const t of [0.3, 0.6, 0.85]) { g.beginPath(); g.moveTo(0, y(t)); g.lineTo(w, y(t)); g.stroke(); }
    if (history.length < 2) return;
    g.strokeStyle = '#56b4e9'; g.lineWidth = 1.5 * dpr; g.beginPath();
    history.forEach((p, k) => {
      const x = (k / (history.length - 1)) * (w - 2 * dpr) + dpr;
      if (k) g.lineTo(x, y(p.risk)); else g.moveTo(x, y(p.risk));
    });
    g.stroke();
  }

  function render(g) {
    const comps = Object.entries(g.components || {}).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
    const hist = g.history || [];
    const span = hist.length > 1 ? `${hist[0].ts.slice(11, 16)}–${hist[hist.length - 1].ts.slice(11, 16)} UTC` : '';
    return `
      <div><span class="big">${(g.risk ?? 0).toFixed(2)}</span> ${stateBadge(g.state)}
        ${g.kind ? `<span class="muted">${esc(g.kind)}</span>` : ''}</div>
      ${g.eta_hours != null ? `<div>trend ETA: <b>${g.eta_hours.toFixed(1)} h</b> to the forecast limit</div>` : ''}
      <table>
        <tr><td>host</td><td>${esc(g.host)}</td></tr>
        <tr><td>rack / cluster</td><td>${esc(g.rack)} / ${esc(g.cluster)}</td></tr>
        <tr><td>job</td><td>${esc(g.job || '—')}</td></tr>
        <tr><td>model</td><td>${esc(g.model)}</td></tr>
        <tr><td>last seen</td><td>${esc(g.last_seen)}</td></tr>
      </table>
      <section><h2>Risk, last 4 h <span class="muted">${esc(span)}</span></h2><canvas id="p-spark"></canvas></section>
      <section id="p-reasons"><h2>Reasons</h2>${(g.reasons || []).length
        ? `<table>${g.reasons.map((r) => `<tr><td><code>${esc(r.signal)}</code></td><td>${esc(r.detail)}</td></tr>`).join('')}</table>`
        : '<p class="muted">none: nothing stands out</p>'}</section>
      <section><h2>Components</h2>${comps.length
        ? `<table>${comps.map(([k, v]) => `<tr><td>${esc(k)}</td><td><div class="bar" style="width:${Math.round(v * 100)}%"></div>${v.toFixed(2)}</td></tr>`).join('')}</table>`
        : '<p class="muted">all zero</p>'}
        <div class="muted">anomaly grade ${(g.anomaly_grade ?? 0).toFixed(2)}</div></section>
      <section><h2>Active alerts</h2>${(g.active_alerts || []).length
        ? `<ul>${g.active_alerts.map((a) => `<li><span class="tag ${esc(a.severity)}">${esc(a.severity)}</span>${esc(a.summary)}</li>`).join('')}</ul>`
        : '<p class="muted">none</p>'}</section>
      <section><a href="/v1/gpus/${encodeURIComponent(g.gpu)}" target="_blank" rel="noopener">JSON: /v1/gpus/${esc(g.gpu)}</a></section>`;
  }

  async function refreshPanel() {
    if (openIndex < 0) return;
    const seq = ++openSeq, id = fw.idOf(openIndex);
    try {
      const r = await fetch(`/v1/gpus/${encodeURIComponent(id)}`, { cache: 'no-store' });
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      const g = await r.json();
      if (seq !== openSeq) return;
      const body = $('p-body'), scroll = $('panel').scrollTop;
      body.innerHTML = render(g);
      sparkline(g.history || []);
      $('panel').scrollTop = scroll;
      $('panel').dataset.gpu = id;
      $('panel').dataset.state = g.state;
    } catch (e) {
      if (seq === openSeq) $('p-body').innerHTML = `<p class="muted">could not load ${esc(id)}: ${esc(e.message)}</p>`;
    }
  }

  fw.openPanel = (i) => {
    openIndex = i;
    $('p-title').textContent = fw.idOf(i);
    $('p-body').innerHTML = '<p class="muted">loading…</p>';
    $('panel').hidden = false;
    refreshPanel();
  };
  $('p-close').addEventListener('click', () => {
    openIndex = -1; fw.selected = -1;
    $('panel').hidden = true; $('mark').hidden = true;
  });
  document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') $('p-close').click(); });

  // ---- schedule ----------------------------------------------------------------
  let ticks = 0;
  fw.onUpdate.push(() => {
    counts();
    riskiest();
    if (ticks % 5 === 0) { loadAlerts(); if (openIndex >= 0) refreshPanel(); }
    if (ticks % 15 === 0) loadSilences();
    ticks++;
  });
})();
