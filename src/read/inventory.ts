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
 *
 * Pages are asked for by offset (a position in the order) or by cursor (the
 * order key and id of the last record of the page before): a cursor page
 * starts right after that place, so writes between pages cannot shift it,
 * and the index seeks there instead of counting rows up to an offset.
 */
import type { DB } from '../store/db.js';
import type { PartitionId } from '../store/layout.js';
import { encodeListCursor, facetTerms, nextOffset, type ParsedList } from './query.js';
import { SUMMARY_COLUMNS, UPDATED_KEY, UPDATED_ORDER, afterClause, filterClauses, partitionClause, toSummary, typeClause, whereSql, type Clause, type SummaryRow } from './summary.js';
import type { ListResult } from './types.js';

/** Up to this many tagged records are sorted directly; more are picked from the ordered index. */
const SORT_DIRECTLY = 1000;

/**
 * The query for a page of the inventory without a tag. Several readable partitions (an agent with a session reads
 * private and its conversation) are each read in order from `records_partition_updated`, no more rows than the page
 * needs, and merged: `partition IN (…)` would have SQLite sort every record of them for each page (277 ms at 100k
 * records, against 1-2 ms; BENCHMARKS.md).
 */
export function pageQuery(partitions: readonly PartitionId[] | null, scope: Clause | null, filters: Clause[], after: Clause | null, take: number, skip: number): Clause {
  if (partitions && partitions.length > 1) {
    const each = partitions.map((p) => whereSql([{ sql: 'r.partition = ?', params: [p] }, ...filters, after]));
    return {
      sql: `SELECT * FROM (${each.map((w) => `SELECT * FROM (SELECT ${PLACED_COLUMNS} FROM records r ${w.sql} ORDER BY ${UPDATED_ORDER} LIMIT ?)`).join(' UNION ALL ')})
        ORDER BY ukey DESC, id LIMIT ? OFFSET ?`,
      params: [...each.flatMap((w) => [...w.params, take + skip]), take, skip],
    };
  }
  const paged = whereSql([scope, ...filters, after]);
  return { sql: `SELECT ${PLACED_COLUMNS} FROM records r ${paged.sql} ORDER BY ${UPDATED_ORDER} LIMIT ? OFFSET ?`, params: [...paged.params, take, skip] };
}

/** One read snapshot: the total and the page always describe the same state, even beside a writer. */
export function listRecords(db: DB, readable: 'all' | PartitionId[], q: ParsedList): ListResult {
  return db.transaction(() => listInSnapshot(db, readable, q)).deferred();
}

/** A summary row with its place in the order. */
type PlacedRow = SummaryRow & { ukey: string };
const PLACED_COLUMNS = `${SUMMARY_COLUMNS}, ${UPDATED_KEY} AS ukey`;

const EMPTY: ListResult = { records: [], total: 0, nextOffset: null, nextCursor: null };

function listInSnapshot(db: DB, readable: 'all' | PartitionId[], q: ParsedList): ListResult {
  // By cursor: the records after it, one more than the page to know whether
  // another page follows. By offset: positions, as before.
  const after = q.after ? afterClause(q.after) : null;
  const andAfter = after ? ` AND ${after.sql}` : '';
  const afterParams = after ? after.params : [];
  const take = after ? q.limit + 1 : q.limit;
  const skip = after ? 0 : q.offset;
  let total: number;
  let rows: PlacedRow[];
  if (q.tag && q.type) {
    // Tag and type together: the tag's records from the FTS facets, then the
    // type checked row by row on that (already narrowed) set.
    const facets = facetTerms({ readable, partition: q.partition, kind: q.kind, lifecycle: q.lifecycle, tag: q.tag });
    if (facets === null) return EMPTY;
    const type = typeClause(q.type);
    const from = `FROM records r WHERE r.id IN (SELECT k.id FROM records_fts JOIN records_fts_keys k ON k.n = records_fts.rowid WHERE records_fts MATCH ?) AND (${type.sql})`;
    const params = [facets.join(' AND '), ...type.params];
    total = (db.prepare(`SELECT count(*) AS n ${from}`).get(...params) as { n: number }).n;
    if (total === 0 || skip >= total) return { ...EMPTY, total };
    rows = db.prepare(`SELECT ${PLACED_COLUMNS} ${from}${andAfter} ORDER BY ${UPDATED_ORDER} LIMIT ? OFFSET ?`).all(...params, ...afterParams, take, skip) as PlacedRow[];
  } else if (q.tag) {
    const facets = facetTerms({ readable, partition: q.partition, kind: q.kind, lifecycle: q.lifecycle, tag: q.tag });
    if (facets === null) return EMPTY;
    const match = facets.join(' AND ');
    total = (db.prepare('SELECT count(*) AS n FROM records_fts WHERE records_fts MATCH ?').get(match) as { n: number }).n;
    if (total === 0 || skip >= total) return { ...EMPTY, total };
    if (total <= SORT_DIRECTLY) {
      rows = db.prepare(
        `SELECT ${PLACED_COLUMNS} FROM records_fts JOIN records_fts_keys k ON k.n = records_fts.rowid JOIN records r ON r.id = k.id
         WHERE records_fts MATCH ?${andAfter} ORDER BY ${UPDATED_ORDER} LIMIT ? OFFSET ?`,
      ).all(match, ...afterParams, take, skip) as PlacedRow[];
    } else {
      const ids = db.prepare(
        `SELECT r.id FROM records r INDEXED BY records_updated
         WHERE r.id IN (SELECT k.id FROM records_fts JOIN records_fts_keys k ON k.n = records_fts.rowid WHERE records_fts MATCH ?)${andAfter}
         ORDER BY ${UPDATED_ORDER} LIMIT ? OFFSET ?`,
      ).pluck().all(match, ...afterParams, take, skip) as string[];
      const byId = new Map((db.prepare(`SELECT ${PLACED_COLUMNS} FROM records r WHERE r.id IN (${ids.map(() => '?').join(', ')})`)
        .all(...ids) as PlacedRow[]).map((r) => [r.id, r]));
      rows = ids.map((id) => byId.get(id)).filter((r): r is PlacedRow => r !== undefined);
    }
  } else {
    const scope = partitionClause(readable);
    const filters = filterClauses(q);
    const where = whereSql([scope, ...filters]);
    total = (db.prepare(`SELECT count(*) AS n FROM records r ${where.sql}`).get(...where.params) as { n: number }).n;
    if (total === 0 || skip >= total) return { ...EMPTY, total };
    const page = pageQuery(readable !== 'all' && !q.partition ? readable : null, scope, filters, after, take, skip);
    rows = db.prepare(page.sql).all(...page.params) as PlacedRow[];
  }
  const page = rows.slice(0, q.limit);
  const next = after ? null : nextOffset(q.offset, page.length, total);
  const more = after ? rows.length > q.limit : next !== null;
  const last = page[page.length - 1];
  return {
    records: page.map(toSummary),
    total,
    nextOffset: next,
    nextCursor: more && last ? encodeListCursor({ updatedKey: last.ukey, id: last.id }) : null,
  };
}
