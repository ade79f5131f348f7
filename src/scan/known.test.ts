import { describe, expect, it } from 'vitest';
import { lstatSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { folderDigest, folderFiles, keepFolderDigests, knownEntry, msFromNs } from './known.js';
import { migrate } from '../store/db.js';
import { upsertVaultFile } from '../store/vault-files.js';

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

describe('folderFiles: the recorded files of one folder, as the walk would see them [SCAN-4]', () => {
  it('loads the folder\'s own rows (not its subfolders or look-alike siblings), filtered by the walk\'s rules, with the folder\'s version', () => {
    const db = new Database(':memory:');
    migrate(db);
    const ins = db.prepare("INSERT INTO vault_files(path, partition, size, mtime_ns, ctime_ns, ino, sha256, racy) VALUES (?, 'private', 3, ?, ?, ?, 'x', ?)");
    const times = ['1700000000123456789', '1799999999999999999', '1000000000', '999', '-1500000000', '1768000000000000001'];
    // A ctime of its own for each (one of them none: a row recorded before migration 009).
    const ctimeOf = (i: number) => (i === 4 ? null : String(1768000000000000000n + BigInt(i) * 1_000_001n));
    times.forEach((ns, i) => ins.run(`private/n/f${i}.md`, ns, ctimeOf(i), String(1000 + i), i === 2 ? 1 : 0));
    for (const other of ['private/n/sub/deeper.md', 'private/n0.md', 'private/n-x/a.md', 'private/m/a.md', 'private/n.md']) ins.run(other, '1', '1', '1', 0);
    for (const unadmitted of ['private/n/pic.png', 'private/n/bad\\name.md', 'private/n/tab\tname.md', 'private/n/.hidden.md']) ins.run(unadmitted, '1', '1', '1', 0);
    const n = folderFiles(db, 'private/n', 'private');
    expect([...n.entries.keys()].sort()).toEqual(times.map((_, i) => `f${i}.md`));
    times.forEach((ns, i) => expect(n.entries.get(`f${i}.md`)).toEqual(knownEntry(3, ns, ctimeOf(i), String(1000 + i), i === 2)));
    expect(n.entries.get('f4.md')!.ctimeMs).toBeNaN();
    expect(n.entries.get('f0.md')!.ctimeMs).toBe(msFromNs('1768000000000000000'));
    expect(n.rows).toBe(times.length + 4); // the unadmitted rows are still rows of the folder
    expect(n.version).toBe(db.prepare("SELECT version FROM scan_folders WHERE dir = 'private/n'").pluck().get());
    // A folder out of the walk's scope admits nothing; a folder without a row has no version.
    ins.run('private/evidence/src/orig.md', '1', '1', '1', 0);
    expect(folderFiles(db, 'private/evidence/src', 'private')).toMatchObject({ rows: 1, entries: new Map() });
    expect(folderFiles(db, 'private/none', 'private')).toEqual({ version: null, rows: 0, entries: new Map() });
    db.close();
  });

  it('counts characters as SQLite does: a folder named with characters beyond the BMP holds only its own files', () => {
    // JavaScript counts each of these as two UTF-16 units, SQLite as one character.
    const db = new Database(':memory:');
    migrate(db);
    const ins = db.prepare("INSERT INTO vault_files(path, partition, size, mtime_ns, ctime_ns, ino, sha256) VALUES (?, 'private', 1, '1', '1', '1', 'x')");
    const dir = 'private/\u{1F4DA} Books/\u{1F3AC}\u{1F3AC} Films';
    for (const p of ['index.md', 'A/x.md', 'AB/y.md', 'A/B/z.md', 'é/w.md']) ins.run(`${dir}/${p}`);
    expect(folderFiles(db, dir, 'private')).toMatchObject({ rows: 1, entries: new Map([['index.md', knownEntry(1, '1', '1', '1', false)]]) });
    expect([...folderFiles(db, `${dir}/A`, 'private').entries.keys()]).toEqual(['x.md']);
    db.close();
  });
});

describe('folder digests: kept only against untouched rows, cleared by any write [SCAN-4]', () => {
  const st = (size: number, mtimeMs: number, ino: number, ctimeMs = 1700000000002.5) => ({ size, mtimeMs, ctimeMs, ino, isFile: () => true, isDirectory: () => false, isSymbolicLink: () => false });
  it('differs when any name, size, mtime, ctime or inode differs, or the order', () => {
    const base = [{ name: 'a.md', st: st(1, 1700000000000.25, 7) }, { name: 'b.md', st: st(2, 1700000000001, 8) }];
    const d = folderDigest(base);
    expect(folderDigest(base.map((f) => ({ ...f })))).toBe(d);
    const variants = [
      [{ name: 'c.md', st: base[0]!.st }, base[1]!],
      [{ name: 'a.md', st: st(9, 1700000000000.25, 7) }, base[1]!],
      [{ name: 'a.md', st: st(1, 1700000000000.5, 7) }, base[1]!],
      [{ name: 'a.md', st: st(1, 1700000000000.25, 70) }, base[1]!],
      [{ name: 'a.md', st: st(1, 1700000000000.25, 7, 1700000000003) }, base[1]!],
      [base[1]!, base[0]!],
      [base[0]!],
      [...base, { name: 'c.md', st: st(0, 0, 0) }],
    ];
    for (const v of variants) expect(folderDigest(v)).not.toBe(d);
  });
  it('every insert, update or delete under a folder clears its digest and bumps its version; a stale version keeps nothing', () => {
    const db = new Database(':memory:');
    migrate(db);
    const ins = db.prepare("INSERT INTO vault_files(path, partition, size, mtime_ns, ino, sha256) VALUES (?, 'private', 1, '1', '1', 'x')");
    ins.run('private/n/a.md');
    ins.run('private/m/a.md');
    const row = db.prepare('SELECT version, digest FROM scan_folders WHERE dir = ?');
    const keep = (dir: string) => keepFolderDigests(db, [[dir, (row.get(dir) as { version: number }).version, 'D']], []);
    const writes = [
      () => ins.run('private/n/b.md'),
      () => db.prepare("UPDATE vault_files SET size = 2 WHERE path = 'private/n/a.md'").run(),
      () => db.prepare("UPDATE vault_files SET racy = 1 WHERE path = 'private/n/a.md'").run(),
      () => db.prepare("DELETE FROM vault_files WHERE path = 'private/n/b.md'").run(),
      () => upsertVaultFile(db, 'private/n/a.md', { size: 5, mtimeNs: '5', ctimeNs: '5', ino: '5', sha256: 'y', exec: false }),
    ];
    for (const write of writes) {
      keep('private/n');
      keep('private/m');
      const v = (row.get('private/n') as { version: number }).version;
      expect(row.get('private/n')).toEqual({ version: v, digest: 'D' });
      write();
      expect(row.get('private/n')).toEqual({ version: v + 1, digest: null });
      expect(row.get('private/m')).toMatchObject({ digest: 'D' }); // another folder keeps its own
      keepFolderDigests(db, [['private/n', v, 'D']], []); // checked against the rows before the write: not kept
      expect(row.get('private/n')).toEqual({ version: v + 1, digest: null });
    }
    // A folder that lost its last row is dropped, at its current version only.
    db.prepare("DELETE FROM vault_files WHERE path = 'private/m/a.md'").run();
    const v = (row.get('private/m') as { version: number }).version;
    keepFolderDigests(db, [], [['private/m', v - 1]]);
    expect(row.get('private/m')).toBeDefined();
    keepFolderDigests(db, [], [['private/m', v]]);
    expect(row.get('private/m')).toBeUndefined();
    // A move between folders touches both.
    ins.run('private/p/x.md');
    keep('private/p');
    keep('private/n');
    db.prepare("UPDATE vault_files SET path = 'private/q/x.md' WHERE path = 'private/p/x.md'").run();
    expect(row.get('private/p')).toMatchObject({ digest: null });
    expect(row.get('private/q')).toMatchObject({ digest: null });
    expect(row.get('private/n')).toMatchObject({ digest: 'D' });
    db.close();
  });
});
