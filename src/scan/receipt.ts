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
import { diagnosticsChangedFirst } from './diagnostics-order.js';

export interface ScanRow { scan_id: string; partition: string; caller: string; created_at: string; batch_id: number | null; receipt: string }

/** What Activity reads of a kept scan: its columns, never its receipt (migration 023). */
export interface ScanCountsRow {
  scan_id: string; partition: string; caller: string; created_at: string; batch_id: number | null;
  baseline: number; added_count: number; modified_count: number; deleted_count: number; renamed_count: number; diagnostics_count: number;
}
export const SCAN_COUNTS_COLUMNS = 'scan_id, partition, caller, created_at, batch_id, baseline, added_count, modified_count, deleted_count, renamed_count, diagnostics_count';

/**
 * At most this many diagnostics are kept with a scan's receipt (migration 023): each scan lists every standing
 * diagnostic, and a vault of hand-written notes has one per note, which kept in full would grow state.sqlite by
 * megabytes with every scan that commits.
 */
export const KEPT_DIAGNOSTICS = 200;

/**
 * Keep a scan that queued a checkpoint [GIT-14]: its receipt (its Git state is read live) with at most
 * KEPT_DIAGNOSTICS diagnostics, those of the files it found changed first, and its counts for Activity.
 */
export function keepScan(db: DB, row: { scanId: string; partition: string; caller: string; createdAt: string; batchId: number }, receipt: ScanReceipt): void {
  const all = receipt.diagnostics;
  const diagnostics = all.length > KEPT_DIAGNOSTICS ? diagnosticsChangedFirst(receipt).slice(0, KEPT_DIAGNOSTICS) : all;
  const kept: ScanReceipt = { ...receipt, git: null, diagnostics, ...(all.length > diagnostics.length ? { diagnosticsOmitted: all.length - diagnostics.length } : {}) };
  db.prepare(`INSERT INTO scans(scan_id, partition, caller, created_at, batch_id, receipt,
      baseline, added_count, modified_count, deleted_count, renamed_count, diagnostics_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
    .run(row.scanId, row.partition, row.caller, row.createdAt, row.batchId, JSON.stringify(kept), receipt.baseline ? 1 : 0,
      receipt.added.length, receipt.modified.length, receipt.deleted.length, receipt.renamed.length, all.length);
}

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
export function scanEntry(db: DB, row: ScanCountsRow): ScanActivity {
  return {
    kind: 'scan' as const,
    id: row.scan_id,
    createdAt: row.created_at,
    actor: 'external',
    git: row.batch_id === null ? { state: 'pending', code: 'git-error', reason: 'scan has no checkpoint' } : batchGitState(db, row.batch_id),
    detail: {
      partition: row.partition,
      caller: row.caller,
      baseline: row.baseline === 1,
      added: row.added_count,
      modified: row.modified_count,
      deleted: row.deleted_count,
      renamed: row.renamed_count,
      diagnostics: row.diagnostics_count,
    },
  };
}
