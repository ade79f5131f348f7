import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { storeSandbox, cli, cliPath, userGit, userGitRaw, type Sandbox } from './helpers.js';

/**
 * [GIT-5][GIT-6][GIT-10] The user commits on the branch in a tight loop while
 * publications run as separate processes. Every publication ends as exactly
 * one commit on that branch (a moved branch is retried, then resume finishes
 * whatever is still pending), in publication order, each holding exactly its
 * bytes; the user's commits are all kept; nothing lands on another ref.
 */
let sb: Sandbox;
let vault: string;
beforeEach(() => ({ sb, vault } = storeSandbox()));
afterEach(() => sb.cleanup());

function cliAsync(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cliPath, ...args], { cwd: sb.dir, env: sb.env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b) => (stdout += b));
    child.stderr.on('data', (b) => (stderr += b));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('[GIT-5] the user\'s own commits racing with publications', () => {
  it('no lost or duplicated checkpoint, nothing on the wrong branch, every user commit kept', async () => {
    writeFileSync(join(sb.dir, 'first.md'), '---\nkind: page\ntitle: First\n---\nfirst\n');
    expect(JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', 'first.md']).stdout).git.state).toBe('committed');
    writeFileSync(join(vault, 'user.txt'), 'user 0\n');
    userGit(sb, vault, ['add', 'user.txt']);
    userGit(sb, vault, ['commit', '-q', '-m', 'user 0']);

    // The user's loop: edit, stage, commit; failures (a lock held by
    // Knowledge, a branch moved under it) are what a user would see too.
    const loop = join(sb.dir, 'user-loop.sh');
    writeFileSync(loop, [
      '#!/bin/sh',
      'i=1',
      `while [ ! -f "${sb.dir}/stop" ]; do`,
      '  echo "user $i" >> user.txt',
      '  git add user.txt 2>/dev/null && git commit -q -m "user $i" 2>/dev/null && echo "user $i" >> "' + join(sb.dir, 'user-ok') + '"',
      '  i=$((i+1))',
      '  sleep 0.0$(( (i % 9) + 1 ))', // 10-90 ms between commits: fast for a person, a real race for Knowledge
      'done',
      '',
    ].join('\n'));
    const user = spawn('sh', [loop], { cwd: vault, env: sb.env, stdio: 'ignore' });
    const userDone = new Promise((r) => user.on('close', r));

    const receipts: Array<{ publicationId: string; records: Array<{ path: string; sha256: string }>; git: { state: string; code?: string } }> = [];
    for (let i = 1; i <= 12; i++) {
      writeFileSync(join(sb.dir, `p${i}.md`), `---\nkind: page\ntitle: Racing ${i}\n---\nbody ${i}\n`);
      const r = await cliAsync(['publish', '--store', 'st', '--json', `p${i}.md`]);
      expect(r.code, r.stderr).toBe(0);
      receipts.push(JSON.parse(r.stdout));
    }
    writeFileSync(join(sb.dir, 'stop'), '');
    await userDone;
    const states = receipts.map((r) => r.git.state + (r.git.code ? `:${r.git.code}` : ''));
    // Whatever is still pending (the loop held index.lock, or moved the branch twice) is finished now.
    const last = receipts[receipts.length - 1]!;
    const final = JSON.parse(cli(sb, ['resume', '--store', 'st', '--json', last.publicationId]).stdout);
    expect(final.git.state, JSON.stringify({ states, final: final.git })).toBe('committed');

    const log = userGit(sb, vault, ['log', '--reverse', '--format=%H %(trailers:key=Knowledge-Publication,valueonly,separator=)%x01%s', 'main']).trim().split('\n');
    const ours = log.map((l) => l.split('\x01')[0]!.split(' ')).filter((p) => p[1]);
    // Exactly one commit per publication, in publication order.
    expect(ours.map((p) => p[1])).toEqual([expect.any(String), ...receipts.map((r) => r.publicationId)]);
    for (const r of receipts) {
      const rec = JSON.parse(cli(sb, ['receipt', '--store', 'st', '--json', r.publicationId]).stdout);
      expect(rec.git.state).toBe('committed');
      const commit = ours.find((p) => p[1] === r.publicationId)![0]!;
      expect(rec.git.commit).toBe(commit);
      // Exactly its bytes.
      const bytes = userGitRaw(sb, vault, ['cat-file', 'blob', `${commit}:${r.records[0]!.path}`]);
      expect(createHash('sha256').update(bytes.stdout).digest('hex')).toBe(r.records[0]!.sha256);
    }
    // Every commit the user's loop reported is on the branch.
    const userOk = existsSync(join(sb.dir, 'user-ok')) ? readFileSync(join(sb.dir, 'user-ok'), 'utf8').trim().split('\n') : [];
    const subjects = new Set(log.map((l) => l.split('\x01')[1]));
    for (const s of userOk) expect(subjects.has(s), s).toBe(true);
    // The branch tip still holds every published file's bytes (no user commit reverted one), and the index agrees.
    for (const r of receipts) {
      const tipBytes = userGitRaw(sb, vault, ['cat-file', 'blob', `main:${r.records[0]!.path}`]).stdout;
      expect(createHash('sha256').update(tipBytes).digest('hex'), r.records[0]!.path).toBe(r.records[0]!.sha256);
    }
    expect(userGit(sb, vault, ['status', '--porcelain', '--', 'private'])).toBe('');
    // Nothing on another ref; the scratch ref is gone.
    expect(userGit(sb, vault, ['for-each-ref', '--format=%(refname)'])).toBe('refs/heads/main\n');
    expect(userGitRaw(sb, vault, ['fsck', '--strict', '--no-dangling']).status).toBe(0);
    const v = cli(sb, ['verify', '--store', 'st', '--json']);
    expect(v.code, v.stdout).toBe(0);
    // Log what the race produced: how many user commits and how each publication first came back.
    console.log(`concurrency: ${userOk.length} user commits; first receipts: ${states.join(', ')}`);
  }, 180_000);
});

/**
 * [GIT-10] `git checkout` writes the new branch's index, releases index.lock,
 * and only then moves HEAD. A checkpoint that takes index.lock in that gap
 * must not move the old branch and then stage its files in the new branch's
 * index. The gap is reproduced with pauses: the "checkout" is its two halves
 * by hand (`read-tree -m -u` writes the index and the files; `symbolic-ref`
 * moves HEAD), each made while the publication is paused at a known point.
 */
describe('[GIT-10] a branch switch racing a checkpoint', () => {
  function publishPaused(file: string, pauses: string) {
    const child = spawn(process.execPath, [cliPath, 'publish', '--store', 'st', '--json', file], {
      cwd: sb.dir, env: { ...sb.env, KNOWLEDGE_PAUSE_AT: pauses }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (b) => (stdout += b));
    const waiters: Array<{ point: string; done: (seen: boolean) => void }> = [];
    child.stderr!.on('data', (b) => {
      stderr += b;
      for (const w of waiters.splice(0)) {
        if (stderr.includes(`paused at ${w.point} `)) w.done(true);
        else waiters.push(w);
      }
    });
    const exited = new Promise<number | null>((done) => child.on('close', done));
    /** Resolves true once the process pauses at `point`, false if it exits (or 8 s pass) first. */
    const pausedAt = (point: string) => new Promise<boolean>((done) => {
      if (stderr.includes(`paused at ${point} `)) return done(true);
      waiters.push({ point, done });
      void exited.then(() => done(stderr.includes(`paused at ${point} `)));
      setTimeout(() => done(false), 8000);
    });
    return { pausedAt, exited, out: () => stdout, err: () => stderr };
  }

  function setUp(): void {
    writeFileSync(join(sb.dir, 'a.md'), '---\nkind: page\ntitle: Alpha\n---\none\n');
    expect(JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', 'a.md']).stdout).git.state).toBe('committed');
    // The user's branch, one commit of their own ahead of main.
    userGit(sb, vault, ['checkout', '-q', '-b', 'other']);
    writeFileSync(join(vault, 'theirs.txt'), 'the user\'s file\n');
    userGit(sb, vault, ['add', 'theirs.txt']);
    userGit(sb, vault, ['commit', '-q', '-m', 'theirs']);
    userGit(sb, vault, ['checkout', '-q', 'main']);
    writeFileSync(join(sb.dir, 'g.md'), '---\nkind: page\ntitle: Gamma\n---\nthree\n');
  }

  it('the checkout\'s index written during the build, HEAD moved while the checkpoint waits: committed on the branch checked out, nothing staged', async () => {
    setUp();
    const mainBefore = userGit(sb, vault, ['rev-parse', 'main']).trim();
    const p = publishPaused('g.md', 'after-commit-object:1500,index-settle:1500');
    expect(await p.pausedAt('after-commit-object'), p.err()).toBe(true);
    // The checkout's first half: the other branch's index and files.
    userGit(sb, vault, ['read-tree', '-m', '-u', 'main', 'other']);
    // Its second half, once the checkpoint holds index.lock (or, on a build that does not wait, a moment later).
    await p.pausedAt('index-settle');
    userGit(sb, vault, ['symbolic-ref', 'HEAD', 'refs/heads/other']);
    expect(await p.exited, p.err()).toBe(0);
    const receipt = JSON.parse(p.out()) as { publicationId: string; git: { state: string; commit?: string } };
    expect(receipt.git.state).toBe('committed');
    // Built again on the branch HEAD names now; main is where it was.
    expect(userGit(sb, vault, ['rev-parse', 'main']).trim()).toBe(mainBefore);
    expect(userGit(sb, vault, ['rev-parse', 'other']).trim()).toBe(receipt.git.commit);
    expect(userGit(sb, vault, ['log', '--format=%s', '-2', 'other']).trim().split('\n')[1]).toBe('theirs');
    // The user's index and work tree describe other + the publication: nothing staged, nothing missing.
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=no'])).toBe('');
  });

  it('HEAD moved after the branch moved to another branch without the checkpoint (checked out without writing the index): the index is left to that branch', async () => {
    setUp();
    userGit(sb, vault, ['branch', 'side']);
    const p = publishPaused('g.md', 'after-update-ref:1500');
    expect(await p.pausedAt('after-update-ref'), p.err()).toBe(true);
    // `git checkout -b`'s effect: HEAD names a new branch at the same commit; the index stays.
    userGit(sb, vault, ['symbolic-ref', 'HEAD', 'refs/heads/side']);
    expect(await p.exited, p.err()).toBe(0);
    const receipt = JSON.parse(p.out()) as { records: Array<{ path: string }>; git: { state: string; commit?: string } };
    expect(receipt.git).toMatchObject({ state: 'committed', commit: userGit(sb, vault, ['rev-parse', 'main']).trim() });
    // side does not have the publication, so its index must not stage it.
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=no'])).toBe('');
    expect(userGit(sb, vault, ['ls-files', '--', receipt.records[0]!.path])).toBe('');
    expect(existsSync(join(vault, '.git', 'index.lock'))).toBe(false);
  });

  it('a `git checkout -b` made after the branch moved (at its new tip, so holding the checkpoint): the index is updated as the branch\'s would be', async () => {
    setUp();
    const p = publishPaused('g.md', 'after-update-ref:1500');
    expect(await p.pausedAt('after-update-ref'), p.err()).toBe(true);
    // A new branch at the tip that now holds the publication, checked out without writing the index (Knowledge holds
    // index.lock): `git checkout -b`'s effect where it does not need the index, made by its two ref steps.
    userGit(sb, vault, ['branch', 'feature']);
    userGit(sb, vault, ['symbolic-ref', 'HEAD', 'refs/heads/feature']);
    expect(await p.exited, p.err()).toBe(0);
    const receipt = JSON.parse(p.out()) as { records: Array<{ path: string }>; git: { state: string; commit?: string } };
    expect(receipt.git).toMatchObject({ state: 'committed', commit: userGit(sb, vault, ['rev-parse', 'feature']).trim() });
    // Nothing staged against feature: its index holds the publication's file.
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=no'])).toBe('');
    expect(userGit(sb, vault, ['ls-files', '--', receipt.records[0]!.path]).trim()).toBe(receipt.records[0]!.path);
  });

  it('an index update owed from a cut-short checkpoint is not made into another branch\'s index', () => {
    setUp();
    // Killed after the branch moved and the commit was recorded, before the index update (its lock is left).
    const killed = cli(sb, ['publish', '--store', 'st', '--json', 'g.md'], { env: { KNOWLEDGE_CRASH_AT: 'after-record-commit' } });
    expect(killed.code).not.toBe(0);
    expect(existsSync(join(vault, '.git', 'index.lock'))).toBe(true);
    // The user clears the lock by hand and checks out their branch, which lacks the publication.
    expect(userGitRaw(sb, vault, ['checkout', '-q', 'other']).stderr).toMatch(/index\.lock/);
    rmSync(join(vault, '.git', 'index.lock'));
    userGit(sb, vault, ['checkout', '-q', '-f', 'other']);
    // Any later write or scan finishes owed index updates; this one must leave other's index alone.
    const scan = cli(sb, ['scan', '--store', 'st', '--json']);
    expect(scan.code, scan.stderr).toBe(0);
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=no'])).toBe('');
    expect(userGit(sb, vault, ['ls-files', 'private'])).not.toMatch(/gamma/);
  });
});
