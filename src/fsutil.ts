/**
 * The one atomic-write module (STYLE habit 8, [PUB-3]): every install writes a
 * uniquely named temp file, fsyncs it, puts it into place and fsyncs the
 * directory — by rename (atomicWrite), or, for a vault file another program
 * may be saving at the same moment, without ever replacing a file the writer
 * has not seen (installVaultFile). A fixed temp name would collide between
 * writers.
 */
import { closeSync, constants, fstatSync, fsyncSync, linkSync, lstatSync, mkdirSync, openSync, readSync, renameSync, statSync, writeSync, existsSync, unlinkSync, readdirSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { open as openAsync } from 'node:fs/promises';
import { KnowledgeError } from './errors.js';
import { crashPoint } from './faults.js';

export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * mkdir -p whose new directories are durable: each created directory's parent
 * is fsynced, so a crash cannot lose the entry of a directory we wrote into.
 */
export function mkdirDurable(dir: string): void {
  if (existsSync(dir)) return;
  const parent = dirname(dir);
  if (parent !== dir) mkdirDurable(parent);
  try {
    mkdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return;
  }
  fsyncDir(parent);
}

/**
 * Whether a failed hard link means this file system has none (so a lock file is
 * created and written in place instead), rather than that the link's target exists.
 */
export function linkUnsupported(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'EPERM' || code === 'ENOTSUP' || code === 'EOPNOTSUPP' || code === 'ENOSYS';
}

/** The most bytes of the target's name a temp name keeps: with its suffix it stays far under any NAME_MAX (255 bytes). */
const TEMP_NAME_BASE_BYTES = 100;

/**
 * A unique temp name beside `base`: `.<base>.<pid>.<random>.tmp`, with `base`
 * cut to its first 100 bytes (whole characters), so that a target whose own
 * name is near the file system's limit (a hand-made file of 255 bytes, say)
 * still has a temp name that fits.
 */
export function tempName(base: string): string {
  let kept = '';
  let bytes = 0;
  for (const ch of base) {
    bytes += Buffer.byteLength(ch, 'utf8');
    if (bytes > TEMP_NAME_BASE_BYTES) break;
    kept += ch;
  }
  return `.${kept}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
}

/** Write bytes to `target` atomically and durably. `stagingDir` must be on the same filesystem. */
export function atomicWrite(target: string, bytes: Buffer | string, stagingDir?: string): void {
  const dir = dirname(target);
  mkdirDurable(dir);
  const stageIn = stagingDir ?? dir;
  mkdirDurable(stageIn);
  const tmp = durableTemp(stageIn, target.split(sep).pop() ?? 'file', typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes);
  renameSync(tmp, target);
  fsyncDir(dir);
  if (stageIn !== dir) fsyncDir(stageIn);
}

/** The file a writer hashed at a path it is about to replace: how to tell it is still the one there. */
export interface SeenFile {
  ino: bigint;
  size: bigint;
  mtimeNs: bigint;
}

function sameFile(st: { ino: bigint; size: bigint; mtimeNs: bigint }, seen: SeenFile): boolean {
  return st.ino === seen.ino && st.size === seen.size && st.mtimeNs === seen.mtimeNs;
}

/** Write `bytes` to a new temp file in `dir`, durably; its path. */
function durableTemp(dir: string, base: string, bytes: Buffer): string {
  const tmp = join(dir, tempName(base));
  const fd = openSync(tmp, 'wx', 0o644);
  try {
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    try { unlinkSync(tmp); } catch { /* keep the first error */ }
    throw err;
  }
  closeSync(fd);
  return tmp;
}

/**
 * Put `from` at `to` unless something is there already (a hard link, which
 * never replaces): false when something is. On a file system without hard
 * links, a rename (which would replace) after a check.
 */
function placeNoReplace(from: string, to: string): boolean {
  try {
    linkSync(from, to);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    if (!linkUnsupported(err)) throw err;
  }
  if (onDiskAt(to)) return false;
  renameSync(from, to);
  return true;
}

/**
 * Install `bytes` at the vault's `rel` [PUB-3] without ever replacing a
 * file the writer has not seen: another program's save that lands after the
 * writer hashed the file and before it is replaced (an editor's save, into
 * the window of the staging file's fsync) is never overwritten.
 *
 * The staging file is written and fsynced first. Then, for a file there
 * before (`seen`), that file is moved aside to `hold` (one atomic step that
 * takes whatever is at the path) and checked to be the very file hashed
 * (inode, size, modification time); another is put back. The new bytes are then hard-linked into place, which fails
 * rather than replace a file created at the path meanwhile (that file, the
 * newer, stays). False when the file changed under the writer either way,
 * true when installed. A crash after the move aside leaves the old file
 * at `hold`, which the next attempt puts back first ({@link restoreHeld}).
 * `hold` is in the staging folder, on the vault's file system.
 */
export function installVaultFile(vault: string, rel: string, bytes: Buffer, stagingDir: string, seen: SeenFile | null, hold: string): boolean {
  const target = join(vault, rel);
  const dir = dirname(target);
  mkdirDurable(dir);
  mkdirDurable(stagingDir);
  const tmp = durableTemp(stagingDir, target.split(sep).pop() ?? 'file', bytes);
  let placed: boolean;
  try {
    crashPoint('install-before-replace');
    if (seen !== null) {
      try {
        renameSync(target, hold);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false; // deleted meanwhile
        throw err;
      }
      crashPoint('install-held');
      if (!sameFile(lstatSync(hold, { bigint: true }), seen)) {
        restoreHeld(target, hold);
        return false;
      }
    }
    placed = placeNoReplace(tmp, target);
    // Not placed: created at the path meanwhile; that file is the newest and stays, the one held aside is older.
    if (placed) fsyncDir(dir);
    if (seen !== null) unlinkSync(hold);
  } finally {
    try { unlinkSync(tmp); } catch { /* linked into place, or renamed there */ }
  }
  fsyncDir(stagingDir);
  return placed;
}

/**
 * A file an interrupted {@link installVaultFile} held aside at `hold`: put
 * back at `target` if nothing is there now, else (the install finished, or
 * a newer file was saved there) dropped.
 */
export function restoreHeld(target: string, hold: string): void {
  if (!onDiskAt(hold)) return;
  placeNoReplace(hold, target);
  try { unlinkSync(hold); } catch { /* renamed into place */ }
  fsyncDir(dirname(target));
  fsyncDir(dirname(hold));
}

/** Remove leftover temp files from a crashed writer (called on open). */
export function clearStaleTemps(dir: string): number {
  if (!existsSync(dir)) return 0;
  let n = 0;
  for (const name of readdirSync(dir)) {
    if (name.startsWith('.') && name.endsWith('.tmp')) {
      try { unlinkSync(join(dir, name)); n++; } catch { /* best effort: a leftover temp is harmless */ }
    }
  }
  return n;
}

export function isDirectory(p: string): boolean {
  try { return statSync(p).isDirectory(); } catch { return false; }
}

export function isFile(p: string): boolean {
  try { return statSync(p).isFile(); } catch { return false; }
}

/** Whether anything is at `abs` (not following a link); a file where a folder should be is the writer's check to report. */
export function onDiskAt(abs: string): boolean {
  try {
    return lstatSync(abs, { throwIfNoEntry: false }) !== undefined;
  } catch {
    return false;
  }
}

/**
 * Whether the vault's `rel` is a regular file (reached through no symbolic
 * link: vaultEntry) holding exactly the bytes of `sha256` and `size`; read
 * only when the size matches.
 */
export function vaultFileHolds(vault: string, rel: string, sha256: string, size: number): boolean {
  try {
    const st = lstatSync(join(vault, rel), { throwIfNoEntry: false });
    if (!st?.isFile() || st.size !== size) return false;
    const there = vaultEntry(vault, rel);
    return there.kind === 'file' && there.sha256 === sha256;
  } catch {
    return false;
  }
}

/** What a path of the vault holds now (vaultEntry). */
export type VaultEntry = { kind: 'none' } | { kind: 'file'; sha256: string | null; seen?: SeenFile } | { kind: 'other'; what: string };

/**
 * What is at `rel` (a safe relative path) inside the vault folder now, for a
 * writer about to replace it: nothing, a regular file (its sha256, unless
 * `hash` is false), or something Knowledge never writes through or over — a
 * symbolic link at or above it (below the vault folder itself), a folder, a
 * FIFO, a socket, a device. Never follows a link and never opens anything but
 * a regular file (looked at with lstat first; opened non-blocking and without
 * following links, then checked again).
 */
export function vaultEntry(vault: string, rel: string, opts: { hash?: boolean } = {}): VaultEntry {
  const parts = rel.split('/');
  for (let i = 1; i <= parts.length; i++) {
    const prefix = parts.slice(0, i).join('/');
    let st;
    try {
      st = lstatSync(join(vault, prefix), { throwIfNoEntry: false });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') return { kind: 'other', what: `a folder above ${rel} is not a folder` };
      throw err;
    }
    if (!st) return { kind: 'none' };
    if (st.isSymbolicLink()) return { kind: 'other', what: `${prefix} is a symbolic link` };
    if (i < parts.length && !st.isDirectory()) return { kind: 'other', what: `${prefix} is not a folder` };
    if (i === parts.length && st.isDirectory()) return { kind: 'other', what: `${rel} is a folder` };
    if (i === parts.length && !st.isFile()) return { kind: 'other', what: `${rel} is not a regular file` };
  }
  if (opts.hash === false) return { kind: 'file', sha256: null };
  let fd: number;
  try {
    fd = openSync(join(vault, rel), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'none' }; // gone since the lstat
    if (code === 'ELOOP') return { kind: 'other', what: `${rel} is a symbolic link` };
    if (code === 'ENXIO') return { kind: 'other', what: `${rel} is not a regular file` };
    throw err;
  }
  try {
    const st = fstatSync(fd, { bigint: true });
    if (!st.isFile()) return { kind: 'other', what: `${rel} is not a regular file` };
    const hash = createHash('sha256');
    const buf = Buffer.allocUnsafe(Math.min(Math.max(Number(st.size), 1), 1 << 20));
    for (let n; (n = readSync(fd, buf, 0, buf.length, null)) > 0;) hash.update(buf.subarray(0, n));
    // The file as it was when hashed (a write during the hash changes its modification time).
    return { kind: 'file', sha256: hash.digest('hex'), seen: { ino: st.ino, size: st.size, mtimeNs: st.mtimeNs } };
  } finally {
    closeSync(fd);
  }
}

/**
 * The writers' rule [PUB-3]: what is at `rel` must be nothing or a regular
 * file; anything else is E_CONFLICT, and nothing is written. Returns the
 * file's sha256 (null when there is none, or when `hash` is false).
 */
export function requireWritable(vault: string, rel: string, opts: { hash?: boolean } = {}): string | null {
  return writableEntry(vault, rel, opts)?.sha256 ?? null;
}

/** {@link requireWritable}, with the file as it was when hashed (null when there is none). */
export function writableEntry(vault: string, rel: string, opts: { hash?: boolean } = {}): { sha256: string | null; seen?: SeenFile } | null {
  const there = vaultEntry(vault, rel, opts);
  if (there.kind === 'other') {
    throw new KnowledgeError('E_CONFLICT', `cannot write ${rel}: ${there.what}; Knowledge writes only regular files in real folders of the vault`);
  }
  return there.kind === 'file' ? there : null;
}

/**
 * Read a file that must be a regular file, without ever blocking on
 * something else put at its path: opened with O_NONBLOCK (a FIFO opens at
 * once instead of waiting for a writer) and judged by `fstat`. A FIFO,
 * socket, device or folder is an error with code `ENOTREG`. Symbolic links
 * are followed, as git follows them.
 */
export async function readRegular(path: string): Promise<Buffer>;
export async function readRegular(path: string, encoding: 'utf8'): Promise<string>;
export async function readRegular(path: string, encoding?: 'utf8'): Promise<Buffer | string> {
  const fh = await openAsync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    if (!(await fh.stat()).isFile()) throw Object.assign(new Error(`${path} is not a regular file`), { code: 'ENOTREG' });
    const bytes = await fh.readFile();
    return encoding ? bytes.toString(encoding) : bytes;
  } finally {
    await fh.close();
  }
}
