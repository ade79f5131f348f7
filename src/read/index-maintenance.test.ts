/**
 * Deferred read-index maintenance builds exactly the index migration 003's
 * per-row triggers build [READ-1]: the same FTS text per record id, the same
 * links, no leftovers, whatever mix of inserts, upserts, replaces, id changes
 * and deletes a bulk writer makes; and the triggers come back unchanged.
 */
import { afterEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { migrate, type DB } from '../store/db.js';
import { deferReadIndex, readIndexFlushSql } from './index-maintenance.js';
import { searchRecords } from './search.js';
import { parseSearchQuery } from './query.js';

const opened: DB[] = [];
afterEach(() => {
  for (const db of opened.splice(0)) db.close();
});

function fresh(): DB {
  const db = new Database(':memory:');
  migrate(db);
  opened.push(db);
  return db;
}

const COLS = 'id, partition, path, kind, title, revision, lifecycle, sha256, recorded_at, updated_at, aliases, tags, meta, body';
const VALS = '@id, @partition, @path, @kind, @title, 1, @lifecycle, \'x\', \'t\', \'t\', @aliases, @tags, @meta, @body';
interface Row { id: string; partition: string; path: string; kind: string; title: string; lifecycle: string; aliases: string; tags: string; meta: string; body: string }
type Op = { op: 'insert' | 'replace' | 'upsert' | 'rename' | 'delete' | 'update-body'; row: Row; to?: string };

function apply(db: DB, ops: readonly Op[], touch: (id: string) => void = () => {}): void {
  const s = {
    insert: db.prepare(`INSERT INTO records(${COLS}) VALUES (${VALS})`),
    replace: db.prepare(`INSERT OR REPLACE INTO records(${COLS}) VALUES (${VALS})`),
    upsert: db.prepare(`INSERT INTO records(${COLS}) VALUES (${VALS}) ON CONFLICT(id) DO UPDATE SET title = excluded.title, tags = excluded.tags, meta = excluded.meta, body = excluded.body`),
    rename: db.prepare('UPDATE records SET id = @to WHERE id = @id'),
    delete: db.prepare('DELETE FROM records WHERE id = @id'),
    body: db.prepare('UPDATE records SET body = @body, lifecycle = @lifecycle WHERE id = @id'),
  };
  for (const o of ops) {
    const exists = db.prepare('SELECT 1 FROM records WHERE id = ?').get(o.row.id) !== undefined;
    const pathTaken = db.prepare('SELECT id FROM records WHERE path = ?').pluck().get(o.row.path) as string | undefined;
    switch (o.op) {
      case 'insert':
        if (!exists && pathTaken === undefined) s.insert.run(o.row);
        touch(o.row.id);
        break;
      case 'replace':
        // Replacing another id's row by path fires no delete trigger, in 003 as here: writers never do it.
        if (pathTaken === undefined || pathTaken === o.row.id) s.replace.run(o.row);
        touch(o.row.id);
        break;
      case 'upsert':
        if (pathTaken === undefined || pathTaken === o.row.id) s.upsert.run(o.row);
        touch(o.row.id);
        break;
      case 'rename':
        if (exists && db.prepare('SELECT 1 FROM records WHERE id = ?').get(o.to) === undefined) s.rename.run({ id: o.row.id, to: o.to });
        touch(o.row.id);
        touch(o.to!);
        break;
      case 'delete':
        s.delete.run({ id: o.row.id });
        touch(o.row.id);
        break;
      case 'update-body':
        s.body.run(o.row);
        touch(o.row.id);
        break;
    }
  }
}

/** Everything the read side derives, keyed by record id (FTS keys are internal numbers). */
function snapshot(db: DB) {
  return {
    fts: db.prepare('SELECT k.id, f.title, f.aliases, f.body, f.facets FROM records_fts f JOIN records_fts_keys k ON k.n = f.rowid ORDER BY k.id').all(),
    ftsRows: db.prepare('SELECT count(*) FROM records_fts').pluck().get(),
    keys: db.prepare('SELECT id FROM records_fts_keys ORDER BY id').pluck().all(),
    ids: db.prepare('SELECT id FROM records ORDER BY id').pluck().all(),
    links: db.prepare('SELECT source_id, kind, target_id FROM record_links ORDER BY 1, 2, 3').all(),
    triggers: db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name").all(),
  };
}

function randomOps(seed: number, n: number): Op[] {
  let x = seed;
  const rand = (k: number) => ((x = (x * 1103515245 + 12345) >>> 0) >>> 16) % k;
  const words = ['apple', 'pear', 'plum', 'fig', 'kiwi', 'lime'];
  const ops: Op[] = [];
  const kinds: Op['op'][] = ['insert', 'insert', 'replace', 'upsert', 'rename', 'delete', 'update-body'];
  for (let i = 0; i < n; i++) {
    const id = `r${rand(12)}`;
    const meta = rand(3) === 0 ? { dependencies: [`r${rand(12)}`, `r${rand(12)}`] } : rand(2) ? { from: `r${rand(12)}`, to: `r${rand(12)}` } : {};
    ops.push({
      op: kinds[rand(kinds.length)]!,
      to: `r${rand(12)}`,
      row: {
        id,
        partition: rand(2) ? 'private' : 'conversation:s1',
        path: `private/pages/${id}-${rand(2)}.md`,
        kind: rand(2) ? 'page' : 'claim',
        title: `${words[rand(6)]} title ${i}`,
        lifecycle: rand(4) ? 'active' : 'withdrawn',
        aliases: rand(3) ? JSON.stringify([`${words[rand(6)]} alias`]) : rand(2) ? '[]' : 'not json',
        tags: JSON.stringify(rand(2) ? [words[rand(6)]!, 'c++'] : []),
        meta: JSON.stringify(meta),
        body: `${words[rand(6)]} ${words[rand(6)]} body ${i}`,
      },
    });
  }
  return ops;
}

/** Every index on `records`, as its SQL (null for the automatic ones). */
function indexSql(db: DB): Array<{ name: string; sql: string | null }> {
  return db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'records' ORDER BY name").all() as Array<{ name: string; sql: string | null }>;
}

describe('[READ-1] deferred read-index maintenance', () => {
  it('in bulk mode writes without the secondary indexes and builds them again, unchanged and in use', () => {
    const db = fresh();
    const before = indexSql(db);
    expect(before.filter((i) => i.sql !== null).length).toBeGreaterThanOrEqual(5);
    db.transaction(() =>
      deferReadIndex(db, (touch) => {
        // Only the automatic indexes (primary key, unique path) are there while the block runs.
        expect(indexSql(db).filter((i) => i.sql !== null)).toEqual([]);
        apply(db, [{ op: 'insert', row: { id: 'q', partition: 'private', path: 'private/pages/q.md', kind: 'page', title: 'Quince', lifecycle: 'active', aliases: '[]', tags: '[]', meta: '{}', body: 'jam' } }], touch);
      }, { bulk: true }))();
    expect(indexSql(db)).toEqual(before);
    const plan = db.prepare("EXPLAIN QUERY PLAN SELECT id FROM records WHERE title = 'Quince'").all() as Array<{ detail: string }>;
    expect(plan.map((p) => p.detail).join(' ')).toMatch(/records_title/);
    // A throw in bulk mode rolls the dropped indexes back as well.
    expect(() => db.transaction(() => deferReadIndex(db, () => { throw new Error('boom'); }, { bulk: true }))()).toThrow('boom');
    expect(indexSql(db)).toEqual(before);
  });


  it('builds the same index as the per-row triggers, for random write mixes', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const ops = randomOps(seed, 60);
      const setup = randomOps(seed + 1000, 20);
      const perRow = fresh();
      const deferred = fresh();
      apply(perRow, setup);
      apply(deferred, setup);
      apply(perRow, ops);
      // Odd seeds also rebuild the table's secondary indexes (the bulk mode of a large scan).
      deferred.transaction(() => deferReadIndex(deferred, (touch) => apply(deferred, ops, touch), { bulk: seed % 2 === 1 }))();
      expect(indexSql(deferred), `seed ${seed}`).toEqual(indexSql(perRow));
      expect(deferred.pragma('integrity_check', { simple: true }), `seed ${seed}`).toBe('ok');
      const a = snapshot(perRow);
      const b = snapshot(deferred);
      expect(b, `seed ${seed}`).toEqual(a);
      expect(a.ftsRows).toBe(a.ids.length);
      for (const w of ['apple', 'fig', 'alias']) {
        const q = parseSearchQuery({ query: w });
        expect(searchRecords(deferred, 'all', q).results.map((h) => h.id).sort(), `seed ${seed} ${w}`)
          .toEqual(searchRecords(perRow, 'all', q).results.map((h) => h.id).sort());
      }
    }
  });

  it('does nothing to the index until the deferred block ends, then everything', () => {
    const db = fresh();
    db.transaction(() =>
      deferReadIndex(db, (touch) => {
        apply(db, [{ op: 'insert', row: { id: 'a', partition: 'private', path: 'private/pages/a.md', kind: 'page', title: 'Quince', lifecycle: 'active', aliases: '[]', tags: '[]', meta: '{}', body: 'jam' } }], touch);
        expect(db.prepare('SELECT count(*) FROM records_fts').pluck().get()).toBe(0);
        expect(db.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'records'").pluck().get()).toBe(0);
      }))();
    expect(searchRecords(db, 'all', parseSearchQuery({ query: 'jam' })).results.map((h) => h.id)).toEqual(['a']);
    expect(snapshot(db).triggers).toEqual(snapshot(fresh()).triggers);
  });

  it('a flush that is not bulk is driven by the dirty ids: it never scans the records or their keys', () => {
    // Left to itself SQLite (no statistics on the temp table) scanned all of `records` for each of
    // the link statements: 0.1-0.15 s each for a one-file edit in a 100k-record store.
    const db = fresh();
    const ins = db.prepare(`INSERT INTO records(${COLS}) VALUES (${VALS})`);
    db.transaction(() => {
      for (let i = 0; i < 2000; i++) {
        ins.run({ id: `r${i}`, partition: 'private', path: `private/pages/r${i}.md`, kind: 'page', title: `T${i}`, lifecycle: 'active', aliases: '["a"]', tags: '["t"]', meta: JSON.stringify({ from: 'r1', to: 'r2', dependencies: ['r3'] }), body: 'b' });
      }
    })();
    db.exec('CREATE TEMP TABLE IF NOT EXISTS read_index_dirty (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE)');
    const scans = (bulk: boolean) => readIndexFlushSql(bulk).flatMap((sql) =>
      (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as Array<{ detail: string }>).map((p) => p.detail).filter((d) => /^SCAN (?!d$|d |json_each|j |records_fts VIRTUAL)/.test(d)));
    expect(scans(false)).toEqual([]);
    // The bulk statements (every record dirty, e.g. a baseline) keep SQLite's own order.
    expect(readIndexFlushSql(true)).toHaveLength(readIndexFlushSql(false).length);
  });

  it('never commits the missing triggers: a throw rolls back the writes and restores them', () => {
    const db = fresh();
    expect(() => deferReadIndex(db, () => 1)).toThrow(/inside a transaction/);
    expect(() =>
      db.transaction(() =>
        deferReadIndex(db, (touch) => {
          apply(db, [{ op: 'insert', row: { id: 'b', partition: 'private', path: 'private/pages/b.md', kind: 'page', title: 'T', lifecycle: 'active', aliases: '[]', tags: '[]', meta: '{}', body: 'x' } }], touch);
          throw new Error('boom');
        }))(),
    ).toThrow('boom');
    expect(snapshot(db)).toMatchObject({ ids: [], ftsRows: 0, triggers: snapshot(fresh()).triggers });
    // The per-row triggers work again afterwards.
    apply(db, [{ op: 'insert', row: { id: 'c', partition: 'private', path: 'private/pages/c.md', kind: 'page', title: 'T', lifecycle: 'active', aliases: '[]', tags: '[]', meta: '{}', body: 'walnut' } }]);
    expect(searchRecords(db, 'all', parseSearchQuery({ query: 'walnut' })).results.map((h) => h.id)).toEqual(['c']);
  });
});
