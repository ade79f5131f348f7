/**
 * What a scan knows of the recorded files [SCAN-4], folder by folder.
 *
 * `vault_files` holds size, mtime, ctime and inode of every recorded file;
 * `scan_folders` (migration 007) names the folders that hold them, and keeps
 * for a folder found wholly unchanged a digest of what the walk saw there.
 * A scan loads the folder rows of its partitions (one per folder) and then:
 * - a walked folder whose digest equals its kept one is unchanged, file for
 *   file, without looking up any file's row;
 * - any other folder's rows are loaded and each file compared with its row
 *   (plan.ts isUnchanged); a folder found wholly unchanged that way gets its
 *   digest kept, if no write touched its rows since they were loaded
 *   (`version`, bumped by triggers on every write to `vault_files`);
 * - recorded folders the walk never listed are loaded too: their files are
 *   candidates for deletion.
 *
 * The digest stands exactly for the per-file check: a digest is kept only
 * when every scanned file of the folder matched its row (same size, mtime,
 * ctime and inode, not racy) and every row admitted here was seen, so an equal digest
 * later means the same names with the same stats, against rows that no write
 * has touched since (a write clears the digest).
 *
 * Times are compared as Node's numbers `Stats.mtimeMs` and `ctimeMs` (no BigInt, no Date
 * objects per file): the stored nanoseconds are turned into that same double
 * with Node's own formula, so an untouched file compares equal. The double
 * resolves about 0.25 µs at today's dates, far finer than the racy window
 * (plan.ts isRacy) that already covers edits close to a recorded mtime.
 */
import { createHash } from 'node:crypto';
import type { DB } from '../store/db.js';
import type { PartitionId } from '../store/layout.js';
import { dirInScope, isScannedFileName, pathProblem } from './scope.js';
import type { WalkFile } from './walk.js';

export interface KnownEntry {
  /** -1 when racy. */
  size: number;
  /** As Node's number `Stats.mtimeMs` reports it (see msFromNs). */
  mtimeMs: number;
  /** As Node's number `Stats.ctimeMs` reports it; NaN when none was recorded (matches nothing). */
  ctimeMs: number;
  /** As Node's number `Stats.ino` reports it. */
  ino: number;
  /** Too close to its scan's clock to trust (plan.ts isRacy): never matches. */
  racy: boolean;
  /** Whether this scan's walk saw the file. */
  seen: boolean;
}

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

export function knownEntry(size: number, mtimeNs: string, ctimeNs: string | null, ino: string, racy: boolean): KnownEntry {
  return { size: racy ? -1 : size, mtimeMs: msFromNs(mtimeNs), ctimeMs: ctimeNs === null ? NaN : msFromNs(ctimeNs), ino: Number(ino), racy, seen: false };
}

/** How many files each partition has recorded. */
export function recordedCounts(db: DB, partitions: readonly PartitionId[]): number[] {
  const count = db.prepare('SELECT count(*) FROM vault_files WHERE partition = ?').pluck();
  return partitions.map((p) => count.get(p) as number);
}

/** A recorded folder: its version and the digest kept for it (null: none). */
export interface RecordedFolder {
  version: number;
  digest: string | null;
}

/** The recorded folders of a partition (dir → row). */
export function recordedFolders(db: DB, p: PartitionId): Map<string, RecordedFolder> {
  const rows = db.prepare('SELECT dir, version, digest FROM scan_folders WHERE partition = ?').raw().all(p) as Array<[string, number, string | null]>;
  return new Map(rows.map(([dir, version, digest]) => [dir, { version, digest }]));
}

export interface FolderFiles {
  /** The folder's version read together with its rows; null when the folder has no row. */
  version: number | null;
  /** Rows directly under the folder, admitted or not. */
  rows: number;
  /** The admitted files, by name. */
  entries: Map<string, KnownEntry>;
}

// One statement, so the version and the rows come from one snapshot (the version's row is the one without a path).
const FOLDER_ROWS = `SELECT NULL, version, NULL, NULL, NULL FROM scan_folders WHERE dir = @dir
  UNION ALL
  SELECT path, CASE WHEN racy THEN -1 ELSE size END, mtime_ns, ctime_ns, ino FROM vault_files
   WHERE path > @lo AND path < @hi AND instr(substr(path, length(@lo) + 1), '/') = 0`;

/**
 * The recorded files directly in vault folder `dir` of partition folder
 * `pdir`, filtered by the walk's own scope rule (a row the walk would never
 * hand over is not admitted: it is neither compared nor ever deleted).
 */
export function folderFiles(db: DB, dir: string, pdir: string): FolderFiles {
  // '0' follows '/': every path under "dir/" sorts between the two.
  // (The offset is SQLite's own length of @lo, in characters: a JavaScript length counts UTF-16 units.)
  const rows = db.prepare(FOLDER_ROWS).raw().all({ dir, lo: `${dir}/`, hi: `${dir}0` }) as Array<[string | null, number, string | null, string | null, string | null]>;
  const out: FolderFiles = { version: null, rows: 0, entries: new Map() };
  const inScope = dirInScope(dir, pdir);
  for (const [path, size, mtimeNs, ctimeNs, ino] of rows) {
    if (path === null) {
      out.version = size;
      continue;
    }
    const name = path.slice(dir.length + 1);
    if (name.includes('/')) continue; // never a row of this folder (a guard: the statement already leaves them out)
    out.rows++;
    if (!inScope || !isScannedFileName(name) || pathProblem(path) !== null) continue;
    out.entries.set(name, knownEntry(size, mtimeNs!, ctimeNs, ino!, size < 0));
  }
  return out;
}

/**
 * A digest of the scanned files of one folder as the walk saw them, in its
 * order: names, sizes, mtimes, ctimes and inodes. (The same folder listed in another
 * order only misses its digest: its files are then compared one by one.)
 */
export function folderDigest(files: readonly WalkFile[]): string {
  const stats = new Float64Array(files.length * 4);
  let names = '';
  for (let i = 0; i < files.length; i++) {
    const f = files[i]!;
    names += `${f.name}/`;
    stats[i * 4] = f.st.size;
    stats[i * 4 + 1] = f.st.mtimeMs;
    stats[i * 4 + 2] = f.st.ctimeMs;
    stats[i * 4 + 3] = f.st.ino;
  }
  return createHash('sha256').update(names).update(new Uint8Array(stats.buffer)).digest('base64');
}

/**
 * Keep digests of folders found wholly unchanged (`kept`) and drop the rows
 * of folders that no longer hold any recorded file (`emptied`), each only if
 * its version is still the one read with its rows. An optimisation: a busy
 * database skips it (the next scan compares file by file again).
 */
export function keepFolderDigests(db: DB, kept: ReadonlyArray<[string, number, string]>, emptied: ReadonlyArray<[string, number]>): void {
  if (kept.length === 0 && emptied.length === 0) return;
  const put = db.prepare('UPDATE scan_folders SET digest = ? WHERE dir = ? AND version = ?');
  const drop = db.prepare('DELETE FROM scan_folders WHERE dir = ? AND version = ?');
  try {
    db.transaction(() => {
      for (const [dir, version, digest] of kept) put.run(digest, dir, version);
      for (const [dir, version] of emptied) drop.run(dir, version);
    }).immediate();
  } catch (err) {
    if ((err as { code?: string }).code?.startsWith('SQLITE_BUSY')) return;
    throw err;
  }
}
