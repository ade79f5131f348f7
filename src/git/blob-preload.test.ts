/**
 * Blobs written into the repository ahead of their commit (blob-preload.ts):
 * the ids it reports are the blobs git stored, a chain then names them
 * instead of carrying the bytes, a wrong or missing preload never makes a
 * wrong commit, and a slow git makes the writer wait rather than buffer.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GitRunner } from './runner.js';
import { commitChain, repositoryForCheckpoint } from './checkpoint.js';
import { blobId } from './commit-stream.js';
import { MAX_IN_FLIGHT, startBlobPreload } from './blob-preload.js';
import type { BlobIds } from './types.js';
import { makeBatch, ugit, ugitRaw, userRepo, longLivedScope, committedChain as committed } from './test-sandbox.js';

const scope = longLivedScope(afterEach);

/** A runner that counts the bytes written to the fast-imports it starts itself (the chain's). */
function countingRunner(gitPath?: string): { r: GitRunner; written: () => number } {
  const r = new GitRunner(gitPath ? { gitPath } : {});
  scope.track(r);
  let n = 0;
  const orig = r.spawnLongLived.bind(r);
  r.spawnLongLived = (args, opts) => {
    const child = orig(args, opts);
    if (args.includes('fast-import') && child.stdin) {
      const write = child.stdin.write.bind(child.stdin) as (chunk: unknown, ...rest: unknown[]) => boolean;
      child.stdin.write = ((chunk: unknown, ...rest: unknown[]) => {
        n += typeof chunk === 'string' ? Buffer.byteLength(chunk) : (chunk as Buffer).length;
        return write(chunk, ...rest);
      }) as typeof child.stdin.write;
    }
    return child;
  };
  return { r, written: () => n };
}

const files = (n: number, tag = '') =>
  Array.from({ length: n }, (_, i) => ({ path: `notes/f${String(i).padStart(4, '0')}.md`, bytes: Buffer.from(`# File ${i}${tag}\n${'x'.repeat(1000 + (i % 50))}\n`) }));

describe('blobs preloaded ahead of their commit (blob-preload.ts)', () => {
  it('stores every blob in a finished pack, reports its id, and the chain names them instead of carrying the bytes', async () => {
    const sb = scope.sandbox();
    const vault = userRepo(sb);
    const { r, written } = countingRunner();
    const repo = await repositoryForCheckpoint(r, vault);
    if (!repo) throw new Error('repository not ready');
    const pre = startBlobPreload(r, repo);
    if (!pre) throw new Error('no preload');
    const fs = files(400);
    for (const f of fs) pre.add(f.path, f.bytes);
    const ids = await pre.end();
    expect(ids).not.toBeNull();
    for (const f of fs) {
      const id = ids!.get(f.path);
      expect(id).toBe(blobId(f.bytes, 'sha1'));
      // In the repository already, before any commit names it.
      expect(ugitRaw(sb, vault, ['cat-file', '-e', id!]).status).toBe(0);
    }
    const total = fs.reduce((n, f) => n + f.bytes.length, 0);

    const batch = makeBatch({ batchId: 7, refId: 'scan-1', kind: 'scan', actor: 'external', changes: fs });
    const out = committed(await commitChain(r, vault, [batch], { preloaded: new Map([[7, ids!]]) }));
    await out.finishIndex();
    // The chain's stream named the blobs: far less than the files' bytes went to its fast-import.
    expect(written()).toBeLessThan(total / 4);
    // And the commit holds exactly those bytes.
    for (const f of [fs[0]!, fs[199]!, fs[399]!]) expect(ugit(sb, vault, ['show', `HEAD:${f.path}`])).toBe(f.bytes.toString());
    expect(ugit(sb, vault, ['ls-tree', '-r', '--name-only', 'HEAD']).trim().split('\n')).toHaveLength(401);
    expect(ugitRaw(sb, vault, ['fsck', '--strict']).status).toBe(0);
  });

  it('makes the chain again with the bytes when git does not have a blob the preload named', async () => {
    const sb = scope.sandbox();
    const vault = userRepo(sb);
    const { r, written } = countingRunner();
    const fs = files(50);
    // Ids of content that was never written: git refuses them, and nothing wrong is committed.
    const bogus: BlobIds = { get: (path) => (fs.some((f) => f.path === path) ? blobId(Buffer.from(`never written ${path}`), 'sha1') : undefined) };
    const batch = makeBatch({ batchId: 3, refId: 'scan-2', kind: 'scan', actor: 'external', changes: fs });
    const out = committed(await commitChain(r, vault, [batch], { preloaded: new Map([[3, bogus]]) }));
    await out.finishIndex();
    expect(written()).toBeGreaterThan(fs.reduce((n, f) => n + f.bytes.length, 0));
    for (const f of fs) expect(ugit(sb, vault, ['show', `HEAD:${f.path}`])).toBe(f.bytes.toString());
    const fsck = ugitRaw(sb, vault, ['fsck', '--strict']);
    expect(fsck.stderr.toString() + fsck.stdout.toString()).toBe('');
    expect(fsck.status).toBe(0);
  });

  it('answers null when abandoned, or when git cannot run', async () => {
    const sb = scope.sandbox();
    const vault = userRepo(sb);
    const { r } = countingRunner();
    const repo = (await repositoryForCheckpoint(r, vault))!;
    const a = startBlobPreload(r, repo)!;
    a.add('notes/a.md', Buffer.from('a\n'));
    a.abandon();
    a.add('notes/b.md', Buffer.from('b\n'));
    expect(await a.end()).toBeNull();

    const broken = new GitRunner({ gitPath: join(sb.dir, 'no-such-git') });
    scope.track(broken);
    const b = startBlobPreload(broken, repo)!;
    for (const f of files(20)) b.add(f.path, f.bytes);
    expect(await b.end()).toBeNull();
  });

  it('makes the writer wait for a slow git instead of holding more than its limit in memory, and still completes', async () => {
    const sb = scope.sandbox();
    const vault = userRepo(sb);
    // A git that reads nothing for a while: everything handed over stays in flight.
    const slow = join(sb.dir, 'slow-git');
    writeFileSync(slow, `#!/bin/sh\nsleep 1\nexec git "$@"\n`);
    chmodSync(slow, 0o755);
    const { r } = countingRunner(slow);
    const repo = (await repositoryForCheckpoint(r, vault))!;
    const pre = startBlobPreload(r, repo)!;
    const big = Array.from({ length: 12 }, (_, i) => ({ path: `big/${i}.bin`, bytes: Buffer.alloc(512 * 1024, i) }));
    expect(big.length * 512 * 1024).toBeGreaterThan(2 * MAX_IN_FLIGHT);
    const t0 = performance.now();
    for (const f of big) pre.add(f.path, f.bytes);
    // add() is synchronous: it could only have taken this long by waiting for git.
    expect(performance.now() - t0).toBeGreaterThan(500);
    const ids = await pre.end();
    expect(ids).not.toBeNull();
    for (const f of big) expect(ids!.get(f.path)).toBe(blobId(f.bytes, 'sha1'));
  });
});
