/**
 * Decide whether the vault's own repository may receive a checkpoint right
 * now. Every repository problem is `pending` with a stable code, never
 * `unavailable` [GIT-18]; nothing found here is repaired or removed [GIT-19].
 */
import { indexFiles, isOwnStaleLock, shownLockPath } from './index-lock.js';
import { fileIdentity } from './index-state.js';
import { configSections, includesOtherFiles } from './config-text.js';
import { lstat, realpath, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { classifyGitFailure, firstLine, type GitRunner } from './runner.js';
import type { PendingCode } from './types.js';
import { readRegular } from '../fsutil.js';

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
      /** The vault's real path (the repository's work tree). */
      workTree: string;
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
  const repo = await inspectLayout(runner, vaultDir);
  if (repo.kind !== 'ready') return repo;
  return (await checkUnmerged(runner, repo.workTree)) ?? repo;
}

/**
 * Everything but the index: where the repository is, which branch HEAD
 * names and its tip, locks and half-done operations. One `git rev-parse`
 * (~4 ms) plus file checks; the checkpoint engine runs the index probe
 * (`checkUnmerged`) in parallel with its own reads.
 */
export async function inspectLayout(runner: GitRunner, vaultDir: string): Promise<RepoInspection> {
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
  // A .git whose refs or objects are symbolic links (the git-new-workdir layout) shares its branches with
  // another repository: moving one here would move it under that repository's checkout [GIT-2, GIT-18].
  const shared = await sharedGitParts(dotGit);
  if (shared.length > 0) {
    return pending('linked-worktree', `vault/.git/${shared.join(' and vault/.git/')} ${shared.length > 1 ? 'are symbolic links' : 'is a symbolic link'}: the repository shares its branches or objects with another one; Knowledge only uses a repository of the vault's own`);
  }

  const env = vaultEnv(vault);
  const [key, headFile] = await Promise.all([layoutKey(vault, dotGit), readHeadFile(dotGit)]);
  // The same repository as at the last inspection that found it ready: the
  // layout facts still hold, and the tip is read from its loose ref file.
  const known = key !== null ? layoutCache.get(vault) : undefined;
  if (known && known.key === key && headFile.kind === 'branch') {
    const tip = await readLooseRef(dotGit, headFile.ref);
    if (tip !== null && tip.length === (known.objectFormat === 'sha256' ? 64 : 40)) {
      return finishInspection(runner, vault, dotGit, env, headFile, tip, known.objectFormat, headFile.ref);
    }
  }
  // One rev-parse for the layout and the tip; `--` makes HEAD a revision even
  // when the vault holds a file called HEAD. An unborn branch fails only on
  // the last argument, after the layout lines were printed.
  const rp = await runner.run(
    ['rev-parse', '--is-bare-repository', '--git-dir', '--git-common-dir', '--show-object-format', '--show-toplevel', 'HEAD^{commit}', '--'],
    { cwd: vault, env },
  );
  const lines = rp.stdout.toString('utf8').split('\n');
  // A vault path holding newlines (git prints the top level as it is): its lines are one answer.
  const extra = vault.split('\n').length - 1;
  if (extra > 0 && lines.length > 4 + extra) lines.splice(4, extra + 1, lines.slice(4, 5 + extra).join('\n'));
  // Unresolved HEAD and nothing else wrong: the only complaint is about HEAD
  // itself (a damaged object says more, and is malformed instead).
  const headUnresolved = rp.code !== 0 && lines.length >= 6 && lines[4] !== '' && rp.stderr.split('\n').every(
    (l) => l.trim() === '' || /^fatal: (bad revision|ambiguous argument) 'HEAD\^\{commit\}'/.test(l) || /^(Use '--'|'git <command>)/.test(l),
  );
  if (rp.code !== 0 && !headUnresolved) {
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

  let headOid: string | null = null;
  if (!headUnresolved) {
    headOid = lines[5]?.trim() ?? '';
    if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(headOid)) return pending('malformed', `unexpected rev-parse output for HEAD: ${headOid}`);
  }
  const out = await finishInspection(runner, vault, gitDir, env, headFile, headOid, fmt);
  if (out.kind === 'ready' && out.head !== null && key !== null) layoutCache.set(vault, { key, objectFormat: fmt });
  else layoutCache.delete(vault);
  return out;
}

/** The checks every inspection makes, with or without rev-parse. */
async function finishInspection(
  runner: GitRunner,
  vault: string,
  gitDir: string,
  env: Record<string, string>,
  headFile: HeadFile,
  headOid: string | null,
  fmt: 'sha1' | 'sha256',
  /** A branch whose loose ref file was just read and holds a commit id: no symbolic ref, not read again. */
  plainRef?: string,
): Promise<RepoInspection> {
  // Operations left half-done by the user: finish them first [GIT-18].
  const op = await operationInProgress(gitDir);
  if (op) return pending('operation-in-progress', `${op.what} is in progress (.git/${op.name}); finish or abort it, then retry`);

  const head = await branchOfHead(runner, vault, headFile);
  if ('code' in head) return pending(head.code, head.reason);
  if (head.ref === null) return pending('detached-head', 'HEAD is detached; check out a branch, then retry');
  const branchRef = head.ref;
  if (!branchRef.startsWith('refs/heads/')) return pending('detached-head', `HEAD points at ${branchRef}, not a local branch`);
  // A branch that is itself a symbolic ref: git moves whatever it names in the end, which must be a branch too.
  const target = branchRef === plainRef ? null : await symrefTarget(gitDir, branchRef);
  if (target !== null && !target.startsWith('refs/heads/')) {
    return pending('detached-head', `HEAD names ${branchRef}, a symbolic ref to ${target}, not a local branch; check out a branch, then retry`);
  }

  // A lock never blocks reading but would fail (or race) our write. Report it
  // and leave it in place: a stale lock is the user's to remove [GIT-19].
  // The index's lock is taken where git takes it: beside the file a linked `.git/index` leads to.
  const indexLock = (await indexFiles(gitDir)).lock;
  const locks = [indexLock, ...['HEAD.lock', 'packed-refs.lock', `${branchRef}.lock`].map((n) => join(gitDir, n))];
  // Knowledge's own index lock left by a killed Knowledge process is not the
  // user's: the checkpoint clears it when it takes the lock (index-lock.ts).
  const locksPresent = await Promise.all(locks.map(async (p) => (await exists(p)) && !(p === indexLock && (await isOwnStaleLock(p)))));
  const held = locks.find((_, i) => locksPresent[i]);
  if (held) {
    return pending('locked', `${shownLockPath(gitDir, held)} exists: another git process is running, or it crashed and left the lock; remove it yourself if stale, then retry`);
  }

  if (headOid === null) {
    // Unborn: fine for a fresh repository, suspicious when other refs exist
    // (an orphan checkout or a deleted branch) [GIT-18].
    const refs = await runner.run(['for-each-ref', '--count=2', '--format=%(refname)'], { cwd: vault, env });
    if (refs.code !== 0) return failed(refs.stderr, refs.timedOut);
    const others = refs.stdout.toString('utf8').split('\n').filter((r) => r !== '' && r !== SCRATCH_REF);
    if (others.length > 0) {
      return pending('unborn-branch', `branch ${branchRef} has no commits while the repository has other refs (${others[0]}); check out an existing branch, then retry`);
    }
    // A ref file that exists but does not resolve is damage, not "unborn".
    if (await exists(join(gitDir, branchRef))) return pending('malformed', `${branchRef} exists but does not name a commit`);
  }

  return { kind: 'ready', gitDir, branchRef, head: headOid, objectFormat: fmt, workTree: vault };
}

/** The parts of `.git` that are symbolic links among those that would share branches or objects. */
async function sharedGitParts(dotGit: string): Promise<string[]> {
  const parts = ['refs', 'packed-refs', 'objects'];
  const links = await Promise.all(parts.map((p) => lstat(join(dotGit, p)).then((st) => st.isSymbolicLink(), () => false)));
  return parts.filter((_, i) => links[i]);
}

/**
 * What one `rev-parse` told about a repository found ready: the object
 * format, under the identity of everything that decides the layout — the
 * vault and `.git` directories (owner, mode, inode: dubious ownership, a
 * replaced `.git`), `.git/config` (core.bare, core.worktree, the object
 * format; a config that includes other files is never cached) and the
 * absence of `.git/commondir`. Per process; dropped whenever an inspection
 * is not ready.
 */
const layoutCache = new Map<string, { key: string; objectFormat: 'sha1' | 'sha256' }>();

async function layoutKey(vault: string, dotGit: string): Promise<string | null> {
  try {
    const [v, g, c, text, common] = await Promise.all([
      lstat(vault, { bigint: true }),
      lstat(dotGit, { bigint: true }),
      stat(join(dotGit, 'config'), { bigint: true }),
      readRegular(join(dotGit, 'config'), 'utf8'),
      lstat(join(dotGit, 'commondir')).then(() => true, () => false),
    ]);
    const sections = configSections(text);
    if (common || sections === null || includesOtherFiles(sections)) return null;
    const dir = (s: typeof v) => `${s.dev}:${s.ino}:${s.uid}:${s.gid}:${s.mode}`;
    return `${dir(v)}|${dir(g)}|${fileIdentity(c)}:${c.uid}`;
  } catch {
    return null;
  }
}

/** core.fileMode and core.symlinks per work tree, under the same key as the layout (the config file's identity). */
const coreFlagCache = new Map<string, { key: string; value: boolean }>();

/**
 * Whether the repository at `workTree` (a ready one: its real path) records
 * the executable bit: `core.fileMode`, true unless set false (git's default;
 * `git init` sets it false where the file system cannot keep the bit). Where
 * it is false, Git keeps a path's mode whatever the bit on disk, and so does
 * Knowledge (commit-stream.ts chainModes). A config git cannot read counts as
 * the default: the checkpoint itself meets and reports that.
 */
export function recordsExecBit(runner: GitRunner, workTree: string): Promise<boolean> {
  return coreFlag(runner, workTree, 'core.fileMode');
}

/**
 * Whether the repository at `workTree` checks symbolic links out as links:
 * `core.symlinks`, true unless set false (`git init` sets it false where the
 * file system has none). Where it is false, a link is a plain file holding
 * its target, and git keeps the path's 120000 mode when it is changed; so
 * does Knowledge (commit-stream.ts chainModes).
 */
export function checksOutLinks(runner: GitRunner, workTree: string): Promise<boolean> {
  return coreFlag(runner, workTree, 'core.symlinks');
}

/** A boolean core setting that defaults to true, cached under the layout key (the config file's identity). */
async function coreFlag(runner: GitRunner, workTree: string, name: 'core.fileMode' | 'core.symlinks'): Promise<boolean> {
  const key = await layoutKey(workTree, join(workTree, '.git'));
  const cacheKey = `${name}\0${workTree}`;
  const known = key !== null ? coreFlagCache.get(cacheKey) : undefined;
  if (known && known.key === key) return known.value;
  const r = await runner.run(['config', '--type=bool', '--get', name], { cwd: workTree, env: vaultEnv(workTree) });
  const value = !(r.code === 0 && r.stdout.toString('utf8').trim() === 'false');
  if (key !== null && !r.timedOut && (r.code === 0 || r.code === 1)) coreFlagCache.set(cacheKey, { key, value });
  return value;
}

/** A loose branch ref's commit id, or null (packed, missing, unreadable, not an id). */
async function readLooseRef(dotGit: string, ref: string): Promise<string | null> {
  try {
    const text = (await readRegular(join(dotGit, ref), 'utf8')).trim();
    return /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(text) ? text : null;
  } catch {
    return null;
  }
}

/**
 * The tip of the branch the vault's HEAD names, read from the files alone
 * (no git process): a loose ref, else `packed-refs`. Null when there is no
 * such branch or the repository is laid out otherwise (a .git file, a
 * symbolic HEAD, another ref backend): only a hint (scan.ts observedTip).
 */
export async function peekBranchTip(vault: string): Promise<string | null> {
  const dotGit = join(vault, '.git');
  const head = await readHeadFile(dotGit);
  if (head.kind !== 'branch') return null;
  const loose = await readLooseRef(dotGit, head.ref);
  if (loose !== null) return loose;
  const packed = await readRegular(join(dotGit, 'packed-refs'), 'utf8').catch(() => '');
  for (const line of packed.split('\n')) {
    const m = /^([0-9a-f]{40}(?:[0-9a-f]{24})?) (\S+)$/.exec(line);
    if (m && m[2] === head.ref) return m[1]!;
  }
  return null;
}

/** Unmerged index entries (an unresolved conflict, also without any operation file) [GIT-18]. */
export async function checkUnmerged(runner: GitRunner, vault: string): Promise<RepoInspection | null> {
  const r = await runner.run(['ls-files', '-u', '-z'], { cwd: vault, env: vaultEnv(vault) });
  if (r.code !== 0) return failed(r.stderr, r.timedOut);
  if (r.stdout.length > 0) return pending('unmerged', 'the index has unmerged entries (an unresolved conflict); resolve them, then retry');
  return null;
}

/**
 * What the inspection found, read again once Knowledge holds `index.lock`,
 * just before the branch moves [GIT-10][GIT-18]. While the commits were
 * being built the user may have switched branches, or started a merge or a
 * rebase; the compare-and-swap guards the branch's value only, not which
 * branch HEAD names nor the operation files. Every git command that changes
 * those also writes the index, which our lock now keeps out. Null: still
 * the same branch with nothing in progress.
 */
export async function recheckBeforeMove(
  runner: GitRunner,
  repo: Extract<RepoInspection, { kind: 'ready' }>,
): Promise<{ code: PendingCode; reason: string } | null> {
  const op = await operationInProgress(repo.gitDir);
  if (op) return { code: 'operation-in-progress', reason: `${op.what} started while the checkpoint was being built (.git/${op.name}); finish or abort it, then retry` };
  const head = await branchOfHead(runner, repo.workTree, await readHeadFile(repo.gitDir));
  if ('code' in head) return head;
  if (head.ref === null) return { code: 'detached-head', reason: 'HEAD was detached while the checkpoint was being built; check out a branch, then retry' };
  // Another branch checked out meanwhile: the checkpoint is built again on the branch HEAD names now.
  if (head.ref !== repo.branchRef) return { code: 'branch-moved', reason: `HEAD now names ${head.ref}, not ${repo.branchRef} (a branch was checked out meanwhile)` };
  return null;
}

/** The first operation file present in `gitDir` (a merge, rebase, … left half-done), or null. */
async function operationInProgress(gitDir: string): Promise<{ name: string; what: string } | null> {
  const i = await firstExisting(IN_PROGRESS.map((p) => join(gitDir, p.name)));
  return i >= 0 ? IN_PROGRESS[i]! : null;
}

/**
 * The ref HEAD names (null: detached), read the way the files ref backend
 * stores it; anything unusual (a symlinked HEAD, another ref backend) asks git.
 */
async function branchOfHead(runner: GitRunner, vault: string, headFile: HeadFile): Promise<{ ref: string | null } | { code: PendingCode; reason: string }> {
  if (headFile.kind === 'detached') return { ref: null };
  if (headFile.kind === 'branch') return { ref: headFile.ref };
  const sym = await runner.run(['symbolic-ref', '-q', 'HEAD'], { cwd: vault, env: vaultEnv(vault) });
  if (sym.code === 1) return { ref: null };
  if (sym.code !== 0) return classifyGitFailure(sym.stderr, sym.timedOut);
  return { ref: sym.stdout.toString('utf8').trim() };
}

/**
 * Where a chain of symbolic refs (loose files `ref: …`) starting at `ref`
 * ends; null when `ref` is an ordinary ref (or cannot be read: git says
 * more when it is used).
 */
async function symrefTarget(gitDir: string, ref: string): Promise<string | null> {
  let at = ref;
  for (let hop = 0; hop < 5; hop++) {
    let text: string;
    try {
      text = await readRegular(join(gitDir, at), 'utf8');
    } catch {
      break;
    }
    const m = /^ref:[ \t]*(refs\/\S+)\s*$/.exec(text);
    if (!m) break;
    at = m[1]!;
  }
  return at === ref ? null : at;
}

type HeadFile = { kind: 'branch'; ref: string } | { kind: 'detached' } | { kind: 'ask-git' };

/** Read .git/HEAD as the files backend writes it; anything else is left to git. */
async function readHeadFile(dotGit: string): Promise<HeadFile> {
  try {
    const p = join(dotGit, 'HEAD');
    if (!(await lstat(p)).isFile()) return { kind: 'ask-git' };
    const text = await readRegular(p, 'utf8');
    const m = /^ref:[ \t]*(refs\/\S+)[ \t]*\n?$/.exec(text);
    // refs/heads/.invalid is what newer ref backends (reftable) leave in the file.
    if (m && m[1] !== 'refs/heads/.invalid') return { kind: 'branch', ref: m[1]! };
    if (/^[0-9a-f]{40}([0-9a-f]{24})?\n?$/.test(text)) return { kind: 'detached' };
  } catch {
    /* unreadable: git reports it precisely */
  }
  return { kind: 'ask-git' };
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
