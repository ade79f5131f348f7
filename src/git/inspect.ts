/**
 * Decide whether the vault's own repository may receive a checkpoint right
 * now. Every repository problem is `pending` with a stable code, never
 * `unavailable` [GIT-18]; nothing found here is repaired or removed [GIT-19].
 */
import { lstat, realpath, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { classifyGitFailure, firstLine, type GitRunner } from './runner.js';
import type { PendingCode } from './types.js';

export type RepoInspection =
  /** No vault/.git at all: the caller may create it at the first content checkpoint [GIT-2]. */
  | { kind: 'absent' }
  | {
      kind: 'ready';
      gitDir: string;
      /** The branch HEAD names, e.g. refs/heads/main. */
      branchRef: string;
      /** null = unborn, allowed only when the repository has no refs at all. */
      head: string | null;
      objectFormat: 'sha1' | 'sha256';
    }
  | { kind: 'pending'; code: PendingCode; reason: string };

/** Files whose presence means another git command is (or was) mid-operation. */
const IN_PROGRESS: readonly { name: string; what: string }[] = [
  { name: 'MERGE_HEAD', what: 'a merge' },
  { name: 'CHERRY_PICK_HEAD', what: 'a cherry-pick' },
  { name: 'REVERT_HEAD', what: 'a revert' },
  { name: 'BISECT_LOG', what: 'a bisect' },
  { name: 'rebase-merge', what: 'a rebase' },
  { name: 'rebase-apply', what: 'a rebase or am' },
  { name: 'sequencer', what: 'a cherry-pick or revert sequence' },
];

/** Scratch ref used while building a checkpoint; never counts as the user's. */
export const SCRATCH_REF = 'refs/knowledge/checkpoint';

/**
 * Environment that confines git's repository discovery to the vault itself:
 * with the vault's parent as a ceiling, a broken vault/.git can never fall
 * through to an enclosing repository [GIT-2].
 */
export function vaultEnv(vaultReal: string): Record<string, string> {
  return { GIT_CEILING_DIRECTORIES: dirname(vaultReal) };
}

const pending = (code: PendingCode, reason: string): RepoInspection => ({ kind: 'pending', code, reason });

export async function inspectRepository(runner: GitRunner, vaultDir: string): Promise<RepoInspection> {
  let vault: string;
  try {
    vault = await realpath(vaultDir);
    if (!(await stat(vault)).isDirectory()) return pending('not-vault-root', `vault ${vaultDir} is not a directory`);
  } catch (e) {
    return fsPending(e, `vault ${vaultDir}`);
  }

  // Look at vault/.git without following it: a gitfile (linked worktree,
  // separate git dir) points at a repository we must not adopt [GIT-18].
  const dotGit = join(vault, '.git');
  try {
    const st = await lstat(dotGit);
    if (st.isFile()) return pending('linked-worktree', 'vault/.git is a file (linked worktree or separate git dir); Knowledge only uses a repository whose .git directory is inside the vault');
    if (st.isSymbolicLink()) return pending('linked-worktree', 'vault/.git is a symbolic link; Knowledge only uses a real .git directory inside the vault');
    if (!st.isDirectory()) return pending('malformed', 'vault/.git is neither a directory nor a file');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent' };
    return fsPending(e, 'vault/.git');
  }

  const env = vaultEnv(vault);
  const rp = await runner.run(
    ['rev-parse', '--is-bare-repository', '--git-dir', '--git-common-dir', '--show-object-format', '--show-toplevel'],
    { cwd: vault, env },
  );
  const lines = rp.stdout.toString('utf8').split('\n');
  if (rp.code !== 0) {
    if (lines[0] === 'true') return pending('not-vault-root', 'vault/.git is a bare repository (core.bare=true); it has no work tree at the vault');
    const c = classifyGitFailure(rp.stderr, rp.timedOut);
    // Anything git refuses to open is a repository problem, not a missing git [GIT-18].
    return pending(c.code === 'git-error' ? 'malformed' : c.code, c.reason);
  }
  const [bare, gitDirRel, commonRel, fmt, top] = lines;
  if (bare === 'true') return pending('not-vault-root', 'vault/.git is a bare repository (core.bare=true)');
  if (!gitDirRel || !commonRel || !top || !fmt) return pending('malformed', `unexpected rev-parse output: ${firstLine(rp.stdout.toString('utf8'))}`);
  let gitDir: string;
  let commonDir: string;
  let topReal: string;
  try {
    gitDir = await realpath(resolve(vault, gitDirRel));
    commonDir = await realpath(resolve(vault, commonRel));
    topReal = await realpath(top);
  } catch (e) {
    return fsPending(e, 'repository paths');
  }
  if (gitDir !== dotGit) return pending('not-vault-root', `git uses ${gitDir}, not the vault's own .git directory`);
  if (commonDir !== gitDir) return pending('linked-worktree', `vault/.git shares objects with ${commonDir} (commondir); Knowledge does not adopt it`);
  if (topReal !== vault) return pending('not-vault-root', `the repository's work tree is ${topReal}, not the vault (core.worktree)`);
  if (fmt !== 'sha1' && fmt !== 'sha256') return pending('malformed', `unsupported object format ${fmt}`);

  // The remaining probes are independent: run them together (each git
  // process costs ~4 ms to start), then judge in a fixed priority order.
  const [inProgress, sym, head, refs, unmerged, locksPresent] = await Promise.all([
    firstExisting(IN_PROGRESS.map((p) => join(gitDir, p.name))),
    runner.run(['symbolic-ref', '-q', 'HEAD'], { cwd: vault, env }),
    runner.run(['rev-parse', '-q', '--verify', 'HEAD^{commit}'], { cwd: vault, env }),
    runner.run(['for-each-ref', '--count=2', '--format=%(refname)'], { cwd: vault, env }),
    runner.run(['ls-files', '-u', '-z'], { cwd: vault, env }),
    Promise.all(['index.lock', 'HEAD.lock', 'packed-refs.lock'].map((n) => exists(join(gitDir, n)))),
  ]);

  // Operations left half-done by the user: finish them first [GIT-18].
  if (inProgress >= 0) {
    const p = IN_PROGRESS[inProgress]!;
    return pending('operation-in-progress', `${p.what} is in progress (.git/${p.name}); finish or abort it, then retry`);
  }

  if (sym.code === 1) return pending('detached-head', 'HEAD is detached; check out a branch, then retry');
  if (sym.code !== 0) return failed(sym.stderr, sym.timedOut);
  const branchRef = sym.stdout.toString('utf8').trim();
  if (!branchRef.startsWith('refs/heads/')) return pending('detached-head', `HEAD points at ${branchRef}, not a local branch`);

  // A lock never blocks reading but would fail (or race) our write. Report it
  // and leave it in place: a stale lock is the user's to remove [GIT-19].
  const lockNames = ['index.lock', 'HEAD.lock', 'packed-refs.lock'];
  const held = lockNames.find((_, i) => locksPresent[i]) ?? ((await exists(join(gitDir, `${branchRef}.lock`))) ? `${branchRef}.lock` : undefined);
  if (held) {
    return pending('locked', `.git/${held} exists: another git process is running, or it crashed and left the lock; remove it yourself if stale, then retry`);
  }

  let headOid: string | null = null;
  if (head.code === 0) {
    headOid = head.stdout.toString('utf8').trim();
  } else {
    if (head.stderr.trim() !== '' || head.timedOut) return failed(head.stderr, head.timedOut);
    // Unborn: fine for a fresh repository, suspicious when other refs exist
    // (an orphan checkout or a deleted branch) [GIT-18].
    if (refs.code !== 0) return failed(refs.stderr, refs.timedOut);
    const others = refs.stdout.toString('utf8').split('\n').filter((r) => r !== '' && r !== SCRATCH_REF);
    if (others.length > 0) {
      return pending('unborn-branch', `branch ${branchRef} has no commits while the repository has other refs (${others[0]}); check out an existing branch, then retry`);
    }
    // A ref file that exists but does not resolve is damage, not "unborn".
    if (await exists(join(gitDir, branchRef))) return pending('malformed', `${branchRef} exists but does not name a commit`);
  }

  if (unmerged.code !== 0) return failed(unmerged.stderr, unmerged.timedOut);
  if (unmerged.stdout.length > 0) {
    return pending('unmerged', 'the index has unmerged entries (an unresolved conflict); resolve them, then retry');
  }

  return { kind: 'ready', gitDir, branchRef, head: headOid, objectFormat: fmt };
}

function failed(stderr: string, timedOut: boolean): RepoInspection {
  const c = classifyGitFailure(stderr, timedOut);
  return pending(c.code, c.reason);
}

/** Index of the first path that exists, or -1. */
async function firstExisting(paths: string[]): Promise<number> {
  const found = await Promise.all(paths.map(exists));
  return found.indexOf(true);
}

async function exists(p: string): Promise<boolean> {
  try {
    await lstat(p);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' || (e as NodeJS.ErrnoException).code === 'ENOTDIR') return false;
    // Cannot tell: treat as present so we do not write past an unreadable lock.
    return true;
  }
}

function fsPending(e: unknown, what: string): RepoInspection {
  const err = e as NodeJS.ErrnoException;
  if (err.code === 'EACCES' || err.code === 'EPERM') return pending('permission', `${what}: permission denied`);
  if (err.code === 'ENOENT') return pending('not-vault-root', `${what} does not exist`);
  return pending('git-error', `${what}: ${err.message}`);
}
