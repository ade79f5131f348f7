/**
 * `knowledge verify`: check the store's outbox and receipts against the
 * vault's repository [GIT-4..7, GIT-14]. Read-only: no lock, nothing
 * written, nothing repaired [GIT-19].
 *
 * - every committed batch's commit exists, is on the branch HEAD names (an
 *   ancestor of its tip) and carries that batch's trailers;
 * - it holds exactly the queued bytes: the blob id recorded for each path is
 *   the one at `<commit>:<path>` (a deletion: no such path);
 * - no batch of this store is committed twice, none landed unrecorded, and
 *   the commits follow the queue order; a commit is a batch's when it carries
 *   the batch's number and its publication, scan or attachment (the key a
 *   retry finds its own commit by), never by the number alone;
 * - waiting batches are behind every committed one and still hold their
 *   bytes; every publication receipt names its own batch.
 *
 * Split: `checkStore` (pure: rows and repository facts in, problems out) and
 * `verifyStore` (reads SQLite, runs a few git commands).
 */
import { lstat, readFile, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import type { Store } from '../store/store.js';
import { classifyGitFailure, type GitRunner } from '../git/runner.js';
import { vaultEnv } from '../git/inspect.js';
import { COMMIT_MESSAGE_FORMAT, parseCommitMessages, Trailers } from '../git/trailers.js';
import { batchCommitKey, commitKeys, REF_TRAILERS, refTrailer } from '../git/commit-stream.js';
import type { BatchForCommit } from '../git/types.js';
import { queuedBytesSql } from './outbox.js';
import { indexFiles, isOwnStaleLock, shownLockPath } from '../git/index-lock.js';
import { committedBlobs, type CommittedFile } from './committed-blobs.js';

export type VerifyCode =
  | 'git-unavailable'
  | 'repository-missing'
  | 'repository-unreadable'
  | 'commit-missing'
  | 'not-on-branch'
  | 'wrong-commit'
  | 'bytes-mismatch'
  | 'duplicate-commit'
  | 'unrecorded-commit'
  | 'unknown-batch'
  | 'state-behind-history'
  | 'history-order'
  | 'queue-order'
  | 'bytes-missing'
  | 'receipt-mismatch'
  | 'index-not-updated'
  | 'index-lock-left';

export interface VerifyProblem {
  code: VerifyCode;
  message: string;
  batchId?: number;
  commit?: string;
  path?: string;
}

export interface VerifyReport {
  ok: boolean;
  store: string;
  /** The branch checked (null: no repository, or HEAD detached) and its tip. */
  branch: string | null;
  tip: string | null;
  batches: { total: number; committed: number; queued: number };
  checked: { commits: number; files: number; filesWithoutBlobId: number };
  problems: VerifyProblem[];
}

export interface BatchFact {
  batchId: number;
  kind: BatchForCommit['kind'];
  refId: string;
  state: 'queued' | 'committed';
  commit: string | null;
}

export interface FileFact {
  batchId: number;
  path: string;
  deleted: boolean;
  blobOid: string | null;
  hasBytes: boolean;
}

export interface PublicationFact {
  publicationId: string;
  status: string;
  batchId: number | null;
}

/** What the repository says, gathered by `verifyStore`. */
export interface RepoFacts {
  /** Commits reachable from the tip, children before parents (topo order). */
  order: string[];
  /** Trailer values per reachable commit: key -> values. */
  trailers: Map<string, Trailers>;
  /** Parents per reachable commit (absent: the history order alone is judged). */
  parents?: Map<string, string[]>;
  /** Recorded commits not reachable from the tip that still exist as commits. */
  existing: Set<string>;
  /** `<commit>:<path>` -> blob id, or null when the commit has no such path. */
  blobs: Map<string, string | null>;
}

/** Pure: the outbox (and receipts) against the repository facts. */
export function checkStore(input: {
  vaultId: string;
  batches: BatchFact[];
  files: FileFact[];
  publications: PublicationFact[];
  repo: RepoFacts | null;
}): { problems: VerifyProblem[]; checkedFiles: number; filesWithoutBlobId: number } {
  const { vaultId, batches, files, publications, repo } = input;
  const problems: VerifyProblem[] = [];
  const byId = new Map(batches.map((b) => [b.batchId, b]));
  const committed = batches.filter((b) => b.state === 'committed').sort((a, b) => a.batchId - b.batchId);
  const queued = batches.filter((b) => b.state === 'queued');
  const lastCommitted = committed.length > 0 ? committed[committed.length - 1]!.batchId : 0;

  // Waiting batches are ordered: none was overtaken [GIT-5], and each still holds its bytes.
  for (const q of queued) {
    if (q.batchId < lastCommitted) {
      problems.push({ code: 'queue-order', batchId: q.batchId, message: `batch ${q.batchId} is still queued behind committed batch ${lastCommitted}` });
    }
  }
  for (const f of files) {
    const b = byId.get(f.batchId);
    if (b?.state === 'queued' && !f.deleted && !f.hasBytes) {
      problems.push({ code: 'bytes-missing', batchId: f.batchId, path: f.path, message: `queued batch ${f.batchId} has lost the bytes of ${f.path}` });
    }
  }
  for (const p of publications) {
    if (p.status !== 'acknowledged') continue;
    const b = p.batchId === null ? undefined : byId.get(p.batchId);
    if (!b || b.kind !== 'publication' || b.refId !== p.publicationId) {
      problems.push({ code: 'receipt-mismatch', batchId: p.batchId ?? undefined, message: `publication ${p.publicationId} names batch ${p.batchId ?? 'none'}, which is not its own` });
    }
  }

  let checkedFiles = 0;
  let filesWithoutBlobId = 0;
  if (!repo) return { problems, checkedFiles, filesWithoutBlobId };

  const position = new Map(repo.order.map((c, i) => [c, i]));
  // The key a commit answers to when it is this batch's (commit-stream.ts: a retry's search uses the same).
  const keyOf = (b: BatchFact) => batchCommitKey({ vaultId, batchId: b.batchId, kind: b.kind, refId: b.refId });
  let previous: BatchFact | null = null;
  for (const b of committed) {
    const commit = b.commit ?? '';
    const at = position.get(commit);
    if (at === undefined) {
      const code = repo.existing.has(commit) ? 'not-on-branch' : 'commit-missing';
      problems.push({
        code,
        batchId: b.batchId,
        commit,
        message: code === 'not-on-branch' ? `batch ${b.batchId}'s commit ${commit} is not on the branch` : `batch ${b.batchId}'s commit ${commit} does not exist in the repository`,
      });
      continue;
    }
    const t = repo.trailers.get(commit) ?? new Trailers();
    if (!commitKeys(t).includes(keyOf(b))) {
      problems.push({ code: 'wrong-commit', batchId: b.batchId, commit, message: `commit ${commit} recorded for batch ${b.batchId} does not carry its trailers (${refTrailer(b.kind)}: ${b.refId})` });
    }
    // Queue order = history order: a later batch's commit never comes before an earlier one's. Two commits on
    // branches the user merged later (Knowledge commits to the branch HEAD names) are side by side, not out of order.
    if (previous) {
      const prevAt = position.get(previous.commit ?? '');
      if (prevAt !== undefined && !(at < prevAt) && (!repo.parents || isAncestor(repo.parents, commit, previous.commit!))) {
        problems.push({ code: 'history-order', batchId: b.batchId, commit, message: `batch ${b.batchId}'s commit comes before batch ${previous.batchId}'s in the history` });
      }
    }
    previous = b;
  }

  // Exactly the queued bytes [GIT-7].
  const committedIds = new Set(committed.filter((b) => b.commit && position.has(b.commit)).map((b) => b.batchId));
  for (const f of files) {
    if (!committedIds.has(f.batchId)) continue;
    const commit = byId.get(f.batchId)!.commit!;
    if (!f.deleted && !f.blobOid) {
      filesWithoutBlobId++;
      continue;
    }
    const key = `${commit}:${f.path}`;
    if (!repo.blobs.has(key)) {
      filesWithoutBlobId++; // a path git's batch protocol cannot name (a newline)
      continue;
    }
    checkedFiles++;
    const got = repo.blobs.get(key) ?? null;
    const want = f.deleted ? null : f.blobOid;
    if (got !== want) {
      problems.push({
        code: 'bytes-mismatch',
        batchId: f.batchId,
        commit,
        path: f.path,
        message: `commit ${commit} holds ${got ?? 'no file'} at ${f.path}, but batch ${f.batchId} queued ${want ?? 'its deletion'}`,
      });
    }
  }

  // One commit per batch, and none landed unrecorded [GIT-6]. A commit of this vault is a batch's only when it
  // carries that batch's publication, scan or attachment too: batch numbers alone repeat once an older
  // state.sqlite was restored (the outbox numbers again) or two copies of the vault each committed and one's
  // history was merged into the other's. A commit whose number is taken by another batch is none of this store's.
  const seen = new Map<number, string[]>();
  const strangers: Array<{ id: number; commit: string; trailers: Trailers }> = [];
  for (const commit of repo.order) {
    const t = repo.trailers.get(commit) ?? new Trailers();
    for (const v of t.values('Knowledge-Batch')) {
      const slash = v.lastIndexOf('/');
      if (slash < 0 || v.slice(0, slash) !== vaultId) continue;
      const id = Number(v.slice(slash + 1));
      if (!Number.isInteger(id)) continue;
      const b = byId.get(id);
      if (b && commitKeys(t).includes(keyOf(b))) seen.set(id, [...(seen.get(id) ?? []), commit]);
      else strangers.push({ id, commit, trailers: t });
    }
  }
  for (const { id, commit, trailers } of strangers.sort((a, b) => a.id - b.id)) {
    const b = byId.get(id);
    const ref = REF_TRAILERS.find((k) => trailers.values(k).length > 0);
    const names = ref ? `batch ${id} (${ref}: ${trailers.values(ref)[0]!.trim()})` : `batch ${id} (with no publication, scan or attachment trailer)`;
    const theirs = b ? `; this store's batch ${id} is ${b.kind} ${b.refId}, so knowledge resume does not record this commit` : '';
    problems.push({ code: 'unknown-batch', batchId: id, commit, message: `commit ${commit} names ${names}, which this store never queued${theirs}` });
  }
  // Checkpoints Knowledge made for this vault (a publication, scan or attachment trailer too, not a trailer copied by
  // hand) that this store never queued: its state.sqlite does not go with this history. Said once, plainly: nothing
  // in a write notices it (a write goes on numbering from its own outbox), and the contract is to keep the registry,
  // state.sqlite and the vault together.
  const unqueued = [...new Set(strangers.filter((x) => REF_TRAILERS.some((k) => x.trailers.values(k).length > 0)).map((x) => x.id))];
  if (unqueued.length > 0) {
    const commits = new Set(strangers.filter((x) => unqueued.includes(x.id)).map((x) => x.commit)).size;
    const [them, they] = commits === 1 ? ['it', 'it'] : ['them', 'they'];
    problems.push({
      code: 'state-behind-history',
      batchId: unqueued.reduce((a, b) => Math.max(a, b)),
      message: `the branch holds ${commits === 1 ? 'a checkpoint' : `${commits} checkpoints`} of this vault that state.sqlite never queued ` +
        `(batch${unqueued.length === 1 ? '' : 'es'} ${numberRanges(unqueued)}): was an older state.sqlite restored, or another copy of this vault's history merged in? ` +
        `This store does not record ${them} (knowledge resume neither), numbers its own batches again beside ${them} and does not know the requests ${they} answered ` +
        '(a retry of one publishes again); if an older state.sqlite was restored, put back the one that goes with this vault',
    });
  }
  for (const [id, commits] of [...seen].sort((a, b) => a[0] - b[0])) {
    const b = byId.get(id)!;
    if (commits.length > 1) {
      problems.push({ code: 'duplicate-commit', batchId: id, commit: commits[0], message: `batch ${id} is committed ${commits.length} times: ${commits.join(', ')}` });
    }
    if (b.state === 'queued') {
      problems.push({ code: 'unrecorded-commit', batchId: id, commit: commits[0], message: `batch ${id} is on the branch as ${commits[0]} but still queued in the store (knowledge resume records it)` });
    }
  }
  return { problems, checkedFiles, filesWithoutBlobId };
}

/** `2, 5-7`: sorted numbers, runs shown as ranges. */
export function numberRanges(ids: number[]): string {
  const sorted = [...new Set(ids)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    parts.push(j === i ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`);
    i = j;
  }
  return parts.join(', ');
}

/** Attempts of a check whose problems may be a checkpoint that another process is making at that moment. */
const VERIFY_ATTEMPTS = 3;

/**
 * Check the store against its repository. It reads SQLite, then git, while
 * another process may be writing: a checkpoint that lands in between (its
 * commit on the branch, its record not yet read, or the other way round)
 * looks like a problem for a moment. So a check that finds any problem is
 * made once more after a pause, and again (three times in all) while the
 * batches or the branch moved in between; real problems stay and are
 * reported (a failing verify therefore checks at least twice).
 */
export async function verifyStore(store: Store, runner: GitRunner): Promise<VerifyReport> {
  return checkAgainWhileMoving(() => verifyOnce(store, runner));
}

/** Run `check` again (after a pause) while it finds problems: once more, and more while the store moved in between. */
export async function checkAgainWhileMoving(check: () => Promise<VerifyReport>, pauseMs = 100): Promise<VerifyReport> {
  let report = await check();
  for (let attempt = 1; attempt < VERIFY_ATTEMPTS && !report.ok; attempt++) {
    await new Promise((r) => setTimeout(r, pauseMs * attempt));
    const again = await check();
    const moved = again.tip !== report.tip || again.batches.committed !== report.batches.committed || again.batches.total !== report.batches.total;
    report = again;
    if (!moved) break;
  }
  return report;
}

async function verifyOnce(store: Store, runner: GitRunner): Promise<VerifyReport> {
  const db = store.db;
  // One snapshot of the three tables: a checkpoint recorded between two reads would look half done.
  const read = db.transaction(() => {
    const batches = (db.prepare('SELECT batch_id, kind, ref_id, state, commit_id FROM batches ORDER BY batch_id').all() as Array<{
      batch_id: number; kind: BatchFact['kind']; ref_id: string; state: 'queued' | 'committed'; commit_id: string | null;
    }>).map((r): BatchFact => ({ batchId: r.batch_id, kind: r.kind, refId: r.ref_id, state: r.state, commit: r.commit_id }));
    const files = (db.prepare(`SELECT f.batch_id, f.path, f.deleted, f.blob_oid, ${queuedBytesSql('f')} IS NOT NULL AS has_bytes FROM batch_files f ORDER BY f.batch_id, f.path`).all() as Array<{
      batch_id: number; path: string; deleted: number; blob_oid: string | null; has_bytes: number;
    }>).map((r): FileFact => ({ batchId: r.batch_id, path: r.path, deleted: r.deleted === 1, blobOid: r.blob_oid, hasBytes: r.has_bytes === 1 }));
    const publications = (db.prepare('SELECT publication_id, status, batch_id FROM publications').all() as Array<{
      publication_id: string; status: string; batch_id: number | null;
    }>).map((r): PublicationFact => ({ publicationId: r.publication_id, status: r.status, batchId: r.batch_id }));
    // An index update that failed after its commits were recorded (markIndex noted why): the user's index is behind
    // the branch, and Knowledge keeps index.lock until its next write or scan makes the update [GIT-10].
    const indexBehind = db.prepare(
      "SELECT batch_id, last_code, last_reason FROM batches WHERE state = 'committed' AND index_synced = 0 AND last_code IS NOT NULL ORDER BY batch_id LIMIT 1",
    ).get() as { batch_id: number; last_code: string; last_reason: string | null } | undefined;
    // Committed batches whose index update is not recorded as made (a process stopped between the two).
    const unsynced = db.prepare("SELECT count(*) AS n, min(batch_id) AS first, max(batch_id) AS last FROM batches WHERE state = 'committed' AND index_synced = 0")
      .get() as { n: number; first: number | null; last: number | null };
    return { batches, files, publications, indexBehind, unsynced };
  });
  const { batches, files, publications, indexBehind, unsynced } = read.deferred();
  const indexProblems: VerifyProblem[] = indexBehind
    ? [{
      code: 'index-not-updated',
      batchId: indexBehind.batch_id,
      message: `the vault's index was not updated after batch ${indexBehind.batch_id} was committed (${indexBehind.last_code}: ${indexBehind.last_reason ?? ''}); ` +
        'Knowledge holds .git/index.lock until its next write or scan updates it (knowledge scan), so your git commands that write the index wait for that',
    }]
    : [];

  const report: VerifyReport = {
    ok: true,
    store: store.paths.root,
    branch: null,
    tip: null,
    batches: { total: batches.length, committed: batches.filter((b) => b.state === 'committed').length, queued: batches.filter((b) => b.state === 'queued').length },
    checked: { commits: 0, files: 0, filesWithoutBlobId: 0 },
    problems: [],
  };
  const finish = (repo: RepoFacts | null, extra: VerifyProblem[] = []): VerifyReport => {
    const c = checkStore({ vaultId: store.manifest.vaultId, batches, files, publications, repo });
    report.problems = [...extra, ...c.problems, ...indexProblems];
    report.checked = { commits: repo ? report.batches.committed : 0, files: c.checkedFiles, filesWithoutBlobId: c.filesWithoutBlobId };
    report.ok = report.problems.length === 0;
    return report;
  };

  let vault: string;
  try {
    vault = await realpath(store.paths.vault);
    await lstat(join(vault, '.git'));
  } catch {
    // No repository: fine while nothing was ever committed.
    if (report.batches.committed === 0) return finish(null);
    return finish(null, [{ code: 'repository-missing', message: `${report.batches.committed} batches are recorded as committed, but the vault has no .git` }]);
  }
  const det = await runner.detect();
  if (!det.ok) {
    if (report.batches.committed === 0) return finish(null);
    return finish(null, [{ code: 'git-unavailable', message: `cannot check ${report.batches.committed} committed batches: ${det.reason}` }]);
  }
  const env = vaultEnv(vault);
  const unreadable = (what: string, stderr: string, timedOut: boolean) =>
    finish(null, [{ code: 'repository-unreadable', message: `${what}: ${classifyGitFailure(stderr, timedOut).reason}` }]);

  const [sym, head, gitDir] = await Promise.all([
    runner.run(['symbolic-ref', '-q', 'HEAD'], { cwd: vault, env }),
    runner.run(['rev-parse', '-q', '--verify', 'HEAD^{commit}'], { cwd: vault, env }),
    runner.run(['rev-parse', '--absolute-git-dir'], { cwd: vault, env }),
  ]);
  // (A failed index update, index-not-updated above, already names the lock Knowledge keeps for it.)
  if (gitDir.code === 0 && !indexBehind) {
    const left = await leftIndexLock(gitDir.stdout.toString('utf8').replace(/\n$/, ''), unsynced);
    if (left) indexProblems.push(left);
  }
  if (sym.code === 0) report.branch = sym.stdout.toString('utf8').trim();
  else if (sym.code !== 1) return unreadable('reading HEAD', sym.stderr, sym.timedOut);
  if (head.code !== 0) {
    if (head.stderr.trim() !== '' || head.timedOut) return unreadable('resolving HEAD', head.stderr, head.timedOut);
    // Unborn: nothing is on the branch.
    const existing = await existingCommits(runner, vault, env, batches);
    if (!existing.ok) return unreadable('looking up commits', existing.stderr, existing.timedOut);
    return finish({ order: [], trailers: new Map(), existing: existing.commits, blobs: new Map() });
  }
  report.tip = head.stdout.toString('utf8').trim();

  const log = await runner.run(['log', '-z', '--topo-order', COMMIT_MESSAGE_FORMAT, report.tip, '--'], { cwd: vault, env });
  if (log.code !== 0) return unreadable('reading the history', log.stderr, log.timedOut);
  // Trailers read by Knowledge from the raw message (git/trailers.ts): the repository's trailer.* config can blind git's %(trailers).
  const commits = parseCommitMessages(log.stdout.toString('utf8'));
  const order = commits.map((c) => c.commit);
  const trailers = new Map<string, Trailers>(commits.map((c) => [c.commit, c.trailers]));
  const parents = new Map<string, string[]>(commits.map((c) => [c.commit, c.parents]));
  const reachable = new Set(order);
  const existing = await existingCommits(runner, vault, env, batches.filter((b) => b.commit && !reachable.has(b.commit)));
  if (!existing.ok) return unreadable('looking up commits', existing.stderr, existing.timedOut);

  // Blob ids at <commit>:<path>: a few cat-file calls for all of them, each folder read once (committed-blobs.ts).
  const byId = new Map(batches.map((b) => [b.batchId, b]));
  const wanted: CommittedFile[] = [];
  for (const f of files) {
    const b = byId.get(f.batchId);
    if (b?.state !== 'committed' || !b.commit || !reachable.has(b.commit) || f.path.includes('\n')) continue;
    if (!f.deleted && !f.blobOid) continue;
    wanted.push({ commit: b.commit, path: f.path });
  }
  const found = await committedBlobs(runner, vault, env, wanted);
  if (!found.ok) return unreadable(found.what, found.stderr, found.timedOut);
  const blobs = found.blobs;
  return finish({ order, trailers, parents, existing: existing.commits, blobs });
}

/**
 * index.lock left by a Knowledge process that has ended (its marker names a
 * process that is gone): stopped, or killed, after a checkpoint moved the
 * branch and before the index followed [GIT-10]. The user's git commands that
 * write the index fail meanwhile, and git's message says to delete the lock;
 * deleted by hand, a commit made from the old index would delete the
 * checkpoint's files from the tip. The next Knowledge write or scan takes the
 * lock over, updates the index and releases it.
 */
async function leftIndexLock(gitDir: string, unsynced: { n: number; first: number | null; last: number | null }): Promise<VerifyProblem | null> {
  const { lock } = await indexFiles(gitDir);
  if (!(await isOwnStaleLock(lock))) return null;
  const holder = /^knowledge-index-lock (\d+) /.exec(await readFile(lock, 'utf8').catch(() => ''))?.[1];
  const behind = unsynced.n > 0
    ? `the index is behind the branch: the update for batch${unsynced.n === 1 ? ` ${unsynced.first}` : `es ${unsynced.first}-${unsynced.last}`}, already committed, was not made`
    : 'the index may be behind the branch (a checkpoint moved it and stopped before the index followed)';
  return {
    code: 'index-lock-left',
    message: `${shownLockPath(gitDir, lock)} was left by a Knowledge process that has ended${holder ? ` (pid ${holder})` : ''}; ${behind}. ` +
      'Your git commands that write the index fail until the next Knowledge write or scan (knowledge scan) updates the index and removes the lock; ' +
      'do not delete it by hand: a commit made from the old index would delete the checkpoint\'s files from the tip',
  };
}

/** Whether `a` is an ancestor of (or is) `b`, by the parents read from the log. */
function isAncestor(parents: Map<string, string[]>, a: string, b: string): boolean {
  const seen = new Set<string>();
  const stack = [b];
  while (stack.length > 0) {
    const c = stack.pop()!;
    if (c === a) return true;
    if (seen.has(c)) continue;
    seen.add(c);
    for (const p of parents.get(c) ?? []) stack.push(p);
  }
  return false;
}

/** Which of these batches' commits exist as commit objects at all. */
async function existingCommits(
  runner: GitRunner,
  vault: string,
  env: Record<string, string>,
  batches: BatchFact[],
): Promise<{ ok: true; commits: Set<string> } | { ok: false; stderr: string; timedOut: boolean }> {
  const ids = [...new Set(batches.map((b) => b.commit).filter((c): c is string => !!c))];
  const commits = new Set<string>();
  if (ids.length === 0) return { ok: true, commits };
  const r = await runner.run(['cat-file', '--batch-check=%(objectname) %(objecttype)'], { cwd: vault, env, input: ids.join('\n') + '\n' });
  if (r.code !== 0) return { ok: false, stderr: r.stderr, timedOut: r.timedOut };
  for (const line of r.stdout.toString('utf8').split('\n')) {
    const [oid, type] = line.split(' ');
    if (oid && type === 'commit') commits.add(oid);
  }
  return { ok: true, commits };
}
