/**
 * state.sqlite: journal, outbox, receipts, scan state and read indexes [LAY-1].
 * WAL with synchronous=FULL: better-sqlite3's default (NORMAL under WAL) can
 * lose the last transactions on power loss (FIELD-NOTES, durability).
 */
import Database from 'better-sqlite3';

export type DB = Database.Database;

import m001 from './migrations/001-core.js';
import m002 from './migrations/002-scans.js';
import m003 from './migrations/003-read.js';
import m004 from './migrations/004-attachments.js';
import m005 from './migrations/005-verify.js';
import m006 from './migrations/006-staged-bytes.js';
import m007 from './migrations/007-scan-folders.js';
import m008 from './migrations/008-record-tombstones.js';
import m009 from './migrations/009-file-ctime.js';
import m010 from './migrations/010-batch-bytes.js';
import m011 from './migrations/011-staged-sha256.js';
import m012 from './migrations/012-exec-bit.js';
import m013 from './migrations/013-observed-tip.js';
import m014 from './migrations/014-broken-record-files.js';
import m015 from './migrations/015-record-moves.js';
import m016 from './migrations/016-broken-record-revision.js';
import m017 from './migrations/017-blocked-claims.js';
import m018 from './migrations/018-source-descriptor.js';
import m019 from './migrations/019-revision-floors.js';
import m020 from './migrations/020-publications-created.js';
import m021 from './migrations/021-unknown-descriptors.js';
import m022 from './migrations/022-batch-files-path.js';
import m023 from './migrations/023-scan-counts.js';

/** Versioned migrations: index i upgrades user_version i -> i+1. Append only; one file each. */
const migrations: string[] = [m001, m002, m003, m004, m005, m006, m007, m008, m009, m010, m011, m012, m013, m014, m015, m016, m017, m018, m019, m020, m021, m022, m023];

export const SCHEMA_VERSION = migrations.length;

/**
 * The page size a new state.sqlite is created with (SQLite's default is
 * 4 KiB). Every page SQLite reads or writes is one system call, and on the
 * VMs measured here a system call is dear: with 16 KiB pages a 100k-file
 * baseline scan writes and reads a quarter as many pages, search and
 * publication at 10k+ records touch fewer, and the page cache keeps its
 * 2 MiB budget (cache_size counts KiB). Measured side by side in
 * BENCHMARKS.md ("SQLite page size"). It only takes effect on a database
 * that has no pages yet: in WAL mode SQLite ignores it afterwards, so a
 * store created with 4 KiB pages keeps them.
 */
export const PAGE_SIZE = 16384;

export function openDatabase(file: string, opts: { create: boolean }): DB {
  const db = new Database(file, { fileMustExist: !opts.create });
  // Before journal_mode: turning WAL on writes the database's first page.
  if (opts.create) db.pragma(`page_size = ${PAGE_SIZE}`);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  migrate(db);
  return db;
}

export function migrate(db: DB): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > migrations.length) {
    throw new Error(`state.sqlite schema version ${current} is newer than this Knowledge (${migrations.length})`);
  }
  for (let v = current; v < migrations.length; v++) {
    const sql = migrations[v]!;
    db.transaction(() => {
      if (sql.trim() !== '') db.exec(sql);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
}

export function getMeta(db: DB, key: string): string | undefined {
  const row = db.prepare('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined;
  return row?.value;
}

export function setMeta(db: DB, key: string, value: string): void {
  db.prepare('INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value').run(key, value);
}

/**
 * Run `fn` inside the current transaction (as a savepoint) with the named
 * triggers of `table` dropped, and recreate them from their own SQL before it
 * returns: no other connection ever sees them missing, and a throw rolls the
 * drop back with everything else. For bulk writes, which then do set-wise
 * what the per-row triggers would have done (a trigger costs more per row
 * than the write itself).
 */
export function withoutTriggers<T>(db: DB, table: string, names: readonly string[], fn: () => T): T {
  return db.transaction(() => {
    const triggers = db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ? AND name IN (${names.map(() => '?').join(', ')})`)
      .all(table, ...names) as Array<{ name: string; sql: string }>;
    if (triggers.length !== names.length) throw new Error(`${table} triggers missing: found ${triggers.map((t) => t.name).join(', ') || 'none'}`);
    for (const t of triggers) db.exec(`DROP TRIGGER ${t.name}`);
    const out = fn();
    for (const t of triggers) db.exec(t.sql);
    return out;
  })();
}
