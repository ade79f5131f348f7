/**
 * The exhaustive inventory [READ-1]: every record the caller may see, in a
 * stable order (updated_at descending, then id), paged. Unlike search it
 * misses nothing: a record with no searchable words is still listed.
 *
 * Without a tag filter the rows come from the `records_updated` index in
 * order. With one, the FTS `facets` column (migration 003) finds and counts
 * the matching records; a few are then sorted directly, many are picked by
 * walking the (covering) `records_updated` index in order until the page is
 * full, so no full record row is read except the page's.
 */
import type { DB } from '../store/db.js';
import type { PartitionId } from '../store/layout.js';
import { facetTerms, nextOffset, type ParsedList } from './query.js';
import { SUMMARY_COLUMNS, UPDATED_ORDER, filterClauses, partitionClause, toSummary, typeClause, whereSql, type SummaryRow } from './summary.js';
import type { ListResult } from './types.js';

/** Up to this many tagged records are sorted directly; more are picked from the ordered index. */
const SORT_DIRECTLY = 1000;

/** One read snapshot: the total and the page always describe the same state, even beside a writer. */
export function listRecords(db: DB, readable: 'all' | PartitionId[], q: ParsedList): ListResult {
  return db.transaction(() => listInSnapshot(db, readable, q)).deferred();
}

function listInSnapshot(db: DB, readable: 'all' | PartitionId[], q: ParsedList): ListResult {
  let total: number;
  let rows: SummaryRow[];
  if (q.tag && q.type) {
    // Tag and type together: the tag's records from the FTS facets, then the
    // type checked row by row on that (already narrowed) set.
    const facets = facetTerms({ readable, partition: q.partition, kind: q.kind, lifecycle: q.lifecycle, tag: q.tag });
    if (facets === null) return { records: [], total: 0, nextOffset: null };
    const type = typeClause(q.type);
    const from = `FROM records r WHERE r.id IN (SELECT k.id FROM records_fts JOIN records_fts_keys k ON k.n = records_fts.rowid WHERE records_fts MATCH ?) AND (${type.sql})`;
    const params = [facets.join(' AND '), ...type.params];
    total = (db.prepare(`SELECT count(*) AS n ${from}`).get(...params) as { n: number }).n;
    if (total === 0 || q.offset >= total) return { records: [], total, nextOffset: null };
    rows = db.prepare(`SELECT ${SUMMARY_COLUMNS} ${from} ORDER BY ${UPDATED_ORDER} LIMIT ? OFFSET ?`).all(...params, q.limit, q.offset) as SummaryRow[];
  } else if (q.tag) {
    const facets = facetTerms({ readable, partition: q.partition, kind: q.kind, lifecycle: q.lifecycle, tag: q.tag });
    if (facets === null) return { records: [], total: 0, nextOffset: null };
    const match = facets.join(' AND ');
    total = (db.prepare('SELECT count(*) AS n FROM records_fts WHERE records_fts MATCH ?').get(match) as { n: number }).n;
    if (total === 0 || q.offset >= total) return { records: [], total, nextOffset: null };
    if (total <= SORT_DIRECTLY) {
      rows = db.prepare(
        `SELECT ${SUMMARY_COLUMNS} FROM records_fts JOIN records_fts_keys k ON k.n = records_fts.rowid JOIN records r ON r.id = k.id
         WHERE records_fts MATCH ? ORDER BY ${UPDATED_ORDER} LIMIT ? OFFSET ?`,
      ).all(match, q.limit, q.offset) as SummaryRow[];
    } else {
      const ids = db.prepare(
        `SELECT r.id FROM records r INDEXED BY records_updated
         WHERE r.id IN (SELECT k.id FROM records_fts JOIN records_fts_keys k ON k.n = records_fts.rowid WHERE records_fts MATCH ?)
         ORDER BY ${UPDATED_ORDER} LIMIT ? OFFSET ?`,
      ).pluck().all(match, q.limit, q.offset) as string[];
      const byId = new Map((db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM records r WHERE r.id IN (${ids.map(() => '?').join(', ')})`)
        .all(...ids) as SummaryRow[]).map((r) => [r.id, r]));
      rows = ids.map((id) => byId.get(id)).filter((r): r is SummaryRow => r !== undefined);
    }
  } else {
    const where = whereSql([partitionClause(readable), ...filterClauses(q)]);
    total = (db.prepare(`SELECT count(*) AS n FROM records r ${where.sql}`).get(...where.params) as { n: number }).n;
    if (total === 0 || q.offset >= total) return { records: [], total, nextOffset: null };
    rows = db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM records r ${where.sql} ORDER BY ${UPDATED_ORDER} LIMIT ? OFFSET ?`)
      .all(...where.params, q.limit, q.offset) as SummaryRow[];
  }
  const records = rows.map(toSummary);
  return { records, total, nextOffset: nextOffset(q.offset, records.length, total) };
}
