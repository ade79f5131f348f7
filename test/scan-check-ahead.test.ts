/**
 * [SCAN-4, REC-3, SCAN-2] A scan that writes CHECK_AHEAD_MIN_FILES+ files has
 * them checked on a worker thread while its transaction indexes them
 * (src/scan/check-ahead.ts). Whatever the worker does — all rows, some and
 * then nothing, rows out of order, no worker at all — the scan indexes,
 * diagnoses and commits exactly what an in-thread check would, or fails
 * whole and leaves nothing behind.
 *
 * Under vitest the sources are TypeScript and the worker file does not
 * exist, so an in-process scan checks in-thread unless the module is
 * replaced (below); a CLI process runs the compiled package and its real
 * worker. The worker itself is driven from the compiled package too.
 */
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { copyFileSync, cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { cli, makeSandbox, userGit, type Sandbox } from './helpers.js';
import { KnowledgeService } from '../src/service.js';
import { KnowledgeError } from '../src/errors.js';
import { initStore, openStore } from '../src/store/store.js';
import { CHECK_AHEAD_MIN_FILES } from '../src/scan/apply.js';
import { checkFile } from '../src/scan/check.js';
import { partitionOfPath } from '../src/store/layout.js';
import { sha256Hex } from '../src/records/record.js';
import type { CheckedRow } from '../src/scan/check-ahead.js';

/** How the replaced CheckAhead behaves for in-process scans. */
type Mode = 'none' | 'all' | 'some' | 'disorder';
const fake = vi.hoisted(() => ({ mode: 'none' as string, starts: 0, delivered: 0 }));

vi.mock('../src/scan/check-ahead.js', async () => {
  const { default: Db } = await import('better-sqlite3');
  const { checkFile: check } = await import('../src/scan/check.js');
  const { partitionOfPath: partitionOf } = await import('../src/store/layout.js');
  const { sha256Hex: sha } = await import('../src/records/record.js');
  /** Reads and checks the staged rows when started, as the worker would, and hands them out as `fake.mode` says. */
  class CheckAhead {
    delivered = 0;
    failure: string | null = null;
    private batches: CheckedRow[][] = [];
    static start(file: string, scanId: string, opts: { bytes: boolean }): CheckAhead | null {
      fake.starts++;
      if (fake.mode === 'none') return null;
      const ahead = new CheckAhead();
      const db = new Db(file, { readonly: true });
      const rows = db.prepare('SELECT rowid, path, bytes FROM scan_staging WHERE scan_id = ? ORDER BY rowid').raw().all(scanId) as Array<[number, string, Buffer]>;
      db.close();
      const checked = rows.map(([rowid, path, bytes]) => ({ rowid, path, bytes: opts.bytes ? bytes : null, check: check(path, partitionOf(path) ?? '', bytes, sha(bytes)) }));
      for (let i = 0; i < checked.length; i += 100) ahead.batches.push(checked.slice(i, i + 100));
      if (fake.mode === 'some') ahead.batches = ahead.batches.slice(0, 7);
      if (fake.mode === 'disorder') {
        const b = ahead.batches[1]!;
        [b[3], b[4]] = [b[4]!, b[3]!];
      }
      return ahead;
    }
    next(): CheckedRow[] | null {
      const b = this.batches.shift();
      if (b === undefined) {
        if (fake.mode === 'some') this.failure = 'stopped after 700 rows (test)';
        return null;
      }
      this.delivered += b.length;
      fake.delivered += b.length;
      return b;
    }
    close(): void {
      this.batches = [];
    }
  }
  return { CheckAhead };
});

const sandboxes: Sandbox[] = [];
const services: KnowledgeService[] = [];
afterEach(() => {
  for (const s of services.splice(0)) s.close();
  for (const sb of sandboxes.splice(0)) sb.cleanup();
  fake.mode = 'none';
  fake.starts = 0;
  fake.delivered = 0;
});

const operator = { kind: 'operator' } as const;

function record(id: string, title: string, scope = 'private', extra = ''): string {
  return `---\nformat: knowledge-record-v1\nid: ${id}\nrevision: 1\nkind: page\ntitle: ${title}\nrecorded_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-02T00:00:00Z\nscope: ${scope}\nlifecycle: active\ntags: [t${id.length}]\n${extra}---\nAbout ${title}, see [[p1]].\n`;
}

/** The files every verdict can come from, and `pages` valid records around them. */
function vaultFiles(pages: number): Map<string, string | Buffer> {
  const files = new Map<string, string | Buffer>();
  for (let i = 0; i < pages; i++) files.set(`private/pages/d${i % 25}/p-${i}.md`, record(`p${i}`, `Page ${i}`));
  files.set('private/odd/broken-yaml.md', '---\nid: [unclosed\n---\nbody\n');
  files.set('private/odd/no-envelope.md', 'just text, no frontmatter\n');
  files.set('private/odd/latin1.md', Buffer.from([0x2d, 0x2d, 0x2d, 0x0a, 0xe9, 0x0a]));
  files.set('private/odd/no-title.md', record('nt', 'x').replace('title: x\n', ''));
  files.set('private/odd/dup-a.md', record('dup', 'Dup A'));
  files.set('private/odd/dup-b.md', record('dup', 'Dup B'));
  files.set('private/odd/elsewhere.md', record('sc', 'Scoped', 'conversation:other'));
  files.set('private/odd/dangling.md', record('dl', 'Dangling', 'private', 'dependencies: [missing-one]\n'));
  files.set('private/data/list.yaml', 'items: [a, b]\n');
  files.set('private/data/broken.yml', 'a: [\n');
  files.set('private/data/latin1.yaml', Buffer.from([0x6b, 0x3a, 0x20, 0xe9, 0x0a]));
  files.set('conversations/s1/notes/c.md', record('c1', 'In a conversation', 'conversation:s1'));
  // Readable on a worker's 4 MiB stack but not on the main thread's: refused on both (MAX_YAML_DEPTH).
  files.set('private/data/deep.yaml', `a: ${'['.repeat(1000)}${']'.repeat(1000)}\n`);
  files.set('private/odd/deep.md', record('deep', 'Deep', 'private', `x: ${'['.repeat(1000)}${']'.repeat(1000)}\n`));
  return files;
}

/** Written once per size into a template folder, copied into each store's vault. */
const templates = new Map<number, string>();
let templateBox: Sandbox | null = null;
afterAll(() => templateBox?.cleanup());
function template(_sb: Sandbox, pages: number): string {
  const known = templates.get(pages);
  if (known !== undefined) return known;
  templateBox ??= makeSandbox();
  const dir = join(templateBox.dir, `template-${pages}`);
  templates.set(pages, dir);
  for (const [rel, bytes] of vaultFiles(pages)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), bytes);
  }
  return dir;
}

function newStore(sb: Sandbox, name: string, from: string): string {
  const dir = join(sb.dir, name);
  initStore(dir, { env: sb.env });
  cpSync(from, join(dir, 'vault'), { recursive: true });
  return dir;
}

async function scanInProcess(sb: Sandbox, dir: string) {
  const s = KnowledgeService.open(dir, { write: true, env: sb.env, git: { pathEnv: sb.env.PATH } });
  services.push(s);
  try {
    return await s.scan({ caller: operator });
  } finally {
    services.splice(services.indexOf(s), 1);
    s.close();
  }
}

/** What a baseline scan left: index, diagnostics, duplicates, the committed tree, the receipt's lists. */
function outcome(sb: Sandbox, dir: string, receipt: { added: string[]; diagnostics: unknown[]; git: { state: string } | null }) {
  const db = new Database(join(dir, 'state.sqlite'), { readonly: true });
  try {
    return {
      records: db.prepare('SELECT * FROM records ORDER BY id').all(),
      diagnostics: db.prepare('SELECT * FROM scan_diagnostics ORDER BY path, code').all(),
      duplicates: db.prepare('SELECT * FROM scan_duplicate_rows ORDER BY path').all(),
      links: db.prepare('SELECT * FROM record_links ORDER BY source_id, target_id, kind').all(),
      fts: db.prepare("SELECT count(*) FROM records_fts WHERE records_fts MATCH 'page'").pluck().get(),
      tree: userGit(sb, join(dir, 'vault'), ['rev-parse', 'main^{tree}']).trim(),
      added: [...receipt.added].sort(),
      receiptDiagnostics: receipt.diagnostics,
      git: receipt.git?.state,
    };
  } finally {
    db.close();
  }
}

function sandbox(): Sandbox {
  const sb = makeSandbox();
  sandboxes.push(sb);
  return sb;
}

const PAGES = CHECK_AHEAD_MIN_FILES; // plus 14 odd files: past the threshold

/** The outcome of an in-process baseline of vaultFiles(PAGES), checked in-thread: computed once. */
let referenceOutcome: ReturnType<typeof outcome> | null = null;
async function reference(): Promise<ReturnType<typeof outcome>> {
  if (referenceOutcome === null) {
    const sb = sandbox();
    const dir = newStore(sb, 'reference', template(sb, PAGES));
    const mode = fake.mode;
    fake.mode = 'none';
    referenceOutcome = outcome(sb, dir, await scanInProcess(sb, dir));
    fake.mode = mode;
    fake.starts = 0;
  }
  return referenceOutcome;
}

describe('[SCAN-4] a large scan\'s files are checked on a worker; the outcome is the in-thread one', () => {
  it('the CLI (compiled, real worker) and an in-process scan (checked in-thread) index, diagnose and commit the same', async () => {
    const sb = sandbox();
    const tpl = template(sb, PAGES);
    const a = newStore(sb, 'cli', tpl);
    const r = cli(sb, ['scan', '--store', a, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const viaCli = outcome(sb, a, JSON.parse(r.stdout));
    fake.starts = 0;
    const inThread = await reference();
    expect(fake.delivered).toBe(0);
    expect(inThread.records).toHaveLength(PAGES + 3); // the pages, elsewhere, dangling, c1 (both dups parked, the rest invalid)
    expect(inThread.diagnostics.map((d) => `${(d as { code: string }).code} ${(d as { path: string }).path}`)).toEqual(expect.arrayContaining([
      'broken-envelope private/odd/broken-yaml.md',
      'broken-envelope private/odd/latin1.md',
      'invalid-record private/odd/no-title.md',
      'broken-yaml private/data/broken.yml',
      'broken-yaml private/data/latin1.yaml',
      'scope-mismatch private/odd/elsewhere.md',
      'broken-yaml private/data/deep.yaml',
      'broken-envelope private/odd/deep.md',
    ]));
    expect(inThread.duplicates).toHaveLength(2);
    expect(inThread.git).toBe('committed');
    expect(viaCli).toEqual(inThread);
  });

  it('the compiled worker sends every staged row of its scan, in rowid order, with the in-thread verdict and the bytes', () => {
    const sb = sandbox();
    const dir = join(sb.dir, 'st');
    initStore(dir, { env: sb.env });
    const store = openStore(dir, { write: true, env: sb.env });
    // Large files too: a batch ends at 1 MiB, not only at 256 rows.
    const big = Array.from({ length: 40 }, (_, i) => [`private/big/b-${i}.md`, record(`big${i}`, `Big ${i}`).replace('About', `${'x'.repeat(100 * 1024)}\nAbout`)] as [string, string]);
    const files = [...vaultFiles(PAGES), ...big];
    const stage = store.db.prepare('INSERT INTO scan_staging(scan_id, path, bytes) VALUES (?, ?, ?)');
    store.db.transaction(() => {
      stage.run('scan-other', 'private/other.md', Buffer.from('not this scan\n'));
      for (const [path, text] of files) stage.run('scan-x', path, Buffer.from(text));
      stage.run('scan-later', 'private/later.md', Buffer.from('not this scan either\n'));
    })();
    store.close();
    const dist = new URL('../dist/scan/check-ahead.js', import.meta.url).href;
    const code = `const { CheckAhead } = await import(${JSON.stringify(dist)});
      const out = {};
      for (const bytes of [true, false]) {
        const ahead = CheckAhead.start(${JSON.stringify(join(dir, 'state.sqlite'))}, 'scan-x', { bytes });
        const rows = [];
        const sizes = [];
        let batches = 0;
        for (let b = ahead.next(); b !== null; b = ahead.next()) {
          batches++;
          sizes.push(b.reduce((n, r) => n + (r.bytes === null ? 0 : r.bytes.length), 0));
          for (const r of b) rows.push({ rowid: r.rowid, path: r.path, check: r.check, bytes: r.bytes === null ? null : r.bytes.toString('base64') });
        }
        out[bytes] = { rows, batches, sizes, delivered: ahead.delivered, failure: ahead.failure };
        ahead.close();
      }
      const missing = CheckAhead.start('/nonexistent/state.sqlite', 'scan-x', { bytes: false });
      out.missing = { first: missing.next(), failure: missing.failure };
      // A worker whose modules cannot be loaded (a copy away from them) says so at once.
      const t0 = performance.now();
      const stray = CheckAhead.start(${JSON.stringify(join(dir, 'state.sqlite'))}, 'scan-x', { bytes: false }, new URL(${JSON.stringify(`file://${join(sb.dir, 'stray', 'check-worker.js')}`)}));
      out.stray = { first: stray.next(), failure: stray.failure, ms: performance.now() - t0 };
      out.noWorker = CheckAhead.start('x', 'scan-x', { bytes: false }, new URL('./no-such-worker.js', import.meta.url)) === null;
      process.stdout.write(JSON.stringify(out));`;
    mkdirSync(join(sb.dir, 'stray'));
    copyFileSync(new URL('../dist/scan/check-worker.js', import.meta.url), join(sb.dir, 'stray', 'check-worker.js'));
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    const expected = files.map(([path, text]) => {
      const bytes = Buffer.from(text);
      // Through JSON, as the worker's answer came: undefined fields drop out alike.
      return JSON.parse(JSON.stringify({ path, check: checkFile(path, partitionOfPath(path) ?? '', bytes, sha256Hex(bytes)) }));
    });
    for (const withBytes of ['true', 'false']) {
      const got = out[withBytes];
      expect(got.failure).toBeNull();
      expect(got.delivered).toBe(files.length);
      expect(got.batches).toBeGreaterThan(1);
      const rowids = got.rows.map((x: { rowid: number }) => x.rowid);
      expect(rowids).toEqual([...rowids].sort((p: number, q: number) => p - q));
      expect(new Set(rowids).size).toBe(files.length);
      expect(got.rows.map((x: { path: string; check: unknown }) => ({ path: x.path, check: x.check }))).toEqual(expected);
      if (withBytes === 'true') {
        expect(got.rows.map((x: { bytes: string }) => x.bytes)).toEqual(files.map(([, text]) => Buffer.from(text).toString('base64')));
        // Bytes waiting in a batch: at most 1 MiB and the one file that passed it.
        const largest = Math.max(...files.map(([, text]) => Buffer.byteLength(text)));
        expect(Math.max(...got.sizes)).toBeLessThanOrEqual((1 << 20) + largest);
        expect(Math.max(...got.sizes)).toBeGreaterThan(1 << 19);
      } else {
        expect(got.rows.every((x: { bytes: unknown }) => x.bytes === null)).toBe(true);
      }
    }
    // A worker that cannot open the database says so, and sends no rows: the caller checks them all itself.
    expect(out.missing.first).toBeNull();
    expect(out.missing.failure).toMatch(/^the check worker failed: /);
    expect(out.stray.first).toBeNull();
    expect(out.stray.failure).toMatch(/^the check worker failed: Cannot find (package|module) /);
    expect(out.stray.ms).toBeLessThan(5_000); // reported, not found out by waiting 15 s
    // No worker file, no worker.
    expect(out.noWorker).toBe(true);
  });

  it.each([
    ['all rows', 'all'],
    ['700 rows and then nothing (the rest are checked in-thread)', 'some'],
  ] as Array<[string, Mode]>)('a worker that delivers %s: the same outcome as with none', async (_what, mode) => {
    const sb = sandbox();
    const tpl = template(sb, PAGES);
    const withIt = newStore(sb, 'with', tpl);
    const expected = await reference();
    fake.mode = mode;
    const got = outcome(sb, withIt, await scanInProcess(sb, withIt));
    expect(fake.starts).toBe(1);
    expect(fake.delivered).toBe(mode === 'all' ? PAGES + 14 : 700);
    expect(got).toEqual(expected);
  });

  it('rows out of order fail the scan whole (E_INTERNAL): nothing indexed or committed, and the next scan does it all', async () => {
    const sb = sandbox();
    const tpl = template(sb, PAGES);
    const dir = newStore(sb, 'st', tpl);
    fake.mode = 'disorder';
    const err = await scanInProcess(sb, dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KnowledgeError);
    expect((err as KnowledgeError).code).toBe('E_INTERNAL');
    const db = new Database(join(dir, 'state.sqlite'), { readonly: true });
    expect(db.prepare('SELECT count(*) FROM records').pluck().get()).toBe(0);
    expect(db.prepare('SELECT count(*) FROM vault_files').pluck().get()).toBe(0);
    expect(db.prepare('SELECT count(*) FROM scan_diagnostics').pluck().get()).toBe(0);
    db.close();
    expect(spawnSync('git', ['rev-parse', '--verify', '-q', 'refs/heads/main'], { cwd: join(dir, 'vault'), env: sb.env }).status).not.toBe(0);
    fake.mode = 'none';
    const retried = outcome(sb, dir, await scanInProcess(sb, dir));
    expect(retried).toEqual(await reference());
  });

  it(`is not started for a scan that writes fewer than ${CHECK_AHEAD_MIN_FILES} files`, async () => {
    const sb = sandbox();
    const tpl = template(sb, CHECK_AHEAD_MIN_FILES - 15); // 14 odd files: one short
    const dir = newStore(sb, 'st', tpl);
    fake.mode = 'all';
    const r = await scanInProcess(sb, dir);
    expect(r.added).toHaveLength(CHECK_AHEAD_MIN_FILES - 1);
    expect(fake.starts).toBe(0);
  });
});
