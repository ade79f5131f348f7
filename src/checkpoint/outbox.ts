/**
 * The outbox [PUB-4, PUB-6, GIT-4..6, GIT-16, GIT-17]: batches of exact bytes
 * queued in state.sqlite, committed to Git strictly in order, outside any
 * SQLite write transaction. It is not a second knowledge store: a batch's
 * bytes are dropped once its checkpoint is recorded.
 */
import type { DB } from '../store/db.js';
import type { Store } from '../store/store.js';
import { firstLine, type GitRunner } from '../git/runner.js';
import { join } from 'node:path';
import { lstat } from 'node:fs/promises';
import { vaultEnv } from '../git/inspect.js';
import { commitChain, runIndexJobLocked, type ChainOutcome, type IndexJob, type IndexSyncOutcome } from '../git/checkpoint.js';
import { clearOwnStaleLock } from '../git/index-lock.js';
import type { Step } from '../git/index-sync.js';
import { maintainRepository } from '../git/maintenance.js';
import type { BatchChange, BatchForCommit, BlobIds, GitState, PendingCode } from '../git/types.js';
import { isDiskFull } from '../errors.js';
import { crashPoint } from '../faults.js';
import { holdSignals } from '../interrupt.js';
import { nowIso } from '../clock.js';

export type BatchKind = 'publication' | 'scan' | 'attachment';
export type BatchActor = 'agent' | 'operator' | 'external';

export interface NewBatch {
  kind: BatchKind;
  refId: string;
  actor: BatchActor;
  subject: string;
  createdAt: string;
  changes: BatchChange[];
  /** A scan's: the branch tip it saw before reading (batches.observed_tip). */
  observedTip?: string | null;
}

/** Queue a batch; call inside the acknowledging transaction. Returns its queue position. */
export function enqueueBatch(db: DB, b: NewBatch): number {
  let bytes = 0;
  for (const c of b.changes) bytes += c.bytes?.length ?? 0;
  const info = db
    .prepare(`INSERT INTO batches(kind, ref_id, actor, subject, created_at, state, queued_bytes, observed_tip)
              VALUES (?, ?, ?, ?, ?, 'queued', ?, ?)`)
    .run(b.kind, b.refId, b.actor, b.subject, b.createdAt, bytes, b.observedTip ?? null);
  const batchId = Number(info.lastInsertRowid);
  const ins = db.prepare('INSERT INTO batch_files(batch_id, path, deleted, bytes, exec) VALUES (?, ?, ?, ?, ?)');
  // Knowledge's own installs are never executable (fsutil.ts writes 0644; attachments 0600).
  for (const c of b.changes) ins.run(batchId, c.path, c.bytes === null ? 1 : 0, c.bytes, c.bytes === null ? null : c.exec ? 1 : 0);
  return batchId;
}

/**
 * A queued file's bytes, for a `batch_files` row aliased `f`. A scan's batch
 * does not copy the bytes it staged: its rows hold NULL, and the bytes stay in
 * `scan_staging` under the scan's id (the batch's ref_id) until the batch's
 * checkpoint is recorded (measured at 100k files: the copy alone took
 * 0.4-0.7 s and ~60 MiB more of the transaction's log).
 */
export const queuedBytesSql = (f: string): string =>
  `coalesce(${f}.bytes, (SELECT s.bytes FROM batches qb JOIN scan_staging s ON s.scan_id = qb.ref_id AND s.path = ${f}.path
     WHERE qb.batch_id = ${f}.batch_id AND qb.kind = 'scan' AND ${f}.deleted = 0))`;

/**
 * Queue every file a scan staged into its batch (inside the scan's applying
 * transaction), their bytes left where they are (queuedBytesSql). Returns how
 * many.
 */
export function queueStagedFiles(db: DB, batchId: number, scanId: string): number {
  const queued = db.prepare('INSERT INTO batch_files(batch_id, path, deleted, bytes, exec) SELECT ?, path, 0, NULL, exec FROM scan_staging WHERE scan_id = ?')
    .run(batchId, scanId).changes;
  db.prepare('UPDATE batches SET queued_bytes = coalesce(queued_bytes, 0) + (SELECT coalesce(sum(length(bytes)), 0) FROM scan_staging WHERE scan_id = ?) WHERE batch_id = ?')
    .run(scanId, batchId);
  return queued;
}

/** Leftovers of scans that queued nothing (killed, or failed): the staged bytes of queued scan batches stay. */
export function clearUnqueuedStaging(db: DB): void {
  db.prepare("DELETE FROM scan_staging WHERE scan_id NOT IN (SELECT ref_id FROM batches WHERE kind = 'scan' AND state = 'queued')").run();
}

interface BatchRow {
  batch_id: number; kind: BatchKind; ref_id: string; actor: BatchActor; subject: string; created_at: string;
  state: 'queued' | 'committed'; commit_id: string | null; parent_commit: string | null; index_synced: number;
  last_state: string | null; last_code: string | null; last_reason: string | null; observed_tip: string | null;
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
  // No attempt recorded: none was made yet, or one was cut short before it could be recorded (a crash, or a full
  // disk under state.sqlite, whose reason only that command's own answer could give).
  return { state: 'pending', code: (row.last_code ?? 'waiting') as PendingCode, reason: row.last_reason ?? 'no checkpoint attempt recorded yet (one cut short by a crash or a full disk is not recorded); knowledge resume, or the next write or scan, makes one' };
}

export interface DrainResult {
  committed: number[];
  /** The first batch that could not be committed, and why. */
  blocked: { batchId: number; state: GitState } | null;
}

export interface DrainOptions {
  /** Commit up to and including this batch (all queued batches when omitted). */
  through?: number;
  /** Most batches per fast-import stream (one chain, one branch update, one index write). */
  maxChainBatches?: number;
  /** Most queued bytes per stream; a single larger batch still goes alone. */
  maxChainBytes?: number;
  /** Skip the occasional repository maintenance (benchmarks measure it separately). */
  skipMaintenance?: boolean;
  /**
   * A batch whose blobs are being written into the repository ahead of its
   * commit (blob-preload.ts): when its chain comes, the drain waits for
   * `ready`, and if true the commit names the blobs instead of carrying them.
   */
  preloaded?: { batchId: number; ready: Promise<BlobIds | null> };
}

export const CHAIN_MAX_BATCHES = 500;
/** The first chain of a drain, before its cost per commit is known. */
const FIRST_CHAIN = 64;
/** Share of git's timeout one chain is sized to take. */
const CHAIN_TIME_SHARE = 0.25;
/** Waits before retrying a lock or a moved branch within one call (ms). */
const TRANSIENT_RETRY_MS = [10, 40, 120];
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const CHAIN_MAX_BYTES = 64 * 1024 * 1024;
/** Chains with more queued bytes than this read each file's bytes when needed instead of loading them all. */
const LAZY_CHAIN_BYTES = 8 * 1024 * 1024;

/**
 * Queued bytes read from the outbox a page at a time, for readers that go
 * through a batch's files in path order: a file not in the current page
 * loads the page starting at it (at most 256 files or ~4 MiB, plus the one
 * asked for). Any order still gets the right bytes, only more queries.
 */
/** A queued change whose bytes are read from the outbox when asked for (one small object per file, no closure). */
class LazyChange implements BatchChange {
  readonly exec?: boolean;
  constructor(private readonly pages: OutboxPages, private readonly batchId: number, readonly path: string, readonly deleted: boolean, exec: number | null) {
    if (exec !== null) this.exec = exec === 1;
  }
  get bytes(): Buffer | null {
    return this.deleted ? null : this.pages.bytes(this.batchId, this.path);
  }
}

export class OutboxPages {
  private static readonly FILES = 256;
  private static readonly BYTES = 4 * 1024 * 1024;
  private readonly from;
  private batchId = -1;
  private page = new Map<string, Buffer | null>();

  constructor(db: DB) {
    this.from = db.prepare(`SELECT f.path, f.deleted, ${queuedBytesSql('f')} AS bytes FROM batch_files f WHERE f.batch_id = ? AND f.path >= ? ORDER BY f.path LIMIT ?`);
  }

  bytes(batchId: number, path: string): Buffer {
    if (batchId !== this.batchId || !this.page.has(path)) {
      this.batchId = batchId;
      this.page = new Map();
      let size = 0;
      for (const row of this.from.iterate(batchId, path, OutboxPages.FILES) as IterableIterator<{ path: string; deleted: number; bytes: Buffer | null }>) {
        if (row.bytes === null && row.deleted === 0) throw lostBytes(batchId, row.path);
        this.page.set(row.path, row.bytes);
        size += row.bytes?.length ?? 0;
        if (size >= OutboxPages.BYTES) break; // ends the statement
      }
    }
    return this.page.get(path) ?? Buffer.alloc(0);
  }
}

interface ChunkRow extends BatchRow { size: number }

/**
 * Commit queued batches in order, up to and including `through` (all when
 * omitted). Consecutive batches go to Git as one chain — one fast-import
 * stream, one compare-and-swap of the branch, one SQLite transaction, one
 * index update — yet each is its own commit with its own bytes [GIT-7].
 * Stops at the first batch Git cannot take: later batches never overtake it
 * [GIT-5]. Nothing here runs inside a write transaction [GIT-4].
 */
export function drainOutbox(store: Store, runner: GitRunner, opts: DrainOptions = {}): Promise<DrainResult> {
  // One drain at a time per store, whichever surface asks (Gateway, MCP,
  // CLI): two interleaved drains would race for the same queued batch. A
  // drain resolves once its receipts are recorded; the index update and
  // maintenance that follow finish before the next drain starts.
  const prev = draining.get(store) ?? Promise.resolve();
  const run = prev.catch(() => undefined).then(() => drainOnce(store, runner, opts));
  // A drain that failed told its own caller; what settles after it is only the work that follows receipts.
  const settled = run.then((r) => r.settled, () => undefined);
  settled.catch(() => undefined); // reported through drainSettled; never an unhandled rejection
  draining.set(store, settled);
  return run.then((r) => r.result);
}

/**
 * [GIT-15] The drain after a request was accepted (its files installed, its
 * receipt stored): a failure here — a full disk under state.sqlite while the
 * checkpoint's state is recorded, say — never fails the request. It is noted
 * on the first waiting batch (disk-full, or git-error naming the cause), so
 * receipts say `pending` with it instead of "not attempted yet"; where SQLite
 * cannot take even that, it is returned for the caller's receipt. Null when
 * the drain ran or the failure was noted.
 */
export async function drainAccepted(store: Store, runner: GitRunner, opts: DrainOptions = {}): Promise<GitState | null> {
  try {
    await drainOutbox(store, runner, opts);
    return null;
  } catch (err) {
    const msg = firstLine(err instanceof Error ? err.message : String(err));
    const state: GitState = isDiskFull(err)
      ? { state: 'pending', code: 'disk-full', reason: `the checkpoint could not be made or recorded: the disk is full (${msg}); free space, then resume` }
      : { state: 'pending', code: 'git-error', reason: `the checkpoint could not be made or recorded: ${msg}; resume to retry` };
    try {
      store.db.prepare("UPDATE batches SET last_state = 'pending', last_code = ?, last_reason = ?, attempted_at = ? WHERE batch_id = (SELECT MIN(batch_id) FROM batches WHERE state = 'queued')")
        .run(state.code, state.reason, nowIso());
      return null; // recorded: every receipt derives its state from it
    } catch {
      return state; // the same full disk: only the caller's receipt can say it
    }
  }
}

/** A batch's state after {@link drainAccepted}: what the outbox records, or the failure it could not record. */
export function acceptedGitState(db: DB, batchId: number | null, failure: GitState | null): GitState {
  const recorded = batchGitState(db, batchId);
  return failure && recorded.state !== 'committed' ? failure : recorded;
}

/**
 * Resolves when every drain of this store asked for so far has finished,
 * including the index update and maintenance after its receipts, with what
 * went wrong in that work (warnings; see afterReceipts). Rejects with an
 * unexpected failure of it. Call before closing the store.
 */
export async function drainSettled(store: Store): Promise<string[]> {
  await (draining.get(store) ?? Promise.resolve());
  return takeAfterReceiptNotes(store);
}

/** The warnings about work after receipts noted so far, without waiting for work still running (a long-running Gateway). */
export function takeAfterReceiptNotes(store: Store): string[] {
  const notes = afterReceipts.get(store) ?? [];
  afterReceipts.delete(store);
  return notes;
}

/**
 * What went wrong in the work after receipts (the index update, its record,
 * maintenance), for drainSettled's caller to pass on as warnings: that work
 * never fails a request whose receipt is recorded [GIT-15], and each of these
 * is made good by a later write or scan.
 */
const afterReceipts = new WeakMap<Store, string[]>();

function noteAfterReceipts(store: Store, note: string): void {
  const notes = afterReceipts.get(store) ?? [];
  // Kept until read (a Gateway reads them at its next request): a few distinct ones, not one per failed write.
  if (notes.length < AFTER_RECEIPTS_KEPT && !notes.includes(note)) notes.push(note);
  afterReceipts.set(store, notes);
}
const AFTER_RECEIPTS_KEPT = 20;

const draining = new WeakMap<Store, Promise<unknown>>();

/**
 * Stores whose branch this process has searched for an earlier, unrecorded
 * attempt [GIT-6], with every branch move since recorded. Only the store's
 * single writer [LAY-4] moves the branch for it, so later checkpoints skip the
 * search (a `git log` whenever a user's own commit moved the branch). A drain
 * that throws forgets it.
 */
const searched = new WeakSet<Store>();

async function drainOnce(store: Store, runner: GitRunner, opts: DrainOptions): Promise<{ result: DrainResult; settled: Promise<void> }> {
  const db = store.db;
  const result: DrainResult = { committed: [], blocked: null };
  if (!store.settings.writesEnabled) return { result, settled: Promise.resolve() }; // [GIT-1]
  const vault = store.paths.vault;
  // An index update a lock or crash interrupted comes first; while it cannot
  // be made, later ones wait too, so they can be made together, in order.
  let indexWaits = !(await resyncIndexes(store, runner));
  const through = opts.through ?? Number.MAX_SAFE_INTEGER;
  const maxBatches = Math.max(1, opts.maxChainBatches ?? CHAIN_MAX_BATCHES);
  // A chain's cost grows with its length and with the size of the folders it
  // rewrites (one tree object per commit): start with a modest chain, then size
  // chains from the measured cost per commit so one stream stays well inside
  // git's timeout. A chain that still times out is cut down and retried, so
  // the queue always makes progress down to single batches.
  let chainLimit = Math.min(maxBatches, FIRST_CHAIN);
  const maxBytes = Math.max(1, opts.maxChainBytes ?? CHAIN_MAX_BYTES);
  // A batch's size was counted when it was queued (queued_bytes); one queued
  // before that was counted (migration 010) is summed wherever
  // queuedBytesSql finds its bytes (a scan's: in its staged rows).
  const nextRows = db.prepare(
    `SELECT b.*, coalesce(b.queued_bytes, (SELECT COALESCE(SUM(length(f.bytes)), 0) FROM batch_files f WHERE f.batch_id = b.batch_id)
       + (CASE WHEN b.kind = 'scan' THEN (SELECT COALESCE(SUM(length(s.bytes)), 0) FROM scan_staging s WHERE s.scan_id = b.ref_id) ELSE 0 END)) AS size
     FROM batches b WHERE b.state = 'queued' AND b.batch_id <= ? ORDER BY b.batch_id LIMIT ?`,
  );
  const loadFiles = db.prepare(`SELECT f.batch_id, f.path, f.deleted, f.exec, ${queuedBytesSql('f')} AS bytes FROM batch_files f WHERE f.batch_id BETWEEN ? AND ? ORDER BY f.batch_id, f.path`);
  const listFiles = db.prepare('SELECT batch_id, path, deleted, exec FROM batch_files WHERE batch_id BETWEEN ? AND ? ORDER BY batch_id, path');
  // A large chain (a baseline scan of 100k files: ~60 MiB in 100k buffers)
  // is not loaded whole: each file's bytes are read from the outbox when the
  // stream or the blob ids need them, and dropped (peak RSS of a 100k
  // baseline's drain, measured: +118 MiB for the loaded chain). Both read the
  // changes in the order listed (batch, then path), so the reads go a page
  // of rows at a time (one query per file cost ~3 s at 100k).
  const pages = new OutboxPages(db);
  const lazyChange = (batchId: number, path: string, deleted: boolean, exec: number | null): BatchChange => new LazyChange(pages, batchId, path, deleted, exec);
  const lastKnownStmt = db.prepare("SELECT commit_id FROM batches WHERE state = 'committed' ORDER BY batch_id DESC LIMIT 1");
  const loadBatches = (chunk: ChunkRow[], bytes: number): BatchForCommit[] => {
    const files = new Map<number, BatchChange[]>();
    const range = [chunk[0]!.batch_id, chunk[chunk.length - 1]!.batch_id] as const;
    const rows = bytes > LAZY_CHAIN_BYTES ? listFiles.all(...range) : loadFiles.all(...range);
    for (const f of rows as Array<{ batch_id: number; path: string; deleted: number; exec: number | null; bytes?: Buffer | null }>) {
      const list = files.get(f.batch_id) ?? [];
      if (f.bytes === null && f.deleted === 0) throw lostBytes(f.batch_id, f.path);
      list.push(f.bytes === undefined
        ? lazyChange(f.batch_id, f.path, f.deleted === 1, f.exec)
        : { path: f.path, bytes: f.deleted ? null : f.bytes!, ...(f.exec === null ? {} : { exec: f.exec === 1 }) });
      files.set(f.batch_id, list);
    }
    return chunk.map((row) => ({
      vaultId: store.manifest.vaultId,
      batchId: row.batch_id,
      kind: row.kind,
      refId: row.ref_id,
      actor: row.actor,
      createdAt: row.created_at,
      subject: row.subject,
      changes: files.get(row.batch_id) ?? [],
      observedTip: row.observed_tip,
    }));
  };
  // A user's own git command holds index.lock for some milliseconds, and a
  // user's commit between our read of the tip and the compare-and-swap moves
  // the branch: both are routine. Wait briefly and rebuild on the new tip a
  // few times before reporting them; a stale lock costs these waits once per
  // call and is never touched [GIT-19]. No timer outlives the call [GIT-16].
  let transientRetries = TRANSIENT_RETRY_MS.length;
  // The index update owed for the chain recorded last: it holds index.lock
  // until paid, so it is paid before the next chain and, for the last chain,
  // after this drain's receipts are recorded (the caller does not wait for it).
  let owed: (() => Promise<void>) | null = null;
  const payOwed = async () => {
    const pay = owed;
    owed = null;
    if (pay) await pay();
  };
  try {
    for (;;) {
      const rows = nextRows.all(through, chainLimit) as ChunkRow[];
      if (rows.length === 0) break;
      await payOwed();
      let bytes = 0;
      let n = 0;
      while (n < rows.length && (n === 0 || bytes + rows[n]!.size <= maxBytes)) bytes += rows[n++]!.size;
      const chunk = rows.slice(0, n);
      // Git that cannot run at all: say so without loading the queued bytes
      // (a 100k-file baseline's batch is tens of MiB).
      const det = await runner.detect();
      const ids = opts.preloaded && chunk.some((r) => r.batch_id === opts.preloaded!.batchId) ? await opts.preloaded.ready : null;
      const pre = ids ? new Map([[opts.preloaded!.batchId, ids]]) : undefined;
      const started = performance.now();
      const outcome: ChainOutcome = det.ok
        ? await commitChain(runner, vault, loadBatches(chunk, bytes), {
          lastKnownCommit: (lastKnownStmt.get() as { commit_id: string } | undefined)?.commit_id ?? null,
          noEarlierAttempt: searched.has(store),
          ...(pre ? { preloaded: pre } : {}),
        })
        : { state: 'unavailable', reason: det.reason };
      const now = nowIso();
      // The search for an earlier attempt ran (or was not needed): from now on this writer's own records say it all.
      if (outcome.state === 'committed') searched.add(store);
      // A failed step may have moved the branch without a record (a ref transaction whose answer was lost
      // and that could not be checked): the next attempt searches again. The search costs a `git log`
      // only when the branch is not where this store last recorded it.
      else searched.delete(store);
      if (outcome.state === 'committed') {
        const perCommit = (performance.now() - started) / outcome.commits.length;
        chainLimit = Math.max(1, Math.min(maxBatches, Math.floor((runner.timeoutMs * CHAIN_TIME_SHARE) / Math.max(perCommit, 0.01))));
      } else if (outcome.state === 'pending' && outcome.code === 'timeout' && chunk.length > 1) {
        chainLimit = Math.max(1, Math.floor(chunk.length / 4));
        continue;
      }
      if (outcome.state === 'committed') {
        // The receipts first [GIT-4]; the user's index follows (Knowledge still
        // holds its lock, so no git command of the user's sees the gap).
        const range: [number, number] = [outcome.commits[0]!.batchId, outcome.commits[outcome.commits.length - 1]!.batchId];
        const runIt = !indexWaits;
        owed = async () => {
          // A signal waits until the index update is made and recorded (src/interrupt.ts); the lock is held until then.
          const letSignalsGo = holdSignals();
          try {
            await payIndex();
          } finally {
            letSignalsGo();
          }
        };
        const payIndex = async () => {
          const idx = await outcome.finishIndex(runIt);
          if (!idx.ok) {
            indexWaits = true;
            noteAfterReceipts(store, `the index of the vault's repository was not updated yet (${idx.code}): ${firstLine(idx.reason)}; the next Knowledge write or scan finishes it (docs/local-history.md)`);
          }
          if (!db.open) return;
          try {
            markIndex(db, range, idx);
          } catch (err) {
            // Not recorded as done (index_synced stays 0): the next drain's resyncIndexes makes the update again, which is idempotent.
            noteAfterReceipts(store, `could not record that the index was updated: ${firstLine(err instanceof Error ? err.message : String(err))}; the next Knowledge write or scan checks it again`);
          }
        };
        crashPoint('before-record-commit');
        recordCommits(db, outcome, now);
        crashPoint('after-record-commit');
        result.committed.push(...outcome.commits.map((c) => c.batchId));
        continue;
      }
      if (outcome.state === 'pending' && (outcome.code === 'branch-moved' || outcome.code === 'locked') && transientRetries > 0) {
        await sleep(TRANSIENT_RETRY_MS[TRANSIENT_RETRY_MS.length - transientRetries--]!);
        continue;
      }
      const head = chunk[0]!;
      const code = outcome.state === 'pending' ? outcome.code : null;
      db.transaction(() => {
        // Later batches wait behind this one [GIT-5]; batchGitState derives their state from it.
        db.prepare('UPDATE batches SET last_state = ?, last_code = ?, last_reason = ?, attempted_at = ? WHERE batch_id = ?')
          .run(outcome.state, code, outcome.reason, now, head.batch_id);
      }).immediate();
      result.blocked = { batchId: head.batch_id, state: outcome.state === 'pending' ? { state: 'pending', code: outcome.code, reason: outcome.reason } : { state: 'unavailable', reason: outcome.reason } };
      break;
    }
  } catch (err) {
    // A branch move may have happened without its record: search again next time.
    searched.delete(store);
    await payOwed(); // never leave index.lock held
    throw err;
  }
  const settled = (async () => {
    await payOwed();
    if (result.committed.length > 0 && !opts.skipMaintenance && db.open) {
      try {
        const m = await maintainRepository(runner, vault);
        if (m.ran === false && m.why === 'failed') noteAfterReceipts(store, `could not roll up the repository's packs (${m.code}): ${firstLine(m.reason)}; tried again after the next checkpoint`);
      } catch (err) {
        // Rolling packs up is only housekeeping: it is tried again after the next checkpoint.
        noteAfterReceipts(store, `could not roll up the repository's packs: ${firstLine(err instanceof Error ? err.message : String(err))}`);
      }
    }
  })();
  return { result, settled };
}

/**
 * Every commit id of a chain, its receipts' state and whether the index
 * followed, in one short transaction [GIT-4]; the queued bytes are dropped
 * and replaced by the blob ids they became [PUB-6].
 */
function recordCommits(db: DB, outcome: Extract<ChainOutcome, { state: 'committed' }>, now: string): void {
  // index_synced = 0 until finishIndex has run (markIndex); a crash in
  // between leaves it to resyncIndexes.
  const setBatch = db.prepare(
    `UPDATE batches SET state = 'committed', commit_id = ?, parent_commit = ?, index_synced = 0, last_state = 'committed',
       last_code = NULL, last_reason = NULL, attempted_at = ? WHERE batch_id = ? AND state = 'queued'`,
  );
  const setFile = db.prepare('UPDATE batch_files SET bytes = NULL, blob_oid = ?, mode = ? WHERE batch_id = ? AND path = ?');
  const dropStaged = db.prepare("DELETE FROM scan_staging WHERE scan_id = (SELECT ref_id FROM batches WHERE batch_id = ? AND kind = 'scan')");
  const dropFile = db.prepare('DELETE FROM batch_files WHERE batch_id = ? AND path = ?');
  db.transaction(() => {
    // A scan's paths the user's own commits overtook are not part of its checkpoint.
    for (const d of outcome.dropped) for (const path of d.paths) dropFile.run(d.batchId, path);
    outcome.commits.forEach((c, i) => {
      const changed = setBatch.run(c.commit, c.parent, now, c.batchId).changes;
      if (changed !== 1) throw new Error(`outbox batch ${c.batchId} is not queued any more`);
      for (const [path, entry] of outcome.steps[i]!) setFile.run(entry?.oid ?? null, entry?.mode ?? null, c.batchId, path);
      dropStaged.run(c.batchId);
    });
  }).immediate();
}

function markIndex(db: DB, [first, last]: readonly [number, number], idx: IndexSyncOutcome): void {
  db.transaction(() => {
    if (idx.ok) {
      db.prepare("UPDATE batches SET index_synced = 1 WHERE batch_id BETWEEN ? AND ? AND state = 'committed'").run(first, last);
    } else {
      db.prepare("UPDATE batches SET last_code = ?, last_reason = ? WHERE batch_id BETWEEN ? AND ? AND state = 'committed' AND index_synced = 0")
        .run(idx.code, `index not updated yet: ${idx.reason}`, first, last);
    }
  }).immediate();
}

/**
 * Finish index updates that a lock or crash interrupted after the commits
 * were recorded [GIT-10], all of them as one job, from the blob ids recorded
 * with them. Returns false while it still cannot be made.
 */
async function resyncIndexes(store: Store, runner: GitRunner): Promise<boolean> {
  const db = store.db;
  const rows = db.prepare("SELECT batch_id, commit_id, parent_commit FROM batches WHERE state = 'committed' AND index_synced = 0 ORDER BY batch_id")
    .all() as Array<{ batch_id: number; commit_id: string; parent_commit: string | null }>;
  if (rows.length === 0) {
    // Every index update recorded as done and no checkpoint under way (a killed one may have
    // moved the branch before recording it; its retry takes the lock over): a stale
    // index.lock of ours is only a leftover.
    if (db.prepare("SELECT 1 FROM batches WHERE state = 'queued' LIMIT 1").get() === undefined) await clearOwnStaleLock(join(store.paths.vault, '.git'));
    return true;
  }
  const first = rows[0]!;
  const last = rows[rows.length - 1]!;
  const fileStmt = db.prepare('SELECT path, deleted, blob_oid, mode FROM batch_files WHERE batch_id = ?');
  const paths = new Set<string>();
  const before: string[] = first.parent_commit ? [first.parent_commit] : [];
  const steps: Step[] = [];
  for (const r of rows) {
    const files = fileStmt.all(r.batch_id) as Array<{ path: string; deleted: number; blob_oid: string | null; mode: string | null }>;
    const step = new Map<string, { mode: string; oid: string } | null>();
    let complete = true;
    for (const f of files) {
      paths.add(f.path);
      if (f.deleted) step.set(f.path, null);
      else if (f.blob_oid && f.mode) step.set(f.path, { mode: f.mode, oid: f.blob_oid });
      else complete = false;
    }
    // Recorded before blob ids were kept: read that commit's entries instead.
    if (complete) steps.push(step);
    else before.push(r.commit_id);
  }
  const job: IndexJob = {
    paths: [...paths],
    objectFormat: last.commit_id.length === 64 ? 'sha256' : 'sha1',
    before,
    // The store's first checkpoint: its parent is the empty tree, so an absent entry is Knowledge's too.
    fromRoot: first.parent_commit === null,
    base: last.commit_id,
    reusedSteps: steps,
    newSteps: [],
  };
  // The branch is ahead of the index: update it under index.lock, taking over one a killed
  // Knowledge process left (never removing it first: index-lock.ts) [GIT-10].
  const gitDir = await findGitDir(runner, store.paths.vault);
  const out = gitDir
    ? await runIndexJobLocked(runner, store.paths.vault, gitDir, job)
    : ({ ok: false, code: 'git-error', reason: 'cannot find the repository\'s git directory' } as const);
  markIndex(db, [first.batch_id, last.batch_id], out);
  return out.ok;
}

/** The vault repository's git directory (`.git`, or where a `.git` file points), or null. */
async function findGitDir(runner: GitRunner, vault: string): Promise<string | null> {
  const dotGit = join(vault, '.git');
  const st = await lstat(dotGit).catch(() => null);
  if (st?.isDirectory()) return dotGit;
  if (!st) return null;
  const r = await runner.run(['rev-parse', '--absolute-git-dir'], { cwd: vault, env: vaultEnv(vault) }).catch(() => null);
  const dir = r && r.code === 0 ? r.stdout.toString('utf8').trim() : '';
  return dir || null;
}

/** A queued file whose bytes are gone (never expected; `knowledge verify` reports it as bytes-missing). */
function lostBytes(batchId: number, path: string): Error {
  return new Error(`queued batch ${batchId} has lost the bytes of ${path} (knowledge verify lists every such file)`);
}
