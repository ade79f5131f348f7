/**
 * Git processes that serve many calls: the branch move's `update-ref
 * --stdin` (ref-session.ts) and the checkpoint's `fast-import`
 * (import-session.ts). A started git costs ~3-5 ms here before it does any
 * work, and fast-import's exit (closing its pack, writing refs it will
 * never be asked to write) another ~4 ms; a running one answers in well
 * under a millisecond.
 *
 * - Isolated like every call (GitRunner.spawnLongLived): same clean
 *   environment and overrides, own process group.
 * - One piece of work at a time (`begin` … `finish`): the process is
 *   referenced only while that work runs, so it never keeps Node alive, and
 *   the work has the runner's timeout (the process group is killed).
 * - Ended after a few idle seconds, when its runner's service closes, or at
 *   the latest when Node exits and the process's input closes; a process that
 *   failed or timed out is never reused.
 */
import type { ChildProcess } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { killGroup, type GitResult, type GitRunner } from './runner.js';

/** An agent that publishes every few seconds keeps its processes; one that stopped gives them back. */
const IDLE_MS = 30_000;

export class LongLivedGit {
  readonly child: ChildProcess;
  private buffered = '';
  private readonly waiters: Array<(line: string | null) => void> = [];
  private stdoutEnded = false;
  private err = '';
  private timer: NodeJS.Timeout | null = null;
  private idle: NodeJS.Timeout | null = null;
  private readonly exit: Promise<number>;
  exited = false;
  /** The executable could not be started (removed since it was detected). */
  private notRunnable = false;
  busy = false;
  /** Pieces of work begun, this one included. */
  uses = 0;
  timedOut = false;

  /** Written just before the input is ended by `close`. */
  private readonly farewell: string;

  /** The repository it works in. */
  readonly cwd: string;

  constructor(runner: GitRunner, args: string[], opts: { cwd: string; env?: Record<string, string>; extraConfig?: string[]; farewell?: string }) {
    this.child = runner.spawnLongLived(args, opts);
    this.cwd = opts.cwd;
    this.farewell = opts.farewell ?? '';
    this.child.stdout?.setEncoding('utf8');
    this.child.stderr?.setEncoding('utf8');
    this.child.stdout?.on('data', (d: string) => {
      this.buffered += d;
      this.pump();
    });
    this.child.stdout?.on('end', () => {
      this.stdoutEnded = true;
      this.pump();
    });
    this.child.stderr?.on('data', (d: string) => {
      this.err += d;
    });
    this.child.stdin?.on('error', () => undefined); // git gone: its exit says why
    this.exit = new Promise<number>((resolve) => {
      this.child.on('error', (e: NodeJS.ErrnoException) => {
        this.notRunnable = e.code === 'ENOENT' || e.code === 'EACCES';
        this.err ||= `cannot run git: ${e.code ?? e.message}`;
        this.exited = true;
        this.stdoutEnded = true;
        this.pump();
        resolve(-1);
      });
      this.child.on('close', (code) => {
        this.exited = true;
        this.stdoutEnded = true;
        this.pump();
        resolve(code ?? 128);
      });
    });
    this.unref();
  }

  private pump(): void {
    while (this.waiters.length > 0) {
      const nl = this.buffered.indexOf('\n');
      if (nl >= 0) {
        const line = this.buffered.slice(0, nl);
        this.buffered = this.buffered.slice(nl + 1);
        this.waiters.shift()!(line);
      } else if (this.stdoutEnded) this.waiters.shift()!(null);
      else return;
    }
  }

  private unref(): void {
    this.child.unref();
    for (const s of [this.child.stdin, this.child.stdout, this.child.stderr]) (s as unknown as { unref?: () => void } | null)?.unref?.();
  }

  private ref(): void {
    this.child.ref();
    for (const s of [this.child.stdin, this.child.stdout, this.child.stderr]) (s as unknown as { ref?: () => void } | null)?.ref?.();
  }

  /** Start one piece of work: keep Node alive for it and kill git if it takes longer than `timeoutMs`. */
  begin(timeoutMs: number): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    this.busy = true;
    this.uses++;
    this.timedOut = false;
    this.ref();
    this.timer = setTimeout(() => {
      this.timedOut = true;
      killGroup(this.child as Parameters<typeof killGroup>[0]);
    }, timeoutMs);
  }

  /** The piece of work is over; a healthy process waits `IDLE_MS` for the next one, then ends. */
  finish(healthy: boolean, onIdle: () => void): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.busy = false;
    if (!healthy || this.exited) {
      this.close();
      return;
    }
    this.unref();
    this.idle = setTimeout(onIdle, IDLE_MS);
    this.idle.unref();
  }

  write(data: Buffer | string): void {
    if (!this.exited) this.child.stdin?.write(data);
  }

  /** Write, and wait while git's input pipe is full (a big stream never sits in memory whole). */
  async writeAsync(data: Buffer | string): Promise<void> {
    const s = this.child.stdin as (NodeJS.WritableStream & { destroyed?: boolean }) | null;
    if (!s || this.exited || s.destroyed) return;
    if (s.write(data)) return;
    await new Promise<void>((resolve) => {
      const settle = () => {
        s.off('drain', settle);
        s.off('close', settle);
        s.off('error', settle);
        resolve();
      };
      s.on('drain', settle);
      s.on('close', settle);
      s.on('error', settle);
      void this.exit.then(settle);
    });
  }

  /** The next line git wrote, without its newline; null once git's output has ended. */
  readLine(): Promise<string | null> {
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.pump();
    });
  }

  /** How the process ended, as a one-shot call would report it (waits for the exit). */
  async result(stdout = ''): Promise<GitResult> {
    const code = await this.exit;
    return {
      code: code === 0 ? 128 : code,
      stdout: Buffer.from(stdout),
      stderr: this.err || 'git ended without answering',
      timedOut: this.timedOut,
      ...(this.notRunnable ? { notRunnable: true } : {}),
    };
  }

  /** Resolves once the process has exited. */
  async ended(): Promise<void> {
    await this.exit;
  }

  /** End the input: git finishes what it has and exits. */
  close(): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    // Someone may wait for the exit (retire); it follows the end of input at once.
    if (!this.exited) this.ref();
    if (this.farewell && !this.exited && this.child.stdin?.writable) this.child.stdin.end(this.farewell);
    else this.child.stdin?.end();
  }
}

/**
 * Every live process of this Node process. When Node runs out of work
 * (`beforeExit`: a script or command that did not close its service), the
 * idle ones are closed properly — a fast-import then ends without writing
 * its ref again — before Node exits.
 */
const live = new Set<LongLivedGit>();
let exitHook = false;
function track(p: LongLivedGit): void {
  live.add(p);
  void p.ended().then(() => live.delete(p));
  if (exitHook) return;
  exitHook = true;
  process.on('beforeExit', () => {
    for (const q of live) if (!q.busy) q.close();
  });
}

/** Live processes per runner, by a key naming the repository and the command. */
const pools = new WeakMap<GitRunner, Map<string, LongLivedGit>>();

/**
 * The idle process under `key`, or a new one from `start` (null when git
 * cannot be started: the caller falls back to a one-shot call, whose result
 * says why). Returns it marked busy until `release`.
 */
export function acquire(runner: GitRunner, key: string, start: () => LongLivedGit): LongLivedGit | null {
  let map = pools.get(runner);
  if (!map) pools.set(runner, (map = new Map()));
  const cur = map.get(key);
  if (cur && !cur.exited && !cur.busy) {
    cur.begin(runner.timeoutMs);
    return cur;
  }
  if (cur?.exited) map.delete(key);
  let fresh: LongLivedGit;
  try {
    fresh = start();
  } catch {
    return null;
  }
  track(fresh);
  if (!cur || cur.exited) map.set(key, fresh);
  fresh.begin(runner.timeoutMs);
  return fresh;
}

/** Hand the process back after one piece of work; an unhealthy (or unpooled) one is ended and forgotten. */
export function release(runner: GitRunner, key: string, p: LongLivedGit, healthy: boolean): void {
  const map = pools.get(runner);
  const forget = () => {
    if (map?.get(key) === p) map.delete(key);
    p.close();
  };
  const keep = healthy && !p.exited && map?.get(key) === p;
  if (!keep) forget();
  p.finish(keep, forget);
}

/** The pieces of work the live process under `key` has begun (0 when there is none). */
export function usesOf(runner: GitRunner, key: string): number {
  const p = pools.get(runner)?.get(key);
  return p && !p.exited ? p.uses : 0;
}

/** End the idle process under `key`, if any, and wait until it has exited. */
export async function retire(runner: GitRunner, key: string): Promise<void> {
  const map = pools.get(runner);
  const p = map?.get(key);
  if (!p || p.busy) return;
  map!.delete(key);
  p.close();
  await p.ended();
}

/**
 * End every long-lived git of this runner (its service is closing), and any
 * other idle one working in `cwd` (the service's vault), whichever runner
 * started it: a service whose runner was swapped must not leave one behind.
 */
export function closeLongLived(runner: GitRunner, cwd?: string): void {
  const map = pools.get(runner);
  for (const [key, p] of [...(map ?? [])]) {
    map!.delete(key);
    p.close();
  }
  if (cwd === undefined) return;
  let real = cwd;
  try {
    real = realpathSync(cwd);
  } catch {
    /* gone: compare the path as given */
  }
  for (const p of live) if (!p.busy && (p.cwd === cwd || p.cwd === real)) p.close();
}
