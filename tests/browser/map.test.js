// End-to-end test of the fleet map: starts the real `forewarn serve` on the
// simulated demo fleet on a free loopback port, drives Debian's headless
// chromium through playwright-core, and checks what an operator would see.
//
//   node map.test.js test    the CI test (512 GPUs): no console errors, a GPU
//                            the simulator fails is drawn in the failing
//                            colour, clicking it opens its panel with its
//                            reasons; screenshots saved as artefacts
//   node map.test.js bench   100,000 GPUs: first full draw and live update
//                            times from the page's performance.now() marks
//
// Environment: FOREWARN_BIN (the binary), FOREWARN_ARTIFACTS (screenshot
// dir), CHROMIUM (default /usr/bin/chromium). Run through scripts/browser.sh,
// which installs playwright-core and sets NODE_PATH.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const MODE = process.argv[2] || 'test';
const BIN = process.env.FOREWARN_BIN;
const ART = path.resolve(process.env.FOREWARN_ARTIFACTS || 'out/browser');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const HOST = '127.0.0.1'; // loopback only, always

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let passed = 0, failed = 0;
function check(name, ok, detail) {
  if (ok) { passed++; console.log(`ok - ${name}`); } else { failed++; console.log(`not ok - ${name}${detail ? `: ${detail}` : ''}`); }
  return ok;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, HOST, () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

async function getJSON(base, p) {
  const r = await fetch(base + p);
  if (!r.ok) throw new Error(`${p}: HTTP ${r.status}`);
  return r.json();
}

async function waitFor(what, timeoutMs, f) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try { const v = await f(); if (v) return v; } catch { /* not yet */ }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(250);
  }
}

// `forewarn serve` in a scratch dir (it writes its alert file and outbox to
// the working directory).
async function startServer(args) {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forewarn-map-'));
  const log = fs.openSync(path.join(dir, 'serve.log'), 'w');
  const child = spawn(BIN, ['serve', '--listen', `${HOST}:${port}`, ...args], {
    cwd: dir, stdio: ['ignore', log, log], env: { ...process.env, RUST_LOG: 'warn' },
  });
  const base = `http://${HOST}:${port}`;
  const exited = new Promise((r) => {
    child.once('exit', (code) => r(code));
    child.once('error', (e) => r(`${e.message} (FOREWARN_BIN=${BIN})`));
  });
  await Promise.race([
    waitFor('the REST port', 60_000, async () => (await fetch(`${base}/healthz`)).ok),
    exited.then((code) => { throw new Error(`forewarn exited with ${code}; log in ${dir}/serve.log`); }),
  ]);
  return { base, dir, stop: async () => { child.kill('SIGINT'); await Promise.race([exited, sleep(5000)]); child.kill('SIGKILL'); } };
}

async function launch() {
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forewarn-chromium-'));
  const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    `--user-data-dir=${userDataDir}`];
  // launchPersistentContext takes the profile dir itself.
  return chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, args: args.filter((a) => !a.startsWith('--user-data-dir')),
    viewport: { width: 1280, height: 800 },
  });
}

function watchConsole(page) {
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('requestfailed', (r) => errors.push(`request failed: ${r.url()}`));
  return errors;
}

const near = (a, b) => a.every((v, k) => Math.abs(v - b[k]) <= 2);

async function test() {
  fs.mkdirSync(ART, { recursive: true });
  // 512 GPUs, 2 shards; at this speed the demo's failure rate shows a GPU
  // failing within about a minute of wall time.
  const speed = process.env.FOREWARN_MAP_SPEED || '1200';
  const srv = await startServer(['--gpus', '512', '--speed', speed]);
  let ctx;
  try {
    const failing = await waitFor('a failing GPU', 240_000, async () => {
      const b = await getJSON(srv.base, '/v1/gpus?state=failing&limit=5');
      return b.total > 0 ? b.items : null;
    });
    console.log(`# server ${srv.base} (log ${srv.dir}/serve.log); failing: ${failing.map((g) => g.gpu).join(', ')}`);
    ctx = await launch();
    const page = ctx.pages()[0] || await ctx.newPage();
    const errors = watchConsole(page);
    await page.goto(`${srv.base}/`, { waitUntil: 'load' });
    await page.waitForFunction(() => window.fw && window.fw.ready && window.fw.n > 0, null, { timeout: 30_000 });

    // A GPU the simulator failed, as the page draws it: one that REST and
    // the page both call failing at once, with the canvas pixel at its cell.
    const hit = await waitFor('a GPU failing in REST and on the page', 60_000, async () => {
      const ids = (await getJSON(srv.base, '/v1/gpus?state=failing&limit=50')).items.map((g) => g.gpu);
      return page.evaluate((ids) => {
        for (const id of ids) {
          const c = window.fw.cellOf(id);
          if (c && c.state === 'failing') return { id, ...c };
        }
        return null;
      }, ids);
    }).catch(async (e) => { await page.screenshot({ path: path.join(ART, 'failed.png') }); throw e; });
    const want = await page.evaluate(() => window.fw.colors.failing);
    check('a failing GPU is drawn in the failing colour', hit && near(hit.pixel, want),
      `pixel ${hit && hit.pixel} want ${want}`);
    const healthy = await page.evaluate(() => {
      const i = window.fw.st.indexOf(0);
      return i >= 0 ? window.fw.cellOf(window.fw.layout.gpu_ids[i]) : null;
    });
    check('a healthy GPU is drawn in the healthy colour', healthy && near(healthy.pixel, await page.evaluate(() => window.fw.colors.healthy)),
      JSON.stringify(healthy));

    // Hover shows id, host, job, risk.
    await page.mouse.move(hit.clientX, hit.clientY);
    const tip = await page.locator('#tip').innerText();
    check('hover shows the GPU id, host and risk', tip.includes(hit.id) && /risk \d\.\d\d/.test(tip) && tip.includes('node-'), tip);

    // Click opens its panel with its reasons.
    await page.mouse.click(hit.clientX, hit.clientY);
    await page.waitForFunction((id) => document.querySelector('#panel')?.dataset.gpu === id, hit.id, { timeout: 10_000 });
    const detail = await getJSON(srv.base, `/v1/gpus/${encodeURIComponent(hit.id)}`);
    const panel = await page.locator('#panel').innerText();
    const reasonRows = await page.locator('#p-reasons tr').count();
    check('clicking it opens its panel with its reasons',
      panel.includes(hit.id) && reasonRows > 0 && detail.reasons.some((r) => panel.includes(r.signal)),
      `rows ${reasonRows}; reasons ${JSON.stringify(detail.reasons)}`);
    check('the panel links the JSON', await page.locator(`#panel a[href="/v1/gpus/${hit.id}"]`).count() === 1);
    await page.screenshot({ path: path.join(ART, 'map-1280x800.png') });

    // Counts, riskiest and search.
    const counts = await page.locator('#counts').innerText();
    check('counts per state are shown', /failing\s*\d/.test(counts), counts);
    const top = await page.locator('#riskiest li').first().innerText();
    check('the riskiest list is filled', /\d\.\d\d/.test(top), top);
    await page.fill('#search', hit.id);
    await page.waitForFunction(() => document.querySelector('#matches').textContent.startsWith('1 '), null, { timeout: 5_000 });
    check('search by GPU id narrows the map to one GPU', true);
    await page.click('#f-clear');

    // Phone viewport.
    await page.setViewportSize({ width: 390, height: 844 });
    await sleep(600);
    await page.evaluate(() => document.querySelector('#p-close').click());
    await page.screenshot({ path: path.join(ART, 'map-390x844.png'), fullPage: false });
    const phoneCell = await page.evaluate((id) => {
      window.scrollTo(0, window.fw.cellOf(id).clientY + window.scrollY - 200);
      const c = window.fw.cellOf(id);
      return [c.clientX, c.clientY];
    }, hit.id);
    await page.mouse.click(...phoneCell);
    await page.waitForFunction(() => !document.querySelector('#panel').hidden, null, { timeout: 5_000 });
    const phoneGpu = await page.locator('#p-title').innerText();
    check('on a phone, tapping the GPU opens its panel', phoneGpu === hit.id, `${phoneGpu} != ${hit.id}`);
    await sleep(500);
    await page.screenshot({ path: path.join(ART, 'map-390x844-panel.png') });
    await page.setViewportSize({ width: 1280, height: 800 });
    await sleep(500);

    check('the page logged no console errors', errors.length === 0, errors.join(' | '));
    console.log(`# screenshots in ${ART}`);
  } finally {
    if (ctx) await ctx.close();
    await srv.stop();
  }
}

async function bench() {
  fs.mkdirSync(ART, { recursive: true });
  const gpus = process.env.FOREWARN_MAP_GPUS || '100000';
  // FOREWARN_MAP_URL: time against a server already running (loopback).
  const srv = process.env.FOREWARN_MAP_URL
    ? { base: process.env.FOREWARN_MAP_URL, stop: async () => {} }
    : await startServer(['--gpus', gpus, '--speed', process.env.FOREWARN_MAP_SPEED || '30']);
  let ctx;
  try {
    // A few simulated GPUs start reporting later than the rest (~0.3 %).
    await waitFor(`${gpus} GPUs in the risk table`, 600_000, async () => (await getJSON(srv.base, '/v1/fleet')).gpus >= 0.99 * gpus);
    ctx = await launch();
    const page = ctx.pages()[0] || await ctx.newPage();
    const errors = watchConsole(page);
    const runs = [];
    for (let k = 0; k < 3; k++) {
      await page.goto(`${srv.base}/`, { waitUntil: 'load' });
      await page.waitForFunction((n) => window.__fwPerf.navToPaintMs && window.fw.n >= 0.99 * n, +gpus, { timeout: 60_000 });
      await page.waitForFunction(() => window.__fwPerf.updates.length >= 8, null, { timeout: 120_000 });
      runs.push(await page.evaluate(() => JSON.parse(JSON.stringify(window.__fwPerf))));
    }
    await page.screenshot({ path: path.join(ART, `map-${gpus}-1280x800.png`) });
    const out = runs.map((p) => {
      const u = p.updates;
      const max = (f) => Math.max(...u.map(f));
      const med = (f) => { const v = u.map(f).sort((a, b) => a - b); return v[v.length >> 1]; };
      const r1 = (x) => +x.toFixed(1);
      return {
        navToPaintMs: r1(p.navToPaintMs), paintedBy: p.paintedBy, navToFirstDrawMs: r1(p.navToFirstDrawMs),
        scriptStartMs: r1(p.startMs), layoutAtMs: r1(p.layoutAtMs), statesAtMs: r1(p.statesAtMs),
        indexMs: r1(p.indexMs), drawMs: r1(p.drawMs), firstDrawMs: r1(p.firstDrawMs),
        layoutBytes: p.layoutBytes, statesBytes: p.statesBytes,
        updates: u.length, cellsMedian: med((x) => x.cells), cellsMax: max((x) => x.cells),
        updateFetchMedianMs: r1(med((x) => x.fetchMs)), updateFetchMaxMs: r1(max((x) => x.fetchMs)),
        updateDrawMedianMs: r1(med((x) => x.drawMs)), updateDrawMaxMs: r1(max((x) => x.drawMs)),
        updatePanelMedianMs: r1(med((x) => x.panelMs)), updatePanelMaxMs: r1(max((x) => x.panelMs)),
        updateTotalMedianMs: r1(med((x) => x.totalMs)), updateTotalMaxMs: r1(max((x) => x.totalMs)),
      };
    });
    console.log(JSON.stringify({ gpus: +gpus, runs: out }, null, 1));
    check('no console errors at 100,000 GPUs', errors.length === 0, errors.join(' | '));
    console.log(`# screenshot in ${ART}`);
  } finally {
    if (ctx) await ctx.close();
    await srv.stop();
  }
}

(MODE === 'bench' ? bench() : test())
  .catch((e) => { failed++; console.log(`not ok - ${MODE}: ${e.stack || e}`); })
  .finally(() => { console.log(`${passed} passed, ${failed} failed`); process.exit(failed ? 1 : 0); });
