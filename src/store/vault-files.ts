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

export function upsertVaultFile(db: DB, path: string, fp: Fingerprint): void {
  db.prepare(
    `INSERT INTO vault_files(path, partition, size, mtime_ns, ino, sha256) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, ino = excluded.ino, sha256 = excluded.sha256`,
  ).run(path, partitionOfPath(path) ?? '', fp.size, fp.mtimeNs, fp.ino, fp.sha256);
}
