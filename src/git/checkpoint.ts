/**
 * Effectful half of a checkpoint: commit queued batches — one commit each,
 * with exactly its bytes [GIT-7], in queue order [GIT-5] — without the work
 * tree or the user's index [GIT-10], then move the branch by compare-and-swap.
 * The caller runs this outside any SQLite write transaction and records the
 * result afterwards [GIT-4], then calls `finishIndex` to update the index.
 *
 * Pipeline (FIELD-NOTES pipeline C, batched — "one stream is the lever"):
 *   detect → inspect (create if absent) → [unmerged probe (skipped for an
 *   index known clean) ∥ previous attempt lookup ∥ parent entries] → ONE
 *   fast-import stream of chained commits onto a scratch ref → take
 *   index.lock → ONE update-ref CAS of the branch (dropping the scratch ref in
 *   the same transaction) → [caller records the receipts] → finishIndex:
 *   the new index is written beside the lock, installed, and the lock
 *   released. Nothing that grows with the size of the index is left before
 *   the receipt; the index write is what follows it.
 */
import { lstat, mkdir, open, readdir, readFile, realpath, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { classifyGitFailure, firstLine, pendingCodeOfErrno, type GitResult, type GitRunner } from './runner.js';
import { checkUnmerged, inspectLayout, recheckBeforeMove, recordsExecBit, checksOutLinks, SCRATCH_REF, vaultEnv, type RepoInspection } from './inspect.js';
import { assertCommittablePath, batchCommitKey, blobId, chainModes, commitKeys, epochSeconds, modesDependOnFileMode, quotePath } from './commit-stream.js';
import { readTreeEntries, runIndexJob, type Entry, type IndexJob, type IndexSyncOutcome, type Step } from './index-sync.js';
import { indexIdentity, isKnownClean, rememberClean } from './index-state.js';
import type { BatchForCommit, BlobIds, PendingCode } from './types.js';
import { crashPoint } from '../faults.js';
import { holdIndexLock, type HeldIndexLock } from './index-lock.js';
import { refTransaction } from './ref-session.js';
import { acquireImporter, type Importer } from './import-session.js';
import { HISTORY_DIR } from '../store/layout.js';
import { COMMIT_MESSAGE_FORMAT, parseCommitMessages } from './trailers.js';
import { readRegular } from '../fsutil.js';

export { syncIndex, runIndexJob, type IndexJob, type IndexSyncOutcome } from './index-sync.js';

export interface ChainCommit {
  batchId: number;
  commit: string;
  parent: string | null;
  /** Found on the branch from an interrupted earlier attempt [GIT-6]. */
  reused: boolean;
}

export type ChainOutcome =
  | {
      state: 'committed';
      /** One per batch, in the order given. */
      commits: ChainCommit[];
      objectFormat: 'sha1' | 'sha256';
      /** The entries each batch committed (path -> mode + blob id, null = deleted), for records and the index. */
      steps: Step[];
      /** Paths left out of a scan's checkpoint because the user's own commits overtook them (withoutOvertaken). */
      dropped: ReadonlyArray<{ batchId: number; paths: readonly string[] }>;
      /**
       * Bring the user's index in line with these commits [GIT-10]. MUST be
       * called exactly once, after the commits are recorded: when the branch
       * moved in this call, Knowledge still holds index.lock (so no git
       * command of the user's can read the old index against the new tip) and
       * this writes the new index and releases the lock. `run: false` only
       * releases it (an earlier index update is still owed; it goes first).
       */
      finishIndex: (run?: boolean) => Promise<IndexSyncOutcome>;
    }
  | { state: 'pending'; code: PendingCode; reason: string }
  | { state: 'unavailable'; reason: string };

export type CommitOutcome =
  | { state: 'committed'; commit: string; parent: string | null; reused: boolean; index: IndexSyncOutcome }
  | { state: 'pending'; code: PendingCode; reason: string }
  | { state: 'unavailable'; reason: string };

export interface CommitBatchOptions {
  /** Last commit the store recorded for this vault; bounds the search for a previous attempt [GIT-6]. */
  lastKnownCommit?: string | null;
  /**
   * The caller knows that every branch move of an earlier attempt was
   * recorded (the store's writer has committed and recorded everything itself
   * since it last searched): skip the search for a previous attempt [GIT-6].
   */
  noEarlierAttempt?: boolean;
  /**
   * Batches whose blobs are all in the repository already (blob-preload.ts),
   * with each path's blob id: their commits name the blobs by id. Should git
   * not have one of them, the chain is made again with every file's bytes.
   */
  preloaded?: ReadonlyMap<number, BlobIds>;
  /** Test-only seams to reproduce races and crashes deterministically. */
  testHooks?: {
    /** Runs after the commit objects exist (on the scratch ref) and before the branch moves. */
    beforeUpdateRef?: (commit: string) => Promise<void> | void;
  };
}

/** Lines written to info/exclude of a repository Knowledge created [GIT-13]. */
export const EXCLUDE_LINES: readonly string[] = [
  '# Written by Knowledge when it created this repository: never committed [GIT-13]',
  '/vault.json',
  `/${HISTORY_DIR}/`,
  '*.sqlite',
  '*.sqlite-wal',
  '*.sqlite-shm',
];

/**
 * Up to this many paths, fast-import itself is asked for the tip's entries
 * (`ls`, one lookup per path) instead of a separate `ls-tree`; its lookup is
 * linear in the directory size, so many paths go to `ls-tree` instead.
 */
const LS_IN_FAST_IMPORT = 16;

/** How far back to look for a previous attempt when the store knows no earlier commit. */
const REUSE_SEARCH_LIMIT = 200;

/**
 * fast-import writes every checkpoint as a pack: one fsync'd pack + index
 * instead of a loose file per object (fast-import would otherwise explode
 * small packs into loose objects). Maintenance rolls the packs up [GIT-9 of
 * the issue: maintenance].
 */
const FAST_IMPORT_CONFIG = ['fastimport.unpackLimit=0'];

const pend = (code: PendingCode, reason: string) => ({ state: 'pending' as const, code, reason });

/** Single batch: commit it and update the index (the pre-chain API, used by tests and tools). */
export async function commitBatch(
  runner: GitRunner,
  vaultDir: string,
  batch: BatchForCommit,
  opts: CommitBatchOptions = {},
): Promise<CommitOutcome> {
  const out = await commitChain(runner, vaultDir, [batch], opts);
  if (out.state !== 'committed') return out;
  const c = out.commits[0]!;
  const index = await out.finishIndex();
  return { state: 'committed', commit: c.commit, parent: c.parent, reused: c.reused, index };
}

export async function commitChain(
  runner: GitRunner,
  vaultDir: string,
  batches: readonly BatchForCommit[],
  opts: CommitBatchOptions = {},
): Promise<ChainOutcome> {
  if (batches.length === 0) throw new TypeError('commitChain needs at least one batch');
  // Programmer errors surface before anything is created or written.
  for (const b of batches) {
    for (const c of b.changes) assertCommittablePath(c.path);
    epochSeconds(b.createdAt);
  }

  const det = await runner.detect();
  if (!det.ok) return { state: 'unavailable', reason: det.reason };

  const paths = [...new Set(batches.flatMap((b) => b.changes.map((c) => c.path)))];
  // Every read this checkpoint needs runs in one round with the inspection
  // (each git process costs ~4 ms to start): the index's conflict probe, the
  // user's entries for the paths, the tip's entries (modes to keep, the
  // index's base) and a previous attempt of these batches [GIT-6]. They name
  // HEAD and are read-only, so running them before the inspection has judged
  // the repository is harmless; their results are used only if it is ready.
  const early = await startReads(runner, vaultDir, paths, batches.length, opts.lastKnownCommit ?? null, false, opts.noEarlierAttempt);
  let repo: RepoInspection = await inspectLayout(runner, vaultDir);
  const reads = await early;
  if (repo.kind === 'absent') {
    const made = await createRepository(runner, vaultDir);
    if (!made.ok) return made.unavailable ? { state: 'unavailable', reason: made.reason } : pend(made.code, made.reason);
    repo = await inspectLayout(runner, vaultDir);
  }
  if (repo.kind === 'absent') return pend('git-error', 'the repository Knowledge just created is not visible');
  if (repo.kind === 'pending') return unavailableIfGone(runner, repo);
  // (A stale index.lock of ours is not removed here: the index it covers may be
  // behind the branch. holdIndexLock takes it over, and the index job below
  // or finishIndex updates the index before releasing it.)
  if (repo.head === null) {
    // A crash between `git init` and writing info/exclude leaves our own
    // empty-template repository without it; finish that step now.
    const healed = await finishOwnRepository(repo.gitDir);
    if (!healed.ok) return pend(healed.code, healed.reason);
  }
  const vault = repo.workTree;
  const env = vaultEnv(vault);
  const tip = repo.head;
  const fmt = repo.objectFormat;
  // The index as this checkpoint found it: written again by the time the branch is to move, it was a user's git
  // command, perhaps a checkout about to move HEAD (settleIndex).
  const indexAtStart = await indexIdentity(repo.gitDir);

  // Reads made before the repository existed (or while it had no commit) are redone now.
  const { unmerged, found, tipTree } = reads && (tip !== null || reads.headless)
    ? reads
    : await (await startReads(runner, vault, paths, batches.length, opts.lastKnownCommit ?? null, true, opts.noEarlierAttempt))!;
  if (unmerged) return unavailableIfGone(runner, unmerged as Extract<RepoInspection, { kind: 'pending' }>);
  if (tip && found.kind === 'error') return pend(found.code, found.reason);
  if (tip && tipTree && !tipTree.ok) return pend(tipTree.code, tipTree.reason);
  // The tip's entries for the paths: read above, or (for a few paths) asked
  // of fast-import itself below, which saves a git process.
  let tipEntries: ReadonlyMap<string, Entry> | null = !tip ? new Map() : tipTree?.ok ? tipTree.entries : null;
  const tipEntriesNow = async (): Promise<ReadonlyMap<string, Entry> | { code: PendingCode; reason: string }> => {
    if (tipEntries) return tipEntries;
    const r = await readTreeEntries(runner, vault, tip!, paths);
    if (!r.ok) return r;
    tipEntries = r.entries;
    return tipEntries;
  };
  const foundHere: Found = tip && opts.lastKnownCommit !== tip ? found : { kind: 'none' };

  // Batches already on the branch form a prefix of the queue: commits land
  // in order, a chain at once. Reuse that prefix; never commit it again.
  const reused: ChainCommit[] = [];
  if (foundHere.kind === 'found') {
    for (const b of batches) {
      const hit = foundHere.commits.get(batchCommitKey(b));
      if (!hit) break;
      reused.push({ batchId: b.batchId, commit: hit.commit, parent: hit.parent, reused: true });
    }
  }
  let rest = batches.slice(reused.length);
  const known = new Map<string, ReadonlyMap<string, Entry>>();
  const dropped: Array<{ batchId: number; paths: readonly string[] }> = [];

  // Entries of the reused commits, rebuilt in-process from their queued
  // bytes and the modes at their parent (the same rule that built them).
  let reusedSteps: Step[] = [];
  const before: string[] = [];
  // A reused chain that starts at the root commit: its parent is the empty tree [GIT-6][GIT-10].
  const fromRoot = reused.length > 0 && reused[0]!.parent === null;
  if (reused.length > 0) {
    const firstParent = reused[0]!.parent;
    let parentEntries: ReadonlyMap<string, Entry> = new Map();
    if (firstParent) {
      before.push(firstParent);
      if (firstParent === tip) {
        const t = await tipEntriesNow();
        if (!(t instanceof Map)) return pend((t as { code: PendingCode }).code, (t as { reason: string }).reason);
        parentEntries = t;
      } else {
        const r = await readTreeEntries(runner, vault, firstParent, paths);
        if (!r.ok) return pend(r.code, r.reason);
        parentEntries = r.entries;
        known.set(firstParent, r.entries);
      }
    }
    const reusedBatches = batches.slice(0, reused.length);
    const parentExec = executableOf(parentEntries);
    const parentLinks = await keptLinks(runner, vault, parentEntries);
    reusedSteps = stepsFor(reusedBatches, parentExec, await fileModeFor(runner, vault, reusedBatches, parentExec), fmt, undefined, parentLinks);
    // What the cut-short attempt left out of a scan's commit (withoutOvertaken) is read from that commit itself.
    const left = await leftOutOf(runner, vault, reusedBatches[0]!, reused[0]!, reusedSteps[0]!);
    if (left.length > 0) {
      const step = new Map(reusedSteps[0]!);
      for (const p of left) step.delete(p);
      reusedSteps = [step, ...reusedSteps.slice(1)];
      dropped.push({ batchId: reused[0]!.batchId, paths: left });
    }
  }
  if (rest.length === 0) {
    if (tip) {
      const t = await tipEntriesNow();
      if (!(t instanceof Map)) return pend((t as { code: PendingCode }).code, (t as { reason: string }).reason);
      known.set(tip, t);
    }
    // Nothing moves now, but the branch moved in the attempt that was cut short: the
    // index job holds index.lock (taking over that attempt's) until the index follows.
    const job: IndexJob = { paths: pathsLeft(paths, dropped, batches), objectFormat: fmt, before, fromRoot, base: tip, reusedSteps, newSteps: [], known };
    const gitDir = repo.gitDir;
    return {
      state: 'committed',
      commits: reused,
      objectFormat: fmt,
      steps: reusedSteps,
      dropped,
      finishIndex: async (run = true) => (run ? runIndexJobLocked(runner, vault, gitDir, job) : skippedIndex()),
    };
  }

  // Build the chain on a scratch ref, in this repository's running
  // fast-import (import-session.ts). --force only ever applies to that
  // scratch ref (the stream names no other), e.g. one left by a crash.
  const fi = acquireImporter(runner, vault, env, FAST_IMPORT_CONFIG);
  if (tipEntries === null) {
    const asked = await lsInFastImport(fi, tip!, paths);
    if (!asked) return failed(runner, await fi.fail());
    tipEntries = asked;
  }
  if (tip) known.set(tip, tipEntries);
  if (reused.length === 0) {
    const w = await withoutOvertaken(runner, vault, rest[0]!, tip, tipEntries, fmt);
    if (w.dropped.length > 0) {
      rest = [w.batch, ...rest.slice(1)];
      dropped.push({ batchId: w.batch.batchId, paths: w.dropped });
    }
  }
  const executable = executableOf(tipEntries);
  const fileMode = await fileModeFor(runner, vault, rest, executable);
  const links = await keptLinks(runner, vault, tipEntries);
  // Each new commit's entries, from its own bytes (the index update uses them too).
  let newSteps = stepsFor(rest, executable, fileMode, fmt, opts.preloaded, links);
  const preloaded = opts.preloaded && rest.some((b) => opts.preloaded!.has(b.batchId))
    ? rest.map((b, i) => (opts.preloaded!.has(b.batchId) ? newSteps[i]! : null))
    : undefined;
  let imported = await fi.chain(rest, { from: tip, executable, fileMode, links, ...(preloaded ? { preloaded } : {}) });
  if (!imported.ok && imported.result && PACK_LOST.test(imported.result.stderr)) {
    // The pack the running fast-import had open was deleted under it (a user's `git prune` between checkpoints):
    // its failed finish left a `.keep` with no pack, which would fail every later build of the same pack. Removed,
    // and the chain built once more by a new fast-import.
    await removeOrphanImportKeeps(repo.gitDir);
    imported = await acquireImporter(runner, vault, env, FAST_IMPORT_CONFIG).chain(rest, { from: tip, executable, fileMode, links, ...(preloaded ? { preloaded } : {}) });
  }
  if (!imported.ok && preloaded) {
    // A preloaded blob git does not have (say, the repository was replaced
    // meanwhile): carry the bytes, and take every id from them again (the
    // index update and the recorded ids use these steps).
    newSteps = stepsFor(rest, executable, fileMode, fmt, undefined, links);
    imported = await acquireImporter(runner, vault, env, FAST_IMPORT_CONFIG).chain(rest, { from: tip, executable, fileMode, links });
  }
  if (!imported.ok) return imported.result ? failed(runner, imported.result) : pend('git-error', imported.reason);
  const marks = imported.marks;
  const last = marks[marks.length - 1]!;

  await opts.testHooks?.beforeUpdateRef?.(last);
  crashPoint('after-commit-object');

  // [GIT-10] Take the user's index lock before the branch moves and keep it
  // until the new index is in place (finishIndex), so no git command of the
  // user's can read the old index against the new tip (index-lock.ts). A
  // held lock is reported and left in place [GIT-19].
  const held = await holdIndexLock(repo.gitDir);
  if (!held.ok) return pend(held.code, held.reason);
  const gitDir = repo.gitDir;
  // HEAD and the operation files may have changed while the chain was built; with
  // the lock held they no longer can. Nothing moved yet, so the lock simply goes.
  const recheck = () => recheckBeforeMove(runner, repo).catch((err: Error) => ({ code: 'git-error' as const, reason: err.message }));
  const changed = (await recheck()) ?? (await settleIndex(repo.gitDir, indexAtStart, recheck));
  // A lock taken over may cover an index still behind the branch: it stays held then (abandon).
  const letGo = () => (held.lock.tookOver ? held.lock.abandon() : held.lock.release());
  if (changed) {
    await letGo();
    return pend(changed.code, changed.reason);
  }
  // Nobody else writes the index while we hold its lock: this is the index finishIndex will copy.
  const cleanBefore = await isKnownClean(gitDir, await indexIdentity(gitDir), vault);

  // Compare-and-swap the branch HEAD names (never HEAD itself): if anyone
  // moved it since inspection, nothing changes and we report branch-moved.
  // Deleting the scratch ref in the same transaction keeps the commits
  // reachable until the branch holds them.
  const tx = (tip ? `update ${repo.branchRef} ${last} ${tip}\n` : `create ${repo.branchRef} ${last}\n`) + `delete ${SCRATCH_REF} ${last}\n`;
  let up: GitResult;
  try {
    up = await refTransaction(runner, vault, env, 'knowledge: checkpoint', tx);
  } catch (err) {
    await letGo();
    throw err;
  }
  if (up.code !== 0) {
    // A transaction that timed out (or whose answer was lost) may still have moved the branch: look.
    const moved = await branchNow(runner, vault, env, repo.branchRef);
    if (moved === null) {
      // Not known: the index may be behind the branch, so the lock stays held (a later write takes it over),
      // and the next attempt searches the branch for this one [GIT-6].
      await held.lock.abandon();
      return failed(runner, up);
    }
    if (moved !== last) {
      await letGo();
      return failed(runner, up);
    }
  }
  crashPoint('after-update-ref');

  const job: IndexJob = { paths: pathsLeft(paths, dropped, batches), objectFormat: fmt, before, fromRoot, base: tip, reusedSteps, newSteps, known };
  let finished = false;
  const finishIndex = async (run = true): Promise<IndexSyncOutcome> => {
    if (finished) throw new Error('finishIndex called twice');
    finished = true;
    if (!run) {
      // An earlier index update of this drain failed: the index is behind this move too.
      await held.lock.abandon();
      return skippedIndex();
    }
    // HEAD moved since the branch moved, to history without these commits (another branch whose checkout kept the
    // index, or a checkout whose index write settleIndex did not see): the index is that history's now, and left
    // alone. A `git checkout -b` made at the new tip holds them: its index is updated as the branch's would be.
    const away = await recheckBeforeMove(runner, repo).catch(() => null);
    if (away && (away.code === 'branch-moved' || away.code === 'detached-head') && !(await headContains(runner, vault, last))) {
      await held.lock.release();
      return leftToOtherBranch(job.paths.length);
    }
    const out = await indexJobUnder(held.lock, runner, vault, job);
    // Our update wrote stage-0 entries for unconflicted paths only: an index
    // known free of conflicts stays so.
    if (out.ok && cleanBefore) await rememberClean(gitDir, await indexIdentity(gitDir), vault);
    return out;
  };

  const made = rest.map((b, i): ChainCommit => ({ batchId: b.batchId, commit: marks[i]!, parent: i === 0 ? tip : marks[i - 1]!, reused: false }));
  return {
    state: 'committed',
    commits: [...reused, ...made],
    objectFormat: fmt,
    steps: [...reusedSteps, ...newSteps],
    dropped,
    finishIndex,
  };
}

/** The commit `ref` names now ('' when there is none); null when git cannot tell. */
async function branchNow(runner: GitRunner, vault: string, env: Record<string, string>, ref: string): Promise<string | null> {
  try {
    const r = await runner.run(['rev-parse', '-q', '--verify', `${ref}^{commit}`], { cwd: vault, env });
    if (r.code === 0) return r.stdout.toString('utf8').trim();
    return r.code === 1 && !r.timedOut && r.stderr.trim() === '' ? '' : null;
  } catch {
    return null;
  }
}

/**
 * [GIT-10] A scan's observations that the user's own commits overtook. A
 * scan queues the bytes it read; when the user commits one of those paths
 * after the scan looked (the tip it saw first, `observedTip`) and the file
 * on disk is still what they committed, the scan's bytes are older, and
 * committed on top they would revert the user's commit (and move the user's
 * index entry back with them). Such paths are left out of the scan's
 * checkpoint; the next scan finds the file as the user committed it and
 * commits nothing for it while the branch holds it. Where the disk holds
 * something else (the user committed staged bytes and kept editing, say),
 * the scan's bytes may well be the newer ones and are committed as usual.
 * Only the first batch of a chain can be such a scan: it was queued with
 * nothing waiting before it (scan.ts), so every commit between the tip it
 * saw and its parent is someone else's.
 */
async function withoutOvertaken(
  runner: GitRunner,
  vault: string,
  batch: BatchForCommit,
  parent: string | null,
  parentEntries: ReadonlyMap<string, Entry>,
  fmt: 'sha1' | 'sha256',
): Promise<{ batch: BatchForCommit; dropped: string[] }> {
  if (!mayBeOvertaken(batch, parent)) return { batch, dropped: [] };
  const paths = batch.changes.map((c) => c.path);
  const seen = await readTreeEntries(runner, vault, batch.observedTip!, paths);
  // The commit the scan saw is gone (a history rewritten and pruned): commit what it observed.
  if (!seen.ok) return { batch, dropped: [] };
  const same = (a: Entry | undefined, b: Entry | undefined) => a?.oid === b?.oid && a?.mode === b?.mode;
  const dropped: string[] = [];
  for (const p of paths) {
    const now = parentEntries.get(p);
    if (!same(seen.entries.get(p), now) && (await diskHolds(vault, p, now, fmt))) dropped.push(p);
  }
  if (dropped.length === 0) return { batch, dropped };
  const drop = new Set(dropped);
  return { batch: { ...batch, changes: batch.changes.filter((c) => !drop.has(c.path)) }, dropped };
}

function mayBeOvertaken(batch: BatchForCommit, parent: string | null): boolean {
  return batch.kind === 'scan' && !!batch.observedTip && parent !== null && parent !== batch.observedTip;
}

/** Whether the working file at `path` is what `entry` names (absent where it names nothing). */
async function diskHolds(vault: string, path: string, entry: Entry | undefined, fmt: 'sha1' | 'sha256'): Promise<boolean> {
  let bytes: Buffer;
  try {
    if (!(await lstat(join(vault, path))).isFile()) return false;
    bytes = await readRegular(join(vault, path));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return (code === 'ENOENT' || code === 'ENOTDIR') && entry === undefined;
  }
  return entry !== undefined && blobId(bytes, fmt) === entry.oid;
}

/**
 * The paths a cut-short attempt left out of a scan's commit (withoutOvertaken
 * decided from the disk as it was then): those whose entry in that commit
 * is not what the scan's bytes would have made.
 */
async function leftOutOf(runner: GitRunner, vault: string, batch: BatchForCommit, made: ChainCommit, step: Step): Promise<string[]> {
  if (!mayBeOvertaken(batch, made.parent)) return [];
  const paths = [...step.keys()];
  const there = await readTreeEntries(runner, vault, made.commit, paths);
  if (!there.ok) return [];
  return paths.filter((p) => there.entries.get(p)?.oid !== step.get(p)?.oid);
}

/** The chain's paths without those left out of every batch that had them. */
function pathsLeft(paths: readonly string[], dropped: ReadonlyArray<{ batchId: number; paths: readonly string[] }>, batches: readonly BatchForCommit[]): string[] {
  if (dropped.length === 0) return [...paths];
  const out = new Set<string>(dropped.flatMap((d) => d.paths));
  for (const b of batches) if (!dropped.some((d) => d.batchId === b.batchId)) for (const c of b.changes) out.delete(c.path);
  return paths.filter((p) => !out.has(p));
}

/**
 * Run an index job [GIT-10] while holding `index.lock` — taking over one a
 * killed Knowledge process left — so that a git command of the user's reads
 * either the index behind our lock or the updated one, never an index behind
 * a branch that already moved. A lock of anyone else's is reported (locked).
 */
export async function runIndexJobLocked(runner: GitRunner, vault: string, gitDir: string, job: IndexJob): Promise<IndexSyncOutcome> {
  if (job.paths.length === 0) return runIndexJob(runner, vault, job);
  const held = await holdIndexLock(gitDir);
  if (!held.ok) return { ok: false, code: held.code, reason: held.reason };
  // An update owed from an earlier checkpoint, made later: if HEAD has since moved to history without those
  // commits (another branch checked out), the index is that history's, and it is left alone [GIT-10].
  if (job.base && !(await headContains(runner, vault, job.base))) {
    await held.lock.release();
    return leftToOtherBranch(job.paths.length);
  }
  return indexJobUnder(held.lock, runner, vault, job);
}

/** Whether the commit HEAD names has `commit` in its history (true when git cannot tell: the update goes ahead as before). */
async function headContains(runner: GitRunner, vault: string, commit: string): Promise<boolean> {
  const r = await runner.run(['merge-base', '--is-ancestor', commit, 'HEAD'], { cwd: vault, env: vaultEnv(vault) }).catch(() => null);
  return !(r && r.code === 1 && !r.timedOut);
}

/**
 * The index job on a copy of the user's index beside the lock we hold; the
 * new index goes into place before the lock is released. If it could not be
 * written, the index is still behind the branch: the lock stays held (a
 * user's git command fails with git's "index.lock exists" instead of
 * committing the checkpoint's files as deleted) and the job runs again at
 * the next drain, which takes the lock over [GIT-10].
 */
async function indexJobUnder(lock: HeldIndexLock, runner: GitRunner, vault: string, job: IndexJob): Promise<IndexSyncOutcome> {
  try {
    const copied = await lock.copy();
    if (!copied.ok) {
      await lock.abandon();
      return { ok: false, code: 'git-error', reason: copied.reason };
    }
    const out = await runIndexJob(runner, vault, { ...job, indexFile: lock.temp });
    if (!out.ok) {
      await lock.abandon();
      return out;
    }
    await lock.install();
    return out;
  } catch (err) {
    await lock.abandon();
    return { ok: false, code: 'git-error', reason: `updating the index: ${(err as Error).message}` };
  }
}

/**
 * How long a checkpoint holding index.lock waits for HEAD to move when the
 * index was written during its build: `git checkout` and
 * `git reset` write the index, release its lock, and only then move HEAD or
 * the branch, a gap of microseconds to a few milliseconds on an idle machine.
 */
export const INDEX_SETTLE_MS = 150;

/**
 * [GIT-10] Called with index.lock held, after HEAD was found unchanged. If
 * the index is not the file this checkpoint found when it started, a user's
 * git command wrote it meanwhile (Knowledge's own index writes all finish
 * before the next checkpoint starts: outbox.ts payOwed); a checkout
 * or reset does so before it moves HEAD or the branch, and in that gap
 * Knowledge would move the old branch and stage its files in the index of
 * the new one. So wait out the gap and look again (the compare-and-swap
 * catches a reset's branch move; this catches HEAD naming another branch):
 * a moved HEAD makes the checkpoint build again on the branch it names.
 * Returns what changed, or null.
 */
async function settleIndex<T>(gitDir: string, atStart: string | null, recheck: () => Promise<T | null>): Promise<T | null> {
  if ((await indexIdentity(gitDir)) === atStart) return null;
  crashPoint('index-settle');
  await new Promise((done) => setTimeout(done, INDEX_SETTLE_MS));
  return recheck();
}

/** The index was left alone: HEAD names another branch now, whose index it is. */
function leftToOtherBranch(paths: number): IndexSyncOutcome {
  return { ok: true, updated: 0, skipped: paths };
}

function skippedIndex(): IndexSyncOutcome {
  return { ok: false, code: 'waiting', reason: 'the index update waits for an earlier one' };
}

interface Reads {
  unmerged: RepoInspection | null;
  found: Found;
  /** null: not read here; fast-import answers `ls` for these few paths. */
  tipTree: Awaited<ReturnType<typeof readTreeEntries>> | null;
  /** Read when the repository had no commit yet (nothing to redo for an unborn branch). */
  headless: boolean;
}

/**
 * The reads of one checkpoint, started together. Returns null when there is
 * no repository to read yet. `force` reads even without a HEAD commit.
 */
async function startReads(
  runner: GitRunner,
  vaultDir: string,
  paths: string[],
  chainLength: number,
  lastKnown: string | null,
  force = false,
  noEarlierAttempt = false,
): Promise<Promise<Reads> | null> {
  let vault: string;
  try {
    vault = await realpath(vaultDir);
    if (!(await lstat(join(vault, '.git'))).isDirectory()) return null;
  } catch {
    return null;
  }
  const env = vaultEnv(vault);
  const gitDir = join(vault, '.git');
  const branchTip = await readBranchTip(gitDir);
  const none: Found = { kind: 'none' };
  return (async () => {
    const [unmerged, found, tipTree] = await Promise.all([
      unmergedUnlessKnownClean(runner, vault, gitDir),
      // Nothing new on the branch since the store's last record: no earlier attempt can be there.
      noEarlierAttempt || (branchTip !== null && branchTip === lastKnown) || (force && branchTip === null)
        ? Promise.resolve(none)
        : findBatchCommits(runner, vault, env, 'HEAD', chainLength, lastKnown),
      force && branchTip === null
        ? Promise.resolve({ ok: true as const, entries: new Map<string, Entry>() })
        : paths.length <= LS_IN_FAST_IMPORT ? Promise.resolve(null) : readTreeEntries(runner, vault, 'HEAD', paths),
    ]);
    return { unmerged, found, tipTree, headless: force };
  })();
}

/**
 * The unmerged-entries probe [GIT-18] (`ls-files -u`: reads the whole
 * index), skipped while the index is the very file Knowledge last knew to be
 * free of conflicts (index-state.ts).
 */
async function unmergedUnlessKnownClean(runner: GitRunner, vault: string, gitDir: string): Promise<RepoInspection | null> {
  const before = await indexIdentity(gitDir);
  if (await isKnownClean(gitDir, before, vault)) return null;
  const found = await checkUnmerged(runner, vault);
  if (found === null && before !== null && (await indexIdentity(gitDir)) === before) await rememberClean(gitDir, before, vault);
  return found;
}

/**
 * The commit the branch HEAD names points at, read the way the files ref
 * backend stores a loose ref; null when that takes more than reading two
 * small files (packed, symlinked, unborn) — git then answers instead.
 */
async function readBranchTip(gitDir: string): Promise<string | null> {
  try {
    const head = await readRegular(join(gitDir, 'HEAD'), 'utf8');
    const m = /^ref:[ \t]*(refs\/heads\/\S+)[ \t]*\n?$/.exec(head);
    if (!m) return null;
    const ref = (await readRegular(join(gitDir, m[1]!), 'utf8')).trim();
    return /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(ref) ? ref : null;
  } catch {
    return null;
  }
}

/**
 * fast-import's `ls` against the tip: mode and blob id of each path (absent,
 * or not a file: missing from the map). Null if fast-import stopped answering.
 */
async function lsInFastImport(session: Pick<Importer, 'write' | 'readLine'>, tip: string, paths: string[]): Promise<Map<string, Entry> | null> {
  for (const p of paths) session.write(Buffer.concat([Buffer.from(`ls ${tip} `), quotePath(p), Buffer.from('\n')]));
  const entries = new Map<string, Entry>();
  for (const p of paths) {
    const line = await session.readLine();
    if (line === null) return null;
    const m = /^([0-7]{6}) (blob|tree|commit) ([0-9a-f]{40}(?:[0-9a-f]{24})?)\t/.exec(line);
    if (m && m[2] === 'blob') entries.set(p, { mode: m[1]!, oid: m[3]! });
    else if (!m && !line.startsWith('missing ')) return null;
  }
  return entries;
}

/** Paths whose entry is executable. */
function executableOf(entries: ReadonlyMap<string, Entry>): Set<string> {
  const out = new Set<string>();
  for (const [p, e] of entries) if (e.mode === '100755') out.add(p);
  return out;
}

/**
 * The paths among `entries` that are symbolic links in a repository that
 * does not check links out as links (core.symlinks=false): their changes keep
 * mode 120000, as git's own would. core.symlinks is read only when a link is
 * among them.
 */
async function keptLinks(runner: GitRunner, vault: string, entries: ReadonlyMap<string, Entry>): Promise<ReadonlySet<string>> {
  const links: string[] = [];
  for (const [p, e] of entries) if (e.mode === '120000') links.push(p);
  if (links.length === 0 || (await checksOutLinks(runner, vault))) return new Set();
  return new Set(links);
}

/** The repository's core.fileMode, read only when the chain's modes depend on it (commit-stream.ts). */
function fileModeFor(runner: GitRunner, vault: string, batches: readonly BatchForCommit[], executable: ReadonlySet<string>): Promise<boolean> | boolean {
  return modesDependOnFileMode(batches, executable) ? recordsExecBit(runner, vault) : true;
}

/** The entries each batch commits, computed in-process (blob ids are hashes of the bytes). */
export function stepsFor(
  batches: readonly BatchForCommit[],
  executable: ReadonlySet<string>,
  /** Whether the repository records the executable bit (commit-stream.ts chainModes). */
  fileMode: boolean,
  fmt: 'sha1' | 'sha256',
  /** Blob ids already known per batch and path (blob-preload.ts): those bytes are not read again. */
  known?: ReadonlyMap<number, BlobIds>,
  /** Paths kept as symbolic links (commit-stream.ts chainModes). */
  links?: ReadonlySet<string>,
): Step[] {
  const modes = chainModes(batches, executable, fileMode, links);
  return batches.map((b, i) => {
    const step = new Map<string, Entry | null>();
    const ids = known?.get(b.batchId);
    for (const c of b.changes) {
      const mode = modes[i]!.get(c.path) ?? null;
      const oid = mode === null ? undefined : ids?.get(c.path);
      if (oid !== undefined) {
        step.set(c.path, { mode: mode!, oid });
        continue;
      }
      const bytes = mode === null ? null : c.bytes; // read once: it may come from the outbox on access
      step.set(c.path, bytes === null || mode === null ? null : { mode, oid: blobId(bytes, fmt) });
    }
    return step;
  });
}

/** fast-import's words when the pack it was writing is gone, or when a failed finish left the pack's `.keep`. */
const PACK_LOST = /unable to write file .*\.pack\b|cannot create keep file|unable to rename temporary/;

/**
 * Remove `.keep` files that fast-import wrote ("fast-import", its own words) and whose pack is not there: what a
 * fast-import that could not finish its pack leaves. They keep nothing; another fast-import building the same
 * pack would fail on them. A keep of anyone else's, or beside its pack, is left alone.
 */
async function removeOrphanImportKeeps(gitDir: string): Promise<void> {
  const dir = join(gitDir, 'objects', 'pack');
  const names = await readdir(dir).catch(() => [] as string[]);
  const present = new Set(names);
  for (const n of names) {
    if (!/^pack-[0-9a-f]+\.keep$/.test(n) || present.has(n.replace(/\.keep$/, '.pack'))) continue;
    const text = await readFile(join(dir, n), 'utf8').catch(() => null);
    if (text !== null && text.trim() === 'fast-import') await unlink(join(dir, n)).catch(() => undefined);
  }
}

type Found =
  | { kind: 'found'; commits: Map<string, { commit: string; parent: string | null }> }
  | { kind: 'none' }
  | { kind: 'error'; code: PendingCode; reason: string };

/**
 * Knowledge-Batch trailers on the branch since the store's last recorded
 * commit: a previous attempt may have moved the branch and then crashed
 * before the store recorded it [GIT-6]. Any batch of a chain that landed is
 * found, since the search covers everything after the last recorded commit.
 */
async function findBatchCommits(
  runner: GitRunner,
  vault: string,
  env: Record<string, string>,
  tip: string,
  chainLength: number,
  lastKnown: string | null,
): Promise<Found> {
  // Nothing new on the branch since the store's last record: no earlier attempt can be there.
  if (lastKnown === tip) return { kind: 'none' };
  // The raw message, its trailers read by Knowledge (trailers.ts): the repository's trailer.* config can blind git's %(trailers).
  const attempt = async (range: string[]) => runner.run(['log', '-z', COMMIT_MESSAGE_FORMAT, ...range, '--'], { cwd: vault, env });
  let r = lastKnown ? await attempt([tip, `^${lastKnown}`]) : null;
  // An unknown lastKnownCommit (rewritten or collected history) falls back to a bounded search.
  if (!r || r.code !== 0) r = await attempt([`-n${REUSE_SEARCH_LIMIT + chainLength}`, tip]);
  if (r.code !== 0) {
    const c = classifyGitFailure(r.stderr, r.timedOut);
    return { kind: 'error', code: c.code, reason: c.reason };
  }
  const commits = new Map<string, { commit: string; parent: string | null }>();
  for (const { commit, parents, trailers } of parseCommitMessages(r.stdout.toString('utf8'))) {
    // Newest first: keep the oldest commit of a key (a twin could only be someone's copy).
    for (const key of commitKeys(trailers)) commits.set(key, { commit, parent: parents[0] ?? null });
  }
  return commits.size > 0 ? { kind: 'found', commits } : { kind: 'none' };
}

function failed(runner: GitRunner, r: GitResult): ChainOutcome {
  if (r.notRunnable) return { state: 'unavailable', reason: `git can no longer be run: ${firstLine(r.stderr)}` };
  const c = classifyGitFailure(r.stderr, r.timedOut);
  void runner;
  return pend(c.code, c.reason);
}

/** A probe that failed because git vanished is `unavailable`, not a repository problem. */
async function unavailableIfGone(runner: GitRunner, p: Extract<RepoInspection, { kind: 'pending' }>): Promise<ChainOutcome> {
  if (p.code === 'malformed' || p.code === 'git-error') {
    const det = await runner.detect();
    if (!det.ok) return { state: 'unavailable', reason: det.reason };
  }
  return pend(p.code, p.reason);
}

/**
 * Create `<vault>/.git` [GIT-2]: empty template (no sample hooks), branch
 * main, and an info/exclude for Knowledge's own files. Only a repository we
 * create is ever written to this way; an existing one is used as it is.
 */
/**
 * The repository a checkpoint of `vaultDir` would write to, created as the
 * first content checkpoint would create it [GIT-2]; null when git cannot run
 * or the repository is not ready for one (the checkpoint reports why).
 * For work done ahead of a checkpoint (blob-preload.ts).
 */
export async function repositoryForCheckpoint(
  runner: GitRunner,
  vaultDir: string,
): Promise<{ workTree: string; env: Record<string, string>; extraConfig: readonly string[]; objectFormat: 'sha1' | 'sha256' } | null> {
  if (!(await runner.detect()).ok) return null;
  let repo = await inspectLayout(runner, vaultDir);
  if (repo.kind === 'absent') {
    if (!(await createRepository(runner, vaultDir)).ok) return null;
    repo = await inspectLayout(runner, vaultDir);
  }
  if (repo.kind !== 'ready') return null;
  return { workTree: repo.workTree, env: vaultEnv(repo.workTree), extraConfig: FAST_IMPORT_CONFIG, objectFormat: repo.objectFormat };
}

export async function createRepository(
  runner: GitRunner,
  vaultDir: string,
): Promise<{ ok: true } | { ok: false; code: PendingCode; reason: string; unavailable?: boolean }> {
  let vault: string;
  try {
    vault = await realpath(vaultDir);
  } catch (e) {
    return { ok: false, code: 'git-error', reason: `vault: ${(e as Error).message}` };
  }
  const r = await runner.run(['init', '-q', '--template=', '-b', 'main', vault], { cwd: vault });
  if (r.notRunnable) return { ok: false, code: 'git-error', reason: `git can no longer be run: ${firstLine(r.stderr)}`, unavailable: true };
  if (r.code !== 0) {
    const c = classifyGitFailure(r.stderr, r.timedOut);
    return { ok: false, code: c.code, reason: c.reason };
  }
  return writeExclude(join(vault, '.git'));
}

async function writeExclude(gitDir: string): Promise<{ ok: true } | { ok: false; code: PendingCode; reason: string }> {
  try {
    await writeFileDurably(join(gitDir, 'info'), 'exclude', EXCLUDE_LINES.join('\n') + '\n');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    return { ok: false, code: pendingCodeOfErrno(err), reason: `writing .git/info/exclude: ${err.message}` };
  }
  return { ok: true };
}

/**
 * Only a repository Knowledge initialised looks like this: no commits, and
 * none of the files a template (git's default or the user's) installs —
 * `info/`, `hooks/`, `description`. Anything else is the user's and is not
 * edited [GIT-19].
 */
async function finishOwnRepository(gitDir: string): Promise<{ ok: true } | { ok: false; code: PendingCode; reason: string }> {
  for (const name of ['info', 'hooks', 'description']) {
    try {
      await lstat(join(gitDir, name));
      return { ok: true };
    } catch {
      /* absent: keep looking */
    }
  }
  return writeExclude(gitDir);
}

async function writeFileDurably(dir: string, name: string, text: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.${name}.knowledge-${process.pid}-${Date.now()}`);
  const fh = await open(tmp, 'wx');
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, join(dir, name));
  const dh = await open(dir, 'r');
  try {
    await dh.sync();
  } finally {
    await dh.close();
  }
}
