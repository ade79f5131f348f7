/**
 * What Knowledge last recorded about each vault file: size, mtime, ctime, inode,
 * SHA-256 and executable bit [SCAN-4]. Publications record their own installs here so a scan
 * never reports them as outside edits [SCAN-1].
 */
import { statSync, readFileSync, type BigIntStats } from 'node:fs';
import { createHash } from 'node:crypto';
import { withoutTriggers, type DB } from './db.js';
import { partitionOfPath } from './layout.js';
import { NEW_FOLDER_VERSION } from './migrations/007-scan-folders.js';

export interface Fingerprint {
  size: number;
  mtimeNs: string;
  ctimeNs: string;
  ino: string;
  sha256: string;
  /** The owner-execute bit (migration 012). */
  exec: boolean;
}

export function statFingerprint(abs: string, knownBytes?: Buffer): Fingerprint {
  const st = statSync(abs, { bigint: true });
  return fingerprintOf(st, createHash('sha256').update(knownBytes ?? readFileSync(abs)).digest('hex'));
}

/** The fingerprint of a file from its stat and the hash of its bytes. */
export function fingerprintOf(st: BigIntStats, sha256: string): Fingerprint {
  return {
    size: Number(st.size),
    mtimeNs: st.mtimeNs.toString(),
    ctimeNs: st.ctimeNs.toString(),
    ino: st.ino.toString(),
    exec: (st.mode & 0o100n) !== 0n,
    sha256,
  };
}

/** One file's row: path, partition, size, mtime_ns, ctime_ns, ino, sha256, racy, exec (1 or 0). */
export const UPSERT_VAULT_FILE = `INSERT INTO vault_files(path, partition, size, mtime_ns, ctime_ns, ino, sha256, racy, exec) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT(path) DO UPDATE SET partition = excluded.partition, size = excluded.size, mtime_ns = excluded.mtime_ns,
    ctime_ns = excluded.ctime_ns, ino = excluded.ino, sha256 = excluded.sha256, racy = excluded.racy, exec = excluded.exec`;

/**
 * Record what Knowledge itself just wrote at `path` (a publication's or an
 * attachment's install): the installed bytes' hash with the file's stat taken
 * after the install. Such a fingerprint is always racy, so the next scan
 * reads the file once more, as Git does with racily clean entries. The stat
 * is taken after every file is installed (and, for an attachment, after its
 * original is verified), so an edit made between a file's install and that
 * stat is the stat recorded, beside the hash of the bytes Knowledge wrote:
 * however long ago the edit was by the time of this row (judging that by the
 * clock now, as a scan judges its own reads, let an edit a few seconds old
 * pass for Knowledge's own bytes, and no scan ever looked at it again).
 */
export function upsertVaultFile(db: DB, path: string, fp: Fingerprint): void {
  db.prepare(UPSERT_VAULT_FILE).run(path, partitionOfPath(path) ?? '', fp.size, fp.mtimeNs, fp.ctimeNs, fp.ino, fp.sha256, 1, fp.exec ? 1 : 0);
}

/** Migration 007's triggers on `vault_files`, which keep `scan_folders` in step with every write. */
const FOLDER_TRIGGERS = ['vault_files_folder_insert', 'vault_files_folder_update', 'vault_files_folder_delete'];
/** Paths written from which the triggers are dropped for the write and the folders updated once each. */
const BULK_PATHS = 1000;

/** The folder of a vault path as migration 007's triggers compute it (the path without its last segment). */
export function folderOf(path: string): string {
  const slash = path.lastIndexOf('/');
  return slash < 0 ? '' : path.slice(0, slash).replace(/\/+$/, '');
}

/**
 * Run `fn`, which writes the `vault_files` rows of `paths` (and no others),
 * inside the current transaction. A large write runs without the per-row
 * triggers (a trigger costs more per row than the write: 100k upserts took
 * 0.44 s without, 0.88-0.96 s with them) and then does what they would
 * have done, once per folder. The triggers are recreated from their own SQL
 * before the transaction ends, so no other connection ever sees them missing.
 */
export function writeVaultFiles<T>(db: DB, paths: readonly string[], fn: () => T): T {
  if (!db.inTransaction) throw new Error('writeVaultFiles must run inside a transaction');
  if (paths.length < BULK_PATHS) return fn();
  return withoutTriggers(db, 'vault_files', FOLDER_TRIGGERS, () => {
    const out = fn();
    const touch = db.prepare(`INSERT INTO scan_folders(dir, partition, version) VALUES (?, ?, ${NEW_FOLDER_VERSION})
      ON CONFLICT(dir) DO UPDATE SET version = version + 1, digest = NULL`);
    const folders = new Map<string, string>();
    for (const path of paths) {
      const dir = folderOf(path);
      if (!folders.has(dir)) folders.set(dir, partitionOfPath(path) ?? '');
    }
    for (const [dir, partition] of folders) touch.run(dir, partition);
    return out;
  });
}
