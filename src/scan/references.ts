/**
 * Invalid references [REC-3, SCAN-2]: a dependency naming no record, a
 * relationship endpoint naming no record of its partition, an evidence
 * citation naming no source of its partition. Recomputed from the index
 * (records written by publications included) and stored as diagnostics, so
 * an unchanged rescan need not repeat it: for a whole partition when the set
 * of record ids or sources may have changed, else only for the records whose
 * files changed.
 */
import type { DB } from '../store/db.js';

interface BadRef { path: string; field: string; target: string | null; parked: number }

// The instr() filters skip the JSON work for the many records with no references.
// `records` is either the whole partition's or the named paths' (one statement
// for both, `@paths IS NULL OR path IN …`, read every record of the partition
// even for one path: 0.14 s per one-file scan in a 100k-record store, measured).
// Either way the rows are read once, materialized, for the four branches
// below (else each branch reads them again; for named paths, looks for
// relationships among the whole partition's records, by kind).
const badRefsSql = (records: string) => `
  WITH r AS MATERIALIZED (${records})
  SELECT r.path AS path, 'dependency' AS field, j.value AS target,
         EXISTS (SELECT 1 FROM scan_duplicate_rows d WHERE d.id = j.value) AS parked
    FROM r, json_each(r.meta, '$.dependencies') j
   WHERE instr(r.meta, '"dependencies":[]') = 0
     AND NOT EXISTS (SELECT 1 FROM records t WHERE t.id = j.value)
  UNION ALL
  SELECT r.path, 'from', json_extract(r.meta, '$.from'), EXISTS (SELECT 1 FROM scan_duplicate_rows d WHERE d.id = json_extract(r.meta, '$.from'))
    FROM r
   WHERE r.kind = 'relationship'
     AND NOT EXISTS (SELECT 1 FROM records t WHERE t.id = json_extract(r.meta, '$.from') AND t.partition = r.partition)
  UNION ALL
  SELECT r.path, 'to', json_extract(r.meta, '$.to'), EXISTS (SELECT 1 FROM scan_duplicate_rows d WHERE d.id = json_extract(r.meta, '$.to'))
    FROM r
   WHERE r.kind = 'relationship'
     AND NOT EXISTS (SELECT 1 FROM records t WHERE t.id = json_extract(r.meta, '$.to') AND t.partition = r.partition)
  UNION ALL
  SELECT r.path, 'evidence', json_extract(j.value, '$.source'), 0
    FROM r, json_each(r.meta, '$.evidence') j
   WHERE instr(r.meta, '"evidence":[]') = 0
     AND NOT EXISTS (SELECT 1 FROM sources s WHERE s.partition = r.partition AND s.source_id = json_extract(j.value, '$.source'))
  ORDER BY 1, 2, 3`;
// The whole partition is read once, keeping only the records that may hold
// a reference (each branch above filters again): not materialized, every
// branch read all of the partition's rows again (four passes; measured on a
// 100k baseline: 1.04-1.13 s, one pass 0.52-0.60 s). How that pass reads
// the partition depends on its share of the store: through the partition
// index, each row is a lookup in index order (~5 µs per row); reading the
// whole table in order is ~1 µs per row of the store (0.10 s against 0.55 s
// for a partition that is the whole 100k store, measured).
const PARTITION_FILTER = `partition = @p
      AND (kind = 'relationship' OR instr(meta, '"dependencies":[]') = 0 OR instr(meta, '"evidence":[]') = 0)`;
const PARTITION_BY_INDEX_SQL = badRefsSql(`SELECT path, partition, kind, meta FROM records WHERE ${PARTITION_FILTER}`);
const PARTITION_BY_SCAN_SQL = badRefsSql(`SELECT path, partition, kind, meta FROM records NOT INDEXED WHERE ${PARTITION_FILTER}`);
const PATHS_SQL = badRefsSql('SELECT path, partition, kind, meta FROM records WHERE path IN (SELECT value FROM json_each(@paths)) AND +partition = @p');

/** A partition holding at least 1/PARTITION_SCAN_SHARE of the store's records is read by scanning the table. */
const PARTITION_SCAN_SHARE = 5;

export type BadReferencesRead = 'paths' | 'partition-index' | 'partition-scan';

/** The statement a re-check runs (tests read its query plan). */
export function badReferencesSql(read: BadReferencesRead): string {
  return read === 'paths' ? PATHS_SQL : read === 'partition-index' ? PARTITION_BY_INDEX_SQL : PARTITION_BY_SCAN_SQL;
}

/** How a whole-partition re-check reads `partition`: by its index when it is a small share of the store. */
export function partitionRead(db: DB, partition: string): BadReferencesRead {
  const inPartition = db.prepare('SELECT count(*) FROM records WHERE partition = ?').pluck().get(partition) as number;
  const all = db.prepare('SELECT count(*) FROM records').pluck().get() as number;
  return inPartition * PARTITION_SCAN_SHARE >= all ? 'partition-scan' : 'partition-index';
}

/** Re-check a partition's references, or only those of the records at `paths`. Returns how many files have bad ones. */
export function recheckReferences(db: DB, partition: string, paths?: readonly string[]): number {
  if (paths === undefined) {
    db.prepare("DELETE FROM scan_diagnostics WHERE partition = ? AND code = 'invalid-reference'").run(partition);
  } else {
    const del = db.prepare("DELETE FROM scan_diagnostics WHERE path = ? AND code = 'invalid-reference'");
    for (const path of paths) del.run(path);
  }
  const rows = (paths === undefined
    ? db.prepare(badReferencesSql(partitionRead(db, partition))).all({ p: partition })
    : db.prepare(PATHS_SQL).all({ p: partition, paths: JSON.stringify(paths) })) as BadRef[];
  const byPath = new Map<string, string[]>();
  for (const r of rows) {
    const what = r.field === 'evidence' ? `evidence source ${r.target}` : `${r.field} ${r.target}`;
    const why = r.field === 'evidence'
      ? 'is not a source of this partition'
      : r.parked
        ? 'is claimed by more than one file'
        : r.field === 'dependency' ? 'is not a record' : 'is not a record of this partition';
    const list = byPath.get(r.path) ?? [];
    list.push(`${what} ${why}`);
    byPath.set(r.path, list);
  }
  const ins = db.prepare("INSERT OR REPLACE INTO scan_diagnostics(path, partition, code, reason) VALUES (?, ?, 'invalid-reference', ?)");
  for (const [path, reasons] of byPath) ins.run(path, partition, reasons.join('; '));
  return byPath.size;
}

/**
 * The records of `partition` whose references may have changed meaning when
 * the standing of `ids` changed (a record appeared, vanished, moved, or
 * became or stopped being a duplicate): those holding one of the ids, those
 * linking to one (dependencies, relationship endpoints: `record_links`, kept
 * by the read index), and files parked under one of them (their diagnostics
 * go). Evidence citations depend on sources, which publications and
 * attachments change, and a scan that adopts sources found on disk
 * (adopt.ts): apply.ts re-checks such a partition whole.
 */
export function pathsAffectedByIds(db: DB, partition: string, ids: ReadonlySet<string>): string[] {
  if (ids.size === 0) return [];
  return db.prepare(AFFECTED_SQL).pluck().all({ p: partition, ids: JSON.stringify([...ids]) }) as string[];
}

const AFFECTED_SQL = `
  WITH ids(id) AS MATERIALIZED (SELECT value FROM json_each(@ids))
  SELECT r.path FROM ids CROSS JOIN records r ON r.id = ids.id WHERE r.partition = @p
  UNION
  SELECT r.path FROM ids CROSS JOIN record_links l ON l.target_id = ids.id CROSS JOIN records r ON r.id = l.source_id WHERE r.partition = @p
  UNION
  SELECT d.path FROM ids CROSS JOIN scan_duplicate_rows d ON d.id = ids.id WHERE d.partition = @p`;
