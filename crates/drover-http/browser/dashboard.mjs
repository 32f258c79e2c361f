// The dashboard in a real browser: Debian's chromium driven by
// playwright-core against a live `drover serve`. Run by the cargo test
// crates/drover-cli/tests/integration/browser.rs, which sets the environment below,
// prepares the items and checks the worker side. Exits non-zero on the
// first failed expectation; screenshots go to ARTIFACTS.
import { chromium } from 'playwright-core';
import http from 'node:http';
import assert from 'node:assert/strict';

const env = process.env;
const BASE = env.BASE_URL;
const NIL = '00000000-0000-0000-0000-000000000000';
const step = (s) => console.log(`STEP ${s}`);

const browser = await chromium.launch({
  executablePath: env.CHROMIUM,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
const page = await ctx.newPage();
const refused = [];
page.on('console', (m) => {
  if (m.type() === 'error') refused.push(m.text());
});
// A full-page capture waits for a quiet frame: on a loaded 2-core machine
// (the whole suite running beside it) one once took past the 30 s default,
// so a capture that times out is taken again with more time.
const shot = async (name) => {
  const opts = { path: `${env.ARTIFACTS}/${name}.png`, fullPage: true };
  try {
    await page.screenshot(opts);
  } catch (e) {
    if (e.name !== 'TimeoutError') throw e;
    console.log(`screenshot ${name} timed out once; taking it again`);
    await page.screenshot({ ...opts, timeout: 90000 });
  }
};

try {
  // Closed by default: the overview sends us to the login form.
  await page.goto(`${BASE}/ui/`);
  assert.ok(page.url().endsWith('/ui/login'), page.url());
  await page.fill('input[name=token]', env.TOKEN);
  await Promise.all([page.waitForURL(`${BASE}/ui/`), page.click('button[type=submit]')]);
  await page.waitForSelector('#lane-counts');
  await shot('01-overview');
  step('logged in');

  // The alert cases: a lane with waiting work and no live worker ("no
  // worker"), a kind no live worker runs ("unhandled"); the charts have
  // labelled time axes.
  const alerts = await page.textContent('#alerts');
  assert.match(alerts, new RegExp(`lane ${env.NO_WORKER_LANE}: \\d+ waiting, no worker`));
  assert.match(alerts, new RegExp(`kind ${env.UNHANDLED_KIND.replace('.', '\\.')}: 1 waiting, unhandled`));
  assert.equal(
    await page.textContent(`#lane-counts tr[data-lane="${env.NO_WORKER_LANE}"] .alert-cell`),
    'no worker',
  );
  assert.equal(
    await page.textContent(`#kind-table tr[data-kind="${env.UNHANDLED_KIND}"] .alert-cell`),
    'unhandled',
  );
  step('alerts');
  for (const id of ['chart-hour', 'wait-hour', 'queue-wait-hour', 'chart-day', 'wait-day', 'queue-wait-day']) {
    const labels = await page.locator(`svg#${id} text.x-label`).count();
    assert.equal(labels, 5, `${id} has five time labels`);
    assert.match(await page.textContent(`svg#${id}`), /time \(UTC\)/);
  }
  // The worker's done item and the dead-lettered one, from the database.
  assert.match(await page.textContent('svg#chart-hour text.totals'), /1 done · 3 failed/);
  await page.locator('svg#chart-hour').screenshot({ path: `${env.ARTIFACTS}/01b-chart-hour.png` });
  step('charts');

  // The icon: every page links it, and it answers without a session, as
  // does /favicon.ico, which browsers ask for unprompted (never a 401).
  const icon = await page.getAttribute('link[rel=icon]', 'href');
  assert.equal(icon, '/ui/assets/favicon.svg');
  for (const path of [icon, '/favicon.ico']) {
    const r = await fetch(`${BASE}${path}`);
    assert.equal(r.status, 200, path);
    assert.equal(r.headers.get('content-type'), 'image/svg+xml', path);
  }
  step('icon');

  // Filter items: failed, with "disk" in the error.
  await page.goto(`${BASE}/ui/items`);
  await page.selectOption('select[name=status]', 'failed');
  await page.fill('input[name=error]', 'disk');
  await Promise.all([page.waitForURL(/\/ui\/items\?/), page.click('#filters button[type=submit]')]);
  const ids = await page.locator('#items tr[data-id]').evaluateAll((rs) => rs.map((r) => r.dataset.id));
  assert.deepEqual(ids, [env.FAILED_ID]);
  await shot('02-items-filtered');
  step('filtered');

  // Open the failed item and retry it: pending.
  await page.click(`a[href$="${env.FAILED_ID}"]`);
  await page.waitForSelector('#item-status');
  assert.equal(await page.textContent('#item-status'), 'failed');
  assert.match(await page.textContent('#item-error'), /disk full/);
  // Its run history: one run, failed, by the test's worker; runs and
  // failures as two numbers.
  assert.equal(await page.textContent('#item-runs'), '1');
  assert.match(await page.textContent('#item-failures'), /^1 of /);
  assert.match(await page.textContent('#runs .outcome'), /failed/);
  assert.match(await page.textContent('#runs'), /w-browser/);
  await Promise.all([page.waitForURL(/msg=/), page.click('#retry')]);
  assert.equal(await page.textContent('#item-status'), 'pending');
  assert.match(await page.textContent('#msg'), /retried 1/);
  await shot('03-item-retried');
  step('retried');

  // The dead letter grouped by kind and normalised error: the two
  // timeouts (digits differ) are one group; retry all in it.
  await page.goto(`${BASE}/ui/dead`);
  const group = page.locator('#groups tr', { hasText: env.GROUP_KIND });
  assert.equal(await group.count(), 1);
  assert.match(await group.textContent(), /order # timed out after #s/);
  assert.equal(await group.locator('td.num').textContent(), '2');
  // Each row's short id is its own (ids made together share a prefix).
  const shorts = await page.locator('#items tr[data-id] td.id a').allTextContents();
  assert.equal(shorts.length, 2);
  assert.equal(new Set(shorts).size, 2, `short ids ${shorts}`);
  await shot('03b-dead-groups');
  await Promise.all([page.waitForURL(/msg=/), group.locator('button.retry-group').click()]);
  assert.match(await page.textContent('#msg'), /retried 2 of the group/);
  assert.equal(await page.locator('#groups tr', { hasText: env.GROUP_KIND }).count(), 0);
  step('dead group retried');

  // Cancel one.
  await page.goto(`${BASE}/ui/items/${NIL}/${env.CANCEL_ID}`);
  await Promise.all([page.waitForURL(/msg=/), page.click('#cancel')]);
  assert.equal(await page.textContent('#item-status'), 'cancelled');
  step('cancelled');

  // Pause the worker's lane.
  await page.goto(`${BASE}/ui/lanes`);
  const row = `#lanes tr[data-lane="${env.PAUSE_LANE}"]`;
  await Promise.all([page.waitForURL(/msg=/), page.click(`${row} button[value=pause]`)]);
  assert.equal(await page.textContent(`${row} .paused`), 'paused');
  // Who paused it, by name: the one-time token has no label, so its short
  // id (never a whole UUID).
  assert.match(await page.textContent(`${row} .lane-by`), /^token [0-9a-f]{8}$/);
  await shot('04-lane-paused');
  step('paused');

  // A cross-site form POST without the CSRF token is refused, and the
  // lane stays paused.
  const evil = http.createServer((req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end(`<form id="f" method="post" action="${BASE}/ui/lanes/act">
      <input name="action" value="resume"><input name="lane" value="${env.PAUSE_LANE}">
      <button id="go" type="submit">go</button></form>`);
  });
  await new Promise((r) => evil.listen(0, 'localhost', r));
  const other = await ctx.newPage();
  await other.goto(`http://localhost:${evil.address().port}/`);
  const [answer] = await Promise.all([
    other.waitForNavigation(),
    other.click('#go'),
  ]);
  const status = answer ? answer.status() : 0;
  assert.ok(status === 401 || status === 403, `cross-site POST answered ${status}`);
  evil.close();
  await page.goto(`${BASE}/ui/lanes`);
  assert.equal(await page.textContent(`${row} .paused`), 'paused');
  step(`cross-site refused ${status}`);

  // Limits on the lanes page: the code's kind limit with its use (one
  // export claimed, two waiting), an operator's lane limit set through the
  // form, then cleared.
  await page.goto(`${BASE}/ui/lanes`);
  const kindRow = `#limits tr[data-scope="kind"][data-name="${env.LIMIT_KIND}"]`;
  const cell = (row, c) => page.textContent(`${row} .limit-${c}`);
  assert.equal(await cell(kindRow, 'concurrency'), '1');
  assert.equal(await cell(kindRow, 'in-use'), '1');
  assert.equal(await cell(kindRow, 'waiting'), '2');
  assert.equal(await cell(kindRow, 'source'), 'code');
  step('limit listed');
  await page.selectOption('#limit-set select[name=scope]', 'lane');
  await page.fill('#limit-set input[name=name]', env.LIMIT_LANE);
  await page.fill('#limit-set input[name=concurrency]', '4');
  await Promise.all([page.waitForURL(/msg=/), page.click('#limit-set button[type=submit]')]);
  assert.match(await page.textContent('#msg'), new RegExp(`limit on lane ${env.LIMIT_LANE} set to 4`));
  const laneRow = `#lanes tr[data-lane="${env.LIMIT_LANE}"]`;
  assert.equal(await cell(laneRow, 'concurrency'), '4');
  assert.equal(await cell(laneRow, 'in-use'), '1');
  assert.equal(await cell(laneRow, 'source'), 'operator');
  await shot('05-limits');
  step('limit set');
  await Promise.all([page.waitForURL(/msg=/), page.click(`${laneRow} .limit-clear`)]);
  assert.match(await page.textContent('#msg'), /cleared/);
  assert.equal(await page.locator(`${laneRow} .limit-concurrency`).count(), 0);
  assert.equal(await cell(kindRow, 'source'), 'code');
  step('limit cleared');

  // Workers: version, in flight against capacity, what runs now.
  await page.goto(`${BASE}/ui/workers`);
  const wrow = page.locator('#workers tr[data-worker]').first();
  assert.match(await wrow.textContent(), /\d+ \/ 2/);
  assert.match(await page.textContent('#running'), new RegExp(env.RUNNING_KIND));
  await shot('07-workers');
  step('workers');

  // Schedules: the next three runs, and trigger now.
  await page.goto(`${BASE}/ui/schedules`);
  const srow = `#schedules tr[data-schedule="${env.SCHEDULE}"]`;
  const runs = await page.locator(`${srow} .next-runs`).innerHTML();
  assert.equal(runs.split('<br>').length, 3, runs);
  await Promise.all([page.waitForURL(/msg=/), page.click(`${srow} button.trigger`)]);
  assert.match(await page.textContent('#msg'), new RegExp(`triggered ${env.SCHEDULE.replace('.', '\\.')}: item`));
  await shot('08-schedules');
  step('schedules');

  // Orchestrations: the stuck one highlighted, ids as links to a detail
  // page; a signal sent through its form; resume the stuck one.
  await page.goto(`${BASE}/ui/orchestrations`);
  assert.equal(await page.locator(`#orchestrations tr.stuck[data-id="${env.STUCK_ID}"]`).count(), 1);
  await shot('09-orchestrations');
  await page.click(`a[href$="${env.ORCH_ID}"]`);
  await page.waitForSelector('#orch-status');
  assert.match(await page.textContent('#orch-status'), /running/);
  await page.fill('#orch-signal input[name=name]', 'approved');
  await page.fill('#orch-signal input[name=payload]', '{"by":"browser"}');
  await Promise.all([page.waitForURL(/msg=/), page.click('#orch-signal button[type=submit]')]);
  assert.match(await page.textContent('#msg'), /signal approved sent/);
  assert.match(await page.textContent('#orch-signals'), /approved/);
  await shot('10-orchestration');
  await Promise.all([page.waitForURL(/msg=/), page.click('#orch-cancel')]);
  assert.match(await page.textContent('#msg'), /cancel requested/);
  await page.goto(`${BASE}/ui/orchestrations`);
  await page.click(`a[href$="${env.STUCK_ID}"]`);
  await Promise.all([page.waitForURL(/msg=/), page.click('#orch-resume')]);
  assert.match(await page.textContent('#msg'), /resumed/);
  step('orchestration');

  // Batches: the page reads (none made here).
  const batches = await page.goto(`${BASE}/ui/batches`);
  assert.equal(batches.status(), 200);
  await shot('11-batches');
  step('batches');

  // The overview again, for the README.
  await page.goto(`${BASE}/ui/`);
  await page.waitForSelector('#lane-counts');
  await shot('06-overview-after');
  if (env.SCREENSHOT) {
    await page.screenshot({ path: env.SCREENSHOT, fullPage: true });
  }
  const csp = refused.filter((t) => /Content Security Policy|Refused to/.test(t));
  assert.deepEqual(csp, [], 'no CSP violations');
  step('done');
} catch (e) {
  await shot('99-failure').catch(() => {});
  console.error(e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
