/**
 * Test support for src/git tests (not used by production code): every test
 * gets its own real directory and a cleaned environment for the *user's* git
 * (no inherited GIT_*, HOME inside the sandbox), like git's own suite.
 */
import { mkdtempSync, mkdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import type { BatchForCommit } from './types.js';
import type { ChainOutcome } from './checkpoint.js';
import { closeLongLived } from './long-lived.js';
import { GitRunner, type GitRunnerOptions } from './runner.js';

export interface GitSandbox {
  dir: string;
  env: NodeJS.ProcessEnv;
  cleanup(): void;
}

export function makeSandbox(): GitSandbox {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'kn-git-')));
  const home = join(dir, 'home');
  mkdirSync(home);
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('GIT_')) env[k] = v;
  Object.assign(env, {
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: 'Test User',
    GIT_AUTHOR_EMAIL: 'user@example.com',
    GIT_COMMITTER_NAME: 'Test User',
    GIT_COMMITTER_EMAIL: 'user@example.com',
    LC_ALL: 'C',
  });
  return { dir, env, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The user's own git, as a person would run it. Throws on failure. */
export function ugit(sb: GitSandbox, cwd: string, args: string[], input?: string | Buffer): string {
  const r = ugitRaw(sb, cwd, args, input);
  if (r.status !== 0) throw new Error(`git ${args.join(' ')} failed (${r.status}): ${r.stderr.toString()}`);
  return r.stdout.toString('utf8');
}

export function ugitRaw(sb: GitSandbox, cwd: string, args: string[], input?: string | Buffer): SpawnSyncReturns<Buffer> {
  return spawnSync('git', args, { cwd, env: sb.env, input });
}

export function writeFile(root: string, rel: string, data: string | Buffer): void {
  const p = join(root, rel);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, data);
}

/** A vault that already is a user repository with one commit on main. */
export function userRepo(sb: GitSandbox, name = 'vault', files: Record<string, string> = { 'README.md': 'hello\n' }): string {
  const vault = join(sb.dir, name);
  mkdirSync(vault, { recursive: true });
  ugit(sb, vault, ['init', '-q', '-b', 'main']);
  for (const [rel, text] of Object.entries(files)) writeFile(vault, rel, text);
  ugit(sb, vault, ['add', '-A']);
  ugit(sb, vault, ['commit', '-q', '-m', 'user: initial']);
  return vault;
}

export function makeBatch(over: Partial<BatchForCommit> = {}): BatchForCommit {
  return {
    vaultId: 'v-1',
    batchId: 1,
    kind: 'publication',
    refId: 'pub-1',
    actor: 'agent',
    createdAt: '2024-05-01T12:00:00.000Z',
    subject: 'Publish note',
    changes: [{ path: 'notes/a.md', bytes: Buffer.from('# A\n') }],
    ...over,
  };
}

/**
 * For tests of long-lived git processes: each test's sandbox and the runners
 * it made, closed and removed after it. Pass vitest's `afterEach` (this file
 * is compiled with the sources and does not import the test runner).
 */
export interface LongLivedScope {
  /** A fresh sandbox for this test (an earlier one of the same test is removed). */
  sandbox(): GitSandbox;
  /** A runner whose long-lived processes are closed after the test. */
  runner(opts?: GitRunnerOptions): GitRunner;
  /** Close `r`'s long-lived processes after the test as well. */
  track(r: GitRunner): GitRunner;
}

export function longLivedScope(afterEach: (fn: () => void) => void): LongLivedScope {
  let sb: GitSandbox | undefined;
  const runners: GitRunner[] = [];
  afterEach(() => {
    for (const r of runners.splice(0)) closeLongLived(r);
    sb?.cleanup();
    sb = undefined;
  });
  const track = (r: GitRunner) => {
    runners.push(r);
    return r;
  };
  return {
    sandbox() {
      sb?.cleanup();
      sb = makeSandbox();
      return sb;
    },
    runner: (opts = {}) => track(new GitRunner(opts)),
    track,
  };
}

/** The committed outcome of a chain, or a thrown error saying what came instead. */
export function committedChain(o: ChainOutcome): Extract<ChainOutcome, { state: 'committed' }> {
  if (o.state !== 'committed') throw new Error(`expected committed, got ${JSON.stringify(o)}`);
  return o;
}
