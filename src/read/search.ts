/**
 * Keyword search [READ-1]: SQLite FTS5 with BM25 over title, aliases and
 * body (weighted 10 : 5 : 1), filtered by kind, tag, lifecycle and
 * updated_at, confined to the caller's partitions, paged.
 *
 * Partition scope, kind, lifecycle and tag are FTS5 terms on the `facets`
 * column (see migration 003), so the index intersects them with the user's
 * words and ranks with `ORDER BY rank` inside FTS5; rows are joined only for
 * the page that is returned. Date bounds are not tokens: with them the
 * ranking query joins `records` and filters row by row.
 */
import { randomBytes } from 'node:crypto';
import type { DB } from '../store/db.js';
import type { PartitionId } from '../store/layout.js';
import { facetTerms, nextOffset, SNIPPET_CLOSE, SNIPPET_OPEN, type ParsedSearch } from './query.js';
import { SUMMARY_COLUMNS, toSummary, type SummaryRow } from './summary.js';
import type { SearchHit, SearchResult } from './types.js';

/** BM25 column weights: title, aliases, body (facets: 0). Configured as `rank` in migration 003. */
export const BM25_WEIGHTS = [10.0, 5.0, 1.0, 0.0] as const;
/** Tokens of context in a snippet. */
const SNIPPET_TOKENS = 16;
// Private markers, replaced by SNIPPET_OPEN/CLOSE once the best column is chosen. A record's text may hold any
// character (U+0002 and U+0003 too), so each marker carries a number drawn when the process starts, which no
// record's author can know: text that happens to look like a marker is never taken for a match.
const NONCE = randomBytes(8).toString('hex');
const OPEN = `\u0002${NONCE}\u0002`;
const CLOSE = `\u0003${NONCE}\u0003`;

const JOIN = 'JOIN records_fts_keys k ON k.n = records_fts.rowid JOIN records r ON r.id = k.id';

/** One read snapshot: the total and the page always describe the same state, even beside a writer. */
export function searchRecords(db: DB, readable: 'all' | PartitionId[], q: ParsedSearch): SearchResult {
  return db.transaction(() => searchInSnapshot(db, readable, q)).deferred();
}

function searchInSnapshot(db: DB, readable: 'all' | PartitionId[], q: ParsedSearch): SearchResult {
  const empty: SearchResult = { results: [], total: 0, nextOffset: null };
  if (q.match === null) return empty;
  const facets = facetTerms({ readable, kind: q.kind, lifecycle: q.lifecycle, tag: q.tag });
  if (facets === null) return empty;
  const match = [q.match, ...facets].join(' AND ');

  let total: number;
  let page: Array<{ rowid: number; rank: number }>;
  if (!q.updatedAfter && !q.updatedBefore) {
    total = (db.prepare('SELECT count(*) AS n FROM records_fts WHERE records_fts MATCH ?').get(match) as { n: number }).n;
    if (total === 0 || q.offset >= total) return { results: [], total, nextOffset: null };
    page = db.prepare('SELECT rowid, rank FROM records_fts WHERE records_fts MATCH ? ORDER BY rank, rowid LIMIT ? OFFSET ?')
      .all(match, q.limit, q.offset) as typeof page;
  } else {
    const dates: string[] = [];
    const params: unknown[] = [match];
    if (q.updatedAfter) { dates.push('julianday(r.updated_at) >= julianday(?)'); params.push(q.updatedAfter); }
    if (q.updatedBefore) { dates.push('julianday(r.updated_at) < julianday(?)'); params.push(q.updatedBefore); }
    const where = `WHERE records_fts MATCH ? AND ${dates.join(' AND ')}`;
    total = (db.prepare(`SELECT count(*) AS n FROM records_fts ${JOIN} ${where}`).get(...params) as { n: number }).n;
    if (total === 0 || q.offset >= total) return { results: [], total, nextOffset: null };
    page = db.prepare(`SELECT records_fts.rowid AS rowid, records_fts.rank AS rank FROM records_fts ${JOIN} ${where} ORDER BY rank, records_fts.rowid LIMIT ? OFFSET ?`)
      .all(...params, q.limit, q.offset) as typeof page;
  }

  // Only the page's rows are joined and get snippets. The rowid is CAST:
  // better-sqlite3 binds JS numbers as REAL, and FTS5 (3.53) then ignored the
  // rowid constraint, so every hit got the first row's snippet.
  const snippets = db.prepare(
    `SELECT highlight(records_fts, 0, :open, :close) AS t,
       snippet(records_fts, 1, :open, :close, '…', ${SNIPPET_TOKENS}) AS a,
       snippet(records_fts, 2, :open, :close, '…', ${SNIPPET_TOKENS}) AS b
     FROM records_fts WHERE records_fts MATCH :match AND rowid = CAST(:rowid AS INTEGER)`,
  );
  const summary = db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM records_fts_keys k JOIN records r ON r.id = k.id WHERE k.n = ?`);
  const results: SearchHit[] = [];
  for (const { rowid, rank } of page) {
    const row = summary.get(rowid) as SummaryRow | undefined;
    const snip = snippets.get({ open: OPEN, close: CLOSE, match, rowid }) as { t: string | null; a: string | null; b: string | null } | undefined;
    if (!row || !snip) continue; // removed between the two statements (another process wrote)
    results.push({ ...toSummary(row), ...pickSnippet(snip.b, snip.a, snip.t), ...(readable === 'all' ? { score: -rank } : {}) });
  }
  return { results, total, nextOffset: nextOffset(q.offset, results.length, total) };
}

/**
 * The body excerpt if a word matched there, else the aliases', else the title; one line, the matched words between
 * SNIPPET_OPEN and SNIPPET_CLOSE, and where they are (`marks`): the markers are `**`, which the text itself may hold.
 */
export function pickSnippet(body: string | null, aliases: string | null, title: string | null): { snippet: string; marks: Array<[number, number]> } {
  const hit = ([body, aliases, title].find((s) => s !== null && s.includes(OPEN)) ?? body ?? title ?? '').replace(/\s+/g, ' ').trim();
  let snippet = '';
  const marks: Array<[number, number]> = [];
  for (const [k, piece] of hit.split(OPEN).entries()) {
    const close = piece.indexOf(CLOSE);
    if (k === 0 || close < 0) {
      snippet += piece.split(CLOSE).join('');
      continue;
    }
    snippet += SNIPPET_OPEN;
    marks.push([snippet.length, snippet.length + close]);
    snippet += piece.slice(0, close) + SNIPPET_CLOSE + piece.slice(close + CLOSE.length).split(CLOSE).join('');
  }
  return { snippet, marks };
}
