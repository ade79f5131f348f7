/**
 * The one atomic-write module (STYLE habit 8, [PUB-3]): every install writes a
 * uniquely named temp file, fsyncs it, renames it into place and fsyncs the
 * directory. A fixed temp name would collide between writers.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, statSync, writeSync, existsSync, unlinkSync, readdirSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { randomBytes } from 'node:crypto';

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

export function tempName(base: string): string {
  return `.${base}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
}

/** Write bytes to `target` atomically and durably. `stagingDir` must be on the same filesystem. */
export function atomicWrite(target: string, bytes: Buffer | string, stagingDir?: string): void {
  const dir = dirname(target);
  mkdirDurable(dir);
  const stageIn = stagingDir ?? dir;
  mkdirDurable(stageIn);
  const tmp = join(stageIn, tempName(target.split(sep).pop() ?? 'file'));
  const fd = openSync(tmp, 'wx', 0o644);
  try {
    const buf = typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes;
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    try { unlinkSync(tmp); } catch { /* keep the first error */ }
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, target);
  fsyncDir(dir);
  if (stageIn !== dir) fsyncDir(stageIn);
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
