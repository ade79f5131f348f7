/**
 * What Knowledge knows about the user's index between checkpoints.
 *
 * Asking git whether the index has unmerged entries [GIT-18] reads the whole
 * index (and verifies its checksum): 50-60 ms at 100k entries (measured
 * 2026-12-06, plus starting the process), on every checkpoint. Git writes the
 * index by renaming a new file over it, so an index whose identity (device,
 * inode, size, modification and change time to the nanosecond) has not
 * changed since Knowledge saw it free of conflicts still is: the probe is
 * skipped then. Any write by anyone — a `git add`, a merge, a `git status`
 * refresh — gives the file a new identity, and the next checkpoint asks git
 * again. Knowledge records the index it installs itself (under its own
 * index.lock) when the index it copied was known clean.
 *
 * What is known is kept per process and, for a vault that has Knowledge's
 * recovery folder, in `.knowledge-history/index-clean` (never committed:
 * that folder's own .gitignore), so the next command of the CLI, a new
 * process, skips the probe as well. The file is a hint, not a record: it is
 * replaced by rename without fsync, and anything unexpected in it (torn,
 * another repository's, unreadable) only means the probe runs.
 */
import { rename, stat, unlink, writeFile } from 'node:fs/promises';
import type { BigIntStats } from 'node:fs';
import { join } from 'node:path';
import { readRegular, tempName } from '../fsutil.js';
import { historyPaths } from '../store/layout.js';

/** gitDir -> identity of an index known to hold no unmerged entries (per process). */
const knownClean = new Map<string, string>();

/**
 * Which file a path names and which version of it: git and editors replace
 * files by rename (new inode) or change them in place (new size, mtime and
 * ctime, to the nanosecond), so an unchanged identity is an unchanged file.
 */
export function fileIdentity(s: BigIntStats): string {
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
}

/** The index file's identity; 'absent' when there is none (no entries, so no conflicts). Null if it cannot be read. */
export async function indexIdentity(gitDir: string): Promise<string | null> {
  try {
    return fileIdentity(await stat(join(gitDir, 'index'), { bigint: true }));
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'absent' : null;
  }
}

/** The hint a vault holds for `gitDir`, or null. */
async function readHint(vault: string, gitDir: string): Promise<string | null> {
  try {
    const hint = JSON.parse(await readRegular(historyPaths(vault).indexClean, 'utf8')) as { gitDir?: unknown; index?: unknown };
    return hint.gitDir === gitDir && typeof hint.index === 'string' ? hint.index : null;
  } catch {
    return null;
  }
}

/**
 * Whether the index with this identity is known to hold no unmerged entries:
 * absent, or the very file this process (or, with `vault`, an earlier one)
 * saw free of conflicts.
 */
export async function isKnownClean(gitDir: string, identity: string | null, vault?: string): Promise<boolean> {
  if (identity === 'absent') return true;
  if (identity === null) return false;
  if (knownClean.get(gitDir) === identity) return true;
  if (vault === undefined || (await readHint(vault, gitDir)) !== identity) return false;
  knownClean.set(gitDir, identity);
  return true;
}

/** Remember the index with this identity as free of conflicts (with `vault`: for later processes too). */
export async function rememberClean(gitDir: string, identity: string | null, vault?: string): Promise<void> {
  if (identity === null || identity === 'absent') {
    knownClean.delete(gitDir);
    return;
  }
  knownClean.set(gitDir, identity);
  if (vault === undefined) return;
  const { indexClean: target, staging } = historyPaths(vault);
  // Staged where a store's open clears leftovers (store.ts), as installs are.
  const tmp = join(staging, tempName('index-clean'));
  try {
    await writeFile(tmp, JSON.stringify({ gitDir, index: identity }) + '\n', { flag: 'wx' });
    await rename(tmp, target);
  } catch {
    // No recovery folder (a plain repository), or it cannot be written: the next process probes.
    await unlink(tmp).catch(() => undefined);
  }
}
