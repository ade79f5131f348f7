import { afterEach, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { GitRunner } from './runner.js';
import { commitChain } from './checkpoint.js';
import { closeLongLived } from './long-lived.js';
import { MAX_CHAINS } from './import-session.js';
import { makeBatch, ugit, ugitRaw, userRepo, longLivedScope, committedChain as committed } from './test-sandbox.js';

const scope = longLivedScope(afterEach);

/** A runner that counts the fast-imports it starts. */
function countingRunner(): { r: GitRunner; imports: () => number } {
  const r = new GitRunner();
  scope.track(r);
  let n = 0;
  const orig = r.spawnLongLived.bind(r);
  r.spawnLongLived = (args, opts) => {
    if (args.includes('fast-import')) n++;
    return orig(args, opts);
  };
  return { r, imports: () => n };
}

async function checkpoint(r: GitRunner, vault: string, i: number, last: string | null): Promise<string> {
  const out = committed(await commitChain(r, vault, [makeBatch({ batchId: i, refId: `pub-${i}`, changes: [{ path: `n/${i}.md`, bytes: Buffer.from(`v${i}\n`) }] })], { lastKnownCommit: last }));
  await out.finishIndex();
  return out.commits[0]!.commit;
}

const packDir = (vault: string) => join(vault, '.git', 'objects', 'pack');
const keeps = (vault: string) => readdirSync(packDir(vault)).filter((n) => n.endsWith('.keep'));
const crashReports = (vault: string) => readdirSync(join(vault, '.git')).filter((n) => n.startsWith('fast_import_crash'));

async function until(cond: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((res) => setTimeout(res, 20));
  }
  return cond();
}

describe('the long-lived fast-import of a repository (import-session.ts)', () => {
  it('writes consecutive checkpoints in one fast-import, each its own commit with its own bytes', async () => {
    const sb = scope.sandbox();
    const vault = userRepo(sb);
    const { r, imports } = countingRunner();
    let last: string | null = ugit(sb, vault, ['rev-parse', 'main']).trim();
    const made: string[] = [];
    for (let i = 1; i <= 5; i++) made.push((last = await checkpoint(r, vault, i, last)));
    expect(imports()).toBe(1);
    expect(ugit(sb, vault, ['rev-list', '--first-parent', '-5', 'main']).trim().split('\n').reverse()).toEqual(made);
    for (let i = 1; i <= 5; i++) expect(ugit(sb, vault, ['show', `${made[i - 1]}:n/${i}.md`])).toBe(`v${i}\n`);
    // Durable and visible to every other git as soon as the ids came back: one closed pack per checkpoint.
    expect(readdirSync(packDir(vault)).filter((n) => n.endsWith('.pack'))).toHaveLength(5);
    expect(ugitRaw(sb, vault, ['fsck', '--strict', '--no-dangling']).status).toBe(0);
    expect(ugitRaw(sb, vault, ['rev-parse', '--verify', '-q', 'refs/knowledge/checkpoint']).status).not.toBe(0);
  });

  it(`is retired after ${MAX_CHAINS} chains; a retired or closed one removes its .keep files and writes no ref and no crash report`, async () => {
    const sb = scope.sandbox();
    const vault = userRepo(sb);
    const { r, imports } = countingRunner();
    let last: string | null = ugit(sb, vault, ['rev-parse', 'main']).trim();
    for (let i = 1; i <= MAX_CHAINS + 1; i++) last = await checkpoint(r, vault, i, last);
    expect(imports()).toBe(2);
    // The first one's packs are free to be repacked; the running one keeps its single pack.
    expect(await until(() => keeps(vault).length === 1)).toBe(true);
    closeLongLived(r);
    expect(await until(() => keeps(vault).length === 0)).toBe(true);
    expect(crashReports(vault)).toEqual([]);
    expect(ugit(sb, vault, ['for-each-ref', '--format=%(refname)']).trim().split('\n')).toEqual(['refs/heads/main']);
    expect(ugitRaw(sb, vault, ['fsck', '--strict', '--no-dangling']).status).toBe(0);
  });

  it('a user\'s `git prune` between checkpoints (it deletes the pack the idle fast-import has open) costs nothing: the next checkpoint commits', async () => {
    const sb = scope.sandbox();
    const vault = userRepo(sb);
    const { r, imports } = countingRunner();
    const first = await checkpoint(r, vault, 1, ugit(sb, vault, ['rev-parse', 'main']).trim());
    ugit(sb, vault, ['prune']);
    const second = await checkpoint(r, vault, 2, first);
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(second);
    expect(ugit(sb, vault, ['show', `${second}:n/2.md`])).toBe('v2\n');
    expect(imports()).toBe(2); // the one whose pack was pruned, and a fresh one
    // No `.keep` is left without its pack.
    const names = readdirSync(packDir(vault));
    expect(names.filter((n) => n.endsWith('.keep') && !names.includes(n.replace(/\.keep$/, '.pack')))).toEqual([]);
  });

  it('a root commit in a running fast-import has no parent (the branch deleted after its commits)', async () => {
    const sb = scope.sandbox();
    const vault = userRepo(sb);
    const { r, imports } = countingRunner();
    await checkpoint(r, vault, 1, ugit(sb, vault, ['rev-parse', 'main']).trim());
    // The user deletes the branch: the repository has no commit on any ref, so the next checkpoint is a root commit.
    ugit(sb, vault, ['update-ref', '-d', 'refs/heads/main']);
    const root = await checkpoint(r, vault, 2, null);
    expect(imports()).toBe(1);
    expect(ugit(sb, vault, ['rev-list', '--parents', 'main']).trim()).toBe(root);
    expect(ugit(sb, vault, ['ls-tree', '-r', '--name-only', 'main']).trim()).toBe('n/2.md');
  });

  it('a repository deleted and created again at the same place gets a new fast-import', async () => {
    const sb = scope.sandbox();
    const vault = userRepo(sb);
    const { r, imports } = countingRunner();
    await checkpoint(r, vault, 1, ugit(sb, vault, ['rev-parse', 'main']).trim());
    rmSync(join(vault, '.git'), { recursive: true, force: true });
    const root = await checkpoint(r, vault, 2, null); // Knowledge creates the repository again [GIT-2]
    expect(imports()).toBe(2);
    expect(ugit(sb, vault, ['rev-list', '--parents', 'main']).trim()).toBe(root);
  });

  it('never keeps Node running, and a writer killed with SIGKILL leaves its fast-import to end cleanly', async () => {
    const dist = (f: string) => pathToFileURL(join(process.cwd(), 'dist', 'git', f)).href;
    for (const kill of [false, true]) {
      const sb = scope.sandbox();
      const vault = userRepo(sb);
      const tip = ugit(sb, vault, ['rev-parse', 'main']).trim();
      const code = `const { GitRunner } = await import(${JSON.stringify(dist('runner.js'))});
        const { commitChain } = await import(${JSON.stringify(dist('checkpoint.js'))});
        const r = new GitRunner();
        const batch = { vaultId: 'v', batchId: 1, kind: 'publication', refId: 'p', actor: 'agent', createdAt: '2026-01-01T00:00:00Z', subject: 's',
          changes: [{ path: 'n/1.md', bytes: Buffer.from('v1\\n') }] };
        const out = await commitChain(r, ${JSON.stringify(vault)}, [batch], { lastKnownCommit: ${JSON.stringify(tip)} });
        await out.finishIndex();
        process.stdout.write(out.state);
        ${kill ? "process.kill(process.pid, 'SIGKILL');" : ''}`;
      const started = Date.now();
      const p = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 20_000 });
      expect(p.stdout).toBe('committed');
      if (!kill) {
        expect(p.stderr).toBe('');
        expect(Date.now() - started).toBeLessThan(2500); // the idle close is 30 s away: nothing waited for it
      } else expect(p.signal).toBe('SIGKILL');
      // fast-import read the end of its input and exited by itself.
      expect(await until(() => keeps(vault).length === 0)).toBe(true);
      expect(crashReports(vault)).toEqual([]);
      expect(ugit(sb, vault, ['show', 'main:n/1.md'])).toBe('v1\n');
      // Its exit may write the scratch ref again after a crash, only ever to a commit already on the branch.
      const scratch = ugitRaw(sb, vault, ['rev-parse', '--verify', '-q', 'refs/knowledge/checkpoint']);
      if (!kill) expect(scratch.status).not.toBe(0);
      else if (scratch.status === 0) expect(scratch.stdout.toString().trim()).toBe(ugit(sb, vault, ['rev-parse', 'main']).trim());
      expect(existsSync(join(vault, '.git', 'index.lock'))).toBe(false);
      // The next sandbox() removes this one.
    }
  });
});
