import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { GitRunner } from './runner.js';
import { commitBatch } from './checkpoint.js';
import { clearOwnStaleLock, holdIndexLock, indexFiles, isOwnStaleLock, shownLockPath } from './index-lock.js';
import { makeBatch, makeSandbox, ugit, userRepo, type GitSandbox } from './test-sandbox.js';
import { processStartTicks } from '../process.js';

let sb: GitSandbox | undefined;
afterEach(() => sb?.cleanup());
const runner = new GitRunner();

/** A pid that is certainly gone: a child that already exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '0']).pid!;
}

describe('[GIT-10][GIT-19] Knowledge holds index.lock across the branch move', () => {
  it('takes the lock with a marker, refuses when someone else holds it, and releases it', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const gitDir = join(vault, '.git');
    const held = await holdIndexLock(gitDir);
    expect(held.ok).toBe(true);
    expect(readFileSync(join(gitDir, 'index.lock'), 'utf8')).toMatch(/^knowledge-index-lock \d+ /);
    // While Knowledge holds it, the user's git cannot write the index.
    const add = spawnSync('git', ['add', '-A'], { cwd: vault, env: sb.env, encoding: 'utf8' });
    expect(add.status).not.toBe(0);
    expect(add.stderr).toMatch(/index\.lock/);
    if (held.ok) await held.lock.release();
    expect(existsSync(join(gitDir, 'index.lock'))).toBe(false);
  });

  it('never removes a lock that no longer carries its marker', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const gitDir = join(vault, '.git');
    const held = await holdIndexLock(gitDir);
    if (!held.ok) throw new Error(held.reason);
    writeFileSync(join(gitDir, 'index.lock'), ''); // replaced behind our back (git itself never does this)
    await held.lock.install();
    expect(readFileSync(join(gitDir, 'index.lock'), 'utf8')).toBe('');
  });

  it('clears only its own lock left by a killed Knowledge process; a user lock is never touched', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const lock = join(vault, '.git', 'index.lock');
    writeFileSync(lock, `knowledge-index-lock ${deadPid()} -\n`);
    await clearOwnStaleLock(join(vault, '.git'));
    expect(existsSync(lock)).toBe(false);
    writeFileSync(lock, ''); // git's own (or the user's) lock
    await clearOwnStaleLock(join(vault, '.git'));
    expect(existsSync(lock)).toBe(true);
    const out = await commitBatch(runner, vault, makeBatch({ changes: [{ path: 'a.md', bytes: Buffer.from('a\n') }] }));
    expect(out).toMatchObject({ state: 'pending', code: 'locked' });
    expect(readFileSync(lock, 'utf8')).toBe('');
  });

  it('the lock of another Knowledge process that still runs is not stale: never taken over or cleared, and a checkpoint waits (locked)', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const gitDir = join(vault, '.git');
    const lockPath = join(gitDir, 'index.lock');
    // A live process (its real pid and start time) stands in for a Knowledge process holding the lock.
    const live = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      const marker = `knowledge-index-lock ${live.pid} ${processStartTicks(live.pid!) ?? '-'}\n`;
      writeFileSync(lockPath, marker);
      expect(await isOwnStaleLock(lockPath)).toBe(false);
      await clearOwnStaleLock(gitDir);
      expect(readFileSync(lockPath, 'utf8')).toBe(marker);
      const out = await commitBatch(runner, vault, makeBatch({ changes: [{ path: 'a.md', bytes: Buffer.from('a\n') }] }));
      expect(out).toMatchObject({ state: 'pending', code: 'locked' });
      expect(readFileSync(lockPath, 'utf8')).toBe(marker);
    } finally {
      live.kill('SIGKILL');
    }
  });

  it('a lock left by a killed process whose pid this process was given again (a restarted container) is stale; its own held lock is not', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const gitDir = join(vault, '.git');
    const lockPath = join(gitDir, 'index.lock');
    writeFileSync(lockPath, `knowledge-index-lock ${process.pid} 1\n`); // this pid, another start time
    expect(await isOwnStaleLock(lockPath)).toBe(true);
    const held = await holdIndexLock(gitDir);
    expect(held.ok && held.lock.tookOver).toBe(true);
    if (!held.ok) return;
    expect(await isOwnStaleLock(lockPath)).toBe(false); // held now, by this very process
    await held.lock.abandon(); // an index update still owed: stale for this process's next update only
    expect(existsSync(lockPath)).toBe(true);
    expect(await isOwnStaleLock(lockPath)).toBe(true);
    const again = await holdIndexLock(gitDir);
    expect(again.ok).toBe(true);
    if (again.ok) await again.lock.release();
    expect(existsSync(lockPath)).toBe(false);
  });

  it('a lock given up, or released, while the vault was away for a moment is this process\'s to take over when it is back', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const gitDir = join(vault, '.git');
    const lockPath = join(gitDir, 'index.lock');
    for (const how of ['abandon', 'release'] as const) {
      const held = await holdIndexLock(gitDir);
      expect(held.ok).toBe(true);
      if (!held.ok) return;
      renameSync(vault, `${vault}.away`);
      await held.lock[how]();
      renameSync(`${vault}.away`, vault);
      // Still there (nothing could read or remove it meanwhile), and not held by any work: stale for this process.
      expect(existsSync(lockPath), how).toBe(true);
      expect(await isOwnStaleLock(lockPath), how).toBe(true);
      const again = await holdIndexLock(gitDir);
      expect(again.ok && again.lock.tookOver, how).toBe(true);
      if (again.ok) await again.lock.release();
      expect(existsSync(lockPath), how).toBe(false);
    }
  });

  it('a checkpoint after a killed holder commits and leaves the index clean', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    writeFileSync(join(vault, '.git', 'index.lock'), `knowledge-index-lock ${deadPid()} -\n`);
    writeFileSync(join(vault, 'a.md'), 'a\n');
    const out = await commitBatch(runner, vault, makeBatch({ changes: [{ path: 'a.md', bytes: Buffer.from('a\n') }] }));
    expect(out.state).toBe('committed');
    expect(existsSync(join(vault, '.git', 'index.lock'))).toBe(false);
    expect(ugit(sb, vault, ['status', '--porcelain', '--', 'a.md'])).toBe('');
  });

  it('the lock never exists without its marker, even for a moment (a kill then could leave a lock no run may clear)', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const gitDir = join(vault, '.git');
    const lock = join(gitDir, 'index.lock');
    const dist = pathToFileURL(join(process.cwd(), 'dist', 'git', 'index-lock.js')).href;
    // A Node process takes and releases the lock over and over; this one watches the file meanwhile.
    const code = `const { holdIndexLock } = await import(${JSON.stringify(dist)});
      const end = Date.now() + 1500;
      while (Date.now() < end) { const h = await holdIndexLock(${JSON.stringify(gitDir)}); if (h.ok) await h.lock.release(); }`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: 'ignore' });
    const exited = new Promise((r) => child.on('close', r));
    let seen = 0;
    let unmarked = 0;
    let done = false;
    void exited.then(() => (done = true));
    while (!done) {
      let text: string | null = null;
      try {
        text = readFileSync(lock, 'utf8');
      } catch {
        /* not held right now */
      }
      if (text !== null) {
        seen++;
        if (!/^knowledge-index-lock \d+ \S+\n$/.test(text)) unmarked++;
      }
      await new Promise((r) => setImmediate(r));
    }
    expect(seen).toBeGreaterThan(20);
    expect(unmarked).toBe(0);
    expect(existsSync(lock)).toBe(false);
    expect(existsSync(join(gitDir, 'knowledge-index-lock.marker'))).toBe(false);
  });
});

describe('[GIT-10] where the index and its lock are: a linked .git/index is followed as git follows it', () => {
  it('a plain index, a chain of relative and absolute links to a file not there yet, and a loop cut after five links', async () => {
    sb = makeSandbox();
    const gitDir = join(sb.dir, 'repo', '.git');
    mkdirSync(join(gitDir, 'sub'), { recursive: true });
    const files = (await indexFiles(gitDir));
    expect(files).toEqual({
      index: join(gitDir, 'index'),
      lock: join(gitDir, 'index.lock'),
      temp: join(gitDir, 'knowledge-index.tmp'),
      marker: join(gitDir, 'knowledge-index-lock.marker'),
    });
    expect(shownLockPath(gitDir, files.lock)).toBe('.git/index.lock');

    const far = join(sb.dir, 'far');
    mkdirSync(far);
    symlinkSync('sub/link', join(gitDir, 'index'));
    symlinkSync(join(far, 'real-index'), join(gitDir, 'sub', 'link'));
    const chained = await indexFiles(gitDir);
    expect(chained).toMatchObject({ index: join(far, 'real-index'), lock: join(far, 'real-index.lock'), temp: join(far, 'knowledge-index.tmp') });
    expect(shownLockPath(gitDir, chained.lock)).toBe(join(far, 'real-index.lock'));

    // A `..` after a linked folder is the kernel's to resolve, through the real folder (as git leaves it):
    // the lock, the temp index and the marker all go beside the index it reaches.
    const real = join(sb.dir, 'elsewhere', 'a', 'b');
    mkdirSync(real, { recursive: true });
    mkdirSync(join(sb.dir, 'elsewhere', 'far'));
    rmSync(join(gitDir, 'index'));
    rmSync(join(gitDir, 'sub'), { recursive: true });
    symlinkSync(real, join(gitDir, 'sub'));
    symlinkSync('sub/link', join(gitDir, 'index'));
    symlinkSync('../../far/real-index', join(real, 'link'));
    const through = await indexFiles(gitDir);
    expect(through.lock).toBe(`${gitDir}/sub/../../far/real-index.lock`);
    expect(through.temp).toBe(`${gitDir}/sub/../../far/knowledge-index.tmp`);
    expect(through.marker).toBe(`${gitDir}/sub/../../far/knowledge-index-lock.marker`);
    const held = await holdIndexLock(gitDir);
    expect(held.ok).toBe(true);
    expect(existsSync(join(sb.dir, 'elsewhere', 'far', 'real-index.lock'))).toBe(true);
    if (held.ok) await held.lock.release();
    expect(readdirSync(join(sb.dir, 'elsewhere', 'far'))).toEqual([]);

    // Links in a loop: git stops after five and locks the path it reached (measured: git 2.39 locks `.git/b.lock`).
    rmSync(join(gitDir, 'index'));
    symlinkSync('b', join(gitDir, 'index'));
    symlinkSync('index', join(gitDir, 'b'));
    expect((await indexFiles(gitDir)).lock).toBe(`${gitDir}/b.lock`);
  });

  it('a checkpoint takes the lock beside the linked file, and leaves the link in place', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const gitDir = join(vault, '.git');
    const far = join(sb.dir, 'far');
    mkdirSync(far);
    renameSync(join(gitDir, 'index'), join(far, 'index'));
    symlinkSync(join(far, 'index'), join(gitDir, 'index'));
    const held = await holdIndexLock(gitDir);
    expect(held.ok).toBe(true);
    expect(readFileSync(join(far, 'index.lock'), 'utf8')).toMatch(/^knowledge-index-lock \d+ /);
    expect(existsSync(join(gitDir, 'index.lock'))).toBe(false);
    // The user's git sees the lock where it takes it.
    const add = spawnSync('git', ['add', '-A'], { cwd: vault, env: sb.env, encoding: 'utf8' });
    expect(add.status).not.toBe(0);
    expect(add.stderr).toMatch(/index\.lock/);
    if (held.ok) {
      expect((await held.lock.copy()).ok).toBe(true);
      await held.lock.install();
    }
    expect(lstatSync(join(gitDir, 'index')).isSymbolicLink()).toBe(true);
    expect(readdirSync(far)).toEqual(['index']);
  });
});
