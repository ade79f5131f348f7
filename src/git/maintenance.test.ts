import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { GitRunner } from './runner.js';
import { commitChain } from './checkpoint.js';
import { maintainRepository, objectCounts, planMaintenance, DEFAULT_MAINTENANCE } from './maintenance.js';
import { makeBatch, makeSandbox, ugit, userRepo, type GitSandbox } from './test-sandbox.js';

let sb: GitSandbox | undefined;
afterEach(() => {
  sb?.cleanup();
  sb = undefined;
});
const runner = new GitRunner();
const policy = { ...DEFAULT_MAINTENANCE, maxPacks: 5 };

/** One pack per checkpoint, as Knowledge writes them. */
async function checkpoints(vault: string, n: number): Promise<void> {
  let last: string | null = ugit(sb!, vault, ['rev-parse', 'main']).trim();
  for (let i = 1; i <= n; i++) {
    const out = await commitChain(runner, vault, [makeBatch({ batchId: i, changes: [{ path: `n/${i}.md`, bytes: Buffer.from(`${i}\n`) }] })], { lastKnownCommit: last });
    if (out.state !== 'committed') throw new Error(JSON.stringify(out));
    await out.finishIndex();
    last = out.commits[0]!.commit;
  }
}

describe('planMaintenance', () => {
  it.each([
    [{ packs: 3, looseObjects: 0 }, false],
    [{ packs: 6, looseObjects: 0 }, true],
    [{ packs: 1, looseObjects: 4096 }, true],
    [{ packs: 5, looseObjects: 2048 }, false],
  ])('%j -> %s', (counts, want) => {
    expect(planMaintenance(counts, { ...policy, maxLooseObjects: 2048 })).toBe(want);
  });
});

describe('maintainRepository', () => {
  it('rolls small checkpoint packs up; history, refs and the index are unchanged; fsck is clean', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    await checkpoints(vault, 8);
    // Eight packs, kept by the fast-import that is still running for the next checkpoint.
    const packsOnDisk = () => readdirSync(join(vault, '.git/objects/pack')).filter((n) => n.endsWith('.pack')).length;
    expect(packsOnDisk()).toBe(8);
    expect((await objectCounts(join(vault, '.git'))).packs).toBe(0);
    const refs = ugit(sb, vault, ['for-each-ref']);
    const log = ugit(sb, vault, ['log', '--format=%H %T', 'main']);
    const out = await maintainRepository(runner, vault, policy);
    expect(out).toMatchObject({ ran: true });
    expect((await objectCounts(join(vault, '.git'))).packs).toBeLessThanOrEqual(2);
    expect(ugit(sb, vault, ['for-each-ref'])).toBe(refs);
    expect(ugit(sb, vault, ['log', '--format=%H %T', 'main'])).toBe(log);
    expect(ugit(sb, vault, ['fsck', '--strict', '--no-dangling']).trim()).toBe('');
    // Nothing to do the second time.
    expect(await maintainRepository(runner, vault, policy)).toMatchObject({ ran: false, why: 'healthy' });
  });

  it('never runs while the user has a lock or an operation in progress; the lock stays [GIT-19]', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    await checkpoints(vault, 7);
    for (const sign of ['index.lock', 'MERGE_HEAD', 'refs/heads/main.lock', 'gc.pid']) {
      const p = join(vault, '.git', sign);
      // gc.pid as a running `git gc` writes it: its pid and host.
      writeFileSync(p, sign === 'MERGE_HEAD' ? ugit(sb, vault, ['rev-parse', 'HEAD']) : sign === 'gc.pid' ? `${process.pid} ${hostname()}` : '');
      const packs = readdirSync(join(vault, '.git/objects/pack')).sort();
      expect(await maintainRepository(runner, vault, policy)).toMatchObject({ ran: false, why: 'busy', busyWith: sign });
      expect(existsSync(p)).toBe(true);
      expect(readdirSync(join(vault, '.git/objects/pack')).sort()).toEqual(packs);
      rmSync(p);
    }
    expect(await maintainRepository(runner, vault, policy)).toMatchObject({ ran: true });
  });

  it('a gc.pid left by a gc that is gone does not stop it, by git\'s own rule: a dead pid of this host, unreadable, or 12 hours old', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const gcPid = join(vault, '.git', 'gc.pid');
    const old = (Date.now() - 13 * 3600_000) / 1000;
    const cases: Array<[string, string, number | null]> = [
      ['a pid of this host that is not running', `2147483646 ${hostname()}`, null],
      ['no pid at all', '', null],
      ['another host, 13 hours ago', '12345 some-other-host', old],
    ];
    await checkpoints(vault, 6);
    for (const [what, text, mtime] of cases) {
      await checkpoints(vault, 0);
      writeFileSync(gcPid, text);
      if (mtime !== null) utimesSync(gcPid, mtime, mtime);
      expect(await maintainRepository(runner, vault, { ...policy, maxPacks: 0 }), what).toMatchObject({ ran: true });
      expect(existsSync(gcPid), what).toBe(true); // still the user's file
    }
    // Another host's gc of the last 12 hours is taken for running, as git takes it.
    writeFileSync(gcPid, '12345 some-other-host');
    expect(await maintainRepository(runner, vault, { ...policy, maxPacks: 0 })).toMatchObject({ ran: false, why: 'busy', busyWith: 'gc.pid' });
  });

  it('in a partial clone (a promisor remote, blobs left out) the packs are rolled up all at once; history is unchanged', async () => {
    const s = (sb = makeSandbox());
    const origin = userRepo(sb, 'origin', { 'README.md': 'hello\n', 'old.txt': 'a blob the clone leaves out\n' });
    ugit(sb, origin, ['rm', '-q', 'old.txt']);
    ugit(sb, origin, ['commit', '-q', '-m', 'user: old.txt gone']);
    ugit(sb, origin, ['config', 'uploadpack.allowFilter', 'true']);
    ugit(sb, sb.dir, ['clone', '-q', '--filter=blob:none', `file://${origin}`, 'vault']);
    const vault = join(sb.dir, 'vault');
    expect(ugit(sb, vault, ['rev-list', '--objects', '--missing=print', 'main'])).toMatch(/^\?[0-9a-f]{40}$/m);
    await checkpoints(vault, 7);
    // Blobs in a pack that no commit reaches yet (as a checkpoint packs them ahead of its commit; fast-import packs 100 or more).
    const ahead = Array.from({ length: 150 }, (_, i) => `ahead ${i}\n`);
    ugit(sb, vault, ['fast-import', '--quiet'], ahead.map((t) => `blob\ndata ${Buffer.byteLength(t)}\n${t}`).join(''));
    const aheadIds = ahead.map((t) => ugit(s, vault, ['hash-object', '--stdin'], t).trim());
    const loose = () => ugit(s, vault, ['count-objects', '-v']).match(/^count: (\d+)$/m)![1];
    const looseBefore = loose();
    const log = ugit(sb, vault, ['log', '--format=%H %T', 'main']);
    const out = await maintainRepository(runner, vault, policy);
    expect(out).toMatchObject({ ran: true });
    expect((await objectCounts(join(vault, '.git'))).packs).toBeLessThanOrEqual(2);
    expect(ugit(sb, vault, ['log', '--format=%H %T', 'main'])).toBe(log);
    expect(ugit(sb, vault, ['cat-file', '-p', 'main:n/7.md'])).toBe('7\n');
    // Kept, and kept packed: not one loose file each (a roll-up with -A loosens them).
    for (const id of aheadIds) expect(ugit(sb, vault, ['cat-file', '-t', id]).trim()).toBe('blob');
    expect(loose()).toBe(looseBefore);
  });

  it('a repository whose config keeps every pack (extensions.preciousObjects) is left as it is, and that is no failure', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    ugit(sb, vault, ['config', 'core.repositoryformatversion', '1']);
    ugit(sb, vault, ['config', 'extensions.preciousObjects', 'true']);
    await checkpoints(vault, 7);
    const packs = () => readdirSync(join(vault, '.git/objects/pack')).filter((n) => n.endsWith('.pack')).sort();
    const before = packs();
    expect(before.length).toBe(7);
    expect(await maintainRepository(runner, vault, policy)).toMatchObject({ ran: false, why: 'precious' });
    expect(packs()).toEqual(before);
  });

  it('never runs while the lock of a linked index is held: git locks the link\'s target [GIT-19]', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    await checkpoints(vault, 7);
    // The user keeps the index elsewhere through a link; their git command locks `<target>.lock`.
    const elsewhere = join(sb.dir, 'index-elsewhere');
    mkdirSync(elsewhere);
    renameSync(join(vault, '.git/index'), join(elsewhere, 'index'));
    symlinkSync(join(elsewhere, 'index'), join(vault, '.git/index'));
    writeFileSync(join(elsewhere, 'index.lock'), '');
    const packs = readdirSync(join(vault, '.git/objects/pack')).sort();
    expect(await maintainRepository(runner, vault, policy)).toMatchObject({ ran: false, why: 'busy', busyWith: join(elsewhere, 'index.lock') });
    expect(readdirSync(join(vault, '.git/objects/pack')).sort()).toEqual(packs);
    rmSync(join(elsewhere, 'index.lock'));
    expect(await maintainRepository(runner, vault, policy)).toMatchObject({ ran: true });
  });

  it('packs loose objects of the user\'s own commits once they pass the threshold', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    // Estimated like gc --auto: objects/17 x 256. 2000 loose blobs put ~8 there.
    const dir = join(sb.dir, 'blobs');
    mkdirSync(dir);
    const files = Array.from({ length: 2000 }, (_, i) => {
      writeFileSync(join(dir, `${i}`), `blob ${i}\n`);
      return join(dir, `${i}`);
    });
    ugit(sb, vault, ['hash-object', '-w', ...files]);
    const counts = await objectCounts(join(vault, '.git'));
    expect(counts.looseObjects).toBeGreaterThanOrEqual(256);
    const out = await maintainRepository(runner, vault, { ...policy, maxLooseObjects: 100 });
    expect(out).toMatchObject({ ran: true });
    expect(ugit(sb, vault, ['count-objects', '-v'])).toMatch(/^count: 0$/m);
  });
});
