/**
 * What Knowledge knows about the user's index between checkpoints.
 *
 * Asking git whether the index has unmerged entries [GIT-18] reads the whole
 * index (and verifies its checksum): ~15 ms at 100k entries, on every
 * checkpoint. Git writes the index by renaming a new file over it, so an
 * index whose identity (device, inode, size, modification and change time to
 * the nanosecond) has not changed since Knowledge saw it free of conflicts
 * still is: the probe is skipped then. Any write by anyone — a `git add`, a
 * merge, a `git status` refresh — gives the file a new identity, and the
 * next checkpoint asks git again. Knowledge records the index it installs
 * itself (under its own index.lock) when the index it copied was known clean.
 */
import { stat } from 'node:fs/promises';
import type { BigIntStats } from 'node:fs';
import { join } from 'node:path';

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

export function isKnownClean(gitDir: string, identity: string | null): boolean {
  return identity === 'absent' || (identity !== null && knownClean.get(gitDir) === identity);
}

export function rememberClean(gitDir: string, identity: string | null): void {
  if (identity === null || identity === 'absent') knownClean.delete(gitDir);
  else knownClean.set(gitDir, identity);
}
