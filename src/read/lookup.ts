/**
 * Exact lookup [READ-1]: by id, else by title, else by alias. Titles and
 * aliases compare after NFC and lowercasing; the FTS5 index narrows the
 * candidates (its tokenizer folds case and diacritics, a superset of the
 * comparison) and the exact comparison is made here. Records outside the
 * caller's partitions are never candidates, so they read as `missing`.
 * Duplicate ids a scan found [REC-3] are never returned. Candidates are
 * searched in a few cases of the key (query.ts caseVariants), for scripts
 * whose case the tokenizer does not fold.
 */
import type { DB } from '../store/db.js';
import type { PartitionId } from '../store/layout.js';
import { columnPhrase, foldKey } from './query.js';
import { SUMMARY_COLUMNS, partitionClause, toSummary, whereSql, type SummaryRow } from './summary.js';
import { duplicateIdsAmong, duplicateSeenBy } from './duplicates.js';
import type { LookupResult, RecordSummary } from './types.js';

/** At most this many candidates are reported for an ambiguous key. */
export const MAX_CANDIDATES = 20;

export function lookupRecord(db: DB, readable: 'all' | PartitionId[], key: string): LookupResult {
  const scope = partitionClause(readable);
  // An id claimed by more than one file the caller can see one of has no record [REC-3]. Claimed only in partitions
  // the caller cannot read, it is no id of the caller's: the lookup goes on to titles and aliases, as for any other
  // unknown id, so their files change nothing the caller is answered.
  if (duplicateSeenBy(db, readable, key)) return { status: 'missing' };

  const byId = whereSql([{ sql: 'r.id = ?', params: [key] }, scope]);
  const row = db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM records r ${byId.sql}`).get(...byId.params) as SummaryRow | undefined;
  if (row) return { status: 'found', record: toSummary(row) };

  const folded = foldKey(key);
  const byTitle = withoutDuplicates(db, candidates(db, scope, 'title', key).filter((r) => foldKey(r.title) === folded));
  if (byTitle.length > 0) return decide(byTitle);
  const byAlias = withoutDuplicates(db, candidates(db, scope, 'aliases', key).filter((r) => r.aliases.some((a) => foldKey(a) === folded)));
  if (byAlias.length > 0) return decide(byAlias);
  return { status: 'missing' };
}

function withoutDuplicates(db: DB, found: RecordSummary[]): RecordSummary[] {
  const dupes = duplicateIdsAmong(db, found.map((r) => r.id));
  return dupes.size === 0 ? found : found.filter((r) => !dupes.has(r.id));
}

function decide(found: RecordSummary[]): LookupResult {
  if (found.length === 1) return { status: 'found', record: found[0]! };
  // Newest first, by instant: timestamps with and without fractions of a second do not sort as strings.
  const at = (r: RecordSummary) => Date.parse(r.updatedAt);
  found.sort((a, b) => at(b) - at(a) || (a.id < b.id ? -1 : 1));
  return { status: 'ambiguous', candidates: found.slice(0, MAX_CANDIDATES) };
}

function candidates(db: DB, scope: ReturnType<typeof partitionClause>, column: 'title' | 'aliases', key: string): RecordSummary[] {
  const match = columnPhrase(column, key, column === 'title');
  if (match === null) {
    // Nothing tokenizable (e.g. "???"): case does not apply; compare exactly.
    const w = column === 'title'
      ? whereSql([{ sql: 'r.title = ? OR r.title = ?', params: [key, key.normalize('NFC')] }, scope])
      : whereSql([{ sql: 'instr(r.aliases, ?) > 0', params: [JSON.stringify(key).slice(1, -1)] }, scope]);
    return (db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM records r ${w.sql}`).all(...w.params) as SummaryRow[]).map(toSummary);
  }
  const w = whereSql([{ sql: 'records_fts MATCH ?', params: [match] }, scope]);
  const rows = db.prepare(
    `SELECT ${SUMMARY_COLUMNS} FROM records_fts JOIN records_fts_keys k ON k.n = records_fts.rowid JOIN records r ON r.id = k.id ${w.sql}`,
  ).all(...w.params) as SummaryRow[];
  return rows.map(toSummary);
}

