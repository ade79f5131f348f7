/**
 * Stored scan receipts and their activity entries (Appendix A, SURF-2). Git
 * states are read from the outbox each time, so a receipt fetched later
 * shows the checkpoint that happened since [GIT-14]. Only scans that queued a
 * checkpoint are kept: scans run on every request, and one that found
 * nothing has nothing to retry or inspect.
 */
import { KnowledgeError } from '../errors.js';
import type { DB } from '../store/db.js';
import { batchGitState } from '../checkpoint/outbox.js';
import type { GitState } from '../git/types.js';
import type { ScanReceipt } from './types.js';

export interface ScanRow { scan_id: string; partition: string; caller: string; created_at: string; batch_id: number | null; receipt: string }

function refresh(db: DB, row: ScanRow): ScanReceipt {
  const r = JSON.parse(row.receipt) as ScanReceipt;
  r.git = row.batch_id === null ? null : batchGitState(db, row.batch_id);
  r.retried = (r.retried ?? []).map((x) => ({ ...x, git: batchGitState(db, x.batchId) }));
  return r;
}

export function scanReceipt(db: DB, scanId: string): ScanReceipt {
  const row = db.prepare('SELECT * FROM scans WHERE scan_id = ?').get(scanId) as ScanRow | undefined;
  if (!row) throw new KnowledgeError('E_NOT_FOUND', `no scan ${scanId} (only scans that found something to commit are kept)`);
  return refresh(db, row);
}

export interface ScanActivity {
  kind: 'scan';
  id: string;
  createdAt: string;
  actor: string;
  git: GitState;
  detail: Record<string, unknown>;
}

/** A scan's activity entry (src/activity.ts reads the rows). */
export function scanEntry(db: DB, row: ScanRow): ScanActivity {
  const r = JSON.parse(row.receipt) as ScanReceipt;
  return {
    kind: 'scan' as const,
    id: row.scan_id,
    createdAt: row.created_at,
    actor: 'external',
    git: row.batch_id === null ? { state: 'pending', code: 'git-error', reason: 'scan has no checkpoint' } : batchGitState(db, row.batch_id),
    detail: {
      partition: row.partition,
      caller: row.caller,
      baseline: r.baseline,
      added: r.added.length,
      modified: r.modified.length,
      deleted: r.deleted.length,
      renamed: r.renamed.length,
      diagnostics: r.diagnostics.length,
    },
  };
}
