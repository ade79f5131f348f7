import { afterEach, describe, expect, it } from 'vitest';
import { chmodSync, existsSync, utimesSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GitRunner } from './runner.js';
import { commitBatch, syncIndex, type CommitOutcome } from './checkpoint.js';
import { makeBatch, makeSandbox, ugit, ugitRaw, userRepo, writeFile, type GitSandbox } from './test-sandbox.js';

let sb: GitSandbox | undefined;
afterEach(() => {
  sb?.cleanup();
  sb = undefined;
});
const runner = new GitRunner();

function committed(o: CommitOutcome): Extract<CommitOutcome, { state: 'committed' }> {
  if (o.state !== 'committed') throw new Error(`expected committed, got ${JSON.stringify(o)}`);
  return o;
}
function show(vault: string, rev: string): Buffer {
  const r = ugitRaw(sb!, vault, ['cat-file', 'blob', rev]);
  if (r.status !== 0) throw new Error(r.stderr.toString());
  return r.stdout;
}
function countBatchCommits(vault: string, value: string): number {
  return ugit(sb!, vault, ['log', '--format=%(trailers:key=Knowledge-Batch,valueonly)', 'main'])
    .split('\n')
    .filter((l) => l.trim() === value).length;
}

describe('commitBatch on a vault without a repository [GIT-2]', () => {
  it('creates vault/.git on main and commits exactly the queued bytes', async () => {
    sb = makeSandbox();
    const vault = join(sb.dir, 'vault');
    mkdirSync(vault);
    const binary = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x0a, 0xc3]); // not UTF-8
    const odd = 'Notes with space/Ünïcödé ✓.md';
    writeFile(vault, 'notes/a.md', '# A\n');
    writeFile(vault, 'bin/blob.dat', binary);
    writeFile(vault, odd, 'unicode\n');
    writeFile(vault, 'vault.json', '{}');
    writeFile(vault, '.knowledge-history/x.md', 'old');
    const batch = makeBatch({
      changes: [
        { path: 'notes/a.md', bytes: Buffer.from('# A\n') },
        { path: 'bin/blob.dat', bytes: binary },
        { path: odd, bytes: Buffer.from('unicode\n') },
      ],
    });
    const out = committed(await commitBatch(runner, vault, batch));
    expect(out.reused).toBe(false);
    expect(out.parent).toBeNull();
    expect(out.index).toEqual({ ok: true, updated: 3, skipped: 0 });

    expect(ugit(sb, vault, ['symbolic-ref', 'HEAD']).trim()).toBe('refs/heads/main');
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(out.commit);
    expect(ugit(sb, vault, ['rev-list', '--count', 'main']).trim()).toBe('1');
    expect(show(vault, `${out.commit}:bin/blob.dat`).equals(binary)).toBe(true);
    expect(show(vault, `${out.commit}:${odd}`).toString()).toBe('unicode\n');
    expect(ugit(sb, vault, ['ls-tree', '-r', '--name-only', '-z', out.commit]).split('\0').filter(Boolean).sort()).toEqual(
      ['bin/blob.dat', 'notes/a.md', odd].sort(),
    );
    expect(ugit(sb, vault, ['log', '-1', '--format=%cn <%ce>|%an|%ct']).trim()).toBe(
      `Knowledge <knowledge@localhost>|Knowledge|${Date.parse(batch.createdAt) / 1000}`,
    );
    const msg = ugit(sb, vault, ['log', '-1', '--format=%B']);
    expect(msg).toContain('Knowledge-Actor: agent\nKnowledge-Batch: v-1/1\nKnowledge-Publication: pub-1');
    // Clean for the committed paths; Knowledge's own files are excluded [GIT-13].
    expect(ugit(sb, vault, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
    expect(readFileSync(join(vault, '.git/info/exclude'), 'utf8')).toContain('/vault.json\n/.knowledge-history/\n');
    // Empty template: no sample hooks were installed.
    expect(existsSync(join(vault, '.git/hooks'))).toBe(false);
    expect(ugitRaw(sb, vault, ['rev-parse', '-q', '--verify', 'refs/knowledge/checkpoint']).status).not.toBe(0);
  });

  it('finishes info/exclude when a crash hit between git init and writing it', async () => {
    sb = makeSandbox();
    const vault = join(sb.dir, 'vault');
    mkdirSync(vault);
    ugit(sb, vault, ['init', '-q', '--template=', '-b', 'main']); // what createRepository runs first
    writeFile(vault, 'vault.json', '{}');
    committed(await commitBatch(runner, vault, makeBatch()));
    expect(readFileSync(join(vault, '.git/info/exclude'), 'utf8')).toContain('/vault.json\n');
    expect(ugit(sb, vault, ['status', '--porcelain', '--untracked-files=all'])).toBe(' D notes/a.md\n');
  });

  it('creates the vault its own repository inside an enclosing work tree, leaving the outer one alone', async () => {
    sb = makeSandbox();
    const outer = userRepo(sb, 'outer');
    writeFile(outer, 'staged.txt', 'outer staged\n');
    ugit(sb, outer, ['add', 'staged.txt']);
    const outerHead = ugit(sb, outer, ['rev-parse', 'HEAD']);
    const outerIndex = readFileSync(join(outer, '.git/index'));
    const vault = join(outer, 'store', 'vault');
    mkdirSync(vault, { recursive: true });
    const out = committed(await commitBatch(runner, vault, makeBatch()));
    expect(existsSync(join(vault, '.git', 'HEAD'))).toBe(true);
    expect(ugit(sb, vault, ['rev-parse', '--show-toplevel']).trim()).toBe(vault);
    expect(ugit(sb, vault, ['rev-parse', 'HEAD']).trim()).toBe(out.commit);
    expect(ugit(sb, outer, ['rev-parse', 'HEAD'])).toBe(outerHead);
    expect(readFileSync(join(outer, '.git/index')).equals(outerIndex)).toBe(true);
    expect(ugitRaw(sb, outer, ['cat-file', '-e', out.commit]).status).not.toBe(0);
  });
});

describe('commitBatch in a user repository', () => {
  it('never runs hooks, filters, fsmonitor or signing, and leaves .git/config unchanged [GIT-12]', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb, 'vault', { 'README.md': 'hi\n', '.gitattributes': '* filter=x\n' });
    const markers = join(sb.dir, 'markers');
    mkdirSync(markers);
    const hookDir = join(sb.dir, 'user-hooks');
    mkdirSync(hookDir);
    mkdirSync(join(vault, '.git/hooks'), { recursive: true });
    const hooks = ['pre-commit', 'prepare-commit-msg', 'commit-msg', 'post-commit', 'post-index-change', 'reference-transaction', 'post-checkout', 'pre-auto-gc', 'post-rewrite', 'fsmonitor-watchman'];
    for (const h of hooks) {
      for (const dir of [hookDir, join(vault, '.git/hooks')]) {
        writeFileSync(join(dir, h), `#!/bin/sh\ntouch "${markers}/hook-${h}"\ncat >/dev/null 2>&1\nexit 0\n`);
        chmodSync(join(dir, h), 0o755);
      }
    }
    const fsmon = join(sb.dir, 'fsmonitor.sh');
    writeFileSync(fsmon, `#!/bin/sh\ntouch "${markers}/fsmonitor"\nexit 1\n`);
    chmodSync(fsmon, 0o755);
    const filt = join(sb.dir, 'filter.sh');
    writeFileSync(filt, `#!/bin/sh\ntouch "${markers}/filter"\ncat\n`);
    chmodSync(filt, 0o755);
    for (const [k, v] of [
      ['core.hooksPath', hookDir],
      ['core.fsmonitor', fsmon],
      ['filter.x.clean', filt],
      ['filter.x.smudge', filt],
      ['filter.x.required', 'true'],
      ['commit.gpgSign', 'true'],
      ['gpg.program', filt],
      ['log.showSignature', 'true'],
      ['core.autocrlf', 'true'],
    ] as const) {
      ugit(sb, vault, ['config', k, v]);
    }
    // Make every index entry "racily clean" (index not newer than the files):
    // writing the index then re-hashes working files, which is where git 2.39
    // runs clean filters even for plumbing.
    const past = new Date(Date.now() - 3600_000);
    utimesSync(join(vault, '.git/index'), past, past);
    const configBefore = readFileSync(join(vault, '.git/config'));
    const out = committed(
      await commitBatch(runner, vault, makeBatch({ changes: [{ path: 'notes/a.md', bytes: Buffer.from('line\r\n') }, { path: 'README.md', bytes: Buffer.from('changed\n') }] })),
    );
    expect(readdirSync(markers)).toEqual([]);
    expect(readFileSync(join(vault, '.git/config')).equals(configBefore)).toBe(true);
    // Raw bytes, no eol conversion or clean filter.
    expect(show(vault, `${out.commit}:notes/a.md`).toString()).toBe('line\r\n');
    expect(ugit(sb, vault, ['cat-file', 'commit', out.commit])).not.toContain('gpgsig');
  });

  it('keeps the user staged and unstaged work out of the commit and in place [GIT-10]', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb, 'vault', { 'A.md': 'a0\n', 'B.md': 'b0\n', 'C.md': 'c0\n', 'D.md': 'd0\n' });
    writeFile(vault, 'A.md', 'a1 staged\n');
    ugit(sb, vault, ['add', 'A.md']);
    writeFile(vault, 'B.md', 'b1 unstaged\n');
    writeFile(vault, 'C.md', 'c1\n'); // Knowledge publishes these bytes
    const before = ugit(sb, vault, ['rev-parse', 'HEAD']).trim();
    const out = committed(
      await commitBatch(runner, vault, makeBatch({ changes: [{ path: 'C.md', bytes: Buffer.from('c1\n') }, { path: 'D.md', bytes: null }] })),
    );
    expect(out.parent).toBe(before);
    expect(ugit(sb, vault, ['diff', '--name-status', before, out.commit])).toBe('M\tC.md\nD\tD.md\n');
    expect(out.index).toEqual({ ok: true, updated: 2, skipped: 0 });
    // D.md still exists as a working file: Knowledge never deletes working files.
    expect(readFileSync(join(vault, 'D.md'), 'utf8')).toBe('d0\n');
    expect(ugit(sb, vault, ['diff', '--cached', '--name-only'])).toBe('A.md\n');
    expect(ugit(sb, vault, ['diff', '--name-only'])).toBe('B.md\n');
    expect(ugit(sb, vault, ['status', '--porcelain'])).toBe('M  A.md\n M B.md\n?? D.md\n');
    expect(readFileSync(join(vault, 'B.md'), 'utf8')).toBe('b1 unstaged\n');
  });

  it('leaves an index entry the user staged differently for a checkpoint path', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb, 'vault', { 'C.md': 'c0\n' });
    writeFile(vault, 'C.md', 'user staged\n');
    ugit(sb, vault, ['add', 'C.md']);
    const staged = ugit(sb, vault, ['ls-files', '-s', 'C.md']);
    const out = committed(await commitBatch(runner, vault, makeBatch({ changes: [{ path: 'C.md', bytes: Buffer.from('knowledge\n') }] })));
    expect(out.index).toEqual({ ok: true, updated: 0, skipped: 1 });
    expect(ugit(sb, vault, ['ls-files', '-s', 'C.md'])).toBe(staged);
    expect(show(vault, `${out.commit}:C.md`).toString()).toBe('knowledge\n');
  });

  it('keeps an executable bit the file already had', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb, 'vault', { 'run.sh': 'echo 0\n' });
    ugit(sb, vault, ['update-index', '--chmod=+x', 'run.sh']);
    ugit(sb, vault, ['commit', '-q', '-m', 'exec']);
    const out = committed(await commitBatch(runner, vault, makeBatch({ changes: [{ path: 'run.sh', bytes: Buffer.from('echo 1\n') }] })));
    expect(ugit(sb, vault, ['ls-tree', out.commit, 'run.sh'])).toMatch(/^100755 /);
  });

  it('still makes one commit when the bytes are already committed', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb, 'vault', { 'C.md': 'same\n' });
    const out = committed(await commitBatch(runner, vault, makeBatch({ changes: [{ path: 'C.md', bytes: Buffer.from('same\n') }] })));
    expect(ugit(sb, vault, ['rev-list', '--count', 'main']).trim()).toBe('2');
    expect(out.index).toEqual({ ok: true, updated: 0, skipped: 0 });
  });

  it('commits into a sha256 repository', async () => {
    sb = makeSandbox();
    const vault = join(sb.dir, 'vault');
    mkdirSync(vault);
    ugit(sb, vault, ['init', '-q', '--object-format=sha256', '-b', 'main']);
    const out = committed(await commitBatch(runner, vault, makeBatch()));
    expect(out.commit).toMatch(/^[0-9a-f]{64}$/);
    expect(show(vault, `${out.commit}:notes/a.md`).toString()).toBe('# A\n');
    expect(out.index).toEqual({ ok: true, updated: 1, skipped: 0 });
    const again = committed(await commitBatch(runner, vault, makeBatch()));
    expect(again).toMatchObject({ commit: out.commit, reused: true });
  });

  it('throws on a path Knowledge must never commit, before creating anything [GIT-13]', async () => {
    sb = makeSandbox();
    const vault = join(sb.dir, 'vault');
    mkdirSync(vault);
    await expect(commitBatch(runner, vault, makeBatch({ changes: [{ path: 'vault.json', bytes: Buffer.from('{}') }] }))).rejects.toThrow(TypeError);
    expect(existsSync(join(vault, '.git'))).toBe(false);
  });

  it('reports unavailable when git cannot be run [GIT-14]', async () => {
    sb = makeSandbox();
    const vault = join(sb.dir, 'vault');
    mkdirSync(vault);
    const out = await commitBatch(new GitRunner({ gitPath: '/nonexistent/git' }), vault, makeBatch());
    expect(out).toEqual({ state: 'unavailable', reason: 'git executable not found: /nonexistent/git' });
    expect(existsSync(join(vault, '.git'))).toBe(false);
  });
});

describe('retries reuse the checkpoint commit [GIT-6]', () => {
  it('finds the commit of an already committed batch instead of adding a twin', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const batch = makeBatch({ batchId: 7 });
    const first = committed(await commitBatch(runner, vault, batch));
    const userCommit = (() => {
      writeFile(vault, 'later.md', 'user\n');
      ugit(sb!, vault, ['add', 'later.md']);
      ugit(sb!, vault, ['commit', '-q', '-m', 'user later']);
      return ugit(sb!, vault, ['rev-parse', 'HEAD']).trim();
    })();
    for (const last of [null, first.parent]) {
      const again = committed(await commitBatch(runner, vault, batch, { lastKnownCommit: last }));
      expect(again.reused).toBe(true);
      expect(again.commit).toBe(first.commit);
      expect(again.parent).toBe(first.parent);
    }
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(userCommit);
    expect(countBatchCommits(vault, 'v-1/7')).toBe(1);
    // A different batch of the same vault is not mistaken for it.
    const other = committed(await commitBatch(runner, vault, makeBatch({ batchId: 8 }), { lastKnownCommit: userCommit }));
    expect(other.reused).toBe(false);
  });

  it('a batch of the same number for another publication (a store whose state went back: a restored backup) is not taken for it', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const first = committed(await commitBatch(runner, vault, makeBatch({ batchId: 1, refId: 'pub-first' })));
    // The store forgot that commit and numbers a new publication's batch 1 again.
    const later = makeBatch({ batchId: 1, refId: 'pub-later', changes: [{ path: 'notes/b.md', bytes: Buffer.from('# B\n') }] });
    const again = committed(await commitBatch(runner, vault, later, { lastKnownCommit: first.parent }));
    expect(again.reused).toBe(false);
    expect(again.commit).not.toBe(first.commit);
    expect(show(vault, `${again.commit}:notes/b.md`).toString()).toBe('# B\n');
    // And its own commit is found again on a retry (both are on the branch now), not the other one.
    for (const last of [first.parent, null]) {
      expect(committed(await commitBatch(runner, vault, later, { lastKnownCommit: last }))).toMatchObject({ commit: again.commit, reused: true });
    }
  });

  it('rebuilds the identical commit after a crash between writing it and moving the branch', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const tip = ugit(sb, vault, ['rev-parse', 'main']).trim();
    const batch = makeBatch({ batchId: 3 });
    class Crash extends Error {}
    let written = '';
    await expect(
      commitBatch(runner, vault, batch, {
        testHooks: {
          beforeUpdateRef: (c) => {
            written = c;
            throw new Crash('simulated crash');
          },
        },
      }),
    ).rejects.toBeInstanceOf(Crash);
    expect(ugit(sb, vault, ['cat-file', '-t', written]).trim()).toBe('commit');
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(tip);
    const retry = committed(await commitBatch(runner, vault, batch, { lastKnownCommit: tip }));
    expect(retry.reused).toBe(false);
    expect(retry.commit).toBe(written);
    expect(countBatchCommits(vault, 'v-1/3')).toBe(1);
    expect(ugit(sb, vault, ['status', '--porcelain'])).toBe(' D notes/a.md\n'); // index = commit; the file was never installed
  });

  it('resyncs the index on a retry after a crash between moving the branch and the index update', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const batch = makeBatch({ batchId: 4 });
    // Simulate the crash: the branch moved but the index was never updated.
    const indexBefore = readFileSync(join(vault, '.git/index'));
    const first = committed(await commitBatch(runner, vault, batch));
    writeFileSync(join(vault, '.git/index'), indexBefore);
    expect(ugit(sb, vault, ['diff', '--cached', '--name-only'])).toBe('notes/a.md\n'); // reverse-staged
    const retry = committed(await commitBatch(runner, vault, batch));
    expect(retry).toMatchObject({ commit: first.commit, reused: true, index: { ok: true, updated: 1, skipped: 0 } });
    expect(ugit(sb, vault, ['diff', '--cached', '--name-only'])).toBe('');
  });
});

describe('syncIndex', () => {
  it('reports a held index.lock as locked and leaves it in place [GIT-19]', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const indexBefore = readFileSync(join(vault, '.git/index'));
    const first = committed(await commitBatch(runner, vault, makeBatch()));
    writeFileSync(join(vault, '.git/index'), indexBefore); // index not yet synced
    const lock = join(vault, '.git/index.lock');
    writeFileSync(lock, '');
    const r = await syncIndex(runner, vault, first.commit, first.parent, ['notes/a.md']);
    expect(r).toMatchObject({ ok: false, code: 'locked' });
    expect(existsSync(lock)).toBe(true);
    expect(readFileSync(join(vault, '.git/index')).equals(indexBefore)).toBe(true);
  });
});
