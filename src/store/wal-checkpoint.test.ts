/**
 * A large write's WAL is copied into the database on a worker thread
 * (wal-checkpoint.ts): the automatic checkpoint is off until the work ends,
 * the copy really empties the log into the database, and a copy that cannot
 * be made is only reported.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, type DB } from './db.js';
import { BACKGROUND_MIN_WAL_BYTES, copyLogOnWorker, deferCheckpoints } from './wal-checkpoint.js';

const dirs: string[] = [];
const dbs: DB[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) if (db.open) db.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function fresh(): { db: DB; file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'kn-wal-'));
  dirs.push(dir);
  const file = join(dir, 'state.sqlite');
  const db = openDatabase(file, { create: true });
  dbs.push(db);
  return { db, file };
}

/** One transaction of `mib` MiB of rows. */
function bigWrite(db: DB, mib: number): void {
  db.exec('CREATE TABLE IF NOT EXISTS filler (n INTEGER PRIMARY KEY, b BLOB NOT NULL)');
  const ins = db.prepare('INSERT INTO filler(b) VALUES (?)');
  const chunk = Buffer.alloc(64 * 1024, 7);
  db.transaction(() => {
    for (let i = 0; i < mib * 16; i++) ins.run(chunk);
  })();
}

const walSize = (file: string) => statSync(`${file}-wal`).size;

describe('WAL copies on a worker thread (wal-checkpoint.ts)', () => {
  it('keeps the automatic checkpoint off during the work, copies the whole log on a worker, and turns it back on', async () => {
    const { db, file } = fresh();
    const before = db.pragma('wal_autocheckpoint', { simple: true });
    expect(before).toBeGreaterThan(0);
    const d = deferCheckpoints(db, file);
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    const sizeBefore = statSync(file).size;
    bigWrite(db, 40);
    expect(statSync(file).size).toBe(sizeBefore);
    // Nothing copied the log at the commit: it holds the whole transaction.
    expect(walSize(file)).toBeGreaterThanOrEqual(BACKGROUND_MIN_WAL_BYTES);
    d.copyInBackground();
    const out = await d.end();
    expect(out).toMatchObject({ ok: true, busy: 0 });
    if (!out?.ok) throw new Error('no copy');
    // `log` counts frames: one page each.
    expect(out.log).toBeGreaterThan(BACKGROUND_MIN_WAL_BYTES / (db.pragma('page_size', { simple: true }) as number));
    expect(out.checkpointed).toBe(out.log);
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(before);
    // The database file itself now holds the rows (before the copy it was a few pages).
    expect(statSync(file).size).toBeGreaterThan(40 * 1024 * 1024);
  });

  it('leaves a small log to the next commit, as SQLite would', async () => {
    const { db, file } = fresh();
    const d = deferCheckpoints(db, file);
    bigWrite(db, 1);
    d.copyInBackground();
    expect(await d.end()).toBeNull();
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
  });

  it('reports a copy it cannot make instead of throwing', async () => {
    const out = await copyLogOnWorker(join(tmpdir(), 'kn-no-such-dir', 'state.sqlite'));
    expect(out.ok).toBe(false);
    if (!out.ok) expect(out.reason).toMatch(/unable to open|does not exist|SQLITE_CANTOPEN|directory/i);
  });
});
