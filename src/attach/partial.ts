/**
 * The partial file of an upload [ATT-1, ATT-2, LAY-1]:
 * `vault/.knowledge-history/uploads/<attachmentId>.part` (a recovery file,
 * never committed [GIT-13]). Chunks are assembled into it as they arrive:
 * each is written at its offset and fdatasynced BEFORE the chunk is
 * committed in SQLite, so every committed byte is durable. Bytes past the
 * committed length (a crash between the write and the commit, or a write a
 * full disk cut short) are cut off before the next write and before
 * verification. One chunk-sized buffer at a time; never the whole file.
 */
import { closeSync, constants, existsSync, fdatasyncSync, fstatSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { dirname, join } from 'node:path';
import { KnowledgeError } from '../errors.js';
import type { Store } from '../store/store.js';
import { fsyncDir, mkdirDurable } from '../fsutil.js';
import { ioError } from './io-error.js';

export function uploadsDir(store: Store): string {
  return join(store.paths.history, 'uploads');
}

export function partPath(store: Store, attachmentId: string): string {
  return join(uploadsDir(store), `${attachmentId}.part`);
}

/**
 * Uploads of a partition cut short after their install, whose bytes are `sha256`: every byte received and the
 * partial file renamed away (into the source's path; completing the same request finishes it). A refused or
 * unfinished upload still has its partial file; an empty one never had one, so never counts. Their ids.
 */
export function installedUploads(store: Store, partition: string, sha256: string): string[] {
  const ids = store.db.prepare(
    "SELECT attachment_id FROM attachments WHERE partition = ? AND sha256 = ? AND state = 'receiving' AND size > 0 AND received = size ORDER BY created_at",
  ).pluck().all(partition, sha256) as string[];
  return ids.filter((id) => !existsSync(partPath(store, id)));
}

/** The partial file holds fewer bytes than were committed: the upload cannot continue from here. */
export function lostBytes(attachmentId: string, committed: number, found: number | null): KnowledgeError {
  return new KnowledgeError(
    'E_CONFLICT',
    `attachment ${attachmentId}: its partial file ${found === null ? 'is missing' : `holds ${found} of ${committed} committed bytes`}; the upload starts again at offset 0 under the same request id`,
    { lost: true },
  );
}

/** An open partial file, positioned after its committed bytes. */
export interface PartHandle {
  fd: number;
  path: string;
  /** Created by this open: its directory entry must be made durable once. */
  created: boolean;
  attachmentId: string;
}

/**
 * Open (creating) the partial file of an upload that has `committed` bytes:
 * a shorter file throws the lost-bytes E_CONFLICT, a longer one (a
 * never-committed tail) is cut back. I/O failures are E_IO.
 */
export function openPart(store: Store, attachmentId: string, committed: number): PartHandle {
  const dir = uploadsDir(store);
  const path = partPath(store, attachmentId);
  let fd: number;
  let created: boolean;
  try {
    mkdirDurable(dir);
    created = !existsSync(path);
    if (created && committed > 0) throw lostBytes(attachmentId, committed, null);
    // 0644 less the umask, as every file Knowledge writes: the partial file becomes the installed original.
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW, 0o644);
  } catch (err) {
    throw ioError(err, `attachment ${attachmentId}: cannot open its partial file`);
  }
  try {
    const size = fstatSync(fd).size;
    if (size < committed) throw lostBytes(attachmentId, committed, size);
    if (size > committed) ftruncateSync(fd, committed); // never-committed tail of an interrupted write
  } catch (err) {
    closeSync(fd);
    throw ioError(err, `attachment ${attachmentId}: cannot prepare its partial file`);
  }
  return { fd, path, created, attachmentId };
}

export function writePart(h: PartHandle, offset: number, bytes: Buffer): void {
  let off = 0;
  while (off < bytes.length) off += writeSync(h.fd, bytes, off, bytes.length - off, offset + off);
}

/** Make every written byte durable (and, the first time, the file's directory entry). */
export function syncPart(h: PartHandle): void {
  fdatasyncSync(h.fd);
  if (h.created) {
    fsyncDir(dirname(h.path));
    h.created = false;
  }
}

/** Close; after a failure, first cut the file back to what was committed (best effort: the next open does it too). */
export function closePart(h: PartHandle, truncateTo?: number): void {
  if (truncateTo !== undefined) {
    try { ftruncateSync(h.fd, truncateTo); } catch { /* the next open cuts it off */ }
  }
  try { closeSync(h.fd); } catch { /* nothing left to release */ }
}

/** `length` committed bytes at `offset` (to compare a retried chunk). */
export function readPartAt(store: Store, attachmentId: string, offset: number, length: number): Buffer {
  const buf = Buffer.alloc(length);
  let fd: number;
  try {
    fd = openSync(partPath(store, attachmentId), constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw lostBytes(attachmentId, offset + length, null);
    throw ioError(err, `attachment ${attachmentId}: cannot read its partial file`);
  }
  try {
    let got = 0;
    while (got < length) {
      const n = readSync(fd, buf, got, length - got, offset + got);
      if (n === 0) break;
      got += n;
    }
    return buf.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}

/** Bytes for media sniffing (detectMedia needs 64). */
export const HEAD_BYTES = 64;

/** The first bytes of a file (fewer when it is shorter). */
export function readHead(path: string, attachmentId: string): Buffer {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw lostBytes(attachmentId, 0, null);
    throw ioError(err, `attachment ${attachmentId}: cannot read ${path}`);
  }
  try {
    const buf = Buffer.alloc(HEAD_BYTES);
    const n = readSync(fd, buf, 0, HEAD_BYTES, 0);
    return buf.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

/**
 * SHA-256 of the first `size` bytes of `path`, streamed through one buffer
 * of `bufBytes`, or read into one buffer of exactly `size` bytes when
 * `collect` (an original under 100 MiB that history keeps). A longer file
 * is cut back to `size` when `truncate` (a never-committed tail); a shorter
 * one throws lostBytes.
 */
export function hashFile(path: string, attachmentId: string, size: number, opts: { collect: boolean; truncate: boolean; bufBytes: number }): { sha256: string; bytes: Buffer | null } {
  let fd: number;
  try {
    fd = openSync(path, (opts.truncate ? constants.O_RDWR : constants.O_RDONLY) | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw lostBytes(attachmentId, size, null);
    throw ioError(err, `attachment ${attachmentId}: cannot read ${path}`);
  }
  try {
    const found = fstatSync(fd).size;
    if (found < size) throw lostBytes(attachmentId, size, found);
    if (found > size && opts.truncate) {
      ftruncateSync(fd, size);
      fdatasyncSync(fd);
    }
    const h = createHash('sha256');
    const all = opts.collect ? Buffer.allocUnsafe(size) : null;
    const buf = all ?? Buffer.allocUnsafe(Math.max(1, Math.min(opts.bufBytes, size)));
    let pos = 0;
    while (pos < size) {
      const at = all ? pos : 0;
      const want = all ? size - pos : Math.min(buf.length, size - pos);
      const n = readSync(fd, buf, at, want, pos);
      if (n === 0) throw lostBytes(attachmentId, size, pos);
      h.update(buf.subarray(at, at + n));
      pos += n;
    }
    return { sha256: h.digest('hex'), bytes: all };
  } catch (err) {
    if (err instanceof KnowledgeError) throw err;
    throw ioError(err, `attachment ${attachmentId}: cannot read ${path}`);
  } finally {
    closeSync(fd);
  }
}

/** Check that `path` holds at least `size` bytes and cut off a never-committed tail beyond them. */
export function settleLength(path: string, attachmentId: string, size: number): void {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw lostBytes(attachmentId, size, null);
    throw ioError(err, `attachment ${attachmentId}: cannot open ${path}`);
  }
  try {
    const found = fstatSync(fd).size;
    if (found < size) throw lostBytes(attachmentId, size, found);
    if (found > size) {
      ftruncateSync(fd, size);
      fdatasyncSync(fd);
    }
  } finally {
    closeSync(fd);
  }
}

export function removeQuietly(path: string): void {
  try { unlinkSync(path); } catch { /* already gone */ }
}
