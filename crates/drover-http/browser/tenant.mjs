// A tenant-scoped operator in a real browser, against a `drover serve`
// whose tokens live in the token table: it sees its own tenant's overview
// (its lane with waiting work and no worker, its charts, no other
// tenant's lanes) and is refused the workers page (hosts, every tenant).
// Run by crates/drover-cli/tests/integration/browser.rs after dashboard.mjs.
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';

const env = process.env;
const BASE = env.BASE_URL;
const step = (s) => console.log(`STEP ${s}`);

const browser = await chromium.launch({
  executablePath: env.CHROMIUM,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 } });
const page = await ctx.newPage();
try {
  await page.goto(`${BASE}/ui/login`);
  await page.fill('input[name=token]', env.TENANT_TOKEN);
  await Promise.all([page.waitForURL(`${BASE}/ui/`), page.click('button[type=submit]')]);
  assert.match(await page.textContent('#tenant-overview'), new RegExp(env.TENANT));
  assert.match(await page.textContent('#alerts'), /lane tenant-lane: 1 waiting, no worker/);
  assert.equal(await page.locator('svg#chart-hour').count(), 1);
  const lanes = await page.locator('#lane-counts a').allTextContents();
  assert.deepEqual(lanes, ['tenant-lane'], 'its own lanes only');
  await page.screenshot({ path: `${env.ARTIFACTS}/12-tenant-overview.png`, fullPage: true });
  const workers = await page.goto(`${BASE}/ui/workers`);
  assert.equal(workers.status(), 403);
  step('tenant overview');
} catch (e) {
  await page.screenshot({ path: `${env.ARTIFACTS}/99-tenant-failure.png`, fullPage: true }).catch(() => {});
  console.error(e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
