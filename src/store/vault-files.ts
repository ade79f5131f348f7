/**
 * What Knowledge last recorded about each vault file: size, mtime, inode and
 * SHA-256 [SCAN-4]. Publications record their own installs here so a scan
 * never reports them as outside edits [SCAN-1].
 */
import { statSync, readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import type { DB } from './db.js';
import { partitionOfPath } from './layout.js';

export interface Fingerprint { size: number; mtimeNs: string; ino: string; sha256: string }

export function statFingerprint(abs: string, knownBytes?: Buffer): Fingerprint {
  const st = statSync(abs, { bigint: true });
  const bytes = knownBytes ?? readFileSync(abs);
  return {
    size: Number(st.size),
    mtimeNs: st.mtimeNs.toString(),
    ino: st.ino.toString(),
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
}

/**
 * Paths this process wrote to `vault_files` through this connection since a
 * reader (the scan's in-memory copy, src/scan/known.ts) started watching.
 * Writes by other connections are seen through `PRAGMA data_version`
 * instead. A rolled-back write is harmless: the reader reloads the path.
 */
export interface VaultFileWrites {
  paths: Set<string>;
  /** Too many paths to keep: the reader starts over. */
  overflow: boolean;
}

const MAX_TRACKED = 4096;
const watchers = new WeakMap<DB, VaultFileWrites>();

/** Start (or restart) recording which paths of `vault_files` this connection writes. */
export function watchVaultFileWrites(db: DB): VaultFileWrites {
  const w: VaultFileWrites = { paths: new Set(), overflow: false };
  watchers.set(db, w);
  return w;
}

export function currentVaultFileWrites(db: DB): VaultFileWrites | undefined {
  return watchers.get(db);
}

/** Every writer of `vault_files` calls this (the scan's own apply keeps its reader up to date itself). */
export function noteVaultFileWrite(db: DB, path: string): void {
  const w = watchers.get(db);
  if (!w || w.overflow) return;
  if (w.paths.size >= MAX_TRACKED) {
    w.overflow = true;
    w.paths.clear();
    return;
  }
  w.paths.add(path);
}

export function upsertVaultFile(db: DB, path: string, fp: Fingerprint): void {
  noteVaultFileWrite(db, path);
  db.prepare(
    `INSERT INTO vault_files(path, partition, size, mtime_ns, ino, sha256) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, ino = excluded.ino, sha256 = excluded.sha256`,
  ).run(path, partitionOfPath(path) ?? '', fp.size, fp.mtimeNs, fp.ino, fp.sha256);
}
