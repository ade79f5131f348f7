/**
 * Bring the user's index in line with checkpoints for the checkpoints' paths
 * only [GIT-10]. After an out-of-band commit the untouched index still
 * describes the old tip, so `git status` would show our files as
 * reverse-staged. Where the user's entry is one Knowledge itself put there or
 * committed (the chain's base, or any commit of the chain — also after a
 * crash, when the index may sit at any of them) we write the final committed
 * entry: the exact committed blob. Where the user staged something else we
 * leave it alone. Working files are never touched, and no porcelain
 * (add/checkout/reset/commit) runs.
 *
 * Split into a pure planner (`planIndexUpdate`, table-tested) and the runner
 * (`runIndexJob`: one read of the index, one write).
 */
import { realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { classifyGitFailure, configEnv, type GitRunner } from './runner.js';
import { vaultEnv } from './inspect.js';
import { configSections, includesOtherFiles } from './config-text.js';
import { gitDirAliasIn } from './commit-stream.js';
import type { PendingCode } from './types.js';
import { readRegular } from '../fsutil.js';

export type IndexSyncOutcome =
  | { ok: true; updated: number; skipped: number }
  | { ok: false; code: PendingCode; reason: string };

export interface Entry {
  mode: string;
  oid: string;
}

/** The entries one checkpoint commit set: path -> entry, or null for a deletion. */
export type Step = ReadonlyMap<string, Entry | null>;

export interface IndexJob {
  /** The checkpoint paths; nothing else in the index is looked at or written. */
  paths: string[];
  objectFormat: 'sha1' | 'sha256';
  /** Earlier commits whose entries for `paths` count as Knowledge's (the parent of a reused chain). */
  before: string[];
  /**
   * The reused chain starts at a root commit (the store's first checkpoint):
   * its parent is the empty tree, so an absent entry is Knowledge's too.
   */
  fromRoot?: boolean;
  /** The commit the new steps were built on (the branch tip), or null for a root commit. */
  base: string | null;
  /** Entries set by checkpoint commits already on the branch up to `base` (a retry after a crash). */
  reusedSteps: Step[];
  /** Entries set by the commits built on `base`, in order; the index ends with `base` + these. */
  newSteps: Step[];
  /** Tree entries already read by the caller: commit -> (path -> entry). Saves a spawn. */
  known?: ReadonlyMap<string, ReadonlyMap<string, Entry>>;
  /**
   * Read and write this index file instead of the user's (GIT_INDEX_FILE):
   * the copy prepared under Knowledge's held index.lock (index-lock.ts).
   */
  indexFile?: string;
}

export interface IndexRead {
  user: Map<string, Entry>;
  conflicted: Set<string>;
  /** Entries of the user's carrying skip-worktree or assume-unchanged. */
  flags: Map<string, EntryFlags>;
  /** Environment that blanks every configured filter driver for an index write (filterOverrides). */
  filters: FilterBlank;
}

export interface FilterBlank {
  env: Record<string, string>;
}

export interface IndexPlan {
  /** `git update-index -z --index-info` records. */
  lines: string[];
  /** Paths written with an entry (not removed), in the order of `lines`. */
  written: string[];
  updated: number;
  skipped: number;
}

/** The user's own flags on an index entry, which `--index-info` drops (it writes a fresh entry). */
export interface EntryFlags {
  skipWorktree: boolean;
  assumeUnchanged: boolean;
}

/**
 * Pure: which index entries to write. For every path, the final entry is the
 * last new step's, else the base's. The user's entry is Knowledge's if it
 * equals the entry at any `before` commit, any step, or the base (absent
 * counts as an entry); only those are moved to the final entry.
 */
export function planIndexUpdate(input: {
  job: IndexJob;
  trees: ReadonlyMap<string, ReadonlyMap<string, Entry>>;
  user: ReadonlyMap<string, Entry>;
  conflicted: ReadonlySet<string>;
}): IndexPlan {
  const { job, trees, user, conflicted } = input;
  const zero = '0'.repeat(job.objectFormat === 'sha256' ? 64 : 40);
  const treeEntry = (commit: string | null, path: string): Entry | null => (commit === null ? null : (trees.get(commit)?.get(path) ?? null));
  const plan: IndexPlan = { lines: [], written: [], updated: 0, skipped: 0 };
  for (const path of new Set(job.paths)) {
    if (conflicted.has(path)) {
      plan.skipped++; // a conflict is the user's to resolve
      continue;
    }
    if (gitDirAliasIn(path) !== undefined) {
      plan.skipped++; // git refuses it in any index (`git~1/x`: committed by an older Knowledge)
      continue;
    }
    const ours: Array<Entry | null> = [treeEntry(job.base, path), ...job.before.map((c) => treeEntry(c, path))];
    if (job.fromRoot) ours.push(null);
    let final = treeEntry(job.base, path);
    for (const step of job.reusedSteps) if (step.has(path)) ours.push(step.get(path)!);
    for (const step of job.newSteps) {
      if (!step.has(path)) continue;
      final = step.get(path)!;
      ours.push(final);
    }
    const mine = user.get(path) ?? null;
    if (same(mine, final)) continue;
    if (!ours.some((e) => same(e, mine))) {
      plan.skipped++; // the user staged something else for this path [GIT-10]
      continue;
    }
    plan.lines.push(final ? `${final.mode} ${final.oid}\t${path}\0` : `0 ${zero}\t${path}\0`);
    if (final) plan.written.push(path);
    plan.updated++;
  }
  return plan;
}

/** Above this many bytes of paths we list everything and filter instead of passing pathspecs (ARG_MAX). */
const MAX_PATHSPEC_BYTES = 64 * 1024;

export async function runIndexJob(runner: GitRunner, vaultDir: string, job: IndexJob): Promise<IndexSyncOutcome> {
  if (job.paths.length === 0) return { ok: true, updated: 0, skipped: 0 };
  let vault: string;
  try {
    vault = await realpath(vaultDir);
  } catch (e) {
    return { ok: false, code: 'git-error', reason: `vault: ${(e as Error).message}` };
  }
  const toRead = [...new Set([...job.before, ...(job.base ? [job.base] : [])])].filter((c) => !job.known?.has(c));
  const [pre, ...read] = await Promise.all([
    readIndex(runner, vault, job.paths, { indexFile: job.indexFile }),
    ...toRead.map((c) => readTreeEntries(runner, vault, c, job.paths)),
  ]);
  if (!('user' in pre)) return pre;
  const trees = new Map<string, ReadonlyMap<string, Entry>>(job.known ?? []);
  for (let i = 0; i < toRead.length; i++) {
    const r = read[i]!;
    if (!r.ok) return r;
    trees.set(toRead[i]!, r.entries);
  }
  const plan = planIndexUpdate({ job, trees, user: pre.user, conflicted: pre.conflicted });
  if (plan.lines.length === 0) return { ok: true, updated: 0, skipped: plan.skipped };

  // --index-info takes index.lock the normal way; a held lock is reported and
  // left in place [GIT-19]. Entries carry no stat data; `git status` refreshes
  // them (we do not refresh: that would run the user's clean filters [GIT-12]).
  const env = { ...vaultEnv(vault), ...pre.filters.env, ...(job.indexFile ? { GIT_INDEX_FILE: job.indexFile } : {}) };
  const up = await runner.run(['update-index', '--add', '--replace', '-z', '--index-info'], {
    cwd: vault,
    env,
    input: plan.lines.join(''),
    dropOverrides: ['core.untrackedCache'],
  });
  if (up.code !== 0) return fail(up.stderr, up.timedOut);
  // A path the index refuses (core.protectNTFS/HFS: `git~1/x`) is skipped with a
  // warning and exit 0: the index would not hold what the branch does.
  const ignored = /^Ignoring path (.*)$/m.exec(up.stderr);
  if (ignored) return { ok: false, code: 'git-error', reason: `git refused to put ${ignored[1]} in the index` };
  // The user's skip-worktree (sparse checkout) and assume-unchanged flags on the entries just written, put back.
  for (const [flag, has] of [['--skip-worktree', (f: EntryFlags) => f.skipWorktree], ['--assume-unchanged', (f: EntryFlags) => f.assumeUnchanged]] as const) {
    const paths = plan.written.filter((path) => { const f = pre.flags.get(path); return f !== undefined && has(f); });
    if (paths.length === 0) continue;
    const r = await runner.run(['update-index', flag, '-z', '--stdin'], {
      cwd: vault,
      env,
      input: paths.map((path) => `${path}\0`).join(''),
      dropOverrides: ['core.untrackedCache'],
    });
    if (r.code !== 0) return fail(r.stderr, r.timedOut);
  }
  return { ok: true, updated: plan.updated, skipped: plan.skipped };
}

/**
 * The user's index entries for `paths` (one `ls-files`) and the filter
 * overrides an index write needs.
 */
export async function readIndex(
  runner: GitRunner,
  vault: string,
  paths: string[],
  opts: { indexFile?: string } = {},
): Promise<IndexRead | { ok: false; code: PendingCode; reason: string }> {
  // Literal pathspecs: a vault file may be called "*.md" or ":(top)x".
  const env = { ...vaultEnv(vault), GIT_LITERAL_PATHSPECS: '1', ...(opts.indexFile ? { GIT_INDEX_FILE: opts.indexFile } : {}) };
  const [ls, filters] = await Promise.all([
    runner.run(['ls-files', '-s', '-v', '-z', ...pathspecArgs(paths)], { cwd: vault, env }),
    filterOverrides(runner, vault),
  ]);
  if (ls.code !== 0) return fail(ls.stderr, ls.timedOut);
  if (!('env' in filters)) return filters;
  const { entries, conflicted, flags } = parseLsFiles(ls.stdout, new Set(paths));
  // An intent-to-add entry (`git add -N`) stages no content, though it reads as the empty blob: it counts as
  // no entry. Kept as the user's, it would stage the deletion of what the checkpoint just committed.
  const empty = [...entries].filter(([, e]) => e.oid === EMPTY_BLOB.sha1 || e.oid === EMPTY_BLOB.sha256).map(([path]) => path);
  if (empty.length > 0) {
    const dbg = await runner.run(['ls-files', '-z', '--debug', ...pathspecArgs(empty)], { cwd: vault, env });
    if (dbg.code !== 0) return fail(dbg.stderr, dbg.timedOut);
    for (const path of intentToAddPaths(dbg.stdout)) entries.delete(path);
  }
  return { user: entries, conflicted, flags, filters };
}

/**
 * Which of `paths` the user's index marks skip-worktree (a sparse checkout
 * leaves them out of the working tree, and git counts them as present); null
 * when git cannot say. One `ls-files`, no lock.
 */
export async function skipWorktreePaths(runner: GitRunner, vault: string, paths: string[]): Promise<Set<string> | null> {
  if (paths.length === 0) return new Set();
  const ls = await runner.run(['ls-files', '-s', '-v', '-z', ...pathspecArgs(paths)], { cwd: vault, env: { ...vaultEnv(vault), GIT_LITERAL_PATHSPECS: '1' } });
  if (ls.code !== 0) return null;
  const { flags } = parseLsFiles(ls.stdout, new Set(paths));
  return new Set([...flags].filter(([, f]) => f.skipWorktree).map(([path]) => path));
}

const EMPTY_BLOB = {
  sha1: 'e69de29bb2d1d6434b8b29ae775ad8c2e48c5391',
  sha256: '473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813',
};
/** Git's CE_INTENT_TO_ADD, in the flags `ls-files --debug` prints. */
const CE_INTENT_TO_ADD = 1 << 29;

/**
 * The paths `ls-files -z --debug` shows with the intent-to-add flag: each
 * entry is its path, NUL, then indented lines ending with `flags: <hex>`.
 */
export function intentToAddPaths(out: Buffer): string[] {
  const text = out.toString('utf8');
  const found: string[] = [];
  for (let at = 0; at < text.length;) {
    const nul = text.indexOf('\0', at);
    if (nul < 0) break;
    const path = text.slice(at, nul);
    const flags = /flags: ([0-9a-f]+)\n/.exec(text.slice(nul + 1));
    if (!flags) break;
    if ((parseInt(flags[1]!, 16) & CE_INTENT_TO_ADD) !== 0) found.push(path);
    at = nul + 1 + flags.index + flags[0].length;
  }
  return found;
}

/**
 * One checkpoint, as before chains existed: the index moves from `parent`'s
 * entries to `commit`'s for `paths`.
 */
export async function syncIndex(
  runner: GitRunner,
  vaultDir: string,
  commit: string,
  parent: string | null,
  paths: string[],
): Promise<IndexSyncOutcome> {
  return runIndexJob(runner, vaultDir, {
    paths,
    objectFormat: commit.length === 64 ? 'sha256' : 'sha1',
    before: parent ? [parent] : [],
    base: commit,
    reusedSteps: [],
    newSteps: [],
  });
}

/** `ls-tree -r` entries of `commit` for `paths` (absent paths are simply missing). */
export async function readTreeEntries(
  runner: GitRunner,
  vault: string,
  commit: string,
  paths: string[],
): Promise<{ ok: true; entries: Map<string, Entry> } | { ok: false; code: PendingCode; reason: string }> {
  if (paths.length === 0) return { ok: true, entries: new Map() };
  const r = await runner.run(['ls-tree', '-r', '-z', '--full-tree', commit, ...pathspecArgs(paths)], {
    cwd: vault,
    env: { ...vaultEnv(vault), GIT_LITERAL_PATHSPECS: '1' },
  });
  if (r.code !== 0) return fail(r.stderr, r.timedOut);
  return { ok: true, entries: parseLsTree(r.stdout, new Set(paths)) };
}

/**
 * The submodules (gitlinks, mode 160000) above any of `files`: those `commit`
 * records under `dirs` (one `ls-tree -r -d`, which lists folders and gitlinks
 * but no files: about a thousand lines for a 100k-file vault), and those the
 * user's index holds but no commit yet (a submodule added and not committed):
 * looked for in the index only under folders of `files` that `commit` does
 * not have (one `ls-files` of those folders, run only when there are any), so
 * that a scan that adds a file to a folder the branch has reads no index. A
 * gitlink staged in place of a folder the branch still has (the folder
 * removed from the index, a submodule added at its path) is not looked for.
 * Null when git cannot tell.
 */
export async function gitlinksUnder(runner: GitRunner, vault: string, commit: string | null, dirs: string[], files: readonly string[]): Promise<Set<string> | null> {
  const env = { ...vaultEnv(vault), GIT_LITERAL_PATHSPECS: '1' };
  const links = new Set<string>();
  const folders = new Set<string>();
  if (commit !== null) {
    const r = await runner.run(['ls-tree', '-r', '-d', '-z', '--full-tree', commit, '--', ...dirs], { cwd: vault, env });
    if (r.code !== 0) return null;
    for (const rec of r.stdout.toString('utf8').split('\0')) {
      const path = rec.slice(rec.indexOf('\t') + 1);
      if (rec.startsWith('160000 ')) links.add(path);
      else if (rec.startsWith('040000 ')) folders.add(path);
    }
  }
  // Each file's outermost folder that the commit lacks (or its gitlink, already known).
  const fresh = new Set<string>();
  for (const file of files) {
    for (let i = file.indexOf('/'); i !== -1; i = file.indexOf('/', i + 1)) {
      const folder = file.slice(0, i);
      if (links.has(folder) || fresh.has(folder)) break;
      if (folders.has(folder)) continue;
      fresh.add(folder);
      break;
    }
  }
  if (fresh.size === 0) return links;
  const staged = await runner.run(['ls-files', '-s', '-z', ...pathspecArgs([...fresh])], { cwd: vault, env });
  if (staged.code !== 0) return null;
  for (const rec of staged.stdout.toString('utf8').split('\0')) {
    if (rec.startsWith('160000 ')) links.add(rec.slice(rec.indexOf('\t') + 1));
  }
  return links;
}

/**
 * Writing the index re-checks "racily clean" entries by hashing their working
 * files through the clean filter named in .gitattributes — measured on 2.39:
 * `update-index --index-info` ran a `filter.x.clean` program. Attributes in
 * the work tree cannot be switched off on 2.39, so blank every configured
 * filter driver for this call [GIT-12]. A blanked filter runs nothing; the
 * racy entry is then merely marked for re-check by the user's next status.
 */
export async function filterOverrides(runner: GitRunner, vault: string): Promise<FilterBlank | { ok: false; code: PendingCode; reason: string }> {
  // Knowledge reads no global or system config, so the repository's own files
  // are the whole configuration: read them in-process when they include
  // nothing else (saves a git process per checkpoint).
  const local = await filterDriversInFiles(join(vault, '.git'));
  if (local) return overridesFor(local);
  const r = await runner.run(['config', '-z', '--get-regexp', '^filter\\.'], { cwd: vault, env: vaultEnv(vault) });
  if (r.code === 1 && r.stderr.trim() === '') return overridesFor([]); // no filter configured
  if (r.code !== 0) return fail(r.stderr, r.timedOut);
  const drivers = new Set<string>();
  for (const rec of r.stdout.toString('utf8').split('\0')) {
    const key = rec.split('\n', 1)[0] ?? '';
    const m = /^filter\.(.+)\.[^.]+$/.exec(key);
    if (m?.[1]) drivers.add(m[1]);
  }
  return overridesFor(drivers);
}

/**
 * Passed as environment config (GIT_CONFIG_COUNT), not `-c`: a driver's name
 * may hold '=', at which `-c` splits, so `-c filter.a=b.clean=` would blank
 * nothing and the driver `a=b` would run.
 */
function overridesFor(drivers: Iterable<string>): FilterBlank {
  const pairs: Array<[string, string]> = [];
  for (const d of drivers) pairs.push([`filter.${d}.clean`, ''], [`filter.${d}.smudge`, ''], [`filter.${d}.process`, ''], [`filter.${d}.required`, 'false']);
  return { env: configEnv(pairs) };
}

/**
 * Filter driver names in .git/config (and config.worktree), or null when
 * git must answer: an include, or a file that cannot be read. Section
 * syntax: `[filter "name"]` (escapes \\" and \\\\) or the old `[filter.name]`.
 */
export async function filterDriversInFiles(gitDir: string): Promise<Set<string> | null> {
  const drivers = new Set<string>();
  for (const name of ['config', 'config.worktree']) {
    let text: string;
    try {
      text = await readRegular(join(gitDir, name), 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT' && name !== 'config') continue;
      return null;
    }
    const found = parseFilterSections(text);
    if (!found) return null;
    for (const d of found) drivers.add(d);
  }
  return drivers;
}

/** Pure: filter driver names declared in one config file's text; null if git must answer (see configSections). */
export function parseFilterSections(text: string): Set<string> | null {
  const sections = configSections(text);
  if (sections === null || includesOtherFiles(sections)) return null;
  const out = new Set<string>();
  for (const { section, subsection } of sections) {
    const lower = section.toLowerCase();
    if (lower === 'filter' && subsection !== undefined) out.add(subsection);
    // `[filter.old]` names the driver `old`; `[filter.a "b"]` is read by git as filter.a.b.*: the driver `a.b`.
    else if (lower.startsWith('filter.')) out.add(lower.slice('filter.'.length) + (subsection === undefined ? '' : `.${subsection}`));
  }
  return out;
}

function fail(stderr: string, timedOut: boolean): { ok: false; code: PendingCode; reason: string } {
  const c = classifyGitFailure(stderr, timedOut);
  return { ok: false, code: c.code, reason: c.reason };
}

function same(a: Entry | null, b: Entry | null): boolean {
  if (a === null || b === null) return a === b;
  return a.mode === b.mode && a.oid === b.oid;
}

export function pathspecArgs(paths: string[]): string[] {
  let bytes = 0;
  for (const p of paths) bytes += Buffer.byteLength(p) + 1;
  return bytes > MAX_PATHSPEC_BYTES ? [] : ['--', ...paths];
}

/** Parse `ls-tree -r -z`: "mode type oid\tpath\0". */
export function parseLsTree(out: Buffer, wanted: ReadonlySet<string>): Map<string, Entry> {
  const entries = new Map<string, Entry>();
  for (const rec of out.toString('utf8').split('\0')) {
    const tab = rec.indexOf('\t');
    if (tab < 0) continue;
    const path = rec.slice(tab + 1);
    if (!wanted.has(path)) continue;
    const [mode = '', , oid = ''] = rec.slice(0, tab).split(' ');
    entries.set(path, { mode, oid });
  }
  return entries;
}

/** Parse `ls-files -s -z`: "mode oid stage\tpath\0". Stage > 0 marks a conflict we never touch. */
export function parseLsFiles(out: Buffer, wanted: ReadonlySet<string>): { entries: Map<string, Entry>; conflicted: Set<string>; flags: Map<string, EntryFlags> } {
  const entries = new Map<string, Entry>();
  const conflicted = new Set<string>();
  const flags = new Map<string, EntryFlags>();
  for (const rec of out.toString('utf8').split('\0')) {
    const tab = rec.indexOf('\t');
    if (tab < 0) continue;
    const fields = rec.slice(0, tab).split(' ');
    // With -v, a tag first: S skip-worktree, lower case assume-unchanged (H / h otherwise).
    const tag = fields.length === 4 ? fields.shift()! : 'H';
    const [mode = '', oid = '', stage = '0'] = fields;
    const path = rec.slice(tab + 1);
    if (!wanted.has(path)) continue;
    if (stage !== '0') {
      conflicted.add(path);
      continue;
    }
    entries.set(path, { mode, oid });
    const f = { skipWorktree: tag.toUpperCase() === 'S', assumeUnchanged: tag !== tag.toUpperCase() };
    if (f.skipWorktree || f.assumeUnchanged) flags.set(path, f);
  }
  return { entries, conflicted, flags };
}
