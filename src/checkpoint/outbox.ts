/**
 * The outbox [PUB-4, PUB-6, GIT-4..6, GIT-16, GIT-17]: batches of exact bytes
 * queued in state.sqlite, committed to Git strictly in order, outside any
 * SQLite write transaction. It is not a second knowledge store: a batch's
 * bytes are dropped once its checkpoint is recorded.
 */
import type { DB } from '../store/db.js';
import type { Store } from '../store/store.js';
import type { GitRunner } from '../git/runner.js';
import { commitBatch, syncIndex } from '../git/checkpoint.js';
import type { BatchChange, GitState, PendingCode } from '../git/types.js';
import { crashPoint } from '../faults.js';

export type BatchKind = 'publication' | 'scan' | 'attachment';
export type BatchActor = 'agent' | 'operator' | 'external';

export interface NewBatch {
  kind: BatchKind;
  refId: string;
  actor: BatchActor;
  subject: string;
  createdAt: string;
  changes: BatchChange[];
}

/** Queue a batch; call inside the acknowledging transaction. Returns its queue position. */
export function enqueueBatch(db: DB, b: NewBatch): number {
  const info = db
    .prepare(`INSERT INTO batches(kind, ref_id, actor, subject, created_at, state)
              VALUES (?, ?, ?, ?, ?, 'queued')`)
    .run(b.kind, b.refId, b.actor, b.subject, b.createdAt);
  const batchId = Number(info.lastInsertRowid);
  const ins = db.prepare('INSERT INTO batch_files(batch_id, path, deleted, bytes) VALUES (?, ?, ?, ?)');
  for (const c of b.changes) ins.run(batchId, c.path, c.bytes === null ? 1 : 0, c.bytes);
  return batchId;
}

interface BatchRow {
  batch_id: number; kind: BatchKind; ref_id: string; actor: BatchActor; subject: string; created_at: string;
  state: 'queued' | 'committed'; commit_id: string | null; parent_commit: string | null; index_synced: number;
  last_state: string | null; last_code: string | null; last_reason: string | null;
}

/** The receipt's view of a batch [GIT-14]. */
export function batchGitState(db: DB, batchId: number | null): GitState {
  if (batchId === null) return { state: 'committed', commit: '' };
  const row = db.prepare('SELECT * FROM batches WHERE batch_id = ?').get(batchId) as BatchRow | undefined;
  if (!row) return { state: 'pending', code: 'git-error', reason: `batch ${batchId} is missing from the outbox` };
  if (row.state === 'committed') return { state: 'committed', commit: row.commit_id! };
  // A queued batch behind an earlier blocked one waits for it [GIT-5]: its
  // state is derived here instead of being rewritten on every later batch.
  const head = db.prepare("SELECT * FROM batches WHERE state = 'queued' ORDER BY batch_id LIMIT 1").get() as BatchRow;
  if (head.batch_id === row.batch_id || head.last_state === null) return ownState(row);
  const blocker = ownState(head);
  if (blocker.state === 'unavailable') return blocker;
  if (blocker.state === 'pending' && blocker.code === 'waiting') return ownState(row);
  return { state: 'pending', code: 'waiting', reason: `waiting for checkpoint #${head.batch_id}: ${blocker.state === 'pending' ? blocker.reason : ''}` };
}

function ownState(row: BatchRow): GitState {
  if (row.state === 'committed') return { state: 'committed', commit: row.commit_id! };
  if (row.last_state === 'unavailable') return { state: 'unavailable', reason: row.last_reason ?? 'git cannot be run' };
  return { state: 'pending', code: (row.last_code ?? 'waiting') as PendingCode, reason: row.last_reason ?? 'checkpoint not attempted yet' };
}

export interface DrainResult {
  committed: number[];
  /** The first batch that could not be committed, and why. */
  blocked: { batchId: number; state: GitState } | null;
}

/**
 * Commit queued batches in order, up to and including `through` (all when
 * omitted). Stops at the first batch Git cannot take: later batches never
 * overtake it [GIT-5]. Nothing here runs inside a write transaction [GIT-4].
 */
export async function drainOutbox(store: Store, runner: GitRunner, opts: { through?: number } = {}): Promise<DrainResult> {
  const db = store.db;
  const result: DrainResult = { committed: [], blocked: null };
  if (!store.settings.writesEnabled) return result; // [GIT-1]
  await resyncIndexes(store, runner);
  const through = opts.through ?? Number.MAX_SAFE_INTEGER;
  const nextQueued = db.prepare("SELECT * FROM batches WHERE state = 'queued' AND batch_id <= ? ORDER BY batch_id LIMIT 1");
  const loadFiles = db.prepare('SELECT path, deleted, bytes FROM batch_files WHERE batch_id = ? ORDER BY path');
  for (;;) {
    const row = nextQueued.get(through) as BatchRow | undefined;
    if (!row) break;
    const lastKnown = db.prepare("SELECT commit_id FROM batches WHERE state = 'committed' ORDER BY batch_id DESC LIMIT 1").get() as
      | { commit_id: string }
      | undefined;
    const changes: BatchChange[] = (loadFiles.all(row.batch_id) as Array<{ path: string; deleted: number; bytes: Buffer | null }>).map((f) => ({
      path: f.path,
      bytes: f.deleted ? null : (f.bytes ?? Buffer.alloc(0)),
    }));
    const outcome = await commitBatch(runner, store.paths.vault, {
      vaultId: store.manifest.vaultId,
      batchId: row.batch_id,
      kind: row.kind,
      refId: row.ref_id,
      actor: row.actor,
      createdAt: row.created_at,
      subject: row.subject,
      changes,
    }, { lastKnownCommit: lastKnown?.commit_id ?? null });
    const now = new Date().toISOString();
    if (outcome.state === 'committed') {
      crashPoint('before-record-commit');
      // Commit id and receipt state recorded together, in one short transaction [GIT-4].
      db.transaction(() => {
        db.prepare(
          `UPDATE batches SET state = 'committed', commit_id = ?, parent_commit = ?, index_synced = ?, last_state = 'committed',
             last_code = ?, last_reason = ?, attempted_at = ? WHERE batch_id = ?`,
        ).run(outcome.commit, outcome.parent, outcome.index.ok ? 1 : 0, outcome.index.ok ? null : outcome.index.code,
          outcome.index.ok ? null : outcome.index.reason, now, row.batch_id);
        db.prepare('UPDATE batch_files SET bytes = NULL WHERE batch_id = ?').run(row.batch_id); // [PUB-6]
      }).immediate();
      result.committed.push(row.batch_id);
      continue;
    }
    const code = outcome.state === 'pending' ? outcome.code : null;
    db.transaction(() => {
      // Later batches wait behind this one [GIT-5]; batchGitState derives their state from it.
      db.prepare('UPDATE batches SET last_state = ?, last_code = ?, last_reason = ?, attempted_at = ? WHERE batch_id = ?')
        .run(outcome.state, code, outcome.reason, now, row.batch_id);
    }).immediate();
    result.blocked = { batchId: row.batch_id, state: outcome.state === 'pending' ? { state: 'pending', code: outcome.code, reason: outcome.reason } : { state: 'unavailable', reason: outcome.reason } };
    break;
  }
  return result;
}

/** Finish index updates that a lock or crash interrupted after the commit was recorded [GIT-10]. */
async function resyncIndexes(store: Store, runner: GitRunner): Promise<void> {
  const db = store.db;
  const rows = db.prepare("SELECT batch_id, commit_id, parent_commit FROM batches WHERE state = 'committed' AND index_synced = 0 ORDER BY batch_id")
    .all() as Array<{ batch_id: number; commit_id: string; parent_commit: string | null }>;
  for (const r of rows) {
    const paths = (db.prepare('SELECT path FROM batch_files WHERE batch_id = ?').all(r.batch_id) as Array<{ path: string }>).map((p) => p.path);
    const out = await syncIndex(runner, store.paths.vault, r.commit_id, r.parent_commit, paths);
    if (!out.ok) return; // still locked: keep the order, try again next time
    db.prepare('UPDATE batches SET index_synced = 1, last_code = NULL, last_reason = NULL WHERE batch_id = ?').run(r.batch_id);
  }
}

export function batchIdOf(db: DB, refId: string): number | null {
  const row = db.prepare('SELECT batch_id FROM batches WHERE ref_id = ? ORDER BY batch_id DESC LIMIT 1').get(refId) as { batch_id: number } | undefined;
  return row?.batch_id ?? null;
}
