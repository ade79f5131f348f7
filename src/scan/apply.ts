/**
 * The applying phase of a scan: one transaction that queues the checkpoint
 * with the exact staged bytes [PUB-4, GIT-7] and brings fingerprints, the
 * records index, diagnostics and the scan's receipt in line with it.
 */
import { KnowledgeError } from '../errors.js';
import type { Store } from '../store/store.js';
import { partitionOfPath, type PartitionId } from '../store/layout.js';
import { enqueueBatch, queueStagedFiles } from '../checkpoint/outbox.js';
import { checkStaged, type FileCheck } from './check.js';
import type { CheckAhead } from './check-ahead.js';
import { committedPaths, isEmptyPlan, subjectFor } from './plan.js';
import { RecordIndexer } from './reindex.js';
import { pathsAffectedByIds, recheckReferences } from './references.js';
import { recordAdoption, type Adoption } from './adopt.js';
import { isMarkdownPath } from './scope.js';
import { deferReadIndex } from '../read/index-maintenance.js';
import { UPSERT_VAULT_FILE, writeVaultFiles } from '../store/vault-files.js';
import type { ReadFile, ScanDiagnostic, ScanPlan, ScanReceipt } from './types.js';
import { keepScan } from './receipt.js';

/** Record ids changing standing up to which references are re-checked only where they are held or linked to. */
const NARROW_MAX_IDS = 1000;
/** Records written from which the records table's indexes are rebuilt rather than kept up (index-maintenance.ts). */
const BULK_MIN_FILES = 10_000;

export interface ApplyInput {
  scanId: string;
  createdAt: string;
  callerLabel: string;
  partitions: readonly PartitionId[];
  baselined: readonly PartitionId[];
  /** Partitions never scanned in which this scan found no file: no scan is recorded for them, their baseline is still to come. */
  notBaselined?: readonly PartitionId[];
  plan: ScanPlan;
  /** False: the changes are recorded and indexed but no checkpoint is queued (the branch's tip already holds them: in-history.ts). */
  queue?: boolean;
  /** The branch tip the scan saw before reading (batches.observed_tip). */
  observedTip?: string | null;
  read: readonly ReadFile[];
  /** Completed here (diagnostics) and kept with the scan when it queues a checkpoint. */
  receipt: ScanReceipt;
  diagnostics: (partitions: readonly string[]) => ScanDiagnostic[];
  /** Hears the bytes of every file the checkpoint writes, as they are read back here (blob-preload.ts). */
  preload?: (path: string, bytes: Buffer) => void;
  /** The staged files checked on a worker (check-ahead.ts; with their bytes when `preload` is set). */
  checkAhead?: CheckAhead | null;
  /** Sources found on disk that the store does not know, to adopt, and descriptors not adopted (adopt.ts). */
  adoption?: Adoption | null;
}

/** Files staged from which a scan has them checked on a worker thread (check-ahead.ts). */
export const CHECK_AHEAD_MIN_FILES = 5000;

/** Returns the batch id, or null when there was nothing to commit. */
export function applyScan(store: Store, a: ApplyInput): number | null {
  const db = store.db;
  const { plan } = a;
  const empty = isEmptyPlan(plan);
  const lastBatch = (db.prepare('SELECT max(batch_id) FROM batches').pluck().get() as number | null) ?? 0;
  const checkedBatch = db.prepare('SELECT checked_batch FROM scan_partitions WHERE partition = ?').pluck();
  // References are re-checked when records may have changed: a baseline, or a publication since the last check.
  const stale = a.partitions.filter((p) => a.baselined.includes(p) || ((checkedBatch.get(p) as number | undefined) ?? 0) < lastBatch);
  if (empty && a.read.length === 0 && stale.length === 0 && !a.adoption) {
    a.receipt.diagnostics = a.diagnostics(a.partitions);
    return null; // the cheap, common case: nothing at all changed
  }

  return db.transaction(() => {
    let batchId: number | null = null;
    const { write, remove } = committedPaths(plan);
    const queueStaged = !empty && a.queue !== false;
    // The files of adopted sources the branch does not hold (adopt.ts placeAdoptions), but a descriptor this
    // checkpoint carries already as a file the scan read.
    const staged = new Set(queueStaged ? write : []);
    const carried = a.adoption ? [...a.adoption.carry.entries()] : [];
    const carry = carried.flatMap(([, changes]) => changes).filter((c) => !staged.has(c.path));
    if (queueStaged || carry.length > 0) {
      batchId = enqueueBatch(db, {
        kind: 'scan',
        refId: a.scanId,
        actor: 'external',
        subject: subjectFor(plan, a.baselined, carried.map(([descriptorPath]) => descriptorPath)),
        createdAt: a.createdAt,
        changes: [...remove.map((path) => ({ path, bytes: null })), ...carry],
        observedTip: a.observedTip ?? null,
      });
      // The bytes we hashed are the bytes we commit [GIT-7]: the staged rows themselves, never re-read
      // (they stay in scan_staging until the checkpoint is recorded).
      const queued = queueStaged ? queueStagedFiles(db, batchId, a.scanId) : 0;
      if (queueStaged && queued !== write.length) throw new KnowledgeError('E_INTERNAL', `scan ${a.scanId} staged ${queued} files but planned ${write.length}`);
    }

    // [SCAN-4] fingerprints of everything read, so the next scan need not read it.
    const upsert = db.prepare(UPSERT_VAULT_FILE);
    const forget = db.prepare('DELETE FROM vault_files WHERE path = ?');
    writeVaultFiles(db, [...a.read.map((f) => f.path), ...remove], () => {
      for (const f of a.read) upsert.run(f.path, partitionOfPath(f.path) ?? '', f.size, f.mtimeNs, f.ctimeNs, f.ino, f.sha256, f.racy ? 1 : 0, f.exec ? 1 : 0);
      for (const path of remove) forget.run(path);
    });

    // The records index and per-file diagnostics follow the committed bytes. The
    // read indexes (FTS, links) are brought in line once, set-wise, at the end.
    const indexer = deferReadIndex(db, (touched) => {
      const indexer = new RecordIndexer(db, a.createdAt, touched, a.scanId);
      for (const path of remove) indexer.release(path, true);
      for (const path of write) indexer.release(path);
      // Each staged file, in rowid order: its bytes to the blob preload, its verdict to the index.
      let after = 0;
      const take = (rowid: number, path: string, bytes: Buffer | null, check: FileCheck) => {
        if (rowid <= after) throw new KnowledgeError('E_INTERNAL', `scan ${a.scanId}: staged row ${rowid} came after ${after}`);
        if (a.preload) {
          if (bytes === null) throw new KnowledgeError('E_INTERNAL', `scan ${a.scanId}: no bytes for ${path}`);
          a.preload(path, bytes);
        }
        indexer.observe(path, partitionOfPath(path) ?? '', check);
        after = rowid;
      };
      // A large scan's files were checked on a worker meanwhile (check-ahead.ts): take its verdicts first.
      if (a.checkAhead) {
        for (let batch = a.checkAhead.next(); batch !== null; batch = a.checkAhead.next()) {
          for (const r of batch) take(r.rowid, r.path, r.bytes, r.check);
        }
      }
      // Then whatever it did not check (everything, without a worker). Pages in rowid order;
      // `+scan_id` keeps SQLite on the rowid range instead of re-reading and sorting every staged
      // row for each page. (Rows of earlier scans whose checkpoints still wait have lower rowids:
      // the first page steps over them once.) The staged bytes are checked again here (cheaper
      // than staging the verdicts as well).
      const page = db.prepare('SELECT rowid, path, bytes, sha256 FROM scan_staging WHERE +scan_id = ? AND rowid > ? ORDER BY rowid LIMIT 500');
      for (;;) {
        const rows = page.all(a.scanId, after) as Array<{ rowid: number; path: string; bytes: Buffer; sha256: string | null }>;
        if (rows.length === 0) break;
        for (const r of rows) take(r.rowid, r.path, r.bytes, checkStaged(r.path, r.bytes, r.sha256));
      }
      indexer.finish();
      return indexer;
    }, { bulk: write.length >= BULK_MIN_FILES && write.length >= (db.prepare('SELECT count(*) FROM records').pluck().get() as number) });

    // Sources found on disk, adopted before references are re-checked: a partition that gained some is re-checked whole.
    const adoptedIn = a.adoption ? recordAdoption(db, a.adoption) : new Set<string>();

    // References: the whole partition after a baseline or a publication (sources, ids); else the edited
    // records, and when record ids changed standing, the records holding, linking to or parked under them.
    const wholly = indexer.idsChanged();
    const changed = wholly ? indexer.changedIds(NARROW_MAX_IDS) : null;
    const edited = write.filter(isMarkdownPath);
    const markScanned = db.prepare(
      `INSERT INTO scan_partitions(partition, baseline_scan_id, baselined_at, last_scan_id, last_scan_at, checked_batch) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT(partition) DO UPDATE SET last_scan_id = excluded.last_scan_id, last_scan_at = excluded.last_scan_at,
         checked_batch = excluded.checked_batch`,
    );
    for (const p of a.partitions) {
      const editedHere = edited.filter((path) => partitionOfPath(path) === p);
      if (stale.includes(p) || adoptedIn.has(p) || (wholly && changed === null)) recheckReferences(db, p);
      else if (wholly) recheckReferences(db, p, [...new Set([...editedHere, ...pathsAffectedByIds(db, p, changed!)])]);
      else if (editedHere.length > 0) recheckReferences(db, p, editedHere);
      if (!a.notBaselined?.includes(p)) markScanned.run(p, a.scanId, a.createdAt, a.scanId, a.createdAt, batchId ?? lastBatch);
    }

    if (a.plan.renamed.length > 0) {
      // Where each moved record came from, for its history (also when no checkpoint of this scan will say so).
      const idAt = db.prepare('SELECT id FROM records WHERE path = ?').pluck();
      const move = db.prepare('INSERT OR REPLACE INTO record_moves(id, to_path, from_path, scan_id) VALUES (?, ?, ?, ?)');
      for (const r of a.plan.renamed) {
        const id = idAt.get(r.to);
        if (typeof id === 'string') move.run(id, r.to, r.from, a.scanId);
      }
    }
    a.receipt.diagnostics = a.diagnostics(a.partitions);
    if (batchId !== null) {
      // Kept with its git state read live, so it outlives a crash before the commit [GIT-14].
      keepScan(db, { scanId: a.scanId, partition: a.receipt.partition, caller: a.callerLabel, createdAt: a.createdAt, batchId }, a.receipt);
    }
    // A queued checkpoint keeps the staged bytes (the outbox reads them there); otherwise they go now.
    if (batchId === null) db.prepare('DELETE FROM scan_staging WHERE scan_id = ?').run(a.scanId);
    return batchId;
  }).immediate();
}
