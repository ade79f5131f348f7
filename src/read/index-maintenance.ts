/**
 * Bulk maintenance of the read indexes [READ-1].
 *
 * Migration 003's triggers index each record as it is written: right for a
 * publication of a few records, but a table with triggers costs far more per
 * written row even when the trigger does nothing (measured: 100k record
 * inserts 1.9 s without triggers, 4.5 s with one that only runs `SELECT 1`,
 * 16 s with 003's). A scan that writes many records (a 100k-file baseline)
 * therefore runs its writes with 003's three triggers dropped and reports
 * every record id it writes; `deferReadIndex` then recreates the triggers
 * exactly as they were (their SQL is read back from the schema) and
 * reindexes those ids with a few set-wise statements that compute what the
 * triggers would have (src/read/index-maintenance.test.ts compares both on
 * random write mixes).
 *
 * It runs inside the caller's transaction, in a savepoint of its own: no
 * other connection ever sees the triggers missing, and on a throw the
 * savepoint (triggers, writes) is rolled back.
 */
import { withoutTriggers, type DB } from '../store/db.js';

/** Migration 003's per-row triggers on `records`. */
const READ_TRIGGERS = ['records_read_ai', 'records_read_au', 'records_read_ad'];

/** 003's aliases column: one alias per line. */
const ALIASES = `(SELECT group_concat(value, char(10)) FROM json_each(CASE WHEN json_valid(r.aliases) THEN r.aliases ELSE '[]' END) WHERE type = 'text')`;
/** 003's facets column: partition, kind, lifecycle and tags as opaque hex tokens. */
const FACETS = `'p' || hex(r.partition) || ' k' || hex(r.kind) || ' l' || hex(r.lifecycle) || coalesce(
  (SELECT ' ' || group_concat('t' || hex(value), ' ') FROM json_each(CASE WHEN json_valid(r.tags) THEN r.tags ELSE '[]' END) WHERE type = 'text'), '')`;

/**
 * What 003's triggers do, for every dirty id at once. `live` joins the dirty
 * ids to their records: SQLite has no statistics on the temp table, and left
 * to itself scans all of `records` (evaluating the JSON tests on every row)
 * and looks each row up among the dirty ids — right for a baseline that
 * dirtied them all, but 0.1-0.15 s per statement for a one-file edit in a
 * 100k-record store (measured). So a write that is not bulk fixes the join
 * order (CROSS JOIN: the dirty ids drive, each record found by its id).
 */
const flushStatements = (live: string): string[] => [
  // Forget what each dirty id had (the update and delete triggers' first half).
  'DELETE FROM records_fts WHERE rowid IN (SELECT k.n FROM temp.read_index_dirty d JOIN records_fts_keys k ON k.id = d.id)',
  'DELETE FROM record_links WHERE source_id IN (SELECT id FROM temp.read_index_dirty)',
  'DELETE FROM records_fts_keys WHERE id IN (SELECT id FROM temp.read_index_dirty) AND NOT EXISTS (SELECT 1 FROM records r WHERE r.id = records_fts_keys.id)',
  // Index each dirty id that is a record now (the insert trigger); new keys in first-write order.
  `INSERT INTO records_fts_keys(id) SELECT d.id FROM ${live} WHERE NOT EXISTS (SELECT 1 FROM records_fts_keys k WHERE k.id = d.id) ORDER BY d.seq`,
  `INSERT INTO records_fts(rowid, title, aliases, body, facets)
     SELECT k.n, r.title, ${ALIASES}, r.body, ${FACETS} FROM ${live} JOIN records_fts_keys k ON k.id = d.id ORDER BY k.n`,
  `INSERT INTO record_links(source_id, target_id, kind)
     SELECT DISTINCT r.id, j.value, 'dependency' FROM ${live}, json_each(CASE WHEN json_valid(r.meta) THEN r.meta ELSE '{}' END, '$.dependencies') j WHERE j.type = 'text'`,
  `INSERT INTO record_links(source_id, target_id, kind)
     SELECT r.id, json_extract(r.meta, '$.from'), 'from' FROM ${live} WHERE json_valid(r.meta) AND json_type(r.meta, '$.from') = 'text'`,
  `INSERT INTO record_links(source_id, target_id, kind)
     SELECT r.id, json_extract(r.meta, '$.to'), 'to' FROM ${live} WHERE json_valid(r.meta) AND json_type(r.meta, '$.to') = 'text'`,
  'DELETE FROM temp.read_index_dirty',
];
const FLUSH_BULK = flushStatements('temp.read_index_dirty d JOIN records r ON r.id = d.id');
const FLUSH_FEW = flushStatements('temp.read_index_dirty d CROSS JOIN records r ON r.id = d.id');

/** The statements a flush runs (bulk: every record dirty, e.g. a baseline; tests read their query plans). */
export function readIndexFlushSql(bulk: boolean): readonly string[] {
  return bulk ? FLUSH_BULK : FLUSH_FEW;
}

/**
 * Run `fn` without the per-row read-index triggers, then reindex every record
 * id `fn` reported through `touched` (each id it inserted, deleted or
 * changed, old and new). `fn` must report every write it makes to `records`.
 */
export function deferReadIndex<T>(db: DB, fn: (touched: (id: string) => void) => T, opts: { bulk?: boolean } = {}): T {
  if (!db.inTransaction) throw new Error('deferReadIndex must run inside a transaction');
  // One savepoint for all of it: the writes, the triggers' return and the flush stand or fall together.
  return db.transaction(() => {
    let touched = 0;
    const out = withoutTriggers(db, 'records', READ_TRIGGERS, () => {
      // A bulk write also drops the table's secondary indexes and builds them
      // again afterwards (again from their own SQL): SQLite builds an index by
      // sorting faster than it maintains it row by row (measured, 100k inserts
      // into an empty table: 2.9 s with the five indexes kept, 1.1 s + 0.7 s
      // to rebuild them). The primary key and the unique path index stay: the
      // writes look rows up by them.
      const indexes = opts.bulk ? secondaryIndexes(db) : [];
      for (const i of indexes) db.exec(`DROP INDEX ${i.name}`);
      // Touched ids go straight to the temp table (first touch sets their
      // order), not into a set held in memory for the whole write.
      db.exec('CREATE TEMP TABLE IF NOT EXISTS read_index_dirty (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE)');
      db.exec('DELETE FROM temp.read_index_dirty');
      const mark = db.prepare('INSERT OR IGNORE INTO temp.read_index_dirty(id) VALUES (?)');
      const result = fn((id) => {
        mark.run(id);
        touched++;
      });
      for (const i of indexes) db.exec(i.sql);
      return result;
    });
    if (touched > 0) for (const sql of readIndexFlushSql(opts.bulk ?? false)) db.prepare(sql).run();
    return out;
  })();
}

/** The indexes on `records` created by name (not the ones behind its primary key and unique path). */
function secondaryIndexes(db: DB): Array<{ name: string; sql: string }> {
  return db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'records' AND sql IS NOT NULL ORDER BY name")
    .all() as Array<{ name: string; sql: string }>;
}
