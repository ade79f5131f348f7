/**
 * Bring the user's index in line with a checkpoint for the checkpoint's paths
 * only [GIT-10]. After an out-of-band commit the untouched index still
 * describes the old tip, so `git status` would show our files as
 * reverse-staged. Where the user's entry equals the parent's (or both are
 * absent) we write the committed entry — the exact committed blob, also on a
 * retry; where the user staged something else we leave it alone. Working files
 * are never touched, and no porcelain (add/checkout/reset/commit) runs.
 */
import { realpath } from 'node:fs/promises';
import { classifyGitFailure, type GitRunner } from './runner.js';
import { vaultEnv } from './inspect.js';
import type { PendingCode } from './types.js';

export type IndexSyncOutcome =
  | { ok: true; updated: number; skipped: number }
  | { ok: false; code: PendingCode; reason: string };

interface Entry {
  mode: string;
  oid: string;
}

/** Above this many bytes of paths we list everything and filter instead of passing pathspecs (ARG_MAX). */
const MAX_PATHSPEC_BYTES = 64 * 1024;

export async function syncIndex(
  runner: GitRunner,
  vaultDir: string,
  commit: string,
  parent: string | null,
  paths: string[],
): Promise<IndexSyncOutcome> {
  if (paths.length === 0) return { ok: true, updated: 0, skipped: 0 };
  let vault: string;
  try {
    vault = await realpath(vaultDir);
  } catch (e) {
    return { ok: false, code: 'git-error', reason: `vault: ${(e as Error).message}` };
  }
  const wanted = new Set(paths);
  const pathspec = pathspecArgs(paths);
  // Literal pathspecs: a vault file may be called "*.md" or ":(top)x".
  const env = { ...vaultEnv(vault), GIT_LITERAL_PATHSPECS: '1' };

  // One diff-tree gives the parent's and the commit's entries for every path
  // that differs; a path it does not mention is identical in both.
  const diffArgs = parent
    ? ['diff-tree', '-r', '-z', '--no-renames', parent, commit]
    : ['diff-tree', '-r', '-z', '--no-renames', '--no-commit-id', '--root', commit];
  // Independent reads run together; `config` is only used if we write.
  const [diff, ls, filters] = await Promise.all([
    runner.run([...diffArgs, ...pathspec], { cwd: vault, env }),
    runner.run(['ls-files', '-s', '-z', ...pathspec], { cwd: vault, env }),
    filterOverrides(runner, vault),
  ]);
  if (diff.code !== 0) return fail(diff.stderr, diff.timedOut);
  const changed = parseRawDiff(diff.stdout, wanted);
  if (ls.code !== 0) return fail(ls.stderr, ls.timedOut);
  const { entries: index, conflicted } = parseLsFiles(ls.stdout, wanted);

  let skipped = 0;
  const lines: string[] = [];
  for (const path of wanted) {
    const d = changed.get(path);
    const user = index.get(path) ?? null;
    if (conflicted.has(path)) {
      skipped++;
      continue;
    }
    if (!d) {
      // Parent and commit agree here (e.g. a retry found the bytes already
      // committed): nothing to move; a different user entry is theirs.
      continue;
    }
    if (same(user, d.after)) continue;
    if (!same(user, d.before)) {
      skipped++; // the user staged something else for this path [GIT-10]
      continue;
    }
    if (d.after) lines.push(`${d.after.mode} ${d.after.oid}\t${path}\0`);
    else lines.push(`0 ${d.zero}\t${path}\0`);
  }
  if (lines.length === 0) return { ok: true, updated: 0, skipped };

  // --index-info takes index.lock the normal way; a held lock is reported and
  // left in place [GIT-19]. Entries carry no stat data; `git status` refreshes
  // them (we do not refresh: that would run the user's clean filters [GIT-12]).
  if (!Array.isArray(filters)) return filters;
  const up = await runner.run(['update-index', '--add', '--replace', '-z', '--index-info'], {
    cwd: vault,
    env: vaultEnv(vault),
    input: lines.join(''),
    extraConfig: filters,
    dropOverrides: ['core.untrackedCache'],
  });
  if (up.code !== 0) return fail(up.stderr, up.timedOut);
  return { ok: true, updated: lines.length, skipped };
}

/**
 * Writing the index re-checks "racily clean" entries by hashing their working
 * files through the clean filter named in .gitattributes — measured on 2.39:
 * `update-index --index-info` ran a `filter.x.clean` program. Attributes in
 * the work tree cannot be switched off on 2.39, so blank every configured
 * filter driver for this call [GIT-12]. A blanked filter runs nothing; the
 * racy entry is then merely marked for re-check by the user's next status.
 */
export async function filterOverrides(runner: GitRunner, vault: string): Promise<string[] | IndexSyncOutcome> {
  const r = await runner.run(['config', '-z', '--get-regexp', '^filter\\.'], { cwd: vault, env: vaultEnv(vault) });
  if (r.code === 1 && r.stderr.trim() === '') return []; // no filter configured
  if (r.code !== 0) return fail(r.stderr, r.timedOut);
  const drivers = new Set<string>();
  for (const rec of r.stdout.toString('utf8').split('\0')) {
    const key = rec.split('\n', 1)[0] ?? '';
    const m = /^filter\.(.+)\.[^.]+$/.exec(key);
    if (m?.[1]) drivers.add(m[1]);
  }
  const out: string[] = [];
  for (const d of drivers) out.push(`filter.${d}.clean=`, `filter.${d}.smudge=`, `filter.${d}.process=`, `filter.${d}.required=false`);
  return out;
}

function fail(stderr: string, timedOut: boolean): IndexSyncOutcome {
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

const isZeroMode = (m: string) => /^0+$/.test(m);

/** Parse `diff-tree -r -z` raw output: ":old new oldoid newoid X\0path\0". */
export function parseRawDiff(out: Buffer, wanted: ReadonlySet<string>): Map<string, { before: Entry | null; after: Entry | null; zero: string }> {
  const res = new Map<string, { before: Entry | null; after: Entry | null; zero: string }>();
  const fields = out.toString('utf8').split('\0');
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const meta = fields[i] ?? '';
    const path = fields[i + 1] ?? '';
    if (!meta.startsWith(':')) continue;
    if (!wanted.has(path)) continue;
    const [oldMode = '', newMode = '', oldOid = '', newOid = ''] = meta.slice(1).split(' ');
    res.set(path, {
      before: isZeroMode(oldMode) ? null : { mode: oldMode, oid: oldOid },
      after: isZeroMode(newMode) ? null : { mode: newMode, oid: newOid },
      zero: '0'.repeat(oldOid.length || 40),
    });
  }
  return res;
}

/** Parse `ls-files -s -z`: "mode oid stage\tpath\0". Stage > 0 marks a conflict we never touch. */
export function parseLsFiles(out: Buffer, wanted: ReadonlySet<string>): { entries: Map<string, Entry>; conflicted: Set<string> } {
  const entries = new Map<string, Entry>();
  const conflicted = new Set<string>();
  for (const rec of out.toString('utf8').split('\0')) {
    const tab = rec.indexOf('\t');
    if (tab < 0) continue;
    const path = rec.slice(tab + 1);
    if (!wanted.has(path)) continue;
    const [mode = '', oid = '', stage = '0'] = rec.slice(0, tab).split(' ');
    if (stage !== '0') conflicted.add(path);
    else entries.set(path, { mode, oid });
  }
  return { entries, conflicted };
}
