/**
 * Every repository problem reads as `pending` with a stable code, built as
 * the real situation, and Knowledge leaves it exactly as it found it
 * [GIT-18][GIT-19]: locks still there, branch and HEAD unchanged.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { chownSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { GitRunner } from './runner.js';
import { commitBatch } from './checkpoint.js';
import { inspectRepository } from './inspect.js';
import type { PendingCode } from './types.js';
import { makeBatch, makeSandbox, ugit, ugitRaw, userRepo, writeFile, type GitSandbox } from './test-sandbox.js';

let sb: GitSandbox | undefined;
afterEach(() => {
  sb?.cleanup();
  sb = undefined;
});
const runner = new GitRunner();

function snapshot(vault: string): string {
  const refs = ugitRaw(sb!, vault, ['for-each-ref', '--format=%(refname) %(objectname)']).stdout.toString();
  const gitDir = join(vault, '.git');
  const head = existsSync(join(gitDir, 'HEAD')) ? readFileSync(join(gitDir, 'HEAD'), 'utf8') : readFileSync(gitDir, 'utf8');
  const index = existsSync(join(gitDir, 'index')) ? readFileSync(join(gitDir, 'index')).toString('base64') : '';
  return `${head}\n${refs}\n${index}`;
}

async function expectPending(vault: string, code: PendingCode, reasonPart?: string | RegExp): Promise<string> {
  const before = snapshot(vault);
  const out = await commitBatch(runner, vault, makeBatch());
  expect(out.state, JSON.stringify(out)).toBe('pending');
  if (out.state !== 'pending') throw new Error('unreachable');
  expect(out.code, out.reason).toBe(code);
  if (reasonPart) expect(out.reason).toMatch(reasonPart);
  expect(snapshot(vault)).toBe(before);
  return out.reason;
}

/** A user repo plus a branch `feature` whose README conflicts with main's. */
function conflictingRepo(): string {
  const vault = userRepo(sb!, 'vault', { 'README.md': 'base\n' });
  ugit(sb!, vault, ['checkout', '-q', '-b', 'feature']);
  writeFile(vault, 'README.md', 'feature\n');
  ugit(sb!, vault, ['commit', '-q', '-am', 'feature']);
  ugit(sb!, vault, ['checkout', '-q', 'main']);
  writeFile(vault, 'README.md', 'main\n');
  ugit(sb!, vault, ['commit', '-q', '-am', 'main']);
  return vault;
}

describe('lock files are reported and never removed', () => {
  it.each(['index.lock', 'HEAD.lock', 'refs/heads/main.lock', 'packed-refs.lock'])('%s', async (name) => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const lock = join(vault, '.git', name);
    writeFileSync(lock, '');
    await expectPending(vault, 'locked', name);
    expect(existsSync(lock)).toBe(true);
  });
});

describe('branch problems', () => {
  it('detached HEAD', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    ugit(sb, vault, ['checkout', '-q', '--detach']);
    await expectPending(vault, 'detached-head');
  });

  it('unborn branch while other branches exist', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    ugit(sb, vault, ['checkout', '-q', '--orphan', 'fresh']);
    await expectPending(vault, 'unborn-branch', 'refs/heads/fresh');
  });

  it('an unborn branch in an empty repository is ready (first commit)', async () => {
    sb = makeSandbox();
    const vault = join(sb.dir, 'vault');
    mkdirSync(vault);
    ugit(sb, vault, ['init', '-q', '-b', 'trunk']);
    const r = await inspectRepository(runner, vault);
    expect(r).toMatchObject({ kind: 'ready', branchRef: 'refs/heads/trunk', head: null, objectFormat: 'sha1' });
    const out = await commitBatch(runner, vault, makeBatch());
    expect(out.state).toBe('committed');
    expect(ugit(sb, vault, ['rev-list', '--count', 'trunk']).trim()).toBe('1');
    // An existing repository's files are not edited: no exclude lines added.
    expect(readFileSync(join(vault, '.git/info/exclude'), 'utf8')).not.toContain('vault.json');
  });

  it('branch moved between building the commit and the compare-and-swap', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    let userTip = '';
    const out = await commitBatch(runner, vault, makeBatch(), {
      testHooks: {
        beforeUpdateRef: () => {
          writeFile(vault, 'user.md', 'raced\n');
          ugit(sb!, vault, ['add', 'user.md']);
          ugit(sb!, vault, ['commit', '-q', '-m', 'user raced']);
          userTip = ugit(sb!, vault, ['rev-parse', 'HEAD']).trim();
        },
      },
    });
    expect(out).toMatchObject({ state: 'pending', code: 'branch-moved' });
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(userTip);
    // The retry builds on the user's commit.
    const retry = await commitBatch(runner, vault, makeBatch());
    expect(retry).toMatchObject({ state: 'committed', parent: userTip, reused: false });
  });
});

describe('linked worktree and foreign repository roots', () => {
  it('a .git file (real linked worktree) is never followed', async () => {
    sb = makeSandbox();
    const main = userRepo(sb, 'main-repo');
    const vault = join(sb.dir, 'wt');
    ugit(sb, main, ['worktree', 'add', '-q', '-b', 'wt', vault]);
    const mainRefs = ugit(sb, main, ['for-each-ref']);
    await expectPending(vault, 'linked-worktree');
    expect(ugit(sb, main, ['for-each-ref'])).toBe(mainRefs);
  });

  it('core.worktree pointing elsewhere is not the vault root', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    mkdirSync(join(sb.dir, 'elsewhere'));
    ugit(sb, vault, ['config', 'core.worktree', join(sb.dir, 'elsewhere')]);
    await expectPending(vault, 'not-vault-root', 'elsewhere');
  });
});

describe('operations in progress', () => {
  it('merge with conflicts (MERGE_HEAD)', async () => {
    sb = makeSandbox();
    const vault = conflictingRepo();
    expect(ugitRaw(sb, vault, ['merge', 'feature']).status).not.toBe(0);
    expect(existsSync(join(vault, '.git/MERGE_HEAD'))).toBe(true);
    await expectPending(vault, 'operation-in-progress', 'merge');
  });

  it('rebase stopped on a conflict', async () => {
    sb = makeSandbox();
    const vault = conflictingRepo();
    expect(ugitRaw(sb, vault, ['rebase', 'feature']).status).not.toBe(0);
    await expectPending(vault, 'operation-in-progress', 'rebase');
  });

  it('cherry-pick stopped on a conflict', async () => {
    sb = makeSandbox();
    const vault = conflictingRepo();
    expect(ugitRaw(sb, vault, ['cherry-pick', 'feature']).status).not.toBe(0);
    await expectPending(vault, 'operation-in-progress', 'CHERRY_PICK_HEAD');
  });

  it('revert stopped on a conflict', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb, 'vault', { 'README.md': '1\n' });
    writeFile(vault, 'README.md', '2\n');
    ugit(sb, vault, ['commit', '-q', '-am', 'two']);
    writeFile(vault, 'README.md', '3\n');
    ugit(sb, vault, ['commit', '-q', '-am', 'three']);
    expect(ugitRaw(sb, vault, ['revert', '--no-edit', 'HEAD~1']).status).not.toBe(0);
    await expectPending(vault, 'operation-in-progress', 'REVERT_HEAD');
  });

  it('bisect', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    ugit(sb, vault, ['bisect', 'start']);
    await expectPending(vault, 'operation-in-progress', 'bisect');
  });

  it('unmerged index entries without any operation file (stash pop conflict)', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb, 'vault', { 'README.md': 'base\n' });
    writeFile(vault, 'README.md', 'stashed\n');
    ugit(sb, vault, ['stash', '-q']);
    writeFile(vault, 'README.md', 'committed\n');
    ugit(sb, vault, ['commit', '-q', '-am', 'c']);
    expect(ugitRaw(sb, vault, ['stash', 'pop']).status).not.toBe(0);
    expect(readdirSync(join(vault, '.git')).filter((f) => f.endsWith('_HEAD'))).toEqual(['ORIG_HEAD']);
    await expectPending(vault, 'unmerged');
  });
});

describe('repositories git refuses or cannot read', () => {
  it('garbage .git/HEAD is malformed, and never falls through to an enclosing repository', async () => {
    sb = makeSandbox();
    const outer = userRepo(sb, 'outer');
    const vault = userRepo(sb, 'outer/vault');
    writeFileSync(join(vault, '.git/HEAD'), 'garbage\n');
    const outerRefs = ugit(sb, outer, ['for-each-ref']);
    await expectPending(vault, 'malformed');
    expect(ugit(sb, outer, ['for-each-ref'])).toBe(outerRefs);
  });

  it('a corrupt commit object is malformed', async () => {
    // Tests run as root, so chmod 000 would not block reads; corrupt bytes do.
    sb = makeSandbox();
    const vault = userRepo(sb);
    const tip = ugit(sb, vault, ['rev-parse', 'HEAD']).trim();
    const obj = join(vault, '.git/objects', tip.slice(0, 2), tip.slice(2));
    writeFileSync(obj, 'not zlib at all');
    await expectPending(vault, 'malformed');
  });

  it.skipIf(process.getuid?.() !== 0)('a repository owned by another user is dubious ownership (safe.directory not bypassed)', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    execFileSync('chown', ['-R', '12345:12345', vault]);
    try {
      await expectPending(vault, 'dubious-ownership', 'dubious ownership');
    } finally {
      chownSync(vault, 0, 0);
      execFileSync('chown', ['-R', '0:0', vault]);
    }
  });
});

describe('the layout facts of a ready repository are reused while nothing that decides them changed', () => {
  function counting(): { r: GitRunner; calls: string[] } {
    const r = new GitRunner();
    const calls: string[] = [];
    const orig = r.run.bind(r);
    r.run = (args, opts) => {
      calls.push(args[0]!);
      return orig(args, opts);
    };
    return { r, calls };
  }

  it('a second inspection runs no git; the tip is the loose ref read now', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const { r, calls } = counting();
    const first = await inspectRepository(r, vault);
    expect(first.kind).toBe('ready');
    expect(calls).toContain('rev-parse');
    calls.length = 0;
    writeFile(vault, 'n.md', 'n\n');
    ugit(sb, vault, ['add', 'n.md']);
    ugit(sb, vault, ['commit', '-q', '-m', 'user moves the branch']);
    const again = await inspectRepository(r, vault);
    expect(calls.filter((c) => c === 'rev-parse')).toEqual([]);
    expect(again).toMatchObject({ kind: 'ready', head: ugit(sb, vault, ['rev-parse', 'main']).trim() });
  });

  it('asks git again when the config, the ref storage or the directories change', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const { r, calls } = counting();
    expect((await inspectRepository(r, vault)).kind).toBe('ready');
    // A packed ref: no loose file to read, git answers.
    ugit(sb, vault, ['pack-refs', '--all']);
    calls.length = 0;
    expect(await inspectRepository(r, vault)).toMatchObject({ kind: 'ready', head: ugit(sb, vault, ['rev-parse', 'main']).trim() });
    expect(calls).toContain('rev-parse');
    // core.bare written to the config: the cached layout no longer holds.
    ugit(sb, vault, ['config', 'core.bare', 'true']);
    expect(await inspectRepository(r, vault)).toMatchObject({ kind: 'pending', code: 'not-vault-root' });
    ugit(sb, vault, ['--git-dir', join(vault, '.git'), 'config', 'core.bare', 'false']);
    expect((await inspectRepository(r, vault)).kind).toBe('ready');
    // The work tree moved elsewhere by config.
    mkdirSync(join(sb.dir, 'elsewhere'));
    ugit(sb, vault, ['config', 'core.worktree', join(sb.dir, 'elsewhere')]);
    expect(await inspectRepository(r, vault)).toMatchObject({ kind: 'pending', code: 'not-vault-root' });
  });
});
