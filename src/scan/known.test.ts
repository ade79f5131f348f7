import { describe, expect, it } from 'vitest';
import { lstatSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { knownEntry, knownFiles, msFromNs } from './known.js';

describe('msFromNs: stored nanoseconds compare equal to Node\'s number Stats.mtimeMs [SCAN-4]', () => {
  it('matches lstat for real files, including whole and sub-microsecond times', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kn-known-'));
    try {
      const times = [new Date(), new Date('2026-01-02T03:04:05.678Z'), new Date('1969-12-31T23:59:58.5Z'), new Date(0), new Date('2001-09-09T01:46:40Z')];
      for (const [i, t] of times.entries()) {
        const f = join(dir, `f${i}.md`);
        writeFileSync(f, 'x');
        if (i > 0) utimesSync(f, t, t);
        const big = lstatSync(f, { bigint: true });
        const num = lstatSync(f);
        expect(msFromNs(big.mtimeNs.toString())).toBe(num.mtimeMs);
        expect(Number(big.ino.toString())).toBe(num.ino);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('splits seconds and nanoseconds as libuv does', () => {
    expect(msFromNs('1700000000123456789')).toBe(1700000000 * 1000 + 123456789 / 1e6);
    expect(msFromNs('999')).toBe(999 / 1e6);
    expect(msFromNs('-1500000000')).toBe(-2 * 1000 + 500000000 / 1e6);
  });
});

describe('knownFiles: the recorded files a scan compares with', () => {
  it('loads what the walk would see, with the times msFromNs gives', () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE vault_files (path TEXT PRIMARY KEY, partition TEXT, size INTEGER, mtime_ns TEXT, ino TEXT, sha256 TEXT, racy INTEGER DEFAULT 0)');
    const ins = db.prepare("INSERT INTO vault_files VALUES (?, 'private', 3, ?, ?, 'x', ?)");
    const times = ['1700000000123456789', '1799999999999999999', '1000000000', '999', '-1500000000', '1768000000000000001'];
    times.forEach((ns, i) => ins.run(`private/n/f${i}.md`, ns, String(1000 + i), i === 2 ? 1 : 0));
    ins.run('private/.trash/hidden.md', '1', '1', 0);
    ins.run('private/n/pic.png', '1', '1', 0);
    ins.run('private/n/bad\\name.md', '1', '1', 0);
    ins.run('private/evidence/src/orig.md', '1', '1', 0);
    ins.run('private/n/tab\tname.md', '1', '1', 0); // control characters: never admitted, and never split a line
    ins.run('private/n/new\nline.md', '1', '1', 0);
    const map = knownFiles(db, ['private']).byPartition.get('private')!;
    expect([...map.keys()].sort()).toEqual(times.map((_, i) => `private/n/f${i}.md`));
    times.forEach((ns, i) => expect(map.get(`private/n/f${i}.md`)).toEqual(knownEntry(3, ns, String(1000 + i), i === 2)));
    db.close();
  });
});
