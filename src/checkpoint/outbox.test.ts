import { afterEach, describe, expect, it } from 'vitest';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { closeLongLived } from '../git/long-lived.js';
import { GitRunner } from '../git/runner.js';
import { join } from 'node:path';
import { initStore } from '../store/store.js';
import { KnowledgeService } from '../service.js';
import { batchGitState, drainOutbox } from './outbox.js';
import { makeSandbox, ugit, ugitRaw, type GitSandbox } from '../git/test-sandbox.js';

/**
 * The outbox drain in-process: queued batches are committed in chains (one
 * stream, one branch update, one transaction, one index write per chain),
 * still one commit per batch with its own bytes, in order [GIT-5][GIT-7].
 */
let sb: GitSandbox | undefined;
const open: KnowledgeService[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) {
    await s.settle().catch(() => undefined);
    s.close();
  }
  sb?.cleanup();
  sb = undefined;
});

function service(git: 'missing' | 'present'): KnowledgeService {
  const env = { ...sb!.env, KNOWLEDGE_HOME: join(sb!.dir, 'kh') };
  const dir = join(sb!.dir, 'st');
  if (!existsSync(dir)) initStore(dir, { env });
  const s = KnowledgeService.open(dir, { write: true, env, git: git === 'missing' ? { gitPath: join(sb!.dir, 'no-git') } : {} });
  open.push(s);
  return s;
}
const page = (title: string, body: string, head = '') => `---\n${head}kind: page\ntitle: ${title}\n---\n${body}\n`;

async function publishVersions(s: KnowledgeService, n: number) {
  const first = await s.publish({ partition: 'private', actor: 'agent', records: [page('Doc', 'v1')], evidence: [] });
  const id = first.records[0]!.id;
  const out = [first];
  for (let v = 2; v <= n; v++) {
    out.push(await s.publish({ partition: 'private', actor: 'agent', records: [page('Doc', `v${v}`, `id: ${id}\nrevision: ${v - 1}\n`)], evidence: [] }));
  }
  await s.settle(); // the index update after the last receipt
  return out;
}

describe('the index update follows the receipt [GIT-4][GIT-10]', () => {
  it('returns a committed receipt while Knowledge still holds index.lock; settle() installs the index and releases it', async () => {
    sb = makeSandbox();
    const s = service('present');
    await s.publish({ partition: 'private', actor: 'agent', records: [page('First', 'one')], evidence: [] });
    await s.settle();
    const vault = s.store.paths.vault;
    const lock = join(vault, '.git', 'index.lock');
    expect(existsSync(lock)).toBe(false);

    const r = await s.publish({ partition: 'private', actor: 'agent', records: [page('Second', 'two')], evidence: [] });
    // The receipt is recorded with its commit on the branch...
    expect(r.git.state).toBe('committed');
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe((r.git as { commit: string }).commit);
    // ...while the user's index is still being brought up to date under Knowledge's lock:
    expect(readFileSync(lock, 'utf8')).toMatch(/^knowledge-index-lock \d+ /);
    const row = () => s.store.db.prepare("SELECT index_synced FROM batches WHERE kind = 'publication' ORDER BY batch_id DESC LIMIT 1").get() as { index_synced: number };
    expect(row().index_synced).toBe(0);
    // A user's commit in that window is refused by git (it would otherwise drop the new file from the tip).
    const userCommit = ugitRaw(sb, vault, ['commit', '--allow-empty', '-q', '-m', 'user']);
    expect(userCommit.status).not.toBe(0);
    expect(userCommit.stderr.toString()).toMatch(/index\.lock/);

    await s.settle();
    expect(existsSync(lock)).toBe(false);
    expect(row().index_synced).toBe(1);
    expect(ugit(sb, vault, ['status', '--porcelain'])).toBe('');
    // The next drain after a settled one needs nothing more.
    ugit(sb, vault, ['commit', '--allow-empty', '-q', '-m', 'user']);
    expect(ugit(sb, vault, ['show', '--name-only', '--format=', 'main'])).toBe('');
    expect(ugit(sb, vault, ['ls-tree', '-r', '--name-only', 'main'])).toContain(r.records[0]!.path);
  });
});

describe('the search for an earlier attempt [GIT-6]', () => {
  it('runs once per writer process: after a user\'s commit the next checkpoint needs no git log', async () => {
    sb = makeSandbox();
    const s = service('present');
    const calls: string[] = [];
    const orig = s.runner.run.bind(s.runner);
    s.runner.run = (args, opts) => {
      calls.push(args[0]!);
      return orig(args, opts);
    };
    await s.publish({ partition: 'private', actor: 'agent', records: [page('One', 'one')], evidence: [] });
    await s.settle();
    const vault = s.store.paths.vault;
    ugit(sb, vault, ['commit', '--allow-empty', '-q', '-m', 'the user moves the branch']);
    calls.length = 0;
    const r = await s.publish({ partition: 'private', actor: 'agent', records: [page('Two', 'two')], evidence: [] });
    expect(r.git.state).toBe('committed');
    expect(calls).not.toContain('log');
    // Built on the user's commit, which stays in history.
    expect(ugit(sb, vault, ['log', '--format=%s', '-2', 'main']).trim().split('\n')[1]).toBe('the user moves the branch');
  });
});

describe('drainOutbox in chains', () => {
  it('commits 7 queued versions in chains of 3: seven commits, in order, each with its own bytes', async () => {
    sb = makeSandbox();
    const offline = service('missing');
    const pubs = await publishVersions(offline, 7);
    expect(pubs.every((p) => p.git.state === 'unavailable')).toBe(true);
    offline.close();
    open.pop();
    const s = service('present');
    const r = await drainOutbox(s.store, s.runner, { maxChainBatches: 3 });
    expect(r.blocked).toBeNull();
    expect(r.committed).toHaveLength(7);
    const vault = s.store.paths.vault;
    const log = ugit(sb, vault, ['log', '--reverse', '--format=%H %(trailers:key=Knowledge-Publication,valueonly,separator=)', 'main']).trim().split('\n').map((l) => l.split(' '));
    expect(log.map((l) => l[1])).toEqual(pubs.map((p) => p.publicationId));
    const path = pubs[0]!.records[0]!.path;
    log.forEach(([commit], i) => expect(ugit(sb!, vault, ['show', `${commit}:${path}`])).toContain(`\nv${i + 1}\n`));
    // Three chains: three branch moves in the reflog.
    expect(ugit(sb, vault, ['reflog', 'show', '--format=%gs', 'refs/heads/main']).trim().split('\n')).toHaveLength(3);
    await s.settle();
    for (const p of pubs) expect(s.publicationReceipt(p.publicationId).git).toEqual({ state: 'committed', commit: log[pubs.indexOf(p)]![0] });
    expect(ugit(sb, vault, ['status', '--porcelain'])).toBe('');
    // Bytes are dropped once committed; blob ids are kept in their place [PUB-6].
    const files = s.store.db.prepare('SELECT bytes, blob_oid, mode FROM batch_files').all() as Array<{ bytes: Buffer | null; blob_oid: string; mode: string }>;
    expect(files.every((f) => f.bytes === null && /^[0-9a-f]{40}$/.test(f.blob_oid) && f.mode === '100644')).toBe(true);
  });

  it('a batch above the byte budget goes alone; the order is kept', async () => {
    sb = makeSandbox();
    const offline = service('missing');
    const pubs = await publishVersions(offline, 4);
    offline.close();
    open.pop();
    const s = service('present');
    const r = await drainOutbox(s.store, s.runner, { maxChainBytes: 1 });
    expect(r.committed).toHaveLength(4);
    expect(ugit(sb, s.store.paths.vault, ['reflog', 'show', '--format=%gs', 'refs/heads/main']).trim().split('\n')).toHaveLength(4);
    expect(ugit(sb, s.store.paths.vault, ['log', '--format=%(trailers:key=Knowledge-Publication,valueonly,separator=)', 'main']).trim().split('\n').reverse())
      .toEqual(pubs.map((p) => p.publicationId));
  });

  it('each batch records its size when queued; chains are sized from it, and batches queued before it are summed file by file', async () => {
    sb = makeSandbox();
    const offline = service('missing');
    await publishVersions(offline, 4);
    const db = offline.store.db;
    const sizes = db.prepare('SELECT b.queued_bytes AS q, (SELECT sum(length(f.bytes)) FROM batch_files f WHERE f.batch_id = b.batch_id) AS s FROM batches b ORDER BY b.batch_id')
      .all() as Array<{ q: number; s: number }>;
    expect(sizes).toHaveLength(4);
    for (const r of sizes) expect(r.q).toBe(r.s);
    // Recorded sizes that lie (0) let every batch into one chain under a budget of one batch...
    const budget = Math.max(...sizes.map((r) => r.s)) + 1;
    db.prepare('UPDATE batches SET queued_bytes = 0 WHERE batch_id = (SELECT min(batch_id) FROM batches)').run();
    // ...while batches without a recorded size (queued by an older Knowledge) are summed: each goes alone.
    db.prepare('UPDATE batches SET queued_bytes = NULL WHERE batch_id > (SELECT min(batch_id) FROM batches)').run();
    offline.close();
    open.pop();
    const s = service('present');
    const r = await drainOutbox(s.store, s.runner, { maxChainBytes: budget });
    expect(r.committed).toHaveLength(4);
    // Chains: [1 (0 bytes) + 2], [3], [4].
    expect(ugit(sb, s.store.paths.vault, ['reflog', 'show', '--format=%gs', 'refs/heads/main']).trim().split('\n')).toHaveLength(3);
  });

  it('a chain that times out is cut down and retried: the queue still drains, in order', async () => {
    sb = makeSandbox();
    const offline = service('missing');
    // 12 publications of 17 records each (more than fast-import is asked `ls` for).
    const pubs = [];
    for (let i = 0; i < 12; i++) {
      const records = Array.from({ length: 17 }, (_, j) => page(`Doc ${i}-${j}`, `v${i}`));
      pubs.push(await offline.publish({ partition: 'private', actor: 'agent', records, evidence: [] }));
    }
    offline.close();
    open.pop();
    // A git whose fast-import hangs on any chain of more than 5 commits: a
    // proxy that passes the stream through line by line (the test's records
    // are one-line texts), counts the commits of each chain and, at the
    // chain's `checkpoint`, stops passing it on when there were more than 5.
    const log = join(sb.dir, 'fast-import.log');
    const slow = join(sb.dir, 'slow-git');
    const proxy = join(sb.dir, 'slow-fast-import.cjs');
    writeFileSync(proxy, [
      "const { spawn } = require('node:child_process');",
      "const { appendFileSync } = require('node:fs');",
      "const git = spawn('git', process.argv.slice(2), { stdio: ['pipe', 'inherit', 'inherit'] });",
      "git.on('close', (code) => process.exit(code ?? 1));",
      "let n = 0; let hung = false; let rest = '';",
      "process.stdin.setEncoding('utf8');",
      "process.stdin.on('data', (d) => {",
      "  rest += d; let i;",
      "  while (!hung && (i = rest.indexOf('\\n')) >= 0) {",
      "    const line = rest.slice(0, i + 1); rest = rest.slice(i + 1);",
      "    if (line.startsWith('commit ')) n++;",
      `    if (line === 'checkpoint\\n') { appendFileSync(${JSON.stringify(log)}, n + '\\n'); if (n > 5) { hung = true; return; } n = 0; }`,
      "    git.stdin.write(line);",
      "  }",
      "});",
      "process.stdin.on('end', () => { if (!hung) git.stdin.end(); });",
      '',
    ].join('\n'));
    writeFileSync(slow, [
      '#!/bin/sh',
      'for a in "$@"; do',
      `  if [ "$a" = fast-import ]; then exec ${JSON.stringify(process.execPath)} ${JSON.stringify(proxy)} "$@"; fi`,
      'done',
      'exec git "$@"',
      '',
    ].join('\n'));
    chmodSync(slow, 0o755);
    const s = service('present');
    const runner = new GitRunner({ gitPath: slow, timeoutMs: 2500 });
    const r = await drainOutbox(s.store, runner);
    expect(r.blocked).toBeNull();
    expect(r.committed).toHaveLength(12);
    const sizes = readFileSync(log, 'utf8').trim().split('\n').map(Number);
    expect(sizes[0]).toBe(12); // the first chain timed out …
    expect(sizes.filter((n) => n > 5).length).toBeGreaterThanOrEqual(1);
    expect(sizes.filter((n) => n <= 5).reduce((a, b) => a + b, 0)).toBe(12); // … and smaller ones committed everything once
    expect(ugit(sb, s.store.paths.vault, ['log', '--format=%(trailers:key=Knowledge-Publication,valueonly,separator=)', 'main']).trim().split('\n').reverse())
      .toEqual(pubs.map((p) => p.publicationId));
  }, 60_000);

  it('stops at `through`: later batches stay queued', async () => {
    sb = makeSandbox();
    const offline = service('missing');
    const pubs = await publishVersions(offline, 5);
    offline.close();
    open.pop();
    const s = service('present');
    const third = s.store.db.prepare('SELECT batch_id FROM publications WHERE publication_id = ?').get(pubs[2]!.publicationId) as { batch_id: number };
    const r = await drainOutbox(s.store, s.runner, { through: third.batch_id });
    expect(r.committed).toHaveLength(3);
    expect(s.publicationReceipt(pubs[3]!.publicationId).git).toMatchObject({ state: 'pending', code: 'waiting' }); // still queued
    expect(ugit(sb, s.store.paths.vault, ['rev-list', '--count', 'main']).trim()).toBe('3');
  });

  it('an index lock appearing mid-checkpoint: the branch does not move, the lock stays, the next drain commits [GIT-10][GIT-19]', async () => {
    sb = makeSandbox();
    const s = service('present');
    const [first] = await publishVersions(s, 1);
    const vault = s.store.paths.vault;
    expect(first!.git.state).toBe('committed');
    const tipBefore = ugit(sb, vault, ['rev-parse', 'main']).trim();
    const lock = join(vault, '.git', 'index.lock');
    // The user's git takes the lock after inspection, while the commit is
    // being written (by a fast-import started for it: the running one ends).
    closeLongLived(s.runner);
    const orig = s.runner.spawnLongLived.bind(s.runner);
    s.runner.spawnLongLived = (args, opts) => {
      if (args.includes('fast-import')) writeFileSync(lock, '');
      return orig(args, opts);
    };
    const id = first!.records[0]!.id;
    const second = await s.publish({ partition: 'private', actor: 'agent', records: [page('Doc', 'v2', `id: ${id}\nrevision: 1\n`)], evidence: [] });
    s.runner.spawnLongLived = orig;
    // Knowledge moves the branch only while it holds the index lock itself.
    expect(second.git, JSON.stringify(second.git)).toMatchObject({ state: 'pending', code: 'locked' });
    expect(existsSync(lock)).toBe(true);
    expect(readFileSync(lock, 'utf8')).toBe('');
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(tipBefore);
    rmSync(lock);
    const r = await drainOutbox(s.store, s.runner);
    expect(r.committed).toHaveLength(1);
    expect(ugit(sb, vault, ['show', `main:${first!.records[0]!.path}`])).toContain('\nv2\n');
    await s.settle();
    expect(ugit(sb, vault, ['status', '--porcelain'])).toBe('');
    const synced = s.store.db.prepare('SELECT COUNT(*) AS n FROM batches WHERE index_synced = 0').get() as { n: number };
    expect(synced.n).toBe(0);
  });

  it('a pending head blocks every later batch, which reports that it is waiting [GIT-5]', async () => {
    sb = makeSandbox();
    const s = service('present');
    const [first] = await publishVersions(s, 1);
    const vault = s.store.paths.vault;
    ugit(sb, vault, ['checkout', '-q', '--detach']);
    const id = first!.records[0]!.id;
    const p2 = await s.publish({ partition: 'private', actor: 'agent', records: [page('Doc', 'v2', `id: ${id}\nrevision: 1\n`)], evidence: [] });
    const p3 = await s.publish({ partition: 'private', actor: 'agent', records: [page('Other', 'x')], evidence: [] });
    expect(p2.git).toMatchObject({ state: 'pending', code: 'detached-head' });
    expect(p3.git).toMatchObject({ state: 'pending', code: 'waiting' });
    const b3 = s.store.db.prepare('SELECT batch_id FROM publications WHERE publication_id = ?').get(p3.publicationId) as { batch_id: number };
    expect(batchGitState(s.store.db, b3.batch_id)).toMatchObject({ state: 'pending', code: 'waiting', reason: expect.stringMatching(/HEAD is detached/) });
  });

  it('a chain larger than 8 MiB is committed from the outbox file by file: exact bytes, one commit, queued bytes dropped', async () => {
    sb = makeSandbox();
    const s = service('present');
    // A baseline of 20 files of ~450 KiB (9 MiB): its drain reads each file's bytes when needed.
    const dir = join(s.store.paths.vault, 'private', 'notes');
    mkdirSync(dir, { recursive: true });
    const files = Array.from({ length: 20 }, (_, i) => {
      const bytes = Buffer.alloc(450 * 1024);
      for (let k = 0; k < bytes.length; k++) bytes[k] = 32 + ((k * 7 + i * 13) % 90);
      bytes[bytes.length - 1] = 10;
      const rel = `private/notes/big-${i}.md`;
      writeFileSync(join(s.store.paths.vault, rel), bytes);
      return { rel, bytes };
    });
    const r = await s.scan({ partition: 'private' });
    expect(r.git).toMatchObject({ state: 'committed' });
    expect(ugit(sb, s.store.paths.vault, ['rev-list', '--count', 'main']).trim()).toBe('1');
    for (const f of files) expect(ugitRaw(sb, s.store.paths.vault, ['cat-file', 'blob', `main:${f.rel}`]).stdout.equals(f.bytes)).toBe(true);
    const left = s.store.db.prepare('SELECT count(*) FROM batch_files WHERE bytes IS NOT NULL').pluck().get();
    expect(left).toBe(0);
    expect(s.store.db.prepare('SELECT count(*) FROM scan_staging').pluck().get()).toBe(0); // the scan's queued bytes went with its record

    await s.settle();
    expect(ugit(sb, s.store.paths.vault, ['status', '--porcelain', '--', 'private'])).toBe('');
  });
});

