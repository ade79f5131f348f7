/**
 * Effectful half of a checkpoint: commit one queued batch with exactly its
 * bytes [GIT-7], without the work tree or the user's index [GIT-10], then
 * move the branch by compare-and-swap. The caller runs this outside any SQLite
 * write transaction and records the result afterwards [GIT-4].
 *
 * Pipeline (FIELD-NOTES pipeline C, fastest and flat in vault size):
 *   detect → inspect (create if absent) → find a previous commit of this batch
 *   → fast-import onto a scratch ref → update-ref CAS of the branch (and drop
 *   the scratch ref in the same transaction) → sync the index for the paths.
 */
import { lstat, mkdir, open, realpath, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { classifyGitFailure, firstLine, type GitRunner } from './runner.js';
import { inspectRepository, SCRATCH_REF, vaultEnv, type RepoInspection } from './inspect.js';
import { assertCommittablePath, batchTrailerValue, buildFastImportStream, epochSeconds } from './commit-stream.js';
import { pathspecArgs, syncIndex, type IndexSyncOutcome } from './index-sync.js';
import type { BatchForCommit, PendingCode } from './types.js';
import { crashPoint } from '../faults.js';

export { syncIndex, type IndexSyncOutcome } from './index-sync.js';

export type CommitOutcome =
  | { state: 'committed'; commit: string; parent: string | null; reused: boolean; index: IndexSyncOutcome }
  | { state: 'pending'; code: PendingCode; reason: string }
  | { state: 'unavailable'; reason: string };

export interface CommitBatchOptions {
  /** Last commit the store recorded for this vault; bounds the search for a previous attempt [GIT-6]. */
  lastKnownCommit?: string | null;
  /** Test-only seams to reproduce races and crashes deterministically. */
  testHooks?: {
    /** Runs after the commit object exists (on the scratch ref) and before the branch moves. */
    beforeUpdateRef?: (commit: string) => Promise<void> | void;
  };
}

/** Lines written to info/exclude of a repository Knowledge created [GIT-13]. */
export const EXCLUDE_LINES: readonly string[] = [
  '# Written by Knowledge when it created this repository: never committed [GIT-13]',
  '/vault.json',
  '/.knowledge-history/',
  '*.sqlite',
  '*.sqlite-wal',
  '*.sqlite-shm',
];

/** How far back to look for a previous attempt when the store knows no earlier commit. */
const REUSE_SEARCH_LIMIT = 200;

const pend = (code: PendingCode, reason: string): CommitOutcome => ({ state: 'pending', code, reason });

export async function commitBatch(
  runner: GitRunner,
  vaultDir: string,
  batch: BatchForCommit,
  opts: CommitBatchOptions = {},
): Promise<CommitOutcome> {
  // Programmer errors surface before anything is created or written.
  for (const c of batch.changes) assertCommittablePath(c.path);
  epochSeconds(batch.createdAt);

  const det = await runner.detect();
  if (!det.ok) return { state: 'unavailable', reason: det.reason };

  let repo: RepoInspection = await inspectRepository(runner, vaultDir);
  if (repo.kind === 'absent') {
    const made = await createRepository(runner, vaultDir);
    if (!made.ok) return pend(made.code, made.reason);
    repo = await inspectRepository(runner, vaultDir);
  }
  if (repo.kind === 'absent') return pend('git-error', 'the repository Knowledge just created is not visible');
  if (repo.kind === 'pending') return pend(repo.code, repo.reason);
  if (repo.head === null) {
    // A crash between `git init` and writing info/exclude leaves our own
    // empty-template repository without it; finish that step now.
    const healed = await finishOwnRepository(repo.gitDir);
    if (!healed.ok) return pend(healed.code, healed.reason);
  }

  let vault: string;
  try {
    vault = await realpath(vaultDir);
  } catch (e) {
    return pend('git-error', `vault: ${(e as Error).message}`);
  }
  const env = vaultEnv(vault);
  const paths = batch.changes.map((c) => c.path);
  const tip = repo.head;

  // [GIT-6] A previous attempt may have moved the branch and then crashed
  // before the store recorded it: reuse that commit instead of adding a twin.
  // The parent's modes are read at the same time (independent processes).
  const [found, parentTree] = await Promise.all([
    tip ? findBatchCommit(runner, vault, env, tip, batch, opts.lastKnownCommit ?? null) : Promise.resolve<Found>({ kind: 'none' }),
    tip && paths.length > 0
      ? runner.run(['ls-tree', '-r', '-z', tip, ...pathspecArgs(paths)], { cwd: vault, env: { ...env, GIT_LITERAL_PATHSPECS: '1' } })
      : Promise.resolve(null),
  ]);
  if (found.kind === 'error') return pend(found.code, found.reason);
  if (found.kind === 'found') {
    const index = await syncIndex(runner, vault, found.commit, found.parent, paths);
    return { state: 'committed', commit: found.commit, parent: found.parent, reused: true, index };
  }

  // Keep an executable bit the parent already had: a content edit is not a mode change.
  const executable = new Set<string>();
  if (parentTree) {
    if (parentTree.code !== 0) return failed(parentTree.stderr, parentTree.timedOut);
    const wanted = new Set(paths);
    for (const rec of parentTree.stdout.toString('utf8').split('\0')) {
      const tab = rec.indexOf('\t');
      if (tab > 0 && rec.startsWith('100755 ') && wanted.has(rec.slice(tab + 1))) executable.add(rec.slice(tab + 1));
    }
  }

  // Build the commit on a scratch ref. --force only ever applies to that
  // scratch ref (the stream names no other), e.g. one left by a crash.
  const stream = buildFastImportStream(batch, { ref: SCRATCH_REF, from: tip, executable });
  const fi = await runner.run(['fast-import', '--quiet', '--done', '--force'], { cwd: vault, env, input: stream });
  if (fi.code !== 0) return failed(fi.stderr, fi.timedOut);
  const commit = fi.stdout.toString('utf8').trim().split('\n').pop() ?? '';
  if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit)) return pend('git-error', `fast-import returned no commit id: ${firstLine(fi.stdout.toString('utf8'))}`);

  await opts.testHooks?.beforeUpdateRef?.(commit);
  crashPoint('after-commit-object');

  // Compare-and-swap the branch HEAD names (never HEAD itself): if anyone
  // moved it since inspection, nothing changes and we report branch-moved.
  // Deleting the scratch ref in the same transaction keeps the commit
  // reachable until the branch holds it.
  const tx = (tip ? `update ${repo.branchRef} ${commit} ${tip}\n` : `create ${repo.branchRef} ${commit}\n`) + `delete ${SCRATCH_REF} ${commit}\n`;
  const up = await runner.run(['update-ref', '-m', 'knowledge: checkpoint', '--stdin'], { cwd: vault, env, input: tx });
  if (up.code !== 0) return failed(up.stderr, up.timedOut);

  crashPoint('after-update-ref');
  const index = await syncIndex(runner, vault, commit, tip, paths);
  return { state: 'committed', commit, parent: tip, reused: false, index };
}

type Found =
  | { kind: 'found'; commit: string; parent: string | null }
  | { kind: 'none' }
  | { kind: 'error'; code: PendingCode; reason: string };

async function findBatchCommit(
  runner: GitRunner,
  vault: string,
  env: Record<string, string>,
  tip: string,
  batch: BatchForCommit,
  lastKnown: string | null,
): Promise<Found> {
  // Nothing new on the branch since the store's last record: no earlier attempt can be there.
  if (lastKnown === tip) return { kind: 'none' };
  const want = batchTrailerValue(batch);
  const fmt = '--format=%H %P%x01%(trailers:key=Knowledge-Batch,valueonly,separator=%x02)';
  const attempt = async (range: string[]) => runner.run(['log', '-z', fmt, ...range, '--'], { cwd: vault, env });
  let r = lastKnown ? await attempt([tip, `^${lastKnown}`]) : null;
  // An unknown lastKnownCommit (rewritten or collected history) falls back to a bounded search.
  if (!r || r.code !== 0) r = await attempt([`-n${REUSE_SEARCH_LIMIT}`, tip]);
  if (r.code !== 0) {
    const c = classifyGitFailure(r.stderr, r.timedOut);
    return { kind: 'error', code: c.code, reason: c.reason };
  }
  for (const rec of r.stdout.toString('utf8').split('\0')) {
    const sep = rec.indexOf('\x01');
    if (sep < 0) continue;
    const values = rec.slice(sep + 1).split('\x02').map((v) => v.trim());
    if (!values.includes(want)) continue;
    const [commit = '', parent] = rec.slice(0, sep).trim().split(' ');
    return { kind: 'found', commit, parent: parent ? parent : null };
  }
  return { kind: 'none' };
}

function failed(stderr: string, timedOut: boolean): CommitOutcome {
  const c = classifyGitFailure(stderr, timedOut);
  return pend(c.code, c.reason);
}

/**
 * Create `<vault>/.git` [GIT-2]: empty template (no sample hooks), branch
 * main, and an info/exclude for Knowledge's own files. Only a repository we
 * create is ever written to this way; an existing one is used as it is.
 */
export async function createRepository(
  runner: GitRunner,
  vaultDir: string,
): Promise<{ ok: true } | { ok: false; code: PendingCode; reason: string }> {
  let vault: string;
  try {
    vault = await realpath(vaultDir);
  } catch (e) {
    return { ok: false, code: 'git-error', reason: `vault: ${(e as Error).message}` };
  }
  const r = await runner.run(['init', '-q', '--template=', '-b', 'main', vault], { cwd: vault });
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
    return { ok: false, code: err.code === 'EACCES' ? 'permission' : 'git-error', reason: `writing .git/info/exclude: ${err.message}` };
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
