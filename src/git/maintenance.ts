/**
 * Keep the vault's repository healthy without `gc --auto` (plumbing never
 * runs it, and Knowledge switches it off: gc.auto=0). Every checkpoint writes
 * one small pack; the user's own commits write loose objects. Once either
 * count passes a threshold, roll them up with one geometric repack — small
 * packs and loose objects merge, a large pack is left as it is, so the cost
 * follows what is new, not the vault size — isolated like every other call
 * [GIT-12]. Never while a lock, a gc or any operation of the user's is
 * visible [GIT-19]; a failure changes nothing and is retried next time (the
 * caller says so). In a partial clone the roll-up is one whole repack; in a
 * repository whose config keeps every pack (extensions.preciousObjects), none.
 *
 * Split: `planMaintenance` (pure: counts in, decision out) and
 * `maintainRepository` (file counts, the repack).
 */
import { lstat, readdir, readFile, realpath } from 'node:fs/promises';
import { hostname } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { processAlive } from '../process.js';
import { classifyGitFailure, type GitRunner } from './runner.js';
import { importerPacks, retireImporter } from './import-session.js';
import { vaultEnv } from './inspect.js';
import { indexFiles } from './index-lock.js';
import type { PendingCode } from './types.js';

export interface MaintenancePolicy {
  /** Roll up once there are more packs than this (git's gc.autoPackLimit is 50). */
  maxPacks: number;
  /** …or more loose objects than this (estimated like git: objects/17 × 256; git's gc.auto is 6700). */
  maxLooseObjects: number;
  /** Generous: a repack that is killed leaves only temporary files git ignores. */
  timeoutMs: number;
}

export const DEFAULT_MAINTENANCE: MaintenancePolicy = { maxPacks: 24, maxLooseObjects: 2048, timeoutMs: 10 * 60_000 };

export interface ObjectCounts {
  packs: number;
  /** Estimate, the way `gc --auto` estimates it. */
  looseObjects: number;
}

export type MaintenanceOutcome =
  // 'precious': the repository's extensions.preciousObjects forbids deleting any pack, so nothing can be rolled up.
  | { ran: false; why: 'healthy' | 'busy' | 'no-repository' | 'precious'; counts?: ObjectCounts; busyWith?: string }
  | { ran: true; before: ObjectCounts; after: ObjectCounts; ms: number }
  | { ran: false; why: 'failed'; code: PendingCode; reason: string };

/** Pure: does the repository need a roll-up? */
export function planMaintenance(counts: ObjectCounts, policy: MaintenancePolicy): boolean {
  return counts.packs > policy.maxPacks || counts.looseObjects > policy.maxLooseObjects;
}

/** Files whose presence means a user's git command is running or was interrupted (`gc.pid`: see gcRunning). */
const BUSY_SIGNS = [
  'index.lock',
  'HEAD.lock',
  'packed-refs.lock',
  'MERGE_HEAD',
  'CHERRY_PICK_HEAD',
  'REVERT_HEAD',
  'BISECT_LOG',
  'rebase-merge',
  'rebase-apply',
  'sequencer',
];

export async function objectCounts(gitDir: string): Promise<ObjectCounts> {
  // Like gc --auto, kept packs do not count (a repack leaves them alone):
  // those of a running fast-import (import-session.ts) or the user's own.
  const names = await readdir(join(gitDir, 'objects', 'pack')).catch(() => [] as string[]);
  const kept = new Set(names.filter((n) => n.endsWith('.keep')).map((n) => n.slice(0, -'.keep'.length)));
  const packs = names.filter((n) => n.endsWith('.pack') && !kept.has(n.slice(0, -'.pack'.length))).length;
  const sample = (await readdir(join(gitDir, 'objects', '17')).catch(() => [] as string[])).filter((n) => /^[0-9a-f]{38}([0-9a-f]{24})?$/.test(n)).length;
  return { packs, looseObjects: sample * 256 };
}

export async function maintainRepository(
  runner: GitRunner,
  vaultDir: string,
  policy: MaintenancePolicy = DEFAULT_MAINTENANCE,
): Promise<MaintenanceOutcome> {
  let vault: string;
  try {
    vault = await realpath(vaultDir);
    if (!(await lstat(join(vault, '.git'))).isDirectory()) return { ran: false, why: 'no-repository' };
  } catch {
    return { ran: false, why: 'no-repository' };
  }
  const gitDir = join(vault, '.git');
  const onDisk = await objectCounts(gitDir);
  // The packs Knowledge's own running fast-import closed count too: it is
  // ended before the repack, and its packs lose their `.keep`.
  const before = { ...onDisk, packs: onDisk.packs + importerPacks(runner, vault) };
  if (!planMaintenance(before, policy)) return { ran: false, why: 'healthy', counts: before };
  // A linked `.git/index` is locked at its target (index-lock.ts): that lock is a user's command too.
  const { lock: indexLock } = await indexFiles(gitDir);
  const busy = (await firstPresent(gitDir, [...BUSY_SIGNS, indexLock, ...(await refLocks(gitDir))])) ?? ((await gcRunning(gitDir)) ? 'gc.pid' : undefined);
  if (busy) return { ran: false, why: 'busy', counts: before, busyWith: busy };
  const t0 = performance.now();
  // Packs a running fast-import closed carry `.keep` until it exits; a
  // repack leaves kept packs alone.
  await retireImporter(runner, vault);
  const repack = (how: string[]) => runner.run(['repack', '-d', '-q', '-l', ...how, '--no-write-bitmap-index'], {
    cwd: vault,
    env: vaultEnv(vault),
    timeoutMs: policy.timeoutMs,
  });
  let r = await repack(['--geometric=2']);
  // A partial clone (a promisor remote): git 2.39 cannot repack geometrically there. Everything into one pack
  // instead (the promisor packs stay as they are), keeping unreachable objects in it, as the geometric roll-up does
  // (blobs a checkpoint packed ahead of its commit): -A would write each of them out as a loose file.
  if (r.code !== 0 && /cannot use internal rev list with --stdin-packs/.test(r.stderr)) r = await repack(['-a', '--keep-unreachable']);
  // extensions.preciousObjects: the user's repository keeps every pack; not Knowledge's to roll up.
  if (r.code !== 0 && /precious-objects repo/.test(r.stderr)) return { ran: false, why: 'precious', counts: before };
  if (r.code !== 0) {
    const c = classifyGitFailure(r.stderr, r.timedOut);
    return { ran: false, why: 'failed', code: c.code, reason: c.reason };
  }
  return { ran: true, before, after: await objectCounts(gitDir), ms: performance.now() - t0 };
}

/**
 * Whether `gc.pid` says a `git gc` is running, by git's own rule: the file is
 * younger than 12 hours and names another host, or a live process of this
 * one. A gc killed without cleaning up leaves it behind, and git runs over it
 * after that; so does Knowledge.
 */
async function gcRunning(gitDir: string): Promise<boolean> {
  let text: string;
  try {
    const file = join(gitDir, 'gc.pid');
    if (Date.now() - (await lstat(file)).mtimeMs > 12 * 3600_000) return false;
    text = await readFile(file, 'utf8');
  } catch {
    return false;
  }
  const m = /^(\d+) (\S+)/.exec(text);
  if (!m) return false;
  return m[2] !== hostname() || processAlive(Number(m[1]), null);
}

/** Lock files under refs/heads (a user's commit in progress). Shallow: branch names rarely nest. */
async function refLocks(gitDir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string, depth: number): Promise<void> => {
    const entries = await readdir(join(gitDir, rel), { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      if (e.isDirectory() && depth < 3) await walk(`${rel}/${e.name}`, depth + 1);
      else if (e.name.endsWith('.lock')) out.push(`${rel}/${e.name}`);
    }
  };
  await walk('refs/heads', 0);
  return out;
}

/** The first of `names` (inside `gitDir`, or absolute) that exists. */
async function firstPresent(gitDir: string, names: string[]): Promise<string | undefined> {
  for (const n of names) {
    try {
      await lstat(isAbsolute(n) ? n : join(gitDir, n));
      return n;
    } catch {
      /* absent */
    }
  }
  return undefined;
}
