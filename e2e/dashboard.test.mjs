// The dashboard's main flows in a real browser: Debian's Chromium driven by playwright-core,
// against the server and data that scripts/e2e.sh prepares (25 commits; at commit 15
// parse/json got 30 % slower and alloc/arena 25 % faster). The tests run in order and share
// one browser; the last one changes the data (it acknowledges the regression).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const BASE = process.env.KYMO_E2E_URL;
const REPO = process.env.KYMO_E2E_REPO ?? 'e2e';
const STEP_SHA = process.env.KYMO_E2E_STEP_SHA;
const COMMITS = 25;
const SHOTS = process.env.KYMO_E2E_SHOTS ?? join('target', 'e2e');
const CHROMIUM = process.env.KYMO_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

let profile;
let context;

before(async () => {
  assert.ok(BASE, 'KYMO_E2E_URL is not set: run the tests through scripts/e2e.sh');
  assert.ok(STEP_SHA, 'KYMO_E2E_STEP_SHA is not set: run the tests through scripts/e2e.sh');
  mkdirSync(SHOTS, { recursive: true });
  profile = mkdtempSync(join(tmpdir(), 'kymo-e2e-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1280, height: 900 },
  });
  context.setDefaultTimeout(10_000);
});

after(async () => {
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

// A fresh tab whose script errors, console errors and failed loads (with their addresses;
// the browser's own favicon request shows only as a console error) fail the test that opened it.
async function openPage(t) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (err) => errors.push(err.message));
  page.on('console', (msg) => msg.type() === 'error' && errors.push(msg.text()));
  page.on('response', (r) => r.status() >= 400 && errors.push(`${r.status()} ${r.url()}`));
  t.after(async () => {
    await page.close();
    assert.deepEqual(errors, [], 'the page logged errors');
  });
  return page;
}

// Logs in with the admin token `kymo serve` wrote beside its database, as a person does on
// the Admin page; every test that changes data calls this first.
async function login(page) {
  await page.goto(url('/login?next=/login'));
  await page.getByLabel('Admin token').fill(process.env.KYMO_E2E_ADMIN_TOKEN);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('button', { name: 'Log out' }).waitFor();
}

async function shot(page, name) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

const url = (path) => `${BASE}${path}`;

test('the dashboard leads to a benchmark trend graph', async (t) => {
  const page = await openPage(t);
  await page.goto(url('/'));
  assert.equal(await page.locator('h1').textContent(), 'Repositories');
  await shot(page, '1-home');

  await page.getByRole('link', { name: REPO, exact: true }).click();
  await page.waitForURL(url(`/repos/${REPO}`));
  assert.equal(await page.locator('#history tr').count(), COMMITS);
  await shot(page, '1-repository');

  // The summary leads with the biggest change: parse/json's 30 % step.
  const summary = page.locator('section.summary');
  const first = summary.locator('tbody tr').first();
  assert.match(await first.textContent(), /parse\/json/);
  assert.equal(await first.locator('td.worse').count(), 1, 'the step is marked worse');
  assert.equal(await first.locator('svg.spark').count(), 1, 'with a sparkline');
  await summary.getByRole('link', { name: 'parse/json', exact: true }).click();
  await page.waitForURL(url(`/repos/${REPO}/benchmarks/parse/json`));
  assert.equal(await page.locator('h1').textContent(), 'parse/json');
  const chart = page.locator('#charts section.chart svg');
  await chart.waitFor({ state: 'visible' });
  assert.equal(await chart.count(), 1, 'one series: one graph');
  // One point per measured commit.
  assert.equal(await chart.locator('circle').count(), COMMITS);
  const box = await chart.boundingBox();
  assert.ok(box.width > 600 && box.height > 200, `a small graph: ${JSON.stringify(box)}`);
  await shot(page, '1-benchmark');

  // Each point links to its commit: the first slow one shows the step against its parent.
  await chart.locator(`a[href$="/commits/${STEP_SHA}"]`).click();
  await page.waitForURL(url(`/repos/${REPO}/commits/${STEP_SHA}`));
  const row = page.locator('table.results tr', { hasText: 'parse/json' });
  const change = parseFloat(await row.locator('td.worse').textContent());
  assert.ok(change > 25 && change < 35, `parse/json changed by ${change} %`);
  await shot(page, '1-commit');
});

test('the range changes through htmx without reloading the page', async (t) => {
  const page = await openPage(t);
  await page.goto(url(`/repos/${REPO}/benchmarks/parse/json`));
  const chart = page.locator('#charts section.chart svg');
  const before = await chart.evaluate((svg) => svg.outerHTML);
  // A full page load would drop this marker.
  await page.evaluate(() => { window.kymoE2eMarker = 'still here'; });
  const documents = [];
  page.on('request', (r) => r.resourceType() === 'document' && documents.push(r.url()));

  const request = page.waitForRequest((r) => new URL(r.url()).searchParams.get('last') === '20');
  await page.locator('nav.range').getByRole('link', { name: '20', exact: true }).click();
  const sent = await request;
  assert.equal(sent.headers()['hx-request'], 'true', 'htmx sent the request');
  const fragment = await (await sent.response()).text();
  assert.ok(!fragment.includes('<html'), 'the server answered with the charts fragment only');

  await page.waitForFunction(() => document.querySelectorAll('#charts svg circle').length === 20);
  assert.equal(await page.evaluate(() => window.kymoE2eMarker), 'still here', 'no reload');
  assert.deepEqual(documents, [], 'no document was loaded');
  assert.notEqual(await chart.evaluate((svg) => svg.outerHTML), before, 'the graph changed');
  assert.match(await page.locator('#charts h2').textContent(), /20 commits/);
  // hx-push-url: the address names the range, so a reload or a shared link keeps it.
  assert.equal(new URL(page.url()).searchParams.get('last'), '20');
  const current = page.locator('nav.range a.current');
  assert.equal(await current.count(), 1);
  assert.equal(await current.textContent(), '20', 'the chosen range is highlighted');
  await shot(page, '2-range-20');
});

test('the chart moves through history and back without reloading the page', async (t) => {
  const page = await openPage(t);
  await page.goto(url(`/repos/${REPO}/benchmarks/parse/json?last=10`));
  await page.evaluate(() => { window.kymoE2eMarker = 'still here'; });
  const zoom = page.locator('nav.zoom');
  assert.match(await zoom.textContent(), /the newest 10 commits: \w{7} \(\d{4}-\d\d-\d\d\) to/);
  const newestShas = await page.locator('#charts svg g.points a').evaluateAll((links) => links.map((a) => a.getAttribute('href')));

  await zoom.getByRole('link', { name: '← older' }).click();
  await page.waitForURL((u) => u.searchParams.has('to'));
  await page.waitForFunction(() => /^10 commits/.test(document.querySelector('nav.zoom span').textContent));
  const olderShas = await page.locator('#charts svg g.points a').evaluateAll((links) => links.map((a) => a.getAttribute('href')));
  assert.equal(olderShas.length, 10, 'the ten commits before');
  assert.ok(olderShas.every((href) => !newestShas.includes(href)), 'none of the newest ten');
  assert.equal(await page.evaluate(() => window.kymoE2eMarker), 'still here', 'no reload');
  await shot(page, '2-zoom-older');

  await page.locator('nav.zoom').getByRole('link', { name: 'zoom out' }).click();
  await page.waitForURL((u) => u.searchParams.get('last') === '20');
  // Twice as many, ending at the same commit: all fifteen from the root.
  await page.waitForFunction(() => document.querySelectorAll('#charts svg g.points circle').length === 15);
  await page.locator('nav.zoom').getByRole('link', { name: 'newest' }).click();
  await page.waitForURL((u) => !u.searchParams.has('to'));
  await page.waitForFunction(() => /the newest 20 commits/.test(document.querySelector('nav.zoom span').textContent));
});

test('the repository page compares any two commits through its form', async (t) => {
  const page = await openPage(t);
  await page.goto(url(`/repos/${REPO}`));
  const form = page.locator('section.compare-form form');
  await form.getByLabel('base').fill('parent');
  await form.getByLabel('head').fill(STEP_SHA.slice(0, 10));
  await form.getByRole('button', { name: 'Compare' }).click();
  await page.waitForURL((u) => u.pathname === `/repos/${REPO}/compare/${STEP_SHA.slice(0, 10)}`);
  assert.match(await page.locator('p.summary').textContent(), /1 regressed, 1 improved/);
  await shot(page, '2-compare-form');
});

test('a compare page filters to significant changes and sorts', async (t) => {
  const page = await openPage(t);
  await page.goto(url(`/repos/${REPO}/regressions`));
  await page.getByRole('link', { name: '+30', exact: false }).click();
  await page.getByRole('link', { name: 'compare', exact: true }).click();
  await page.waitForURL((u) => u.pathname.startsWith(`/repos/${REPO}/compare/`));
  assert.ok(page.url().endsWith(`...${STEP_SHA}`), `the culprit is the head: ${page.url()}`);
  assert.match(await page.locator('p.summary').textContent(), /1 regressed, 1 improved, 2 unchanged, 0 inconclusive of 4/);
  const rows = page.locator('table.results tbody tr');
  assert.equal(await rows.count(), 4);
  await shot(page, '3-compare-all');

  await page.getByRole('link', { name: 'only significant changes' }).click();
  await page.waitForURL((u) => u.searchParams.get('significant') === '1');
  // The verdict column (after "could see") holds the badge, then the verdict's note.
  const verdicts = (await column(page, 9)).map((text) => text.split(' ')[0]);
  assert.deepEqual(verdicts, ['regression', 'improvement'], 'sorted by change');
  assert.deepEqual(await column(page, 1), ['parse/json', 'alloc/arena']);
  await shot(page, '3-compare-significant');

  await page.getByRole('link', { name: 'benchmark', exact: true }).click();
  await page.waitForURL((u) => u.searchParams.get('sort') === 'benchmark');
  assert.equal(new URL(page.url()).searchParams.get('significant'), '1', 'the filter stays');
  assert.deepEqual(await column(page, 1), ['alloc/arena', 'parse/json']);
  assert.equal(await page.locator('p.sub a.current').textContent(), 'benchmark', 'marked');
  await shot(page, '3-compare-by-benchmark');
});

// The trimmed texts of a column (1-based) of the compare table.
function column(page, n) {
  return page.locator(`table.results tbody tr td:nth-child(${n})`).allTextContents()
    .then((cells) => cells.map((c) => c.trim()));
}

test('a regression is acknowledged through its triage form', async (t) => {
  const page = await openPage(t);
  await login(page);
  await page.goto(url(`/repos/${REPO}/regressions?kind=regression&state=open`));
  const open = page.locator('tbody tr');
  assert.equal(await open.count(), 1, 'one open regression');
  await open.getByRole('link', { name: 'regression' }).click();
  await page.waitForURL((u) => /\/regressions\/\d+$/.test(u.pathname));
  const regression = page.url();
  assert.match(await page.locator('h1').textContent(), /regression \+30\.\d % in parse\/json/);
  await page.locator('.svg svg').waitFor({ state: 'visible' });
  await shot(page, '4-regression-open');

  const form = page.locator('form.triage');
  await form.getByLabel('State').selectOption('acknowledged');
  await form.getByLabel('Your name').fill('e2e tester');
  await form.getByLabel('Note').fill('expected: the parser validates UTF-8 now');
  const posted = page.waitForResponse((r) => r.request().method() === 'POST');
  await form.getByRole('button', { name: 'Save' }).click();
  const response = await posted;
  assert.ok([302, 303].includes(response.status()), `the form redirects: ${response.status()}`);
  assert.equal(new URL(response.headers().location, regression).href, regression);
  // The address stays the same: wait for the page the redirect loads.
  const state = page.locator('p', { hasText: 'State:' });
  await state.locator('.badge', { hasText: 'acknowledged' }).waitFor();
  assert.equal(page.url(), regression);
  assert.match(await state.textContent(), /by e2e tester/);
  assert.match(await page.locator('pre.message').textContent(), /validates UTF-8/);
  await shot(page, '4-regression-acknowledged');

  await page.goto(url(`/repos/${REPO}/regressions?kind=regression`));
  assert.deepEqual(
    await page.locator('tbody tr td:last-child .badge').allTextContents(),
    ['acknowledged', 'unconfirmed'],
    'the list shows the new state, and that uploaded results could not be measured again',
  );
  await page.goto(url(`/repos/${REPO}/regressions?kind=regression&state=open`));
  assert.equal(await page.locator('tbody tr').count(), 0, 'no open regression is left');
  await shot(page, '4-regressions-none-open');
});
