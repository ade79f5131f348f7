/**
 * Ids claimed by more than one file [REC-3]. Scans list them in
 * `duplicate_record_ids` (migration 003); exact lookup never returns a
 * record for such an id, because which file "is" the record is unknowable.
 */
import type { DB } from '../store/db.js';

export function duplicateIdsAmong(db: DB, ids: readonly string[]): Set<string> {
  const out = new Set<string>();
  if (ids.length === 0) return out;
  const stmt = db.prepare('SELECT 1 FROM duplicate_record_ids WHERE id = ? LIMIT 1');
  for (const id of new Set(ids)) if (stmt.get(id) !== undefined) out.add(id);
  return out;
}

/** Whether `id` is claimed twice [REC-3] with a claimant in a partition the caller may read. */
export function duplicateSeenBy(db: DB, readable: 'all' | readonly string[], id: string): boolean {
  const partitions = db.prepare('SELECT DISTINCT partition FROM duplicate_record_ids WHERE id = ?').pluck().all(id) as string[];
  return partitions.some((p) => readable === 'all' || readable.includes(p));
}

/**
 * The files that claim `id` when more than one does: the paths in partitions
 * the caller may read, and how many others there are (never named, as scan
 * diagnostics name them [SURF-3]). Null when `id` is no duplicate the caller
 * can see any claimant of.
 */
export function duplicateClaimants(db: DB, readable: 'all' | readonly string[], id: string): { shown: string[]; hidden: number } | null {
  const rows = db.prepare('SELECT path, partition FROM duplicate_record_ids WHERE id = ? ORDER BY path').all(id) as Array<{ path: string; partition: string }>;
  const shown = rows.filter((r) => readable === 'all' || readable.includes(r.partition)).map((r) => r.path);
  return shown.length > 0 && rows.length > 1 ? { shown, hidden: rows.length - shown.length } : null;
}

/** "a.md, b.md, a file you cannot read": the other claimants of an id, as messages and diagnostics name them. */
export function claimantsPhrase(shown: readonly string[], hidden: number): string {
  return [...shown, ...(hidden > 0 ? [hidden === 1 ? 'a file you cannot read' : `${hidden} files you cannot read`] : [])].join(', ');
}
