/**
 * Holding the user's index lock across a checkpoint's branch move [GIT-10].
 *
 * After Knowledge moves the branch, the user's index must describe the new
 * commit before any git command of the user's reads it: a `git commit`
 * starting in between would build its tree from the old index on top of our
 * commit and silently drop the checkpoint's files from the tip. Git itself
 * serialises index writers with `index.lock`, so Knowledge takes that lock
 * (O_EXCL, like git) before moving the branch, moves the branch, writes the
 * new index beside the lock, installs it and only then releases the lock. A user's git command in that window fails with git's ordinary
 * "index.lock exists" message and can simply be run again.
 *
 * The lock file carries a marker naming the Knowledge process that holds it.
 * A lock left by a Knowledge process that was killed (its pid is gone) is
 * Knowledge's own crash leftover: the next attempt takes it over (one rename,
 * so the lock never disappears while the index may still be behind the
 * branch) and releases it once the index is updated; a lock without that
 * marker is never touched [GIT-19]. While the lock is held, SIGINT, SIGTERM
 * and SIGHUP wait for its release (or abandon) in the CLI (src/interrupt.ts):
 * Ctrl-C during a checkpoint lets the index catch up with the branch and the
 * lock go before the process ends. (Between our check that it is stale and
 * the rename, a user could delete it by hand and a git command take it anew:
 * a window of one system call that no file operation can close.)
 */
import { copyFile, link, open, readlink, realpath, rename, unlink, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { processAlive, processStartTicks } from '../process.js';
import { pendingCodeOfErrno } from './runner.js';
import { linkUnsupported, readRegular } from '../fsutil.js';
import { holdSignals } from '../interrupt.js';

const MARKER = 'knowledge-index-lock';

/** The files of an index update: git's index, its lock, and Knowledge's own beside them. */
export interface IndexFiles {
  /** The file git reads and writes as the index. */
  index: string;
  /** Git's lock on it: `<index>.lock`. */
  lock: string;
  /** Knowledge's new index, written beside the index (so one rename installs it). */
  temp: string;
  /** Knowledge's marker text, staged beside the lock and hard-linked into place. */
  marker: string;
}

/**
 * Where git keeps the index of `gitDir` and takes its lock. `.git/index` may be
 * a symbolic link: git follows it (lockfile.c `resolve_symlink`: at most five
 * links, a relative one read from the link's folder, the target need not
 * exist), locks `<target>.lock` and renames its new index onto the target, so
 * the link stays. Knowledge must lock the same file, or a git command of the
 * user's and a checkpoint would write the index at once, and must write where
 * git would, or the link is replaced by a file.
 */
export async function indexFiles(gitDir: string): Promise<IndexFiles> {
  let index = join(gitDir, 'index');
  for (let depth = 0; depth < 5; depth++) {
    let target: string;
    try {
      target = await readlink(index);
    } catch {
      break; // not a link (or nothing there): this is the file
    }
    // Joined as text, as git does: `..` is left for the kernel to resolve through the real folders.
    index = isAbsolute(target) ? target : `${dirname(index)}/${target}`;
  }
  // Beside the index as text too: `join` would resolve a `..` after a linked folder elsewhere than the kernel does.
  const folder = dirname(index);
  return { index, lock: `${index}.lock`, temp: `${folder}/knowledge-index.tmp`, marker: `${folder}/knowledge-index-lock.marker` };
}

/** A lock's path as messages show it: `.git/index.lock`, or where a linked index's lock is. */
export function shownLockPath(gitDir: string, lock: string): string {
  const inside = relative(gitDir, lock);
  return inside.startsWith('..') || isAbsolute(inside) ? resolve(lock) : join('.git', inside);
}

export interface HeldIndexLock {
  /** The index file to write the new entries into (GIT_INDEX_FILE), once `copy` made it. */
  temp: string;
  /** Copy the user's index (which nobody else may write while we hold the lock) to `temp`. */
  copy(): Promise<{ ok: true } | { ok: false; reason: string }>;
  /** Move the prepared index into place, then release the lock. */
  install(): Promise<void>;
  /** Release the lock without changing the index. */
  release(): Promise<void>;
  /**
   * Whether this lock was taken over from a killed process or from an index
   * update this process still owes: the index may be behind the branch, so
   * the lock must not simply be released (`abandon`).
   */
  readonly tookOver: boolean;
  /**
   * Leave the lock in place, held for an index update that failed after the
   * branch moved: the index is still behind the branch, and released now, a
   * user's `git commit` would record the checkpoint's files as deleted. The
   * next index update (this process's or, once it has ended, any Knowledge
   * process's) takes it over like a killed process's lock.
   */
  abandon(): Promise<void>;
}

/** Locks this process left held for an index update still owed (`abandon`): its own, yet stale. */
const abandoned = new Set<string>();

export type IndexLockResult = { ok: true; lock: HeldIndexLock } | { ok: false; code: 'locked' | ReturnType<typeof pendingCodeOfErrno>; reason: string };

/** The pending code of a failure to create or take over the lock file. */
const lockFailureCode = pendingCodeOfErrno;

function markerText(): string {
  return `${MARKER} ${process.pid} ${processStartTicks(process.pid) ?? '-'}\n`;
}

/** A lock whose marker names a process that no longer runs: ours, left by a crash. */
export async function isOwnStaleLock(lockPath: string): Promise<boolean> {
  let text: string;
  try {
    text = await readRegular(lockPath, 'utf8');
  } catch {
    return false;
  }
  const m = new RegExp(`^${MARKER} (\\d+) (\\S+)\\n$`).exec(text);
  if (!m) return false;
  const pid = Number(m[1]);
  // This very process (same pid and start time): stale only where it left the lock for an update still owed.
  // The same pid with another start time is a killed process whose pid this one was given again.
  if (text === markerText()) return abandoned.has(await realpath(lockPath).catch(() => lockPath));
  return !processAlive(pid, m[2] === '-' ? null : m[2]!);
}

/**
 * Remove Knowledge's own index lock left by a killed Knowledge process (never
 * anyone else's). Only where the index is known to be up to date: a lock that
 * may cover an index still to be updated is taken over instead (holdIndexLock).
 */
export async function clearOwnStaleLock(gitDir: string): Promise<void> {
  const files = await indexFiles(gitDir);
  if (await isOwnStaleLock(files.lock)) {
    await unlink(files.marker).catch(() => undefined);
    await unlink(files.temp).catch(() => undefined);
    await unlink(`${files.temp}.lock`).catch(() => undefined);
    await unlink(files.lock).catch(() => undefined);
  }
}

/**
 * Create `index.lock` (O_EXCL semantics, like git) so that it never exists
 * without its marker: the marker is written to a file of our own first and
 * hard-linked into place (link fails with EEXIST like O_EXCL). Created empty
 * and then written, a process killed in between would leave an empty lock
 * that no later run may remove. Where hard links are not supported, the
 * lock is created and written in place.
 */
async function createWithMarker(staged: string, lockPath: string): Promise<void> {
  await writeFile(staged, markerText(), { mode: 0o644 });
  try {
    await link(staged, lockPath);
    return;
  } catch (err) {
    if (!linkUnsupported(err)) throw err;
  } finally {
    await unlink(staged).catch(() => undefined);
  }
  const fh = await open(lockPath, 'wx', 0o644);
  try {
    await fh.writeFile(markerText());
  } finally {
    await fh.close();
  }
}

/** Replace a stale lock of ours with one naming this process, atomically (rename over it). */
async function takeOver(staged: string, lockPath: string): Promise<void> {
  await writeFile(staged, markerText(), { mode: 0o644 });
  try {
    // Still stale (the marker's process is gone) and so nobody else's: only another
    // Knowledge process would take it over, and the store's writer lock keeps those out.
    await rename(staged, lockPath);
  } finally {
    await unlink(staged).catch(() => undefined);
  }
}

export async function holdIndexLock(gitDir: string): Promise<IndexLockResult> {
  const { index: indexPath, lock: lockPath, temp, marker } = await indexFiles(gitDir);
  let tookOver = false;
  try {
    await createWithMarker(marker, lockPath);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EEXIST') return { ok: false, code: lockFailureCode(err), reason: `cannot create ${lockPath}: ${(err as Error).message}` };
    if (!(await isOwnStaleLock(lockPath))) {
      return { ok: false, code: 'locked', reason: `${shownLockPath(gitDir, lockPath)} exists: another git process is running, or it crashed and left the lock; remove it yourself if stale, then retry` };
    }
    // Left by a killed Knowledge process, maybe after it moved the branch and
    // before the index followed: taken over in one rename, never removed
    // first, so no git command of the user's can take the lock in between
    // and read that old index against the new tip.
    tookOver = true;
    try {
      await takeOver(marker, lockPath);
    } catch (e) {
      return { ok: false, code: lockFailureCode(e), reason: `cannot take over ${lockPath}: ${(e as Error).message}` };
    }
  }
  // Until the lock is let go (released or abandoned), a signal waits: the index may be behind the branch meanwhile.
  const letSignalsGo = holdSignals();
  // Where the lock is, resolved now while it surely exists: abandon() and release() may run while the vault is away.
  const lockReal = await realpath(lockPath).catch(() => lockPath);
  abandoned.delete(lockReal);
  // Ours while we hold index.lock: a temp index, and git's lock on it, left by a killed run
  // (update-index would otherwise refuse that lock forever).
  await unlink(temp).catch(() => undefined);
  await unlink(`${temp}.lock`).catch(() => undefined);
  const mine = markerText();
  const release = async () => {
    try {
      await unlink(temp).catch(() => undefined);
      // Git never replaces a lock it did not take (O_EXCL), but anything else
      // might: remove the lock only while it still carries our marker.
      const text = await readRegular(lockPath, 'utf8').catch(() => null);
      if (text === mine) await unlink(lockPath).catch(() => undefined);
      // Not readable (the vault moved away for a moment): it may still be there when the vault is back. Given up,
      // this process takes it over at its next update instead of waiting on itself for ever (isOwnStaleLock still
      // requires our marker).
      else if (text === null) abandoned.add(lockReal);
    } finally {
      letSignalsGo();
    }
  };
  return {
    ok: true,
    lock: {
      temp,
      async copy() {
        try {
          await unlink(temp).catch(() => undefined);
          await copyFile(indexPath, temp);
        } catch (err) {
          // No index yet: git creates the temp file from nothing.
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return { ok: false, reason: `cannot read the index: ${(err as Error).message}` };
        }
        return { ok: true };
      },
      async install() {
        try {
          await rename(temp, indexPath);
        } catch (err) {
          // No new index was written (nothing to change): keep the user's.
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err; // the caller abandons the lock
        }
        await release();
      },
      release,
      tookOver,
      async abandon() {
        try {
          await unlink(temp).catch(() => undefined);
          // Noted by where it was, without reading it (the vault may be away just now): isOwnStaleLock takes it for
          // stale only while it carries this process's marker and no work holds it.
          abandoned.add(lockReal);
        } finally {
          letSignalsGo();
        }
      },
    },
  };
}
