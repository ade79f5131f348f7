/**
 * Rows of the `records` index as RecordSummary values, and the SQL that
 * confines every read to the caller's partitions [SURF-3]. Records outside
 * them are never selected, so they cannot leak through any read.
 */
import type { PartitionId } from '../store/layout.js';
import type { RecordRow } from '../store/record-row.js';
import type { Lifecycle, RecordKind } from '../records/types.js';
import type { RecordSummary } from './types.js';

/** Columns every summary query selects, from `records` aliased as `r`. */
export const SUMMARY_COLUMNS =
  'r.id, r.partition, r.path, r.kind, r.title, r.revision, r.lifecycle, r.tags, r.aliases, r.updated_at, r.recorded_at';

/** The columns of SUMMARY_COLUMNS. */
export type SummaryRow = Omit<RecordRow, 'sha256' | 'meta' | 'body'>;

function stringList(json: string): string[] {
  try {
    const v: unknown = JSON.parse(json);
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

export function toSummary(row: SummaryRow): RecordSummary {
  return {
    id: row.id,
    partition: row.partition as PartitionId,
    path: row.path,
    kind: row.kind as RecordKind,
    title: row.title,
    revision: row.revision,
    lifecycle: row.lifecycle as Lifecycle,
    tags: stringList(row.tags),
    aliases: stringList(row.aliases),
    updatedAt: row.updated_at,
    recordedAt: row.recorded_at,
  };
}

/** A WHERE fragment and its parameters. */
export interface Clause {
  sql: string;
  params: unknown[];
}

/**
 * `r.partition IN (...)` for the partitions a caller may read; 'all' adds
 * nothing; an empty list matches nothing.
 */
export function partitionClause(readable: 'all' | PartitionId[]): Clause | null {
  if (readable === 'all') return null;
  if (readable.length === 0) return { sql: '0', params: [] };
  return { sql: `r.partition IN (${readable.map(() => '?').join(', ')})`, params: [...readable] };
}

/** Column filters of the inventory (a tag filter goes through the FTS facets instead: see inventory.ts). */
export function filterClauses(f: { kind?: RecordKind; lifecycle?: Lifecycle; partition?: PartitionId; type?: string }): Clause[] {
  const out: Clause[] = [];
  if (f.partition) out.push({ sql: 'r.partition = ?', params: [f.partition] });
  if (f.kind) out.push({ sql: 'r.kind = ?', params: [f.kind] });
  if (f.type) out.push(typeClause(f.type));
  if (f.lifecycle) out.push({ sql: 'r.lifecycle = ?', params: [f.lifecycle] });
  return out;
}

/** A claim's claim_kind or a relationship's relationship_type (Browse by type). */
export function typeClause(type: string): Clause {
  return {
    sql: "(r.kind = 'claim' AND json_extract(r.meta, '$.claim_kind') = ?) OR (r.kind = 'relationship' AND json_extract(r.meta, '$.relationship_type') = ?)",
    params: [type, type],
  };
}

export function whereSql(clauses: Array<Clause | null>): Clause {
  const real = clauses.filter((c): c is Clause => c !== null);
  if (real.length === 0) return { sql: '', params: [] };
  return { sql: `WHERE ${real.map((c) => `(${c.sql})`).join(' AND ')}`, params: real.flatMap((c) => c.params) };
}

/** updated_at as the inventory order compares it (never null: every stored updated_at is a valid UTC timestamp). */
export const UPDATED_KEY = "strftime('%Y-%m-%dT%H:%M:%fZ', r.updated_at)";

/** The inventory order (matches the records_updated index of migration 003). */
export const UPDATED_ORDER = `${UPDATED_KEY} DESC, r.id`;

/** The records after `p` in UPDATED_ORDER (its first term lets the records_updated index seek there). */
export function afterClause(p: { updatedKey: string; id: string }): Clause {
  return { sql: `${UPDATED_KEY} <= ? AND (${UPDATED_KEY} < ? OR r.id > ?)`, params: [p.updatedKey, p.updatedKey, p.id] };
}
