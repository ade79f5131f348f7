/**
 * Read one file the way a scan must [SCAN-1]: never follow a symlink, never
 * open a FIFO, and never record bytes that were changing underneath us.
 *
 * An editor's save-by-rename replaces the inode while we read; a
 * delete-then-recreate leaves the name missing for a moment; a file can be
 * growing. So: open with O_NOFOLLOW|O_NONBLOCK, fstat, read to EOF, fstat
 * again, then lstat the name: all must describe the same inode, size and
 * mtime and ctime, else wait briefly and try again. A name that is missing is
 * "vanished" at once (the caller decides whether that is a deletion, and looks
 * again); one that keeps changing is "unstable" and is left for the next scan.
 *
 * The reader is made by {@link stableReader}, a self-contained function (no
 * imports, no outer names; `node:fs` and `createHash` are its arguments), so
 * the prefetch workers (prefetch.ts) evaluate its very source and read a
 * baseline's files exactly as this thread would.
 */
import * as fs from 'node:fs';
import { createHash } from 'node:crypto';

export type ReadOutcome =
  /** `exec`: the owner-execute bit, as Git reads it for a file's mode (100755 or 100644). */
  | { kind: 'ok'; bytes: Buffer; sha256: string; size: number; mtimeNs: string; ctimeNs: string; ino: string; exec: boolean }
  /** No file by that name any more: missing, or a folder has taken the name. */
  | { kind: 'vanished' }
  | { kind: 'symlink' }
  | { kind: 'special' }
  | { kind: 'unreadable'; reason: string }
  | { kind: 'unstable'; reason: string }
  /** Larger than a scan reads (SCAN_MAX_BYTES): neither read whole nor staged. */
  | { kind: 'too-large'; size: number };

export interface StableReader {
  read(abs: string): ReadOutcome;
  /** The largest file it reads whole; a larger one is 'too-large'. */
  maxBytes: number;
  sleep(ms: number): void;
}

/** Self-contained: see the header. */
export function stableReader(nodeFs: typeof fs, hash: typeof createHash): StableReader {
  /** Waits between attempts, in ms. */
  const BACKOFF_MS = [5, 20, 50, 100];
  /**
   * A consistent read of a file modified less than this long ago is trusted
   * only once the file has stayed the same until it is this old: a writer that
   * truncates and then writes (most editors, `fs.writeFileSync`) shows an empty
   * or partial file for a moment, and that moment is consistent in itself.
   */
  const SETTLE_MS = 5;
  /** The largest file a scan reads, stages and commits (SCAN_MAX_BYTES). */
  const MAX_BYTES = 256 * 1024 * 1024;
  const { constants } = nodeFs;
  const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

  const sleepCell = new Int32Array(new SharedArrayBuffer(4));
  const sleep = (ms: number): void => {
    Atomics.wait(sleepCell, 0, 0, ms);
  };

  const same = (a: fs.BigIntStats, b: fs.BigIntStats): boolean => a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs && a.dev === b.dev;

  /** Null when the name still describes the file just read; '' when it is gone; else why it differs. */
  const nameChanged = (abs: string, after: fs.BigIntStats, changed: string): string | null => {
    let named: fs.BigIntStats | undefined;
    try {
      named = nodeFs.lstatSync(abs, { bigint: true, throwIfNoEntry: false });
    } catch (err) {
      return (err as Error).message;
    }
    if (!named) return '';
    return same(named, after) ? null : changed;
  };

  // One scratch buffer for every read: each result is copied out at its exact
  // size, so a 100k-file scan does not leave 100k oversized buffers to the GC.
  let scratch = Buffer.allocUnsafe(256 * 1024);

  /**
   * Read from `fd` to EOF, or to one byte past MAX_BYTES; a copy of exactly
   * the bytes read. A read that returns less than it asked for, ending at
   * `size` (the fstat size), is taken as the end without one more read that
   * returns 0: a regular file's read comes up short only at its end, and the
   * caller's fstat after the read still refuses any other outcome (one
   * system call fewer per file; a 100k-file baseline makes ~1.4M).
   */
  const readAll = (fd: number, size: number): Buffer => {
    let len = 0;
    while (len <= MAX_BYTES) {
      if (len === scratch.length) {
        const bigger = Buffer.allocUnsafe(scratch.length * 2);
        scratch.copy(bigger, 0, 0, len);
        scratch = bigger;
      }
      const want = Math.min(scratch.length - len, MAX_BYTES + 1 - len);
      const n = nodeFs.readSync(fd, scratch, len, want, null);
      if (n === 0) break;
      len += n;
      if (n < want && len === size) break;
    }
    const out = Buffer.from(scratch.subarray(0, len));
    if (scratch.length > 4 * 1024 * 1024) scratch = Buffer.allocUnsafe(256 * 1024); // do not keep a huge file's buffer
    return out;
  };

  const read = (abs: string): ReadOutcome => {
    let lastReason = 'it kept changing while it was read';
    for (let attempt = 0; attempt <= BACKOFF_MS.length; attempt++) {
      if (attempt > 0) sleep(BACKOFF_MS[attempt - 1]!);
      let fd: number;
      try {
        fd = nodeFs.openSync(abs, OPEN_FLAGS);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // Gone (or mid-save): no waiting here. A recorded file the scan does not find is looked for
        // again, all of them together after short pauses (observe.ts, recheckMissing); a new file
        // back by then is the next scan's. Waiting here, file by file, made a scan racing an
        // `rm -rf` of 2,000 files take minutes.
        if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'vanished' };
        if (code === 'ELOOP') return { kind: 'symlink' };
        if (code === 'EACCES' || code === 'EPERM') return { kind: 'unreadable', reason: `permission denied (${code})` };
        return { kind: 'unreadable', reason: (err as Error).message };
      }
      let before: fs.BigIntStats;
      let after: fs.BigIntStats;
      let bytes: Buffer;
      try {
        before = nodeFs.fstatSync(fd, { bigint: true });
        // A folder now has the name: the file is gone (its files are the walk's, under that folder).
        if (before.isDirectory()) return { kind: 'vanished' };
        if (!before.isFile()) return { kind: 'special' };
        if (before.size > BigInt(MAX_BYTES)) return { kind: 'too-large', size: Number(before.size) };
        // To EOF, not to the stat size: a growing file must show as changed.
        bytes = readAll(fd, Number(before.size));
        if (bytes.length > MAX_BYTES) return { kind: 'too-large', size: bytes.length };
        after = nodeFs.fstatSync(fd, { bigint: true });
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EISDIR') return { kind: 'vanished' };
        if (code === 'EAGAIN' || code === 'EWOULDBLOCK') return { kind: 'special' };
        lastReason = (err as Error).message;
        continue;
      } finally {
        nodeFs.closeSync(fd);
      }
      if (!same(before, after) || BigInt(bytes.length) !== after.size) {
        lastReason = 'it was being written while it was read';
        continue;
      }
      const moved = nameChanged(abs, after, 'it was replaced while it was read');
      if (moved !== null) {
        if (moved !== '') lastReason = moved; // '' = removed right after we read it: look again
        continue;
      }
      // The later of the two times: a write that puts an old mtime back still moves the ctime.
      const changedNs = after.ctimeNs > after.mtimeNs ? after.ctimeNs : after.mtimeNs;
      const ageMs = Number(BigInt(Date.now()) * 1_000_000n - changedNs) / 1e6;
      if (ageMs < SETTLE_MS) {
        sleep(Math.min(SETTLE_MS, SETTLE_MS - ageMs) + 1);
        const changed = nameChanged(abs, after, 'it was being written while it was read');
        if (changed !== null) {
          lastReason = changed || 'it was being written while it was read';
          continue;
        }
      }
      return {
        kind: 'ok',
        bytes,
        sha256: hash('sha256').update(bytes).digest('hex'),
        size: bytes.length,
        mtimeNs: after.mtimeNs.toString(),
        ctimeNs: after.ctimeNs.toString(),
        ino: after.ino.toString(),
        exec: (after.mode & 0o100n) !== 0n,
      };
    }
    // Changing on every attempt, unless the name went away after the last one.
    try {
      if (!nodeFs.lstatSync(abs, { throwIfNoEntry: false })) return { kind: 'vanished' };
    } catch {
      return { kind: 'vanished' };
    }
    return { kind: 'unstable', reason: lastReason };
  };

  return { read, sleep, maxBytes: MAX_BYTES };
}

const reader = stableReader(fs, createHash);
export const readStable = reader.read;
export const sleepSync = reader.sleep;
/** The largest file a scan reads, stages and commits. */
export const SCAN_MAX_BYTES = reader.maxBytes;
