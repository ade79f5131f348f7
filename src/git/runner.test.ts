import { afterEach, describe, expect, it, vi } from 'vitest';
import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { GitRunner, KILL_GRACE_MS, classifyGitFailure, killGroup } from './runner.js';
import { makeSandbox, userRepo, type GitSandbox } from './test-sandbox.js';

let sb: GitSandbox | undefined;
afterEach(() => {
  sb?.cleanup();
  sb = undefined;
});

describe('GitRunner', () => {
  it('detects the installed git and its version', async () => {
    const d = await new GitRunner().detect();
    expect(d.ok).toBe(true);
    if (d.ok) expect(d.version).toMatch(/^\d+\.\d+/);
  });

  it('reports a missing executable as not ok instead of throwing', async () => {
    const byPath = await new GitRunner({ gitPath: '/nonexistent/git' }).detect();
    expect(byPath).toEqual({ ok: false, reason: 'git executable not found: /nonexistent/git' });
    const noPath = await new GitRunner({ pathEnv: '/nonexistent-bin' }).detect();
    expect(noPath).toEqual({ ok: false, reason: 'git executable not found on PATH' });
    const r = await new GitRunner({ gitPath: '/nonexistent/git' }).run(['status'], { cwd: '/' });
    expect(r.code).toBe(-1);
    expect(r.stderr).toContain('ENOENT');
  });

  it('starts no process to learn that git is missing, and still notices a git that appears later [GIT-17]', async () => {
    sb = makeSandbox();
    const bin = join(sb.dir, 'bin');
    const byPath = new GitRunner({ gitPath: join(bin, 'git') });
    const onPath = new GitRunner({ pathEnv: `/nonexistent-bin:${bin}` });
    const runs = [vi.spyOn(byPath, 'run'), vi.spyOn(onPath, 'run')];
    expect(await byPath.detect()).toEqual({ ok: false, reason: `git executable not found: ${join(bin, 'git')}` });
    expect(await onPath.detect()).toEqual({ ok: false, reason: 'git executable not found on PATH' });
    for (const run of runs) expect(run).not.toHaveBeenCalled();
    // Something by that name that cannot run is tried, and reported as before.
    mkdirSync(bin);
    writeFileSync(join(bin, 'git'), 'not a program\n', { mode: 0o644 });
    expect(await byPath.detect()).toEqual({ ok: false, reason: `git executable not found: ${join(bin, 'git')}` });
    expect(runs[0]).toHaveBeenCalledTimes(1);
    // A real git installed there is found.
    rmSync(join(bin, 'git'));
    const real = (process.env.PATH ?? '').split(':').map((d) => join(d, 'git')).find((f) => existsSync(f));
    expect(real, 'a git on the test PATH').toBeDefined();
    symlinkSync(real!, join(bin, 'git'));
    expect((await byPath.detect()).ok).toBe(true);
    expect((await onPath.detect()).ok).toBe(true);
  });

  it.skipIf(!existsSync('/proc/self/fd'))('keeps no descriptors open for attempts while git is missing (needs /proc)', async () => {
    const runner = new GitRunner({ gitPath: '/nonexistent/git' });
    const before = readdirSync('/proc/self/fd').length;
    for (let i = 0; i < 300; i++) expect((await runner.detect()).ok).toBe(false);
    expect(readdirSync('/proc/self/fd').length - before).toBeLessThan(10);
  });

  it('does not leak inherited GIT_* variables into git', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const saved = { ...process.env };
    process.env.GIT_DIR = '/nonexistent/elsewhere.git';
    process.env.GIT_INDEX_FILE = '/nonexistent/index';
    process.env.GIT_CONFIG_PARAMETERS = "'user.name'='Leaked'";
    process.env.GIT_WORK_TREE = '/nonexistent';
    try {
      const runner = new GitRunner();
      const r = await runner.run(['rev-parse', '--git-dir', '--git-path', 'index'], { cwd: vault });
      expect(r.code).toBe(0);
      expect(r.stdout.toString().split('\n').slice(0, 2)).toEqual(['.git', '.git/index']);
      const name = await runner.run(['config', '--get', 'user.name'], { cwd: vault });
      expect(name.stdout.toString()).not.toContain('Leaked');
      const env = runner.buildEnv();
      expect(Object.keys(env).filter((k) => !['PATH', 'HOME', 'LC_ALL', 'LANG', 'MALLOC_TOP_PAD_'].includes(k) && !k.startsWith('GIT_'))).toEqual([]);
      expect(env.MALLOC_TOP_PAD_).toBe(String(16 * 1024 * 1024)); // ours (runner.ts), never the caller's
      expect(env.GIT_DIR).toBeUndefined();
      expect(env.GIT_INDEX_FILE).toBeUndefined();
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
    }
  });

  it('puts its -c overrides above the repository config', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const runner = new GitRunner();
    await runner.run(['config', 'core.hooksPath', '/tmp/user-hooks'], { cwd: vault }); // repo value
    const r = await runner.run(['config', '--get', 'core.hooksPath'], { cwd: vault });
    expect(r.stdout.toString().trim()).toBe('/dev/null/knowledge-no-hooks');
    // Durability and history settings a repository could weaken: what git itself sees under the runner.
    for (const [key, repoValue, forced] of [
      ['core.fsync', 'none', 'committed,reference'],
      ['core.fsyncMethod', 'writeout-only', 'fsync'],
      ['log.showRoot', 'false', 'true'],
      ['core.ignorecase', 'true', 'false'],
    ] as const) {
      await runner.run(['config', key, repoValue], { cwd: vault });
      const got = await runner.run(['config', '--get', key], { cwd: vault });
      expect(got.stdout.toString().trim(), key).toBe(forced);
    }
  });

  it('kills a git that hangs past its timeout', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const t0 = Date.now();
    const r = await new GitRunner().run(['fast-import', '--quiet'], { cwd: vault, timeoutMs: 200, holdStdin: true });
    expect(r.timedOut).toBe(true);
    expect(r.code).not.toBe(0);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(classifyGitFailure(r.stderr, r.timedOut).code).toBe('timeout');
  });

  it('a git killed for its timeout inside a ref transaction leaves no lock behind (SIGTERM first: git removes its locks)', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const runner = new GitRunner();
    const head = (await runner.run(['rev-parse', 'HEAD'], { cwd: vault })).stdout.toString().trim();
    const cmd = runner.command(['update-ref', '--stdin']);
    const child = spawn(cmd.file, cmd.argv, { cwd: vault, env: cmd.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let out = '';
    const prepared = new Promise<void>((ok) => child.stdout!.on('data', (b: Buffer) => { out += b; if (out.includes('prepare: ok')) ok(); }));
    child.stdin!.write(`start\nupdate refs/heads/main ${head} ${head}\nupdate refs/knowledge/checkpoint ${head}\nprepare\n`);
    await prepared;
    const locks = [join(vault, '.git', 'refs', 'heads', 'main.lock'), join(vault, '.git', 'refs', 'knowledge', 'checkpoint.lock')];
    for (const l of locks) expect(existsSync(l), l).toBe(true);
    const ended = new Promise<NodeJS.Signals | null>((done) => child.on('exit', (_c, sig) => done(sig)));
    killGroup(child);
    expect(await ended).toBe('SIGTERM');
    for (const l of locks) expect(existsSync(l), `${l} left behind`).toBe(false);
  });

  it('a process that ignores SIGTERM is killed after the grace period', async () => {
    const child = spawn('/bin/sh', ['-c', 'trap "" TERM; echo ready; sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'], detached: true });
    await new Promise<void>((ok) => child.stdout!.once('data', () => ok()));
    const t0 = Date.now();
    const ended = new Promise<NodeJS.Signals | null>((done) => child.on('exit', (_c, sig) => done(sig)));
    killGroup(child);
    expect(await ended).toBe('SIGKILL');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(KILL_GRACE_MS - 50);
  });
});

describe('classifyGitFailure', () => {
  const cases: [string, string][] = [
    ["fatal: Unable to create '/v/.git/index.lock': File exists.\n\nAnother git process seems", 'locked'],
    ["error: cannot lock ref 'refs/heads/main': Unable to create '/v/.git/refs/heads/main.lock': File exists.", 'locked'],
    ["fatal: detected dubious ownership in repository at '/v'", 'dubious-ownership'],
    ["fatal: cannot lock ref 'refs/heads/main': is at 1111 but expected 2222", 'branch-moved'],
    ["fatal: cannot lock ref 'refs/heads/main': reference already exists", 'branch-moved'],
    ['error: insufficient permission for adding an object to repository database .git/objects', 'permission'],
    ["fatal: could not open '.git/HEAD': Permission denied", 'permission'],
    ['fatal: not a git repository (or any of the parent directories): .git', 'malformed'],
    ['error: inflate: data stream error (incorrect header check)\nfatal: loose object 1234 (stored in .git/objects/12/34) is corrupt', 'malformed'],
    ['fatal: bad object HEAD', 'malformed'],
    ['fatal: bad config line 1 in file .git/config', 'malformed'],
    ['fatal: something unexpected', 'git-error'],
  ];
  it.each(cases)('maps %j to %s', (stderr, code) => {
    const c = classifyGitFailure(stderr, false);
    expect(c.code).toBe(code);
    expect(c.reason).toContain(stderr.split('\n')[0]!.trim());
  });
  it('prefers timeout over any text', () => {
    expect(classifyGitFailure('fatal: bad object', true).code).toBe('timeout');
  });
});
