/**
 * Reading an original from a file path [ATT-3]: regular files only, under an
 * allowed root, streamed in bounded chunks (never whole in memory).
 *
 * How a path is judged:
 * - The directory part is resolved with realpath and must lie inside the
 *   realpath of the allowed root (symlinked directories are followed, then
 *   judged by where they really are). Outside: E_DENIED.
 * - The file itself is opened with O_NOFOLLOW (a symlink is refused, even one
 *   pointing inside the root) and O_NONBLOCK (opening a FIFO never blocks);
 *   fstat of the open descriptor must say "regular file" (directories,
 *   devices, FIFOs and sockets are refused): E_VALIDATION.
 * - After opening, the path must still name the opened inode (a directory
 *   swapped in between is caught).
 * - Hard links: a file with more than one link is accepted only when every
 *   one of its links is found inside the allowed root (a bounded walk of the
 *   root, same device, symlinks not followed). A link we cannot find may be
 *   an alias of a file outside the root: E_DENIED.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readSync, realpathSync, type BigIntStats } from 'node:fs';
import { createHash } from 'node:crypto';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { KnowledgeError } from '../errors.js';
import { crashPoint } from '../faults.js';
import { yieldToSignals } from '../interrupt.js';

/** Upper bound of directory entries examined when confirming hard links. */
export const LINK_SEARCH_LIMIT = 200_000;

export interface OpenedFile {
  fd: number;
  /** The name the caller gave (last path component). */
  name: string;
  /** Resolved path inside the root. */
  realPath: string;
  size: number;
  stat: BigIntStats;
}

function kindOf(st: BigIntStats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isSymbolicLink()) return 'a symbolic link';
  return 'not a regular file';
}

export function isInside(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith(sep) ? root : root + sep);
}

/**
 * E_VALIDATION when `path` holds a control character: no file name holds one
 * a caller means (a NUL would reach the system call as an error of its own).
 * Attach and publish's `--evidence` refuse such a path alike.
 */
export function refuseControlInPath(path: string): void {
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(path)) throw new KnowledgeError('E_VALIDATION', `the path ${JSON.stringify(path)} holds a control character`);
}

/** Open `path` for attaching, judged against `allowedRoot` as described above. */
export function openRegularFile(path: string, allowedRoot: string): OpenedFile {
  let root: string;
  try {
    root = realpathSync(allowedRoot);
  } catch {
    throw new KnowledgeError('E_VALIDATION', `allowed root ${allowedRoot} does not exist`);
  }
  refuseControlInPath(path);
  const abs = resolve(path);
  const name = basename(abs);
  if (name === '' || abs === sep) throw new KnowledgeError('E_VALIDATION', `${path} is a directory`);
  const outside = () => new KnowledgeError('E_DENIED', `${path} is outside the allowed root ${root} (pass --root to allow another directory)`);
  let dir: string;
  try {
    dir = realpathSync(dirname(abs));
  } catch {
    // A folder that does not exist outside the root is outside it, like one that does: the answer
    // never tells which folders exist there.
    if (!isInside(root, abs) && !isInside(resolve(allowedRoot), abs)) throw outside();
    throw new KnowledgeError('E_VALIDATION', `cannot read ${path}: no such file`);
  }
  const full = join(dir, name);
  if (!isInside(root, full)) throw outside();
  let fd: number;
  try {
    fd = openSync(full, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw new KnowledgeError('E_VALIDATION', `${path} is a symbolic link; attach the file it points to instead`);
    if (code === 'ENOENT') throw new KnowledgeError('E_VALIDATION', `cannot read ${path}: no such file`);
    if (code === 'ENXIO') throw new KnowledgeError('E_VALIDATION', `${path} is not a regular file`);
    if (code === 'EACCES' || code === 'EPERM') throw new KnowledgeError('E_DENIED', `cannot read ${path}: permission denied`);
    throw new KnowledgeError('E_IO', `cannot open ${path}: ${(err as Error).message}`);
  }
  try {
    const st = fstatSync(fd, { bigint: true });
    if (!st.isFile()) throw new KnowledgeError('E_VALIDATION', `${path} is ${kindOf(st)}, not a regular file`);
    // The path must still name what we opened (no directory swapped in since realpath).
    let now: BigIntStats | undefined;
    try {
      now = realpathSync(dirname(abs)) === dir ? lstatSync(full, { bigint: true }) : undefined;
    } catch {
      now = undefined;
    }
    if (!now || now.ino !== st.ino || now.dev !== st.dev) {
      throw new KnowledgeError('E_VALIDATION', `${path} changed while it was being opened`);
    }
    if (st.nlink > 1n) {
      const found = countLinksUnder(root, st.dev, st.ino, LINK_SEARCH_LIMIT);
      if (found.count < Number(st.nlink)) {
        throw new KnowledgeError(
          'E_DENIED',
          `${path} has ${st.nlink} hard links and ${found.complete ? `only ${found.count} are` : `not all could be confirmed (searched ${LINK_SEARCH_LIMIT} entries)`} inside the allowed root ${root}; a hard link may alias a file outside it: attach a copy instead`,
        );
      }
    }
    return { fd, name, realPath: full, size: Number(st.size), stat: st };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** Names of inode (dev, ino) under `root`, without following symlinks or leaving the device. */
export function countLinksUnder(root: string, dev: bigint, ino: bigint, limit: number): { count: number; complete: boolean } {
  let count = 0;
  let seen = 0;
  const stack = [root];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      continue; // unreadable directory: its links stay unconfirmed, so the file is refused
    }
    for (const e of entries) {
      if (++seen > limit) return { count, complete: false };
      if (!e.isFile() && !e.isDirectory()) continue;
      const p = join(dir, e.name);
      let st: BigIntStats;
      try {
        st = lstatSync(p, { bigint: true });
      } catch {
        continue;
      }
      if (st.dev !== dev) continue;
      if (st.isDirectory()) stack.push(p);
      else if (st.isFile() && st.ino === ino) count++;
    }
  }
  return { count, complete: true };
}

/** Read up to `buf.length` bytes at `position`; short only at end of file. */
export function readAt(fd: number, buf: Buffer, position: number, length: number): number {
  let got = 0;
  while (got < length) {
    const n = readSync(fd, buf, got, length - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return got;
}

/**
 * SHA-256 and length of the whole file, streamed through one reused buffer.
 * Every `yieldBytes` it waits one turn of the event loop, so a signal (Ctrl-C)
 * stops a long file's hash there rather than once it is read to the end
 * (src/interrupt.ts: a handler runs between tasks only).
 */
export async function hashOpenFile(f: OpenedFile, bufBytes: number, yieldBytes = Infinity): Promise<{ sha256: string; size: number }> {
  const h = createHash('sha256');
  const buf = Buffer.allocUnsafe(bufBytes);
  let pos = 0;
  let sinceYield = 0;
  for (;;) {
    const n = readAt(f.fd, buf, pos, buf.length);
    if (n === 0) break;
    h.update(buf.subarray(0, n));
    pos += n;
    sinceYield += n;
    if (sinceYield >= yieldBytes) {
      sinceYield = 0;
      crashPoint('attach-mid-hash');
      await yieldToSignals();
    }
  }
  return { sha256: h.digest('hex'), size: pos };
}

/** Refuse a file that changed (size or mtime) while it was being attached. */
export function assertUnchanged(f: OpenedFile, path: string): void {
  const st = fstatSync(f.fd, { bigint: true });
  if (st.size !== f.stat.size || st.mtimeNs !== f.stat.mtimeNs) {
    throw new KnowledgeError('E_VALIDATION', `${path} changed while it was being attached`);
  }
}

export function closeFile(f: OpenedFile): void {
  try { closeSync(f.fd); } catch { /* nothing left to release */ }
}
