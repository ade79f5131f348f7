/**
 * The Knowledge page in a real browser [SURF-2, READ-1, READ-2, GIT-16]:
 * Debian's chromium, headless, driven by playwright-core, against a real
 * `knowledge serve` process over a store written by real `knowledge publish`
 * processes and real git.
 *
 * The issue's proof, in order: browse to a record, open its history and a
 * diff; find a pending checkpoint in Activity & issues; fix the repository;
 * press Retry (from the keyboard) and see `committed` without a reload.
 * Plus: record text cannot inject script, the page works at phone width,
 * a vanished store shows a designed error state, `npm start`'s demo works
 * end to end, and the page never requests anything beyond its Gateway.
 *
 * Chromium is installed by `.ci/run` (apt). When it is missing this file
 * fails; it is never skipped.
 *
 * KNOWLEDGE_SCREENSHOTS=DIR additionally saves screenshots of the views
 * there (bench/screenshots.mjs makes the ones in docs/ from the demo).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { makeSandbox, cli, cliPath, userGit, type Sandbox } from './helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = process.env.KNOWLEDGE_SCREENSHOTS;

let sb: Sandbox;
let vault: string;
let server: ChildProcess | null = null;
let demo: ChildProcess | null = null;
let origin = '';
let ctx: BrowserContext;
let page: Page;
let pendingId = '';
let userData = '';
const requests: string[] = [];
const pageErrors: string[] = [];

function publish(name: string, text: string, args: string[] = []) {
  writeFileSync(join(sb.dir, name), text);
  const r = cli(sb, ['publish', '--store', 'st', '--json', ...args, name]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { publicationId: string; git: { state: string } };
}

/** Start `knowledge <args>` and wait for the URL it prints. */
async function startCli(args: string[], env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [cliPath, ...args], { cwd: sb.dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr!.on('data', (c) => { err += c; });
  const url = await new Promise<string>((resolveUrl, reject) => {
    const t = setTimeout(() => reject(new Error(`no URL printed: ${out} ${err}`)), 20_000);
    child.stdout!.on('data', (c) => {
      out += c;
      const m = /Open (http:\/\/127\.0\.0\.1:\d+)\/|open (http:\/\/127\.0\.0\.1:\d+)\//.exec(out);
      if (m) { clearTimeout(t); resolveUrl(m[1] ?? m[2]!); }
    });
    child.on('exit', (code) => { clearTimeout(t); reject(new Error(`exited ${code}: ${err}`)); });
  });
  return { child, url };
}

async function shot(name: string) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

async function stop(child: ChildProcess | null) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.on('exit', r));
  child.kill('SIGTERM');
  await exited;
}

beforeAll(async () => {
  // Fails (never skips) where chromium is missing: CI installs it with apt (.ci/run).
  expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)`).toBe(true);
  sb = makeSandbox('kn-browser-');
  expect(cli(sb, ['init', 'st']).code).toBe(0);
  vault = join(sb.dir, 'st', 'vault');
  publish('g1.md', '---\nkind: page\nid: rec-glossary\ntitle: Glossary\ntags: [ref]\n---\nVersion one.\n');
  publish('g2.md', '---\nkind: page\nid: rec-glossary\nrevision: 1\ntitle: Glossary\ntags: [ref]\n---\nVersion two.\n', ['--actor', 'agent']);
  publish('g3.md', '---\nkind: page\nid: rec-glossary\nrevision: 2\ntitle: Glossary\ntags: [ref]\n---\n# Terms\n\nVersion three, about **lanterns**.\n');
  writeFileSync(join(sb.dir, 'review.txt'), 'Design review notes.\n');
  publish('claim.md', '---\nkind: claim\nclaim_kind: decision\nid: rec-claim\ntitle: We use SQLite\n---\nSee [[rec-glossary]].\n', ['--evidence', 'review.txt', '--actor', 'agent']);
  publish('xss.md', [
    '---', 'kind: page', 'id: rec-xss', 'title: "<img src=x onerror=window.__pwned=1> Hostile"', '---',
    '<script>window.__pwned = 1</script>',
    '',
    '<img src="x" onerror="window.__pwned = 2">',
    '',
    '[click me](javascript:window.__pwned=3) and [data](data:text/html,<script>1</script>) and ![pic](https://cdn.example.com/x.png)',
    '',
    '**bold <b>not a tag</b>**',
    '',
  ].join('\n'));
  // A record in two versions whose file is then deleted by hand and scanned: only its history remains [READ-2].
  publish('gone1.md', '---\nkind: page\nid: rec-gone\ntitle: Soon gone\n---\nFirst words.\n');
  const gone = publish('gone2.md', '---\nkind: page\nid: rec-gone\nrevision: 1\ntitle: Soon gone\n---\nLast words.\n') as unknown as { records: Array<{ path: string }> };
  rmSync(join(vault, gone.records[0]!.path));
  const scanned = cli(sb, ['scan', '--store', 'st', '--json']);
  expect(scanned.code, scanned.stderr).toBe(0);
  expect(JSON.parse(scanned.stdout)).toMatchObject({ deleted: [gone.records[0]!.path], git: { state: 'committed' } });
  // The repository breaks; the next publication is accepted but its checkpoint waits [GIT-15][GIT-18].
  writeFileSync(join(vault, '.git', 'index.lock'), '');
  const late = publish('late.md', '---\nkind: page\nid: rec-late\ntitle: Written while Git was locked\n---\nStill safe.\n');
  expect(late.git.state).toBe('pending');
  pendingId = late.publicationId;

  const started = await startCli(['serve', '--store', 'st', '--port', '0'], sb.env);
  server = started.child;
  origin = started.url;

  userData = mkdtempSync(join(tmpdir(), 'kn-chromium-'));
  ctx = await chromium.launchPersistentContext(userData, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    viewport: { width: 1280, height: 900 },
  });
  page = ctx.pages()[0] ?? (await ctx.newPage());
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => pageErrors.push(e.message));
}, 120_000);

afterAll(async () => {
  await ctx?.close();
  await stop(server);
  await stop(demo);
  sb?.cleanup();
  if (userData) rmSync(userData, { recursive: true, force: true });
});

describe('the Knowledge page in chromium', () => {
  it('[READ-2] browses to a record, opens its history with actor labels, and a diff between two versions', async () => {
    await page.goto(`${origin}/`);
    await page.getByRole('heading', { level: 1, name: 'Recent' }).waitFor();
    await shot('recent');
    await page.getByRole('link', { name: 'Glossary', exact: true }).first().click();
    await page.getByRole('heading', { level: 1, name: 'Glossary' }).waitFor();
    expect(page.url()).toBe(`${origin}/#/record/rec-glossary`);
    // Body rendered from Markdown; backlink from the claim.
    await expect.poll(() => page.locator('article.markdown strong').textContent()).toBe('lanterns');
    await page.locator('.record-side').getByRole('link', { name: 'We use SQLite' }).waitFor();
    // History: three versions, newest first, with who made each.
    const rows = page.locator('table.history tbody tr');
    await expect.poll(() => rows.count()).toBe(3);
    expect(await rows.locator('.badge.actor').allTextContents()).toEqual(['operator', 'agent', 'operator']);
    await shot('record');
    // Compare the oldest with the newest.
    await rows.nth(2).locator('input[type=radio]').first().check();
    await rows.nth(0).locator('input[type=radio]').nth(1).check();
    await page.getByRole('button', { name: 'Compare selected versions' }).click();
    await page.getByRole('heading', { level: 1, name: 'Changes' }).waitFor();
    await page.locator('pre.diff').waitFor();
    expect(await page.locator('pre.diff .del').allTextContents()).toEqual(expect.arrayContaining(['-revision: 1', '-Version one.']));
    expect(await page.locator('pre.diff .add').allTextContents()).toEqual(expect.arrayContaining(['+revision: 3', '+Version three, about **lanterns**.']));
    await shot('diff');
    // One version's own changes from the per-row link.
    await page.goBack();
    await page.getByRole('heading', { level: 1, name: 'Glossary' }).waitFor();
    await page.getByRole('link', { name: /^changes in / }).first().click();
    await page.locator('pre.diff').waitFor();
    expect(await page.locator('pre.diff .add').allTextContents()).toContain('+Version three, about **lanterns**.');
    expect(await page.locator('pre.diff .del').allTextContents()).toContain('-Version two.');
  });

  it('[READ-2] a deleted record\'s address shows its history, and a diff between its versions', async () => {
    await page.goto(`${origin}/#/record/rec-gone`);
    await page.getByRole('heading', { level: 1, name: 'rec-gone (deleted)' }).waitFor();
    const rows = page.locator('table.history tbody tr');
    await expect.poll(() => rows.count()).toBe(2); // its two committed versions
    expect(await rows.locator('.badge.actor').allTextContents()).toEqual(['operator', 'operator']);
    await page.getByRole('link', { name: /^changes in / }).click();
    await page.getByRole('heading', { level: 1, name: 'Changes' }).waitFor();
    await page.locator('pre.diff').waitFor();
    expect(await page.locator('pre.diff .del').allTextContents()).toContain('-First words.');
    expect(await page.locator('pre.diff .add').allTextContents()).toContain('+Last words.');
  });

  it('[READ-1] searches from the header and shows evidence with file details', async () => {
    await page.goto(`${origin}/#/recent`);
    await page.getByRole('heading', { level: 1, name: 'Recent' }).waitFor();
    await page.keyboard.press('/');
    await page.keyboard.type('three');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Search' }).waitFor();
    const hit = page.locator('ul.records li').first();
    await hit.waitFor();
    expect(await hit.locator('.record-link').textContent()).toBe('Glossary');
    // Only the matched word is marked: the body's own **lanterns** is text, not a match.
    expect(await hit.locator('mark').allTextContents()).toEqual(['three']);
    expect(await hit.locator('.snippet').textContent()).toContain('about **lanterns**');
    await shot('search');
    await page.goto(`${origin}/#/record/rec-claim`);
    await page.getByRole('heading', { level: 1, name: 'We use SQLite' }).waitFor();
    const ev = page.locator('li.evidence');
    await ev.waitFor();
    expect(await ev.locator('.evidence-head strong').textContent()).toBe('review.txt');
    expect(await ev.textContent()).toContain('in Git history');
    expect(await ev.locator('code.hash').textContent()).toMatch(/^[0-9a-f]{64}$/);
  });

  it('renders hostile record text as text: no script runs, no handler or javascript: link is created', async () => {
    await page.goto(`${origin}/#/record/rec-xss`);
    await page.locator('h1').filter({ hasText: 'Hostile' }).waitFor();
    await page.waitForTimeout(300);
    const report = await page.evaluate(() => ({
      pwned: (window as unknown as { __pwned?: number }).__pwned ?? null,
      scripts: document.querySelectorAll('main script').length,
      imgs: document.querySelectorAll('main img').length,
      handlers: [...document.querySelectorAll('main *')].filter((e) => [...e.attributes].some((a) => a.name.startsWith('on'))).length,
      badLinks: [...document.querySelectorAll('main a')].filter((a) => !/^(?:#\/|https?:|mailto:)/.test(a.getAttribute('href') ?? '')).length,
      title: document.querySelector('h1')?.textContent,
      body: document.querySelector('article.markdown')?.textContent ?? '',
    }));
    expect(report).toMatchObject({ pwned: null, scripts: 0, imgs: 0, handlers: 0, badLinks: 0 });
    expect(report.title).toBe('<img src=x onerror=window.__pwned=1> Hostile');
    expect(report.body).toContain('<script>window.__pwned = 1</script>');
    expect(report.body).toContain('[image: pic]');
  });

  it('[GIT-16] finds the pending checkpoint in Activity & issues, and Retry (keyboard) shows committed without a reload', async () => {
    await page.goto(`${origin}/#/recent`);
    await page.getByRole('heading', { level: 1, name: 'Recent' }).waitFor();
    await expect.poll(() => page.locator('#issue-count').textContent()).toBe('1');
    // Reach "Activity & issues" with the keyboard only.
    let onActivity = false;
    for (let k = 0; k < 15 && !onActivity; k++) {
      await page.keyboard.press('Tab');
      onActivity = await page.evaluate(() => document.activeElement?.getAttribute('data-nav') === 'activity');
    }
    expect(onActivity).toBe(true);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Activity & issues' }).waitFor();
    const entry = page.locator(`li.entry[data-entry-id="${pendingId}"]`);
    await entry.waitFor();
    expect(await entry.getAttribute('data-state')).toBe('pending');
    expect(await entry.locator('.state-chip').textContent()).toBe('pending · locked');
    // What was published, in words: the record's title and partition.
    expect(await entry.locator('h3').textContent()).toBe('publication Published “Written while Git was locked” in private');
    expect(await entry.locator('.reason-text').textContent()).toContain('index.lock');
    expect(await entry.locator('.hint').textContent()).toContain('delete the file');
    await shot('activity-pending');

    // Retry while still broken: stays pending, reason shown, no reload.
    await page.evaluate(() => { (window as unknown as { __marker: number }).__marker = 42; });
    await entry.getByRole('button', { name: 'Retry' }).focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('#live').textContent()).toContain('Still pending');
    expect(existsSync(join(vault, '.git', 'index.lock'))).toBe(true);

    // Fix the repository the way the hint says, then retry from the keyboard.
    rmSync(join(vault, '.git', 'index.lock'));
    const again = page.locator(`li.entry[data-entry-id="${pendingId}"]`);
    await again.getByRole('button', { name: 'Retry' }).focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator(`li.entry[data-entry-id="${pendingId}"]`).getAttribute('data-state')).toBe('committed');
    const chip = await page.locator(`li.entry[data-entry-id="${pendingId}"] .state-chip`).textContent();
    const head = userGit(sb, vault, ['rev-parse', 'HEAD']).trim();
    expect(chip).toBe(`committed ${head.slice(0, 10)}`);
    expect(userGit(sb, vault, ['log', '-1', '--format=%B'])).toContain(`Knowledge-Publication: ${pendingId}`);
    // Same document: no reload happened.
    expect(await page.evaluate(() => (window as unknown as { __marker?: number }).__marker)).toBe(42);
    expect(await page.evaluate(() => performance.getEntriesByType('navigation').length)).toBe(1);
    await expect.poll(() => page.locator('#issue-count').isHidden()).toBe(true);
    await page.getByRole('link', { name: 'Issues only' }).click();
    await page.getByText('No issues.').waitFor();
    await page.getByRole('link', { name: 'Everything', exact: true }).click();
    await page.locator('li.entry').first().waitFor();
    await shot('activity-committed');
  });

  it('reads well at phone width: nothing scrolls sideways', async () => {
    await page.setViewportSize({ width: 375, height: 740 });
    for (const hash of ['#/recent', '#/record/rec-glossary', '#/activity', '#/search?q=lanterns', '#/browse?kind=page']) {
      await page.goto(`${origin}/${hash}`);
      await page.locator('main h1').waitFor();
      await page.waitForLoadState('networkidle');
      const [scroll, width] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
      expect(scroll, hash).toBeLessThanOrEqual(width);
    }
    await page.goto(`${origin}/#/record/rec-glossary`);
    await page.locator('table.history').waitFor();
    await shot('phone-record');
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('a store that vanishes while served shows a designed error state, and recovers with Try again', async () => {
    renameSync(vault, `${vault}.away`);
    try {
      await page.goto(`${origin}/#/recent`);
      await page.getByText('The store is unavailable').waitFor();
      expect(await page.locator('[role=alert]').textContent()).toContain('missing vault directory');
      await shot('unavailable');
    } finally {
      renameSync(`${vault}.away`, vault);
    }
    await page.getByRole('button', { name: 'Try again' }).click();
    await page.locator('ul.records li').first().waitFor();
    expect(server!.exitCode).toBeNull();
  });

  it('npm start: the demo store serves, its pending checkpoint is fixed as the page says and retried to committed', async () => {
    const demoDir = join(sb.dir, 'demo');
    const started = await startCli(['demo', demoDir, '--port', '0'], sb.env);
    demo = started.child;
    const demoOrigin = started.url;
    await page.goto(`${demoOrigin}/#/activity`);
    const notice = page.locator('#notice');
    await expect.poll(() => notice.textContent()).toContain('index.lock');
    const pending = page.locator('li.entry[data-state=pending]');
    await expect.poll(() => pending.count()).toBe(1);
    rmSync(join(demoDir, 'vault', '.git', 'index.lock'));
    await pending.getByRole('button', { name: 'Retry' }).click();
    await expect.poll(() => page.locator('li.entry[data-state=pending]').count()).toBe(0);
    expect(await page.locator('li.entry[data-state=committed]').count()).toBeGreaterThanOrEqual(8);
    await expect.poll(() => notice.textContent()).toContain('Delete that folder to start over');
    // Requests to the demo's origin are the demo Gateway's own.
    requests.splice(0, requests.length, ...requests.map((u) => (u.startsWith(demoOrigin) ? u.replace(demoOrigin, origin) : u)));
  });

  it('a stale link past the last page says so, and Previous goes to the last page there is', async () => {
    await page.goto(`${origin}/#/browse?offset=100`);
    const pager = page.locator('nav.pager').first();
    await pager.waitFor();
    const total = Number((await pager.locator('span').textContent())!.replace(/^nothing past (\d+)$/, '$1'));
    expect(total).toBeGreaterThan(0);
    expect(await pager.getByRole('link', { name: '← Previous' }).getAttribute('href')).toBe('#/browse');
  });

  it('Activity reaches older entries page by page: an offset shows the entries after it, with a way back to the newest', async () => {
    await page.goto(`${origin}/#/activity`);
    const entries = page.locator('ol.entries > li.entry');
    await entries.first().waitFor();
    const all = await entries.evaluateAll((els) => els.map((e) => e.getAttribute('data-entry-id')));
    expect(all.length).toBeGreaterThan(3);
    await page.goto(`${origin}/#/activity?offset=3`);
    await page.getByRole('link', { name: '← Newer' }).waitFor();
    expect(await entries.evaluateAll((els) => els.map((e) => e.getAttribute('data-entry-id')))).toEqual(all.slice(3));
    expect(await page.getByRole('link', { name: '← Newer' }).getAttribute('href')).toBe('#/activity');
  });

  it('with a token: a badly escaped #token= neither breaks the page nor stays in the address bar; a token typed in loads the whole page', async () => {
    expect(cli(sb, ['init', 'st-token']).code).toBe(0);
    const token = 'a-token-of-24-characters';
    const started = await startCli(['serve', '--store', 'st-token', '--port', '0', '--token', token], sb.env);
    try {
      const tokenOrigin = started.url;
      await page.goto(`${tokenOrigin}/#token=abc%E0`);
      await page.getByText('This Gateway needs its token').waitFor();
      expect(page.url()).not.toContain('token=');
      await page.locator('#token-input').fill(token);
      await page.getByRole('button', { name: 'Use token' }).click();
      await page.getByRole('heading', { level: 1, name: 'Recent' }).waitFor();
      // The shell too, not only the view: the store line in the footer.
      await expect.poll(() => page.locator('#store-path').textContent()).toBe(join(sb.dir, 'st-token'));
      requests.splice(0, requests.length, ...requests.map((u) => (u.startsWith(tokenOrigin) ? u.replace(tokenOrigin, origin) : u)));
    } finally {
      await stop(started.child);
    }
  });

  it('made no request beyond its Gateway, and threw no page errors', () => {
    expect(requests.length).toBeGreaterThan(20);
    expect(requests.filter((u) => !u.startsWith(`${origin}/`))).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});
