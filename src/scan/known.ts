/**
 * What a scan knows of the recorded files of a partition [SCAN-4]: size,
 * mtime and inode from `vault_files`, kept in memory between scans of one
 * open store, so a Gateway that scans on every request does not reload 100k
 * rows each time.
 *
 * The copy is used only while it provably equals the table:
 * - writes by other connections (another process, or another connection of
 *   this one) change `PRAGMA data_version`: the copy is dropped;
 * - writes by this connection go through src/store/vault-files.ts, which
 *   names the paths written (noteVaultFileWrite); those rows are reloaded
 *   before the next scan (a rolled-back write reloads the old row);
 * - the scan's own apply updates the copy after its transaction commits, or
 *   drops it when the transaction fails or the change is large.
 *
 * The copy also only ever causes a file to be read, never a change to be
 * reported: observe.ts takes the recorded hash of every file it reads, and
 * checks every file it would call deleted, against the table itself.
 *
 * Times are compared as Node's number `Stats.mtimeMs` (no BigInt, no Date
 * objects per file): the stored nanoseconds are turned into that same double
 * with Node's own formula, so an untouched file compares equal. The double
 * resolves about 0.25 µs at today's dates, far finer than the racy window
 * (plan.ts isRacy) that already covers edits close to a recorded mtime.
 */
import type { DB } from '../store/db.js';
import { partitionDir, partitionOfPath, type PartitionId } from '../store/layout.js';
import { currentVaultFileWrites, watchVaultFileWrites, type VaultFileWrites } from '../store/vault-files.js';
import { dirInScope, inScanScope, isScannedFileName, pathProblem } from './scope.js';
import type { ReadFile } from './types.js';

export interface KnownEntry {
  /** -1 when racy. */
  size: number;
  /** As Node's number `Stats.mtimeMs` reports it (see msFromNs). */
  mtimeMs: number;
  /** As Node's number `Stats.ino` reports it. */
  ino: number;
  /** Too close to its scan's clock to trust (plan.ts isRacy): never matches. */
  racy: boolean;
  /** The stamp of the last scan whose walk saw this path. */
  seen: number;
}

export type KnownFiles = Map<string, KnownEntry>;

const NS_PER_S = 1_000_000_000n;

/**
 * Node's `Stats.mtimeMs` for a time stored as nanoseconds since the epoch:
 * `sec * 1e3 + nsec / 1e6` (Node 20, lib/internal/fs/utils.js msFromTimeSpec),
 * with the same (sec, nsec) split libuv reports (nsec in [0, 1e9)).
 */
export function msFromNs(ns: string): number {
  let sec: number;
  let nsec: number;
  if (ns.length > 9 && /^\d+$/.test(ns)) {
    sec = Number(ns.slice(0, -9));
    nsec = Number(ns.slice(-9));
  } else {
    const b = BigInt(ns);
    let s = b / NS_PER_S;
    let r = b % NS_PER_S;
    if (r < 0n) {
      r += NS_PER_S;
      s -= 1n;
    }
    sec = Number(s);
    nsec = Number(r);
  }
  return sec * 1000 + nsec / 1_000_000;
}

export function knownEntry(size: number, mtimeNs: string, ino: string, racy: boolean): KnownEntry {
  return { size: racy ? -1 : size, mtimeMs: msFromNs(mtimeNs), ino: Number(ino), racy, seen: 0 };
}

interface Cache {
  dataVersion: number;
  writes: VaultFileWrites;
  partitions: Map<PartitionId, KnownFiles>;
  stamp: number;
}

const caches = new WeakMap<DB, Cache>();

/** Above this many files changed by one scan, its copy is dropped rather than updated (a later scan reloads). */
const MAX_APPLIED = 10_000;

export interface KnownSnapshot {
  byPartition: Map<PartitionId, KnownFiles>;
  /** Marks entries seen by this scan's walk. */
  stamp: number;
  /** True when (part of) the copy comes from an earlier scan. */
  reused: boolean;
}

// pathProblem's rules (control characters, backslash, > 4096 UTF-8 bytes) as one test for the common case.
// eslint-disable-next-line no-control-regex -- control characters are exactly what it looks for
const ODD_PATH_RE = /[\u0000-\u001f\u007f\\]/;

/** Adds a file when the walk of `pdir` would see its path (dirOk caches the folder half of the rule). */
function admit(map: KnownFiles, pdir: string, dirOk: Map<string, boolean>, path: string, size: number, mtimeNs: string, ino: string): void {
  const slash = path.lastIndexOf('/');
  if (slash <= 0) return;
  const dir = path.slice(0, slash);
  let ok = dirOk.get(dir);
  if (ok === undefined) dirOk.set(dir, (ok = dirInScope(dir, pdir)));
  if (!ok || !isScannedFileName(path.slice(slash + 1))) return;
  if ((path.length > 1365 || ODD_PATH_RE.test(path)) && pathProblem(path) !== null) return;
  map.set(path, { size, mtimeMs: msFromNs(mtimeNs), ino: Number(ino), racy: size < 0, seen: 0 });
}

/**
 * One partition's rows as one text, `path TAB size TAB mtime_ns TAB ino` per
 * line (size -1 when racy): for 100k rows this takes about half the time of
 * better-sqlite3 building 100k row arrays (measured 90-166 ms vs 154-367 ms).
 * Paths holding a tab or newline are left out here, as admit() leaves them
 * out (control characters).
 */
const PARTITION_TEXT = `SELECT group_concat(path || char(9) || CASE WHEN racy THEN -1 ELSE size END || char(9) || mtime_ns || char(9) || ino, char(10))
  FROM vault_files WHERE partition = ? AND instr(path || mtime_ns || ino, char(9)) = 0 AND instr(path || mtime_ns || ino, char(10)) = 0`;

function loadPartition(db: DB, p: PartitionId): KnownFiles {
  const map: KnownFiles = new Map();
  const text = (db.prepare(PARTITION_TEXT).pluck().get(p) as string | null) ?? '';
  const pdir = partitionDir(p);
  const dirOk = new Map<string, boolean>();
  for (let pos = 0; pos < text.length; ) {
    let nl = text.indexOf('\n', pos);
    if (nl < 0) nl = text.length;
    const t1 = text.indexOf('\t', pos);
    const t2 = text.indexOf('\t', t1 + 1);
    const t3 = text.indexOf('\t', t2 + 1);
    admit(map, pdir, dirOk, text.slice(pos, t1), Number(text.slice(t1 + 1, t2)), text.slice(t2 + 1, t3), text.slice(t3 + 1, nl));
    pos = nl + 1;
  }
  return map;
}

/**
 * The recorded files of `partitions` (path → entry), filtered by the walk's
 * own scope rule. Reused from this connection's last scan when nothing else
 * wrote `vault_files` since.
 */
export function knownFiles(db: DB, partitions: readonly PartitionId[]): KnownSnapshot {
  const dataVersion = db.pragma('data_version', { simple: true }) as number;
  let cache = caches.get(db);
  let reused = false;
  if (cache && cache.dataVersion === dataVersion && currentVaultFileWrites(db) === cache.writes && !cache.writes.overflow) {
    reused = cache.partitions.size > 0;
    if (cache.writes.paths.size > 0) {
      const one = db.prepare('SELECT partition, CASE WHEN racy THEN -1 ELSE size END, mtime_ns, ino FROM vault_files WHERE path = ?').raw();
      for (const path of cache.writes.paths) {
        for (const map of cache.partitions.values()) map.delete(path);
        const row = one.get(path) as [PartitionId, number, string, string] | undefined;
        if (!row) continue;
        const map = cache.partitions.get(row[0]);
        if (map) admit(map, partitionDir(row[0]), new Map(), path, row[1], row[2], row[3]);
      }
      cache.writes.paths.clear();
    }
  } else {
    cache = { dataVersion, writes: watchVaultFileWrites(db), partitions: new Map(), stamp: 0 };
    caches.set(db, cache);
  }
  const byPartition = new Map<PartitionId, KnownFiles>();
  for (const p of partitions) {
    let map = cache.partitions.get(p);
    if (!map) cache.partitions.set(p, (map = loadPartition(db, p)));
    byPartition.set(p, map);
  }
  return { byPartition, stamp: ++cache.stamp, reused };
}

/**
 * After the scan's apply committed: the files it read are recorded with the
 * fingerprints it read, and `removed` are gone. Large changes drop the copy.
 */
export function knownFilesApplied(db: DB, read: readonly ReadFile[], removed: readonly string[]): void {
  const cache = caches.get(db);
  if (!cache) return;
  if (read.length + removed.length > MAX_APPLIED) {
    forgetKnownFiles(db);
    return;
  }
  for (const path of removed) for (const map of cache.partitions.values()) map.delete(path);
  for (const f of read) {
    const p = partitionOfPath(f.path);
    const map = p === null ? undefined : cache.partitions.get(p);
    if (!map) continue;
    if (inScanScope(f.path, partitionDir(p!)) && pathProblem(f.path) === null) map.set(f.path, knownEntry(f.size, f.mtimeNs, f.ino, f.racy));
  }
}

/** Drop this connection's copy (e.g. a scan's apply failed): the next scan reloads it. */
export function forgetKnownFiles(db: DB): void {
  caches.delete(db);
}
