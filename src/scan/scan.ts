/**
 * The scan runner [SCAN-1..4, GIT-8, GIT-16]: observe edits made outside
 * Knowledge, record them as one `external` checkpoint, and retry waiting
 * checkpoints first.
 *
 *   retry waiting batches → observe (walk, stat; read, hash and stage what
 *   changed) → plan (pure) → apply (one transaction: batch, fingerprints,
 *   records index, diagnostics, receipt) → commit through our batch.
 *
 * The caller holds the single-writer lock for the whole run; scans of one
 * store in one process are queued (runScan).
 */
import type { Store } from '../store/store.js';
import { partitionDir, partitionOfPath, type PartitionId } from '../store/layout.js';
import type { GitRunner } from '../git/runner.js';
import { canAccessPartition, type Caller } from '../access.js';
import { acceptedGitState, batchGitState, clearUnqueuedStaging, drainAccepted, drainOutbox } from '../checkpoint/outbox.js';
import { crashPoint } from '../faults.js';
import { callerLabel, resolvePartitions } from './partitions.js';
import { observe, type Observation } from './observe.js';
import { committedPaths, isEmptyPlan, planScan, writeCount } from './plan.js';
import { changesInBranchTip } from './in-history.js';
import { applyScan, CHECK_AHEAD_MIN_FILES } from './apply.js';
import { placeAdoptions, planAdoptions } from './adopt.js';
import { CheckAhead } from './check-ahead.js';
import { deferCheckpoints } from '../store/wal-checkpoint.js';
import { repositoryForCheckpoint } from '../git/checkpoint.js';
import { inspectLayout, peekBranchTip, recordsExecBit } from '../git/inspect.js';
import { gitlinksUnder, skipWorktreePaths } from '../git/index-sync.js';
import { startBlobPreload, type BlobPreload } from '../git/blob-preload.js';
import type { ReadFile, RetriedCheckpoint, ScanDiagnostic, ScanProgress, ScanReceipt } from './types.js';
import { newId } from '../request-id.js';
import { claimantsPhrase } from '../read/duplicates.js';
import { nowIso } from '../clock.js';

export interface ScanOptions {
  /** One partition id; all the caller may scan when omitted. */
  partition?: string;
  caller: Caller;
  onProgress?: (p: ScanProgress) => void;
}

export function newScanId(): string {
  return newId('scan');
}

const SYNC_NAMES = ['OFF', 'NORMAL', 'FULL', 'EXTRA'];

/**
 * Scans of one store run one after the other in this process. A scan's
 * staged rows live from its walk to its applying transaction, across awaits
 * (the waiting checkpoints, the blob preload's start) — and on, as its queued
 * checkpoint's bytes, until that is recorded — and every scan begins by
 * clearing what earlier scans left in `scan_staging` but did not queue: two at
 * once would take each other's files away. Keyed by the database file, so two
 * services open on one store share the queue; other processes are kept out by
 * the store's writer lock.
 */
const queues = new Map<string, Promise<void>>();

export function runScan(store: Store, runner: GitRunner, opts: ScanOptions): Promise<ScanReceipt> {
  const key = store.paths.database;
  const run = (queues.get(key) ?? Promise.resolve()).then(() => scanNow(store, runner, opts));
  const settled = run.then(
    () => {},
    () => {},
  );
  queues.set(key, settled);
  void settled.then(() => {
    if (queues.get(key) === settled) queues.delete(key);
  });
  return run;
}

async function scanNow(store: Store, runner: GitRunner, opts: ScanOptions): Promise<ScanReceipt> {
  const db = store.db;
  const partitionDiags: ScanDiagnostic[] = [];
  const partitions = resolvePartitions(store, opts.caller, opts.partition, partitionDiags);
  const scanId = newScanId();
  const createdAt = nowIso();

  // [GIT-16, SCAN-3] Waiting checkpoints first, in order.
  // All of them are retried; an agent's receipt lists those of partitions it may read [SURF-3].
  const waiting = (db.prepare("SELECT batch_id, kind, ref_id FROM batches WHERE state = 'queued' ORDER BY batch_id").all() as Array<{ batch_id: number; kind: RetriedCheckpoint['kind']; ref_id: string }>)
    .filter((w) => canSeeBatch(store, opts.caller, w));
  await drainOutbox(store, runner);
  // The tip the scan sees before it reads any file: a path the user commits after this is
  // theirs, and the scan's older bytes must not be committed over it (git/checkpoint.ts
  // withoutOvertaken). Only with nothing left waiting, so every later commit is someone else's.
  const observedTip = db.prepare("SELECT 1 FROM batches WHERE state = 'queued' LIMIT 1").get() === undefined
    ? await peekBranchTip(store.paths.vault)
    : null;

  clearUnqueuedStaging(db); // leftovers of a killed scan
  const baselined = partitions.filter((p) => db.prepare('SELECT 1 FROM scan_partitions WHERE partition = ?').get(p) === undefined);
  const progress: ScanProgress = { phase: 'walk', seen: 0, expected: 0, hashed: 0 };

  // A large scan's log is copied into the database on another thread while
  // its Git commit runs, not at the end of its commit (wal-checkpoint.ts).
  const checkpoints = deferCheckpoints(db, store.paths.database);
  try {
    return await observeAndApply(store, runner, opts, { partitions, partitionDiags, scanId, createdAt, baselined, waiting, progress, observedTip }, checkpoints.copyInBackground);
  } finally {
    await checkpoints.end();
  }
}

interface ScanStart {
  partitions: PartitionId[];
  partitionDiags: ScanDiagnostic[];
  scanId: string;
  createdAt: string;
  baselined: PartitionId[];
  waiting: Array<{ batch_id: number; kind: RetriedCheckpoint['kind']; ref_id: string }>;
  progress: ScanProgress;
  observedTip: string | null;
}

async function observeAndApply(store: Store, runner: GitRunner, opts: ScanOptions, start: ScanStart, applied: () => void): Promise<ScanReceipt> {
  const db = store.db;
  const { partitions, partitionDiags, scanId, createdAt, baselined, waiting, progress, observedTip } = start;
  // Staged bytes need no fsync of their own: a killed scan is simply redone.
  // The applying transaction runs with the store's own setting again.
  const prevSync = db.pragma('synchronous', { simple: true }) as number;
  db.pragma('synchronous = NORMAL');
  let seen: Observation;
  try {
    seen = observe(store, scanId, partitions, progress, opts.onProgress);
  } catch (err) {
    db.prepare('DELETE FROM scan_staging WHERE scan_id = ?').run(scanId);
    throw err;
  } finally {
    db.pragma(`synchronous = ${SYNC_NAMES[prevSync] ?? 'FULL'}`);
  }
  await keepOutOfSubmodules(store, runner, scanId, seen);
  await settleExecChanges(store, runner, scanId, seen.read);
  await keepSparseCheckout(store, runner, seen);
  const plan = planScan(seen.read, seen.missing);
  // Sources on disk that the store does not know (a vault cloned or restored without its state): their
  // originals are hashed here, outside the applying transaction, and recorded in it (adopt.ts).
  const adoption = await planAdoptions(store, scanId, partitions, seen.read, (done, of) => {
    progress.phase = 'adopt';
    progress.adopting = { done, of };
    opts.onProgress?.(progress);
  });
  await placeAdoptions(store, runner, adoption);
  // A partition's baseline is the first scan that reads a file in it: a first scan of a partition whose
  // folder is missing, empty, or holds nothing it may read (a symbolic link, an unreadable or too large
  // file, one that kept changing) leaves it to a later one.
  const readIn = baselined.length > 0 ? partitionsRead(seen.read) : new Set<string>();
  const baselinedNow = baselined.filter((p) => readIn.has(p));
  const notBaselined = baselined.filter((p) => !baselinedNow.includes(p));

  progress.phase = 'record';
  opts.onProgress?.(progress);
  const walkDiags = [...partitionDiags, ...seen.diagnostics];
  const receipt: ScanReceipt = {
    kind: 'scan',
    scanId,
    partition: opts.partition ?? 'all',
    partitions,
    baseline: baselinedNow.length > 0,
    baselined: baselinedNow,
    actor: 'external',
    createdAt,
    added: plan.added,
    modified: plan.modified,
    deleted: plan.deleted,
    renamed: plan.renamed,
    unchanged: seen.unchanged,
    hashed: seen.read.length,
    diagnostics: [],
    ...(adoption && adoption.sources.length > 0 ? { adopted: adoption.sources.map((s) => ({ sourceId: s.sourceId, path: s.path })) } : {}),
    retried: waiting.map((w) => ({ kind: w.kind, id: w.ref_id, batchId: w.batch_id, git: batchGitState(db, w.batch_id) })),
    git: null,
  };
  // A large checkpoint's blobs go into the repository on the second core
  // while the transaction below runs (blob-preload.ts); a large scan's staged
  // files are checked on a worker meanwhile (check-ahead.ts).
  // Edits the user committed themselves before this scan saw them: recorded and indexed, no empty commit (in-history.ts).
  const inBranchTip = !isEmptyPlan(plan) && await changesInBranchTip(store, runner, scanId, committedPaths(plan));
  const preloading = !inBranchTip && store.settings.writesEnabled && isLargeWrite(seen.read);
  const checkAhead = writeCount(plan) >= CHECK_AHEAD_MIN_FILES
    ? CheckAhead.start(store.paths.database, scanId, { bytes: preloading })
    : null;
  let preload: BlobPreload | null = null;
  let batchId: number | null;
  try {
    preload = preloading ? await startPreload(store, runner) : null;
    batchId = applyScan(store, {
      scanId,
      createdAt,
      callerLabel: callerLabel(opts.caller),
      partitions,
      baselined: baselinedNow,
      notBaselined,
      plan,
      queue: !inBranchTip,
      observedTip,
      read: seen.read,
      receipt,
      diagnostics: (ps) => diagnosticsFor(store, ps, walkDiags, opts.caller),
      ...(preload ? { preload: preload.add } : {}),
      checkAhead,
      adoption,
    });
  } catch (err) {
    preload?.abandon();
    throw err;
  } finally {
    checkAhead?.close();
  }
  if (batchId === null) preload?.abandon();
  const preloaded = preload && batchId !== null ? { batchId, ready: preload.end() } : undefined;
  applied();
  seen.read.length = 0; // the drain below may need the memory
  crashPoint('scan-after-enqueue');

  if (batchId !== null) {
    progress.phase = 'commit';
    opts.onProgress?.(progress);
    const failure = await drainAccepted(store, runner, { through: batchId, ...(preloaded ? { preloaded } : {}) });
    receipt.git = acceptedGitState(db, batchId, failure);
  }
  return receipt;
}

/**
 * Files whose executable bit alone changed (observe.ts) are changes where the
 * vault's repository records the bit (core.fileMode, git's default; also when
 * there is no repository yet: `git init` sets it where the file system keeps
 * the bit). Where it does not, they are fingerprint refreshes, as for `git
 * status`, and their staged rows go. While git cannot be asked (not
 * installed, a lock held, an operation in progress, a damaged repository),
 * such a change waits: its staged row goes, its recorded bit and fingerprint
 * stay as they were (marked racy, so the next scan reads the file again and
 * decides then). Queued now, it could become an empty commit once git
 * answers that the bit is not recorded.
 */
async function settleExecChanges(store: Store, runner: GitRunner, scanId: string, read: ReadFile[]): Promise<void> {
  const flipped = read.filter((f) => f.execChanged === true);
  if (flipped.length === 0) return;
  const decision = await execBitRecorded(runner, store.paths.vault);
  if (decision === 'recorded') return;
  const unstage = store.db.prepare('DELETE FROM scan_staging WHERE scan_id = ? AND path = ?');
  store.db.transaction(() => {
    for (const f of flipped) {
      unstage.run(scanId, f.path);
      f.execChanged = false;
      if (decision === 'unknown') {
        f.exec = !f.exec; // the bit as recorded
        f.racy = true;
      }
    }
  })();
}

/**
 * Recorded files a sparse checkout leaves out of the working tree [SCAN-1,
 * GIT-10]: `git sparse-checkout` removes them from disk and marks them
 * skip-worktree, and git still counts them as present. They are not
 * deletions: each is kept as recorded (its record, its fingerprint, its path
 * in the branch) and reported. Asked only when some recorded file is gone;
 * when git cannot say, a gone file is a deletion, as before.
 */
async function keepSparseCheckout(store: Store, runner: GitRunner, seen: Observation): Promise<void> {
  if (seen.missing.length === 0 || !(await runner.detect()).ok) return;
  const repo = await inspectLayout(runner, store.paths.vault);
  if (repo.kind === 'absent') return;
  const skipped = await skipWorktreePaths(runner, store.paths.vault, seen.missing.map((m) => m.path));
  if (skipped === null || skipped.size === 0) return;
  seen.missing = seen.missing.filter((m) => !skipped.has(m.path));
  for (const path of [...skipped].sort()) {
    seen.diagnostics.push({ path, code: 'sparse-checkout', reason: 'left out of the working tree by the repository\'s sparse checkout (skip-worktree): not a deletion; what Knowledge recorded is kept' });
  }
}

/**
 * [GIT-10] Files under a submodule the branch records (a gitlink), or the
 * user's index (added, not yet committed), whose folder is not checked out,
 * so holds no `.git` the walk would stop at: they are that repository's (git
 * itself refuses to add them). Committed here, they would replace the gitlink
 * in the branch and in the user's index. Left out of the scan — not staged,
 * indexed or committed — with one diagnostic per submodule. One `ls-tree` of
 * folders, only when the scan read a file new to it, and one `ls-files` of the
 * folders new to the branch, only when it found some (gitlinksUnder).
 */
async function keepOutOfSubmodules(store: Store, runner: GitRunner, scanId: string, seen: Observation): Promise<void> {
  // Only a path new to Knowledge can lie under one: a file it recorded was in the branch as a file.
  const added = seen.read.filter((f) => f.knownSha256 === null);
  if (added.length === 0 || !(await runner.detect()).ok) return;
  const repo = await inspectLayout(runner, store.paths.vault);
  if (repo.kind !== 'ready') return;
  const tops = [...partitionsRead(added)].map((p) => partitionDir(p as PartitionId));
  const links = tops.length > 0 ? await gitlinksUnder(runner, repo.workTree, repo.head, tops, added.map((f) => f.path)) : null;
  if (links === null || links.size === 0) return;
  const submoduleOf = (path: string): string | null => {
    for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) if (links.has(path.slice(0, i))) return path.slice(0, i);
    return null;
  };
  const found = new Set<string>();
  const unstage = store.db.prepare('DELETE FROM scan_staging WHERE scan_id = ? AND path = ?');
  seen.read = seen.read.filter((f) => {
    const sub = submoduleOf(f.path);
    if (sub === null) return true;
    found.add(sub);
    unstage.run(scanId, f.path);
    return false;
  });
  for (const sub of [...found].sort()) {
    seen.diagnostics.push({ path: sub, code: 'nested-repository', reason: 'a submodule the branch or the index records (a gitlink) whose folder is not checked out: files put there belong to that repository and are not checkpointed' });
  }
}

/** Whether the vault's repository records the executable bit; 'unknown' while git cannot be asked. */
async function execBitRecorded(runner: GitRunner, vault: string): Promise<'recorded' | 'ignored' | 'unknown'> {
  if (!(await runner.detect()).ok) return 'unknown';
  const repo = await inspectLayout(runner, vault);
  if (repo.kind === 'absent') return 'recorded';
  if (repo.kind !== 'ready') return 'unknown';
  return (await recordsExecBit(runner, repo.workTree)) ? 'recorded' : 'ignored';
}

/** Files (or bytes) to commit from which preloading their blobs pays for its worker and process. */
const PRELOAD_MIN_FILES = 1000;
const PRELOAD_MIN_BYTES = 8 * 1024 * 1024;

function isLargeWrite(read: readonly ReadFile[]): boolean {
  let files = 0;
  let bytes = 0;
  for (const f of read) {
    if (f.knownSha256 === f.sha256) continue; // touched, not rewritten
    files++;
    bytes += f.size;
  }
  return files >= PRELOAD_MIN_FILES || bytes >= PRELOAD_MIN_BYTES;
}

/** Null when there is no repository ready for it; an optimisation never fails the scan. */
async function startPreload(store: Store, runner: GitRunner): Promise<BlobPreload | null> {
  try {
    const repo = await repositoryForCheckpoint(runner, store.paths.vault);
    return repo ? startBlobPreload(runner, repo) : null;
  } catch {
    return null; // the checkpoint itself will meet and report whatever this was
  }
}

/** Whether `caller` may read every partition a queued checkpoint writes to. */
function canSeeBatch(store: Store, caller: Caller, w: { kind: RetriedCheckpoint['kind']; ref_id: string }): boolean {
  if (caller.kind === 'operator') return true;
  const db = store.db;
  let partitions: string[];
  if (w.kind === 'publication') partitions = db.prepare('SELECT partition FROM publications WHERE publication_id = ?').pluck().all(w.ref_id) as string[];
  else if (w.kind === 'attachment') partitions = db.prepare('SELECT partition FROM attachments WHERE attachment_id = ?').pluck().all(w.ref_id) as string[];
  else {
    // Its walked partitions only: the receipt itself may list a baseline's every file.
    const walked = db.prepare("SELECT json_extract(receipt, '$.partitions') FROM scans WHERE scan_id = ?").pluck().get(w.ref_id) as string | null | undefined;
    partitions = typeof walked === 'string' ? (JSON.parse(walked) as string[]) : [];
  }
  return partitions.length > 0 && partitions.every((p) => canAccessPartition(caller, p));
}

/** Every current diagnostic of the partitions walked: stored ones, duplicate ids, and this walk's. */
export function diagnosticsFor(store: Store, partitions: readonly string[], walk: readonly ScanDiagnostic[], caller: Caller): ScanDiagnostic[] {
  const db = store.db;
  const out: ScanDiagnostic[] = [...walk];
  const stored = db.prepare('SELECT path, code, reason FROM scan_diagnostics WHERE partition = ?');
  const dups = db.prepare('SELECT path, id FROM scan_duplicate_rows WHERE partition = ?');
  const claimants = db.prepare('SELECT path, partition FROM scan_duplicate_rows WHERE id = ? AND path <> ? ORDER BY path');
  for (const p of partitions) {
    out.push(...(stored.all(p) as ScanDiagnostic[]));
    for (const d of dups.all(p) as Array<{ path: string; id: string }>) {
      // The other claimants are named only where the caller may read them (an agent never
      // learns another conversation's paths) [SURF-3].
      const others = claimants.all(d.id, d.path) as Array<{ path: string; partition: string }>;
      const shown = others.filter((o) => canAccessPartition(caller, o.partition)).map((o) => o.path);
      const hidden = others.length - shown.length;
      const by = claimantsPhrase(shown, hidden) || 'another file';
      out.push({ path: d.path, code: 'duplicate-id', reason: `record id ${d.id} is also claimed by ${by}; lookup returns no record for it` });
    }
  }
  return out.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : x.code < y.code ? -1 : x.code > y.code ? 1 : 0));
}

/** The partitions of the files a scan read (and staged). */
function partitionsRead(read: readonly { path: string }[]): Set<string> {
  const out = new Set<string>();
  for (const f of read) {
    const p = partitionOfPath(f.path);
    if (p !== null) out.add(p);
  }
  return out;
}
