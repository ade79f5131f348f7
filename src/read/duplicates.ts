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
