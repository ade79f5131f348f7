// Screenshots of the Knowledge page for docs/screenshots/ (README), taken
// from the demo store that `npm start` serves, in Debian's chromium.
//   npm run build && node bench/screenshots.mjs docs/screenshots
// It measures nothing: without an output directory (as `npm run bench` runs
// every bench/*.mjs) it says so and writes nothing.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { tempDir, cleanup } from './lib.mjs';

const out = process.argv[2];
if (!out) {
  console.log('bench/screenshots.mjs: not a benchmark; run `node bench/screenshots.mjs docs/screenshots` to refresh the README screenshots');
  process.exit(0);
}
mkdirSync(out, { recursive: true });
const dir = tempDir('kn-shots-');
const env = { ...process.env, KNOWLEDGE_HOME: join(dir, 'home') };
for (const k of Object.keys(env)) if (k.startsWith('GIT_')) delete env[k];
const demoDir = join(dir, '.knowledge-demo');
const child = spawn(process.execPath, ['bin/knowledge.js', 'demo', demoDir, '--port', '0'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
let printed = '';
const origin = await new Promise((resolve, reject) => {
  child.stdout.on('data', (c) => {
    printed += c;
    const m = /Open (http:\/\/127\.0\.0\.1:\d+)\//.exec(printed);
    if (m) resolve(m[1]);
  });
  child.on('exit', (code) => reject(new Error(`demo exited ${code}`)));
});
const ctx = await chromium.launchPersistentContext(mkdtempSync(join(dir, 'chromium-')), {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  viewport: { width: 1280, height: 900 },
});
try {
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  const shoot = async (name, hash, ready, opts = {}) => {
    if (hash !== null) await page.goto(`${origin}/${hash}`);
    await page.locator(ready).first().waitFor();
    await page.waitForLoadState('networkidle');
    await page.screenshot({ path: join(out, `${name}.png`), ...opts });
    console.log(`${out}/${name}.png`);
  };
  await shoot('recent', '#/recent', 'ul.records li');
  await shoot('record', '#/record/demo-welcome', 'table.history tbody tr', { fullPage: true });
  await shoot('history', '#/record/demo-glossary', 'table.history tbody tr:nth-child(3)');
  const versions = await page.locator('table.history tbody tr td:nth-child(2) code').evaluateAll((els) => els.map((e) => e.getAttribute('title')));
  await shoot('diff', `#/diff/demo-glossary?from=${versions[2]}&to=${versions[0]}`, 'pre.diff');
  await shoot('search', '#/search?q=journal', 'ul.records li');
  await shoot('activity-pending', '#/activity', 'li.entry[data-state=pending]');
  rmSync(join(demoDir, 'vault', '.git', 'index.lock'));
  await page.locator('li.entry[data-state=pending] button.retry').click();
  await page.locator('li.entry[data-state=pending]').waitFor({ state: 'detached' });
  await shoot('activity-committed', null, 'li.entry[data-state=committed]');
  await page.setViewportSize({ width: 390, height: 844 });
  await shoot('phone-record', '#/record/demo-claim-sqlite', 'table.history');
  await shoot('phone-activity', '#/activity', 'li.entry');
} finally {
  await ctx.close();
  child.kill('SIGTERM');
  await new Promise((r) => child.on('exit', r));
  cleanup(dir);
}
