import { chmodSync, existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';

/**
 * Every test gets its own directory and a cleaned environment: no inherited
 * GIT_* variables, HOME and KNOWLEDGE_HOME inside the test directory.
 */
export interface Sandbox {
  dir: string;
  home: string;
  env: NodeJS.ProcessEnv;
  cleanup(): void;
}

export function makeSandbox(prefix = 'kn-test-'): Sandbox {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  const home = join(dir, 'home');
  mkdirSync(home, { recursive: true });
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('GIT_') || k.startsWith('KNOWLEDGE_')) continue;
    env[k] = v;
  }
  env.HOME = home;
  env.KNOWLEDGE_HOME = join(home, '.knowledge');
  env.GIT_CONFIG_NOSYSTEM = '1';
  env.GIT_AUTHOR_NAME = 'Test User';
  env.GIT_AUTHOR_EMAIL = 'user@example.com';
  env.GIT_COMMITTER_NAME = 'Test User';
  env.GIT_COMMITTER_EMAIL = 'user@example.com';
  env.LC_ALL = 'C';
  return {
    dir,
    home,
    env,
    cleanup() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Run the user's git (not Knowledge's runner) in the sandbox, as a person would. */
export function userGit(sb: Sandbox, cwd: string, args: string[], input?: string): string {
  const r = spawnSync('git', args, { cwd, env: sb.env, input, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

export function userGitRaw(sb: Sandbox, cwd: string, args: string[]): SpawnSyncReturns<string> {
  return spawnSync('git', args, { cwd, env: sb.env, encoding: 'utf8' });
}

const repoRoot = new URL('..', import.meta.url).pathname;
export const cliPath = join(repoRoot, 'bin', 'knowledge.js');

/**
 * A CLI process that has not ended after this long is killed, so the test
 * fails with a reason instead of holding the whole run (spawnSync blocks the
 * test runner's timeouts). Seen once: Node 20 deadlocked at exit after a
 * usage error (main thread in NodePlatform::DrainTasks, a background TurboFan
 * job waiting for a garbage collection; nodejs/node#54918) — caused by a V8
 * flag set at run time, which the CLI no longer does (src/cli/main.ts).
 */
const CLI_TIMEOUT_MS = 180_000;

/** Run the built CLI as a real process. */
export function cli(sb: Sandbox, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; input?: string } = {}) {
  const r = spawnSync(process.execPath, [cliPath, ...args], {
    cwd: opts.cwd ?? sb.dir,
    env: { ...sb.env, ...opts.env },
    input: opts.input,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024, // a receipt listing 10k paths is over the 1 MiB default
    timeout: CLI_TIMEOUT_MS,
    killSignal: 'SIGKILL',
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr + (r.signal ? `[signal ${r.signal}] ${r.error ?? ""}` : "") };
}

/** A sandbox with an initialised store at `<sandbox>/st` (the common fixture of the CLI tests). */
export function storeSandbox(): { sb: Sandbox; vault: string } {
  const sb = makeSandbox();
  const r = cli(sb, ['init', 'st']);
  if (r.code !== 0) throw new Error(`knowledge init failed: ${r.stderr}`);
  return { sb, vault: join(sb.dir, 'st', 'vault') };
}

/** A store sandbox with one publication already committed, so what a test does next meets a repository with history. */
export function storeWithHistory(): { sb: Sandbox; vault: string } {
  const made = storeSandbox();
  writeFileSync(join(made.sb.dir, 'first.md'), '---\nkind: page\ntitle: First\n---\nfirst\n');
  const r = cli(made.sb, ['publish', '--store', 'st', 'first.md']);
  if (r.code !== 0) throw new Error(`knowledge publish failed: ${r.stderr}`);
  return made;
}

/**
 * A git for Knowledge (KNOWLEDGE_GIT) that runs the user's shell `action`
 * once, in `cwd` and with the user's environment, when Knowledge starts its
 * fast-import: after the repository was inspected, while a checkpoint's
 * commits are being built — a user's git command racing with a checkpoint.
 */
/**
 * A git for Knowledge to run (KNOWLEDGE_GIT): a shell script at
 * `<sandbox>/<name>` that runs `lines` first, then the real git.
 */
export function gitWrapper(sb: Sandbox, name: string, lines: string[]): string {
  const wrapper = join(sb.dir, name);
  writeFileSync(wrapper, ['#!/bin/sh', ...lines, 'exec git "$@"', ''].join('\n'));
  chmodSync(wrapper, 0o755);
  return wrapper;
}

export function racingGit(sb: Sandbox, cwd: string, action: string): { wrapper: string; ran: () => boolean } {
  const trigger = join(sb.dir, 'race-once');
  const script = join(sb.dir, 'race-action.sh');
  writeFileSync(script, `cd '${cwd}' || exit 1\n${action}\n`);
  const userEnv = Object.entries(sb.env).filter(([k]) => k === 'PATH' || k === 'HOME' || k.startsWith('GIT_') || k === 'LC_ALL')
    .map(([k, v]) => `${k}='${v}'`).join(' ');
  const wrapper = gitWrapper(sb, 'racing-git', [
    'for a in "$@"; do',
    `  if [ "$a" = fast-import ] && [ -f '${trigger}' ]; then rm -f '${trigger}'; env -i ${userEnv} sh '${script}' >/dev/null 2>&1; fi`,
    'done',
  ]);
  writeFileSync(trigger, '');
  return { wrapper, ran: () => !existsSync(trigger) };
}

/**
 * Whether a real full disk can be made: a small tmpfs mounted in a private
 * mount namespace (unshare -rm). Where the machine does not allow that, it
 * says so (for `what`, the test that is then skipped).
 */
export function canMountTmpfs(what: string): boolean {
  const r = spawnSync('unshare', ['-rm', 'sh', '-c', 'd=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs "$d" && umount "$d" && rmdir "$d"'], { encoding: 'utf8' });
  if (r.status !== 0) console.warn(`skipping ${what}: cannot mount a tmpfs in a private namespace here (${(r.stderr || String(r.error)).trim()})`);
  return r.status === 0;
}

/**
 * Run shell `lines` as root of a private mount namespace (unshare -rm) in the
 * sandbox (see canMountTmpfs), for tests that mount a small tmpfs to fill a
 * disk for real. The script must end `exit 0`; what it leaves in files of the
 * sandbox is read back with `read`.
 */
export function runUnshared(sb: Sandbox, lines: string[]): (file: string) => string {
  const r = spawnSync('unshare', ['-rm', 'sh', '-c', lines.join('\n')], { cwd: sb.dir, env: sb.env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`the namespace script failed (${r.status}): ${r.stderr}`);
  return (file) => readFileSync(join(sb.dir, file), 'utf8');
}

const isRoot = process.getuid?.() === 0;

/**
 * Permissions as a user without root's exemption see them: the CLI run as this
 * user, or — where the tests run as root, who may read and write any folder —
 * as `uid` (default nobody) through setpriv, after the sandbox was opened to
 * every user (chmod -R a+rwX; tighten what the test is about afterwards).
 * Null where that cannot be done (root without setpriv), with the reason
 * printed for `what`, the test that then returns early.
 */
/** Root without setpriv: tests that must run as a user without root's exemption cannot run; they are skipped, saying so. */
export const NO_UNPRIVILEGED = isRoot && !spawnSync('sh', ['-c', 'command -v setpriv'], { encoding: 'utf8' }).stdout.trim();
/** For such a test's title: why it is skipped, or as whom it runs. */
export const UNPRIVILEGED_NOTE = NO_UNPRIVILEGED ? '(SKIPPED: running as root, and setpriv is not available to drop privileges)' : '(as a user without root\'s exemption)';

export function unprivilegedCli(sb: Sandbox, what: string, uid = 65534): ((args: string[], opts?: { env?: NodeJS.ProcessEnv; input?: string; cleanEnv?: boolean }) => { code: number | null; stdout: string; stderr: string }) | null {
  let prefix: string[] = [];
  if (isRoot) {
    const setpriv = spawnSync('sh', ['-c', 'command -v setpriv'], { encoding: 'utf8' }).stdout.trim();
    if (!setpriv) {
      console.log(`skipped ${what}: running as root, and setpriv is not available to drop privileges`);
      return null;
    }
    spawnSync('chmod', ['-R', 'a+rwX', sb.dir]);
    prefix = [setpriv, `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];
  }
  return (args, opts = {}) => {
    const cmd = [...prefix, process.execPath, cliPath, ...args];
    const r = spawnSync(cmd[0]!, cmd.slice(1), {
      cwd: sb.dir,
      env: opts.cleanEnv ? { ...opts.env } : { ...sb.env, ...opts.env },
      input: opts.input,
      encoding: 'utf8',
      timeout: CLI_TIMEOUT_MS,
      killSignal: 'SIGKILL',
    });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr + (r.signal ? `[signal ${r.signal}] ${r.error ?? ''}` : '') };
  };
}

/**
 * Undo migration 023's columns (a store as a Knowledge before it left one), for tests that set `user_version` back
 * to an earlier migration: the migrations after it run again, and 023 adds these columns.
 */
export function dropScanCounts(db: { exec(sql: string): unknown }): void {
  for (const c of ['baseline', 'added_count', 'modified_count', 'deleted_count', 'renamed_count', 'diagnostics_count']) db.exec(`ALTER TABLE scans DROP COLUMN ${c}`);
}
