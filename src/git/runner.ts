/**
 * The only way Knowledge runs `git`. Every call gets an environment built from
 * scratch and `-c` overrides that switch off everything in the user's or the
 * repository's configuration that could run a program, sign, filter, prompt or
 * reach the network [GIT-3][GIT-12]. Outcomes are values: a missing executable
 * or a timeout is reported, never thrown.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { PendingCode } from './types.js';

export interface GitRunnerOptions {
  /** Executable; default 'git' resolved on `pathEnv`. */
  gitPath?: string;
  /** PATH to use; default process.env.PATH. */
  pathEnv?: string;
  /** Default per-call timeout; default 30000. */
  timeoutMs?: number;
}

export interface GitResult {
  code: number;
  stdout: Buffer;
  stderr: string;
  timedOut: boolean;
  /** The executable could not be started at all (ENOENT/EACCES): git is unavailable, not the repository broken. */
  notRunnable?: boolean;
}

export type GitDetect = { ok: true; version: string } | { ok: false; reason: string };

export interface GitRunOptions {
  cwd: string;
  input?: Buffer | string;
  timeoutMs?: number;
  /** Extra variables on top of the clean environment (e.g. GIT_LITERAL_PATHSPECS). */
  env?: Record<string, string>;
  /** Leave stdin open when no input is given (a git that waits; tests use it to prove the timeout). */
  holdStdin?: boolean;
  /** More `-c key=value` overrides, after the fixed ones. */
  extraConfig?: string[];
  /**
   * Keys of GIT_OVERRIDES to leave to the repository for this call. The
   * index writer uses it for core.untrackedCache: forcing it off would strip
   * the user's untracked-cache extension from their index.
   */
  dropOverrides?: string[];
}

/** core.fsync needs 2.36 [FIELD-NOTES: durability]. */
const MIN_VERSION: readonly [number, number] = [2, 36];

/**
 * Command-line overrides win over repository config. The repository's own
 * `.git/config` may name hooks, fsmonitor programs, filters or a signing key:
 * none of those may run for Knowledge [GIT-12]. Unknown keys (index.skipHash on
 * 2.39) are ignored by git.
 */
export const GIT_OVERRIDES: readonly string[] = [
  'core.hooksPath=/dev/null/knowledge-no-hooks',
  'core.fsmonitor=false',
  'core.attributesFile=/dev/null',
  'core.autocrlf=false',
  // Paths are exact bytes to Knowledge, as in its records. With
  // core.ignorecase=true (what git init sets on macOS and Windows), fast-import
  // and update-index match names without regard to case, so a rename that only
  // changes case turned into an empty commit and an index that lost the file.
  'core.ignorecase=false',
  'commit.gpgSign=false',
  'tag.gpgSign=false',
  'log.showSignature=false',
  // Objects AND refs: the store records the commit id once we return, so the
  // branch update must survive a power loss too [GIT-4][GIT-6].
  'core.fsync=committed,reference',
  // And with fsync itself: `writeout-only` in the repository's config made git
  // flush with sync_file_range, which survives no power loss (found by audit).
  'core.fsyncMethod=fsync',
  // History lists the files of every commit it follows, the root commit's too:
  // with log.showRoot=false a record's first version vanished from its history.
  'log.showRoot=true',
  // An order file that does not exist fails every diff and log that lists
  // files; one that does reorders them. None: git's own order.
  'diff.orderFile=/dev/null',
  'gc.auto=0',
  'maintenance.auto=false',
  'core.untrackedCache=false',
  'credential.helper=',
  'protocol.allow=never',
  'core.sshCommand=false',
  'core.pager=cat',
  'index.skipHash=false',
  // Knowledge writes a copy of a split index (GIT_INDEX_FILE) and renames it over .git/index. Writing it, git
  // deletes expired shared index files: with splitIndex.sharedIndexExpire=now, the very one the live index still
  // names, so the user's git could not read .git/index until the rename — nor ever, had Knowledge died in between.
  // Git's own default instead: two weeks (git freshens the shared index it reads), so old ones still go.
  'splitIndex.sharedIndexExpire=2.weeks.ago',
  // Knowledge parses what git prints (trailers, paths): always UTF-8, never
  // re-encoded to what a repository's config asks for (UTF-16 output broke the
  // search for a retried checkpoint's own commit).
  'i18n.logOutputEncoding=UTF-8',
  'i18n.commitEncoding=UTF-8',
];

/**
 * Config for one call as environment variables (git 2.31+): keys are taken
 * whole, whatever they hold, where `-c key=value` splits at the first '='.
 */
export function configEnv(pairs: ReadonlyArray<readonly [string, string]>): Record<string, string> {
  if (pairs.length === 0) return {};
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(pairs.length) };
  pairs.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

/** HOME that cannot exist, so nothing is read from a home directory. */
const NO_HOME = '/dev/null/knowledge-home';

export class GitRunner {
  private readonly gitPath: string;
  private readonly pathEnv: string;
  /** Default per-call timeout (ms). */
  readonly timeoutMs: number;
  /** Only a positive detection is cached: Git installed later must be noticed [GIT-17]. */
  private detected: GitDetect | null = null;

  constructor(opts: GitRunnerOptions = {}) {
    this.gitPath = opts.gitPath ?? 'git';
    this.pathEnv = opts.pathEnv ?? process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin';
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  async detect(): Promise<GitDetect> {
    if (this.detected) return this.detected;
    const notFound: GitDetect = { ok: false, reason: this.gitPath.includes('/') ? `git executable not found: ${this.gitPath}` : 'git executable not found on PATH' };
    // Nothing by that name at all: say so without starting a process. While
    // Git stays away every publication asks again [GIT-17], and starting a
    // process that cannot run still costs a fork of this one (~9 ms of each
    // publication at 10k records, measured). Anything that does exist, even
    // unrunnable, is left to the real attempt below and its exact error.
    if (!this.candidates().some((file) => existsSync(file))) return notFound;
    const r = await this.run(['--version'], { cwd: '/', timeoutMs: Math.min(this.timeoutMs, 10_000) });
    if (r.notRunnable) return notFound;
    if (r.code === -1 && !r.timedOut) return { ok: false, reason: `cannot start git: ${firstLine(r.stderr)}` };
    if (r.timedOut) return { ok: false, reason: 'git --version timed out' };
    if (r.code !== 0) return { ok: false, reason: `git --version failed: ${firstLine(r.stderr)}` };
    const text = r.stdout.toString('utf8').trim();
    const m = /git version (\d+)\.(\d+)(?:\.(\d+))?/.exec(text);
    if (!m) return { ok: false, reason: `unrecognised git version output: ${text}` };
    const major = Number(m[1]);
    const minor = Number(m[2]);
    const version = `${m[1]}.${m[2]}${m[3] !== undefined ? `.${m[3]}` : ''}`;
    if (major < MIN_VERSION[0] || (major === MIN_VERSION[0] && minor < MIN_VERSION[1])) {
      return { ok: false, reason: `git ${version} is too old; Knowledge needs git 2.36 or newer (core.fsync)` };
    }
    this.detected = { ok: true, version };
    return this.detected;
  }

  /**
   * Where starting `gitPath` may find it, as the search for an executable
   * does: the path itself when it has a slash, else that name in each PATH
   * entry (an empty or relative entry counts from detection's working folder, `/`).
   */
  private candidates(): string[] {
    if (this.gitPath.includes('/')) return [resolve('/', this.gitPath)];
    return this.pathEnv.split(':').map((dir) => resolve('/', dir, this.gitPath));
  }

  /** Environment from scratch: nothing inherited except PATH [FIELD-NOTES: isolation]. */
  buildEnv(extra?: Record<string, string>): Record<string, string> {
    const env: Record<string, string> = {
      PATH: this.pathEnv,
      HOME: NO_HOME,
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_CONFIG_NOSYSTEM: '1',
      LC_ALL: 'C',
      LANG: 'C',
      GIT_TERMINAL_PROMPT: '0',
      // No transport at all [GIT-3, GIT-12]. Reading a missing object of a
      // partial clone makes git fetch it from the promisor remote, whose URL
      // the repository's config names: `ext::<command>` with
      // protocol.ext.allow=always ran that command when history was read. The
      // first variable allows only the protocols it lists (none exists),
      // overriding every protocol.*.allow of the config; with the second, git
      // does not even try the fetch ("lazy fetching disabled": 2.45.1 and the
      // 2024 security releases, such as the 2.39.5 measured here). Older ones
      // try, and stop at the transport.
      GIT_ALLOW_PROTOCOL: 'knowledge-none',
      GIT_NO_LAZY_FETCH: '1',
      // Knowledge never needs optional locks (status-style index refreshes).
      GIT_OPTIONAL_LOCKS: '0',
      // The objects as they are: a user's `git replace` of the branch tip must
      // not hand a checkpoint the replacement's tree (it would drop files from
      // the branch), nor a grafts file change what the history search sees.
      GIT_NO_REPLACE_OBJECTS: '1',
      GIT_GRAFT_FILE: '/dev/null/knowledge-no-grafts',
      GIT_AUTHOR_NAME: 'Knowledge',
      GIT_AUTHOR_EMAIL: 'knowledge@localhost',
      GIT_COMMITTER_NAME: 'Knowledge',
      GIT_COMMITTER_EMAIL: 'knowledge@localhost',
      // glibc's malloc otherwise gives memory back to the system after almost
      // every object (a brk call each way): measured on a 100k-blob
      // fast-import, 209,791 brk calls, 4.5 s (2.8 s system time); with 16 MiB
      // of top padding 1.7 s, same peak RSS. Other C libraries ignore it.
      MALLOC_TOP_PAD_: String(16 * 1024 * 1024),
    };
    return { ...env, ...(extra ?? {}) };
  }

  /** The full argument list of one git call: every override, then the command. */
  argv(args: string[], opts: Pick<GitRunOptions, 'extraConfig' | 'dropOverrides'> = {}): string[] {
    const argv: string[] = [];
    for (const o of GIT_OVERRIDES) {
      if (opts.dropOverrides?.includes(o.slice(0, o.indexOf('=')))) continue;
      argv.push('-c', o);
    }
    for (const o of opts.extraConfig ?? []) argv.push('-c', o);
    argv.push(...args);
    return argv;
  }

  /**
   * A git process that outlives one call (ref-session.ts), isolated exactly
   * like `run` (same environment and overrides, own process group). The
   * caller owns its lifetime and timeouts.
   */
  spawnLongLived(args: string[], opts: { cwd: string; env?: Record<string, string>; extraConfig?: string[] }): ReturnType<typeof spawn> {
    const c = this.command(args, opts);
    return spawn(c.file, c.argv, { cwd: opts.cwd, env: c.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  }

  /**
   * What starting one git call takes — executable, full argument list and
   * environment — for a process started elsewhere (a worker thread, see
   * blob-preload.ts), which must start it isolated the same way, in its own
   * process group.
   */
  command(args: string[], opts: { env?: Record<string, string>; extraConfig?: string[] } = {}): { file: string; argv: string[]; env: Record<string, string> } {
    return { file: this.gitPath, argv: this.argv(args, opts), env: this.buildEnv(opts.env) };
  }

  run(args: string[], opts: GitRunOptions): Promise<GitResult> {
    const argv = this.argv(args, opts);
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    return new Promise<GitResult>((resolve) => {
      let settled = false;
      let timedOut = false;
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      const finish = (r: GitResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(r);
      };
      let child: ReturnType<typeof spawn>;
      try {
        child = spawn(this.gitPath, argv, {
          cwd: opts.cwd,
          env: this.buildEnv(opts.env),
          stdio: ['pipe', 'pipe', 'pipe'],
          // Own process group so a timeout kills git and anything it started.
          detached: true,
        });
      } catch (e) {
        // Synchronous spawn failures (e.g. invalid arguments) are still values.
        resolve({ code: -1, stdout: Buffer.alloc(0), stderr: errText(e), timedOut: false });
        return;
      }
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup(child);
      }, timeoutMs);
      child.stdout?.on('data', (b: Buffer) => out.push(b));
      child.stderr?.on('data', (b: Buffer) => err.push(b));
      child.on('error', (e: NodeJS.ErrnoException) => {
        // ENOENT/EACCES for the executable, or for a missing cwd.
        // A spawn that failed still opened pipes: close them, or every
        // attempt while git is missing would leak two descriptors.
        child.stdin?.destroy();
        child.stdout?.destroy();
        child.stderr?.destroy();
        const missing = e.code === 'ENOENT' || e.code === 'EACCES';
        const what = missing ? `cannot run ${this.gitPath} in ${opts.cwd}: ${e.code}` : errText(e);
        // Git removed while we run: detect again next time [GIT-17].
        if (missing) this.detected = null;
        finish({ code: -1, stdout: Buffer.concat(out), stderr: what, timedOut, ...(missing ? { notRunnable: true } : {}) });
      });
      child.on('close', (code, signal) => {
        finish({
          code: code ?? (signal ? 128 + signalNumber(signal) : -1),
          stdout: Buffer.concat(out),
          stderr: Buffer.concat(err).toString('utf8'),
          timedOut,
        });
      });
      // git may exit before reading all input (e.g. an early fatal): ignore EPIPE.
      child.stdin?.on('error', () => undefined);
      if (opts.input !== undefined) child.stdin?.end(opts.input);
      else if (!opts.holdStdin) child.stdin?.end();
    });
  }
}

/** How long a git sent SIGTERM (a timeout) has to clean up and exit before it is sent SIGKILL. */
export const KILL_GRACE_MS = 2000;

/**
 * End a git that passed its timeout, with anything it started: SIGTERM to its
 * process group first, which git answers by removing the lock files it holds
 * (a ref's `.lock` during an update-ref transaction, say) and exiting; SIGKILL
 * after {@link KILL_GRACE_MS} if it has not exited by then. A plain SIGKILL
 * left those locks behind — `refs/heads/main.lock` with no git running — and
 * every later checkpoint waited on a lock nobody would remove.
 */
export function killGroup(child: ReturnType<typeof spawn>): void {
  if (child.pid === undefined) return;
  const send = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      try {
        child.kill(signal);
      } catch {
        /* already gone */
      }
    }
  };
  send('SIGTERM');
  const hard = setTimeout(() => {
    if (child.exitCode === null && child.signalCode === null) send('SIGKILL');
  }, KILL_GRACE_MS);
  child.once('exit', () => clearTimeout(hard));
}

function signalNumber(signal: NodeJS.Signals): number {
  return signal === 'SIGKILL' ? 9 : signal === 'SIGTERM' ? 15 : 1;
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export function firstLine(s: string): string {
  const line = s.split('\n').find((l) => l.trim() !== '') ?? '';
  return line.trim().slice(0, 300);
}

/**
 * Map `LC_ALL=C` stderr to a stable pending code [GIT-14][GIT-18]. Order
 * matters: a ref lock failure also says "cannot lock ref", so locks are
 * recognised before a moved branch.
 */
/** The pending code of a file-system error Knowledge itself met in `.git` (a lock file, info/exclude). */
export function pendingCodeOfErrno(err: unknown): 'permission' | 'disk-full' | 'git-error' {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return 'permission';
  if (code === 'ENOSPC' || code === 'EDQUOT') return 'disk-full';
  return 'git-error';
}

export function classifyGitFailure(stderr: string, timedOut: boolean): { code: PendingCode; reason: string } {
  const line = firstLine(stderr);
  const say = (code: PendingCode, sentence: string) => ({
    code,
    reason: line ? `${sentence}: ${line}` : sentence,
  });
  if (timedOut) return say('timeout', 'git did not finish in time');
  const s = stderr;
  // First: fast-import out of room also says "(disk corruption?)" about its own cut-short pack.
  if (/No space left on device|Out of diskspace|Disk quota exceeded/i.test(s)) {
    return say('disk-full', 'the disk holding the repository is full (nothing is damaged); free space, then resume');
  }
  if (/Unable to create '[^']*\.lock': File exists/.test(s) || s.includes('index.lock')) {
    return say('locked', 'the repository is locked by another git process (remove a stale lock yourself)');
  }
  if (s.includes('detected dubious ownership')) {
    return say('dubious-ownership', 'git refuses a repository owned by another user (safe.directory); make the vault and its .git belong to the user Knowledge runs as');
  }
  if (s.includes('but expected') || s.includes('reference already exists') || (s.includes('cannot lock ref') && s.includes('expected'))) {
    return say('branch-moved', 'the branch moved while Knowledge was committing; retry');
  }
  if (s.includes('Permission denied') || s.includes('insufficient permission') || s.includes('Operation not permitted')) {
    return say('permission', 'git could not read or write the repository');
  }
  if (s.includes('lazy fetching disabled') || /transport '[^']*' not allowed/.test(s)) {
    return say('git-error', 'the repository is a partial clone and lacks an object Knowledge needs; Knowledge never fetches (a `git fetch` of your own can fill it in)');
  }
  if (
    s.includes('not a git repository') ||
    s.includes('bad object') ||
    s.includes('corrupt') ||
    s.includes('missing object') ||
    s.includes('invalid object') ||
    s.includes('bad config') ||
    s.includes('unable to read')
  ) {
    return say('malformed', 'the repository is damaged or not readable as a git repository');
  }
  return say('git-error', 'git failed');
}
