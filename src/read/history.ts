/**
 * Effectful half of record history [READ-2]: every committed version of one
 * record on the branch HEAD names, its actor label and date, and the diff
 * between two versions. Git runs only through GitRunner (clean environment,
 * no hooks, filters, pagers or external diff [GIT-12]) and discovery never
 * leaves the vault [GIT-2].
 *
 * Reading history never fails because of Git: a missing repository is
 * `absent` with no versions, and a Git that cannot run or a repository it
 * cannot read is reported in `git`, with no versions. Reading takes no lock
 * and writes nothing, so it works beside a running Gateway and while a
 * checkpoint is pending.
 *
 * The history covers the whole vault [GIT-20]; this module only ever asks
 * for the path of a record the caller was allowed to see.
 */
import { lstat, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { KnowledgeError } from '../errors.js';
import { classifyGitFailure, type GitRunner } from '../git/runner.js';
import { vaultEnv } from '../git/inspect.js';
import type { DB } from '../store/db.js';
import { LOG_FORMAT, parseCatFileBatch, parseLog, versionFacts } from './history-parse.js';
import { isFullCommitId } from './query.js';
import type { HistoryGit, RecordDiff, RecordHistory, RecordVersion } from './types.js';

interface Repo {
  vault: string;
  env: Record<string, string>;
  branch: string;
  head: string | null;
}

type RepoCheck = { ok: true; repo: Repo } | { ok: false; git: HistoryGit };

/** Locate the vault's own repository and the branch HEAD names; read-only. */
export async function openHistoryRepo(runner: GitRunner, vaultDir: string): Promise<RepoCheck> {
  let vault: string;
  try {
    vault = await realpath(vaultDir);
  } catch (e) {
    return { ok: false, git: { state: 'pending', code: 'not-vault-root', reason: `vault: ${(e as Error).message}` } };
  }
  try {
    const st = await lstat(join(vault, '.git'));
    if (!st.isDirectory()) {
      return { ok: false, git: { state: 'pending', code: 'linked-worktree', reason: 'vault/.git is not a directory; Knowledge reads history only from the vault\'s own repository' } };
    }
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { ok: false, git: { state: 'absent', reason: 'no history yet: the vault has no repository (it is created at the first checkpoint)' } };
    return { ok: false, git: { state: 'pending', code: code === 'EACCES' ? 'permission' : 'git-error', reason: `vault/.git: ${(e as Error).message}` } };
  }
  const det = await runner.detect();
  if (!det.ok) return { ok: false, git: { state: 'unavailable', reason: det.reason } };
  const env = vaultEnv(vault);
  const sym = await runner.run(['symbolic-ref', '-q', 'HEAD'], { cwd: vault, env });
  if (sym.code === 1) return { ok: false, git: { state: 'pending', code: 'detached-head', reason: 'HEAD is detached; history is read from the branch HEAD names' } };
  if (sym.code !== 0) return { ok: false, git: failure(sym.stderr, sym.timedOut) };
  const branch = sym.stdout.toString('utf8').trim();
  const rp = await runner.run(['rev-parse', '--show-toplevel', '-q', '--verify', `${branch}^{commit}`], { cwd: vault, env });
  const [top = '', oid = ''] = rp.stdout.toString('utf8').split('\n');
  if (rp.code !== 0 && (rp.stderr.trim() !== '' || top === '')) return { ok: false, git: failure(rp.stderr, rp.timedOut) };
  let topReal = top;
  try {
    topReal = await realpath(top);
  } catch {
    /* compared below as given */
  }
  if (topReal !== vault) {
    return { ok: false, git: { state: 'pending', code: 'not-vault-root', reason: `the repository's work tree is ${top}, not the vault` } };
  }
  return { ok: true, repo: { vault, env, branch, head: rp.code === 0 && oid ? oid : null } };
}

function failure(stderr: string, timedOut: boolean): HistoryGit {
  const c = classifyGitFailure(stderr, timedOut);
  return { state: 'pending', code: c.code, reason: c.reason };
}

/** Versions of this path waiting in the outbox (not in Git yet) [GIT-14]. */
export function queuedVersions(db: DB, path: string): number {
  const row = db.prepare(
    "SELECT count(*) AS n FROM batch_files f JOIN batches b ON b.batch_id = f.batch_id WHERE b.state = 'queued' AND f.path = ? AND f.deleted = 0",
  ).get(path) as { n: number };
  return row.n;
}

/**
 * Every committed version of the record at `path`, newest first, following
 * renames (`git log --follow`). Git's rename detection guesses by
 * similarity, and may cross into another file: a version that is not this
 * record's — one whose frontmatter names another id, or names none (a
 * broken file) at a path other than the version after it — is not listed,
 * and the history goes on at the record's own path before the commit where
 * Git's guess went astray (a deleted record restored by hand, taken for a
 * copy of a look-alike record). A version that added the record's file goes
 * on where the record lived before: a scan's rename paired by record id, a
 * deleted record published again under its id at another path (the
 * publication's plan names its last path), or its file restored by hand at
 * another path (its tombstone's path). It ends at the first version in a partition `mayRead`
 * refuses (a record moved out of a conversation the caller cannot read
 * keeps that conversation's versions to itself) [SURF-3].
 */
export async function readHistory(
  runner: GitRunner,
  vaultDir: string,
  db: DB,
  rec: { id: string; path: string },
  mayRead: (path: string) => boolean = () => true,
): Promise<RecordHistory> {
  return (await walkHistory(runner, vaultDir, db, rec, mayRead, null)) as RecordHistory;
}

/**
 * The versions `readHistory` would list for the commits `want` (whole ids,
 * or prefixes of at least 7 hex digits that name exactly one object in the
 * repository), newest first in its order, reading the history only as far as
 * they are: the walk is newest first and each version depends only on the
 * ones before it, so a version found before the walk ends is listed just so
 * by the whole history. Null when the walk does not find them all (a commit
 * that is no version, one only the checks after the walk list, a prefix
 * naming several objects): the caller then reads the whole history. A diff
 * needs two versions, not thousands.
 */
export async function findVersions(
  runner: GitRunner,
  vaultDir: string,
  db: DB,
  rec: { id: string; path: string },
  mayRead: (path: string) => boolean,
  want: readonly string[],
): Promise<RecordVersion[] | null> {
  const found = await walkHistory(runner, vaultDir, db, rec, mayRead, want);
  return Array.isArray(found) ? found : null;
}

/**
 * readHistory's walk. With `want`, it stops as soon as every wanted commit is
 * a listed version and returns those versions (one per wanted commit, in
 * `want`'s order); null when it cannot tell without the whole history.
 */
async function walkHistory(
  runner: GitRunner,
  vaultDir: string,
  db: DB,
  rec: { id: string; path: string },
  mayRead: (path: string) => boolean,
  wantGiven: readonly string[] | null,
): Promise<RecordHistory | RecordVersion[] | null> {
  const base = { id: rec.id, path: rec.path, queued: queuedVersions(db, rec.path) };
  const opened = await openHistoryRepo(runner, vaultDir);
  if (!opened.ok) {
    // No repository where Knowledge committed before (.git deleted): its checkpoints are gone with it.
    const offBranch = opened.git.state === 'absent' ? recordedCommits(db, [rec.path]).length : 0;
    return { ...base, versions: [], git: opened.git, ...(offBranch > 0 ? { offBranch } : {}) };
  }
  const { repo } = opened;
  const git: HistoryGit = { state: 'ready', branch: repo.branch, head: repo.head };
  if (repo.head === null) {
    const offBranch = recordedCommits(db, [rec.path]).length;
    return { ...base, versions: [], git, ...(offBranch > 0 ? { offBranch } : {}) };
  }
  let want: string[] | null = null;
  if (wantGiven !== null) {
    want = [];
    for (const c of wantGiven) {
      const whole = isFullCommitId(c) ? c : await onlyObjectNamed(runner, repo, c);
      if (whole === null) return null;
      want.push(whole);
    }
  }
  const foundAll = (vs: readonly SegmentVersion[]): RecordVersion[] | null => {
    const out: RecordVersion[] = [];
    for (const c of want ?? []) {
      const v = vs.find((x) => x.commit === c);
      if (!v) return null;
      const { added: _added, ...version } = v;
      out.push(version);
    }
    return out;
  };

  const versions: SegmentVersion[] = [];
  // Where to go on from when Git's rename detection ends: a scan that paired a moved and edited
  // file by its record id recorded the rename in its receipt, which Git could not guess.
  // Read in SQLite, not parsed here: a baseline's receipt lists every file it added (megabytes at 100k files).
  const renamedFrom = db.prepare(
    `SELECT json_extract(j.value, '$.from') FROM scans s, json_each(s.receipt, '$.renamed') j
      WHERE s.scan_id = ? AND instr(s.receipt, '"renamed":[]') = 0 AND json_extract(j.value, '$.to') = ? LIMIT 1`,
  ).pluck();
  // A deleted record published again under its id at another path: the publication's plan names its last path.
  const publishedFrom = db.prepare(
    `SELECT json_extract(j.value, '$.formerPath') FROM publications p, json_each(p.plan, '$.records') j
      WHERE p.publication_id = ? AND json_extract(j.value, '$.path') = ? LIMIT 1`,
  ).pluck();
  // A rename a scan found whose checkpoint is still waiting: the path is not in Git yet, and the versions are at the old one.
  const queuedRenameFrom = db.prepare(
    `SELECT json_extract(j.value, '$.from') FROM batches b JOIN scans s ON s.scan_id = b.ref_id, json_each(s.receipt, '$.renamed') j
      WHERE b.kind = 'scan' AND b.state = 'queued' AND instr(s.receipt, '"renamed":[]') = 0 AND json_extract(j.value, '$.to') = ?
      ORDER BY b.batch_id DESC LIMIT 1`,
  ).pluck();
  // A deleted record's file restored by hand at another path (a scan added it): its last path before it was deleted, once.
  let tombstoneAsked = false;
  // A move a scan found (by content or record id) into this path, whoever committed it: a move and rewrite the user
  // committed with their own git carries no trailer of Knowledge's, and its scan committed nothing.
  const movedFrom = db.prepare('SELECT from_path FROM record_moves WHERE id = ? AND to_path = ?').pluck();
  /** Where the record lived before the version that added its file at `v.path`; null when nowhere known. */
  const formerPathOf = (v: SegmentVersion): string | null => {
    let before: unknown;
    if (v.publicationId) before = publishedFrom.get(v.publicationId, v.path);
    else if (v.scanId) {
      before = renamedFrom.get(v.scanId, v.path);
      // A deleted record put back under another name (scan/reindex.ts records where it came from).
      if (typeof before !== 'string') before = movedFrom.get(rec.id, v.path);
      if (typeof before !== 'string' && !tombstoneAsked) {
        tombstoneAsked = true;
        before = db.prepare('SELECT path FROM record_tombstones WHERE id = ?').pluck().get(rec.id);
      }
    } else before = movedFrom.get(rec.id, v.path);
    return typeof before === 'string' ? before : null;
  };
  let from: string = repo.head;
  let path = rec.path;
  for (let hop = 0; hop < MAX_RENAME_HOPS; hop++) {
    const segment = await readSegment(runner, repo, from, path, rec.id, mayRead, want === null ? null : want.filter((c) => !versions.some((v) => v.commit === c)));
    if ('state' in segment) return want === null ? { ...base, versions: [], git: segment } : null;
    versions.push(...segment.versions);
    if (want !== null) {
      const found = foundAll(versions);
      if (found !== null) return found;
      // Read only up to the wanted commits, which were not all listed: the rest of the walk would need the whole segment.
      if (segment.truncated) return null;
    }
    if (segment.versions.length === 0) {
      const queuedFrom = queuedRenameFrom.get(path);
      if (typeof queuedFrom !== 'string' || queuedFrom === path) break;
      path = queuedFrom;
      continue;
    }
    const oldest = segment.versions[segment.versions.length - 1];
    if (!oldest?.parent) break;
    if (segment.crossed) {
      // Git took the oldest version for a copy or rename of another file (a deleted record
      // restored, next to a record written from the same template): the record's own earlier
      // versions are at its path, before that commit.
      from = oldest.parent;
      path = oldest.path;
      continue;
    }
    if (!segment.complete || !oldest.added) break;
    const before = formerPathOf(oldest);
    if (before === null || before === oldest.path) break;
    from = oldest.parent;
    path = before;
  }
  if (want !== null) return null;
  const { offBranch, empty } = await unlistedCommits(runner, repo, db, rec.id, rec.path, versions);
  const listed = empty.length > 0 ? await byAncestry(runner, repo, versions, empty) : versions;
  return { ...base, versions: listed.map(({ added: _added, ...v }) => v), git, ...(offBranch > 0 ? { offBranch } : {}) };
}

/** Renames recorded by scans followed, at most, for one history. */
const MAX_RENAME_HOPS = 64;

type SegmentVersion = RecordVersion & { added: boolean };

/** The distinct commits Knowledge recorded for checkpoints that wrote one of `paths`, with the path each wrote. */
function recordedCommits(db: DB, paths: readonly string[]): Array<{ commit: string; path: string }> {
  const q = db.prepare(
    `SELECT DISTINCT b.commit_id AS commit_id FROM batch_files f JOIN batches b ON b.batch_id = f.batch_id
      WHERE f.path = ? AND f.deleted = 0 AND b.state = 'committed' AND b.commit_id IS NOT NULL`,
  ).pluck();
  const seen = new Set<string>();
  const out: Array<{ commit: string; path: string }> = [];
  for (const path of new Set(paths)) {
    for (const commit of q.all(path) as string[]) {
      if (seen.has(commit)) continue;
      seen.add(commit);
      out.push({ commit, path });
    }
  }
  return out;
}

/**
 * Whether commit `a` is an ancestor of (or is) `b`: false also when the
 * repository no longer has `a`; null when git did not answer in time.
 */
async function isAncestor(runner: GitRunner, repo: Repo, a: string, b: string): Promise<boolean | null> {
  const r = await runner.run(['merge-base', '--is-ancestor', a, b], { cwd: repo.vault, env: repo.env });
  return r.timedOut ? null : r.code === 0;
}

/** Ancestry checks at most per history: a reset branch is told by the first few. */
const MAX_UNLISTED_CHECKS = 32;

/**
 * The commits Knowledge recorded for `path` and the paths of `versions` that
 * the list does not hold. Those not on the branch (it was reset, or .git
 * replaced by an older copy) are counted: their versions are missing, which
 * the history says rather than look complete [GIT-17]; each is asked of Git
 * (`merge-base --is-ancestor`: a commit the repository no longer has is not
 * on it). Those on the branch that changed nothing at the path — the user
 * had committed those very bytes first (a `git commit -a` while the
 * checkpoint waited on a lock), so `git log` skips Knowledge's commit — are
 * versions too, returned to be listed: the receipt names that commit. The
 * common case (every recorded commit listed) asks Git nothing.
 */
async function unlistedCommits(runner: GitRunner, repo: Repo, db: DB, id: string, path: string, versions: readonly SegmentVersion[]): Promise<{ offBranch: number; empty: SegmentVersion[] }> {
  const listed = new Set(versions.map((v) => v.commit));
  const others = recordedCommits(db, [path, ...versions.map((v) => v.path)]).filter((c) => !listed.has(c.commit));
  let offBranch = 0;
  const onBranch: Array<{ commit: string; path: string }> = [];
  for (const c of others.slice(0, MAX_UNLISTED_CHECKS)) {
    const on = await isAncestor(runner, repo, c.commit, repo.head!);
    if (on === true) onBranch.push(c);
    else if (on === false) offBranch++;
  }
  if (onBranch.length === 0) return { offBranch, empty: [] };
  const log = await runner.run(['log', '-z', '--no-walk=unsorted', '--no-color', '--no-show-signature', LOG_FORMAT, ...onBranch.map((c) => c.commit)], { cwd: repo.vault, env: repo.env });
  const cat = await runner.run(['cat-file', '--batch'], { cwd: repo.vault, env: repo.env, input: onBranch.map((c) => `${c.commit}:${c.path}\n`).join('') });
  if (log.code !== 0 || cat.code !== 0) return { offBranch, empty: [] };
  const headers = new Map(parseLog(log.stdout.toString('utf8')).map((e) => [e.commit, e]));
  const objects = parseCatFileBatch(cat.stdout, onBranch.length);
  const empty: SegmentVersion[] = [];
  onBranch.forEach((c, i) => {
    const e = headers.get(c.commit);
    const obj = objects[i];
    if (!e || !obj?.found) return;
    const facts = versionFacts(obj.bytes);
    // Another record's commit at a path this one reuses is not a version of this one.
    if (facts.id !== id) return;
    const v: SegmentVersion = { commit: e.commit, parent: e.parent, date: e.date, actor: e.actor, subject: e.subject, path: c.path, revision: facts.revision, added: false };
    if (e.publicationId) v.publicationId = e.publicationId;
    if (e.scanId) v.scanId = e.scanId;
    empty.push(v);
  });
  return { offBranch, empty };
}

/**
 * `versions` (newest first) with each of `more` placed before the newest of
 * them that is its ancestor (binary search: along one line of history the
 * ancestors of a commit are the list's tail), else last. Dates cannot order
 * them: commits made in one second share a date.
 */
async function byAncestry(runner: GitRunner, repo: Repo, versions: readonly SegmentVersion[], more: readonly SegmentVersion[]): Promise<SegmentVersion[]> {
  const out = [...versions];
  for (const v of more) {
    let lo = 0;
    let hi = out.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((await isAncestor(runner, repo, out[mid]!.commit, v.commit)) === true) hi = mid;
      else lo = mid + 1;
    }
    out.splice(lo, 0, v);
  }
  return out;
}

/**
 * The versions `git log --follow` lists for `path` from commit `from`, newest
 * first, cut where they stop being this record's (see readHistory).
 * `complete`: the log ran out rather than being cut; `crossed`: cut where
 * Git's guess went on into another file.
 */
async function readSegment(
  runner: GitRunner,
  repo: Repo,
  from: string,
  path: string,
  id: string,
  mayRead: (path: string) => boolean,
  want: readonly string[] | null = null,
): Promise<{ versions: SegmentVersion[]; complete: boolean; crossed?: boolean; truncated?: boolean } | HistoryGit> {
  const readLog = async (withMerges: boolean) => {
    const log = await runner.run(
      ['log', '-z', '--follow', '--name-status', ...(withMerges ? ['--diff-merges=first-parent'] : []), '--no-color', '--no-show-signature', LOG_FORMAT, from, '--', path],
      { cwd: repo.vault, env: { ...repo.env, GIT_LITERAL_PATHSPECS: '1' } },
    );
    return log.code !== 0 ? failure(log.stderr, log.timedOut) : parseLog(log.stdout.toString('utf8'));
  };
  // A merge that changed the file is a version too, often the current one; git lists no file for a merge unless
  // told which diff to show: the one against its first parent. But where that diff shows the file added or renamed
  // at the merge (a rename or a new file made on the merged branch), --follow would go on from there along the first
  // parent and drop the merged branch's own versions: such a history is read as before, without its merges.
  let parsed = await readLog(true);
  if (!Array.isArray(parsed)) return parsed;
  if (parsed.some((e) => e.merge && e.status !== null && !e.status.startsWith('M'))) {
    parsed = await readLog(false);
    if (!Array.isArray(parsed)) return parsed;
  }
  let entries = parsed.filter(
    (e): e is typeof e & { path: string } => e.path !== null && !e.status?.startsWith('D'),
  );
  if (entries.length === 0) return { versions: [], complete: true };
  // Looking for given commits that this log lists: the versions up to the oldest of them are all that is read.
  let truncated = false;
  if (want !== null && want.length > 0) {
    const at = want.map((c) => entries.findIndex((e) => e.commit === c));
    if (!at.includes(-1)) {
      const last = Math.max(...at);
      truncated = last < entries.length - 1;
      entries = entries.slice(0, last + 1);
    }
  }

  // One cat-file process for every version's bytes, not one spawn each.
  const cat = await runner.run(['cat-file', '--batch'], {
    cwd: repo.vault,
    env: repo.env,
    input: entries.map((e) => `${e.commit}:${e.path}\n`).join(''),
  });
  if (cat.code !== 0) return failure(cat.stderr, cat.timedOut);
  const objects = parseCatFileBatch(cat.stdout, entries.length);

  const versions: SegmentVersion[] = [];
  let newer = path;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    const obj = objects[i];
    if (!obj?.found) continue; // not a version of the file (e.g. a merge listing)
    if (!mayRead(e.path)) return { versions, complete: false };
    const facts = versionFacts(obj.bytes);
    // Newer versions at this very path that name another id (the id changed by hand in the file, or the path taken by
    // another record after this one was deleted): not this record's, and not where its history ends.
    if (versions.length === 0 && facts.id !== null && facts.id !== id && e.path === path) continue;
    if (facts.id !== null ? facts.id !== id : e.path !== newer) return { versions, complete: false, crossed: true };
    newer = e.path;
    const v: SegmentVersion = {
      commit: e.commit,
      parent: e.parent,
      date: e.date,
      actor: e.actor,
      subject: e.subject,
      path: e.path,
      revision: facts.revision,
      added: e.status?.startsWith('A') ?? false,
    };
    if (e.publicationId) v.publicationId = e.publicationId;
    if (e.scanId) v.scanId = e.scanId;
    versions.push(v);
  }
  return { versions, complete: true, ...(truncated ? { truncated } : {}) };
}

/**
 * The one object of the repository whose id starts with `prefix` (hex, at
 * least 7 digits), or null when there are none, several, or git cannot tell:
 * with a single object, at most one version can start with it.
 */
async function onlyObjectNamed(runner: GitRunner, repo: Repo, prefix: string): Promise<string | null> {
  if (!/^[0-9a-f]{7,63}$/.test(prefix)) return null;
  const r = await runner.run(['rev-parse', `--disambiguate=${prefix}`], { cwd: repo.vault, env: repo.env });
  if (r.code !== 0) return null;
  const ids = r.stdout.toString('utf8').split('\n').filter((l) => l !== '');
  return ids.length === 1 && ids[0]!.startsWith(prefix) ? ids[0]! : null;
}

/**
 * Unified diff between two committed versions of one record. Both commits
 * must be versions listed by `readHistory` (E_VALIDATION otherwise), so a
 * caller can never diff another record, a path outside its partition, or an
 * arbitrary revision expression.
 */
export async function diffVersions(
  runner: GitRunner,
  vaultDir: string,
  history: RecordHistory,
  from: string,
  to: string,
): Promise<RecordDiff> {
  const a = history.versions.find((v) => v.commit === from);
  const b = history.versions.find((v) => v.commit === to);
  if (!a || !b) {
    const which = [!a && `from ${from}`, !b && `to ${to}`].filter(Boolean).join(' and ');
    throw new KnowledgeError('E_VALIDATION', `${which} is not a committed version of record ${history.id}`);
  }
  return diffBetween(runner, vaultDir, history.id, a, b);
}

/** Unified diff between two versions of record `id` that `readHistory` lists (or `findVersions` found). */
export async function diffBetween(
  runner: GitRunner,
  vaultDir: string,
  id: string,
  a: Pick<RecordVersion, 'commit' | 'path'>,
  b: Pick<RecordVersion, 'commit' | 'path'>,
): Promise<RecordDiff> {
  const opened = await openHistoryRepo(runner, vaultDir);
  if (!opened.ok) throw new KnowledgeError('E_UNAVAILABLE', `cannot read the vault's history: ${'reason' in opened.git ? opened.git.reason : opened.git.state}`);
  const paths = a.path === b.path ? [a.path] : [a.path, b.path];
  const r = await runner.run(
    // The same patch whatever the repository's diff settings say (diff.context, diff.algorithm, diff.orderFile,
    // diff.suppressBlankEmpty, core.bigFileThreshold) or a `-diff` attribute: text, three lines of context, git's
    // default algorithm. (A `diff=<driver>` attribute's xfuncname can still change the text after `@@ … @@`.)
    ['diff', '--no-ext-diff', '--no-textconv', '--no-color', '--text', '-U3', '--inter-hunk-context=0', '--diff-algorithm=myers', '--indent-heuristic',
      '--src-prefix=a/', '--dst-prefix=b/', '-M', a.commit, b.commit, '--', ...paths],
    // UTF-8 paths in the headers as they are, not C-quoted octal escapes.
    { cwd: opened.repo.vault, env: { ...opened.repo.env, GIT_LITERAL_PATHSPECS: '1' }, extraConfig: ['core.quotePath=false', 'diff.suppressBlankEmpty=false'] },
  );
  if (r.code !== 0) {
    const c = classifyGitFailure(r.stderr, r.timedOut);
    throw new KnowledgeError('E_UNAVAILABLE', `git diff failed (${c.code}): ${c.reason}`);
  }
  return { id, from: a.commit, to: b.commit, path: b.path, patch: r.stdout.toString('utf8') };
}

/**
 * The histories of the files that claim one id [REC-3] as one: every version
 * of each, newest first by date (a version in two of them — one commit that
 * changed both files — is listed once per file). `path` is the first file's.
 */
export function mergeHistories(histories: readonly RecordHistory[]): RecordHistory {
  const seen = new Set<string>();
  const versions = histories
    .flatMap((h) => h.versions)
    .filter((v) => {
      const key = `${v.commit}\0${v.path}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    })
    .sort((a, b) => (a.date < b.date ? 1 : a.date > b.date ? -1 : 0));
  const offBranch = histories.reduce((n, h) => n + (h.offBranch ?? 0), 0);
  const { offBranch: _first, ...first } = histories[0]!;
  return { ...first, versions, queued: histories.reduce((n, h) => n + h.queued, 0), ...(offBranch > 0 ? { offBranch } : {}) };
}
