import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { migrate } from './db.js';
import { folderOf, writeVaultFiles } from './vault-files.js';

/** [SCAN-4] `scan_folders` follows every write to `vault_files`, row by row (triggers) or in bulk. */
function fresh() {
  const db = new Database(':memory:');
  migrate(db);
  return db;
}
const triggers = (db: Database.Database) => db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'vault_files' ORDER BY name").all();
const folders = (db: Database.Database) => db.prepare('SELECT dir, partition, version, digest FROM scan_folders ORDER BY dir').all() as Array<{ dir: string; partition: string; version: number; digest: string | null }>;
const UPSERT = `INSERT INTO vault_files(path, partition, size, mtime_ns, ino, sha256) VALUES (?, ?, 1, '1', '1', 'x')
  ON CONFLICT(path) DO UPDATE SET size = size + 1`;

describe('folderOf: the folder of a path, as migration 007\'s triggers compute it', () => {
  it('agrees with the SQL for any path', () => {
    const db = fresh();
    const sql = db.prepare("SELECT rtrim(rtrim(@p, replace(@p, '/', '')), '/')").pluck();
    const seg = fc.string({ unit: fc.constantFrom('a', 'é', '/', '.', ' ', '0', '\u{1F600}', '-'), maxLength: 12 });
    fc.assert(fc.property(seg, (p) => folderOf(p) === sql.get({ p })), { numRuns: 2000 });
    for (const p of ['private/a/b.md', 'top.md', 'private//x.md', 'conversations/s-1/pages/é ü.md']) expect(folderOf(p)).toBe(sql.get({ p }));
    db.close();
  });
});

describe('writeVaultFiles: a large write updates each folder once, without the per-row triggers', () => {
  const paths = Array.from({ length: 2500 }, (_, i) => `private/pages/d${i % 7}/p-${i}.md`).concat(['conversations/s1/x.md', 'private/top.md']);
  it('leaves the folders as the triggers would: every touched folder registered, its digest cleared and its version moved', () => {
    const byTriggers = fresh();
    const bulk = fresh();
    for (const db of [byTriggers, bulk]) {
      db.prepare(UPSERT).run('private/pages/d1/old.md', 'private');
      db.prepare(UPSERT).run('private/keep/k.md', 'private');
      db.exec("UPDATE scan_folders SET digest = 'D'");
    }
    const run = (db: Database.Database) => {
      const up = db.prepare(UPSERT);
      for (const p of paths) up.run(p, p.startsWith('private/') ? 'private' : 'conversation:s1');
      db.prepare("DELETE FROM vault_files WHERE path = 'private/pages/d1/old.md'").run();
    };
    const before = folders(bulk);
    byTriggers.transaction(() => run(byTriggers))();
    bulk.transaction(() => writeVaultFiles(bulk, [...paths, 'private/pages/d1/old.md'], () => run(bulk)))();
    const shape = (db: Database.Database) => folders(db).map(({ dir, partition, digest }) => ({ dir, partition, digest }));
    expect(shape(bulk)).toEqual(shape(byTriggers));
    for (const f of folders(bulk)) {
      const was = before.find((b) => b.dir === f.dir);
      if (f.dir === 'private/keep') expect(f).toEqual(was); // untouched: digest kept
      else if (was) expect(f.version).toBeGreaterThan(was.version);
    }
    expect(triggers(bulk)).toEqual(triggers(byTriggers));
    expect(triggers(bulk)).toHaveLength(3);
    // Small writes keep the triggers.
    bulk.exec("UPDATE scan_folders SET digest = 'D'");
    bulk.transaction(() => writeVaultFiles(bulk, ['private/keep/k.md'], () => bulk.prepare(UPSERT).run('private/keep/k.md', 'private')))();
    expect(folders(bulk).find((f) => f.dir === 'private/keep')?.digest).toBeNull();
    expect(folders(bulk).find((f) => f.dir === 'private/top.md')).toBeUndefined();
  });

  it('a throw rolls back the writes and keeps the triggers; outside a transaction it refuses', () => {
    const db = fresh();
    const want = triggers(db);
    expect(() => writeVaultFiles(db, paths, () => 1)).toThrow(/inside a transaction/);
    expect(() => db.transaction(() => writeVaultFiles(db, paths, () => {
      db.prepare(UPSERT).run(paths[0], 'private');
      throw new Error('boom');
    }))()).toThrow('boom');
    expect(triggers(db)).toEqual(want);
    expect(db.prepare('SELECT count(*) FROM vault_files').pluck().get()).toBe(0);
    expect(folders(db)).toEqual([]);
  });
});
