/**
 * The stable reader's reads (read.ts): exact bytes whatever the reads return,
 * and one read per ordinary file (a short read ending at the fstat size is
 * its end).
 */
import { afterEach, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stableReader } from './read.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function file(bytes: Buffer): string {
  const dir = mkdtempSync(join(tmpdir(), 'kn-read-'));
  dirs.push(dir);
  const abs = join(dir, 'f.md');
  writeFileSync(abs, bytes);
  // Older than the reader's settle time, so no wait muddles the counts.
  fs.utimesSync(abs, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
  return abs;
}

/** node:fs with readSync counted, each read capped at `cap` bytes, and `onRead` run before each. */
function countingFs(cap = Infinity, onRead: (n: number) => void = () => {}) {
  const calls = { reads: 0 };
  const wrapped = {
    ...fs,
    readSync: (fd: number, buf: Buffer, off: number, len: number, pos: null) => {
      onRead(calls.reads++);
      return fs.readSync(fd, buf, off, Math.min(len, cap), pos);
    },
  } as unknown as typeof fs;
  return { fs: wrapped, calls };
}

const bytesOf = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + 7) % 251));

describe('stableReader reads', () => {
  it('an ordinary file in one read: the short read that ends at its size is its end', () => {
    const data = bytesOf(700);
    const c = countingFs();
    const out = stableReader(c.fs, createHash).read(file(data));
    expect(out).toMatchObject({ kind: 'ok', size: 700, sha256: createHash('sha256').update(data).digest('hex') });
    if (out.kind === 'ok') expect(out.bytes.equals(data)).toBe(true);
    expect(c.calls.reads).toBe(1);
  });

  it('a file that fills the buffer exactly, and a larger one: every byte, read to the end', () => {
    for (const n of [256 * 1024, 1024 * 1024 + 3, 0]) {
      const data = bytesOf(n);
      const out = stableReader(countingFs().fs, createHash).read(file(data));
      expect(out.kind).toBe('ok');
      if (out.kind === 'ok') expect(out.bytes.equals(data), `${n} bytes`).toBe(true);
    }
  });

  it('reads that come up short before the end go on to the end', () => {
    const data = bytesOf(1000);
    const c = countingFs(100);
    const out = stableReader(c.fs, createHash).read(file(data));
    expect(out.kind).toBe('ok');
    if (out.kind === 'ok') expect(out.bytes.equals(data)).toBe(true);
    expect(c.calls.reads).toBeGreaterThanOrEqual(10);
  });

  it('a file that grows while it is read is read again, never recorded half-grown', () => {
    const data = bytesOf(500);
    const abs = file(data);
    const more = Buffer.from('appended while the first read ran\n');
    // Between the first attempt's fstat and its read, the file grows (its size and mtime move).
    const c = countingFs(Infinity, (n) => {
      if (n === 0) appendFileSync(abs, more);
    });
    const reader = stableReader(c.fs, createHash);
    const first = reader.read(abs);
    // The attempt that saw the growth is refused; the next one reads the whole new file.
    expect(first.kind === 'ok' ? first.bytes.length : -1).toBe(500 + more.length);
    if (first.kind === 'ok') expect(first.bytes.equals(Buffer.concat([data, more]))).toBe(true);
    expect(c.calls.reads).toBeGreaterThanOrEqual(3);
  });

  it('a name that is gone is vanished at once: one open, no waiting (the scan looks for recorded files again, all together)', () => {
    const abs = file(bytesOf(10));
    rmSync(abs);
    let opens = 0;
    const counted = { ...fs, openSync: (...a: Parameters<typeof fs.openSync>) => { opens++; return fs.openSync(...a); } } as unknown as typeof fs;
    expect(stableReader(counted, createHash).read(abs)).toEqual({ kind: 'vanished' });
    expect(opens).toBe(1);
    // A path under what is now a file (its folder replaced by a file: ENOTDIR) is gone, too.
    writeFileSync(abs, 'a file where a folder was\n');
    expect(stableReader(counted, createHash).read(join(abs, 'below.md'))).toEqual({ kind: 'vanished' });
    expect(opens).toBe(2);
  });
});
