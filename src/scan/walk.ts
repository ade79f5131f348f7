/**
 * The effectful walk of one partition folder [SCAN-1, SCAN-4]: readdir and
 * lstat only — no file is opened here. Symbolic links are reported and
 * never followed (so nothing outside the vault is ever reached); folders we
 * may not read are reported and "blocked", so what Knowledge recorded under
 * them is kept rather than mistaken for deletions; so are folders holding a
 * `.git` of their own (another repository's work tree, e.g. a submodule).
 */
import { lstatSync, readdirSync } from 'node:fs';
import { isUtf8 } from 'node:buffer';
import { isIgnoredName, isScannedFileName, isSkippedDir, pathProblem, showRawName } from './scope.js';
import type { ScanDiagnostic } from './types.js';
import type { ReadOutcome } from './read.js';

/** What the walk reads from the file system (Node's `Dirent` and `Stats` fit). */
export interface WalkEntry {
  readonly name: string;
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
}
export interface WalkStat {
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  readonly ino: number;
  /** The file's contents, when they were read ahead with its listing (prefetch.ts). */
  readonly preread?: ReadOutcome;
  isFile(): boolean;
  isSymbolicLink(): boolean;
  isDirectory(): boolean;
}
export interface WalkFs {
  readdir(abs: string): WalkEntry[];
  /** `lstat` of `abs`, the file `entry` of the folder just listed; undefined when gone. */
  lstat(abs: string, entry?: WalkEntry): WalkStat | undefined;
}

const LSTAT = { throwIfNoEntry: false } as const;

/** The file system itself. */
export const directFs: WalkFs = {
  readdir: (abs) => readdirSync(abs, { withFileTypes: true }),
  lstat: (abs) => lstatSync(abs, LSTAT),
};

/** A regular file the walk handed over: its name in its folder and its `lstat`. */
export interface WalkFile {
  readonly name: string;
  readonly st: WalkStat;
}

export interface WalkSink {
  /**
   * The regular files of one folder that a scan looks at (scanned names, in
   * scope), with their `lstat` (number stats: no BigInt or Date work per
   * file), in the order listed; once per folder listed, even when empty.
   */
  files(dir: string, files: WalkFile[]): void;
  diagnostic(d: ScanDiagnostic): void;
  /** A path the walk could not look into or through: recorded files at or under it are kept. */
  blocked(path: string): void;
}

/** Whether `abs` holds an entry named `.git` (a folder, or a file pointing at one). */
function hasGitEntry(abs: string): boolean {
  try {
    return lstatSync(`${abs}/.git`, { throwIfNoEntry: false }) !== undefined;
  } catch {
    return false;
  }
}

function errCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException).code;
}

/**
 * Walk `<vault>/<pdir>` (pdir: 'private' or 'conversations/<sid>'), listing
 * folders and stat-ing files through `fs` (prefetch.ts may have asked already).
 */
export function walkPartition(vault: string, pdir: string, sink: WalkSink, fs: WalkFs = directFs): void {
  const rootAbs = `${vault}/${pdir}`;
  let root;
  try {
    root = lstatSync(rootAbs, { throwIfNoEntry: false });
  } catch (err) {
    sink.diagnostic({ path: pdir, code: 'unreadable', reason: `cannot look at the partition folder: ${errCode(err) ?? (err as Error).message}` });
    sink.blocked(pdir);
    return;
  }
  if (!root) return;
  if (root.isSymbolicLink()) {
    sink.diagnostic({ path: pdir, code: 'symlink', reason: 'the partition folder is a symbolic link; it is not followed' });
    sink.blocked(pdir);
    return;
  }
  if (!root.isDirectory()) {
    sink.diagnostic({ path: pdir, code: 'special-file', reason: 'the partition is not a folder' });
    sink.blocked(pdir);
    return;
  }
  // A folder above the partition (conversations/) holding a repository of its own takes the partition with it.
  const segs = pdir.split('/');
  for (let i = 1; i < segs.length; i++) {
    const above = segs.slice(0, i).join('/');
    if (!hasGitEntry(`${vault}/${above}`)) continue;
    sink.diagnostic({ path: pdir, code: 'nested-repository', reason: `${above} is a Git repository of its own (it holds .git): not scanned; anything Knowledge recorded under it is kept` });
    sink.blocked(pdir);
    return;
  }
  const stack: string[] = [''];
  while (stack.length > 0) {
    const relIn = stack.pop()!;
    const relVault = relIn === '' ? pdir : `${pdir}/${relIn}`;
    const abs = `${vault}/${relVault}`;
    let entries: WalkEntry[];
    try {
      entries = fs.readdir(abs);
    } catch (err) {
      const code = errCode(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') continue; // removed while we walked: files under it are re-checked
      sink.diagnostic({ path: relVault, code: 'unreadable', reason: `cannot list this folder (${code ?? (err as Error).message}); anything Knowledge recorded under it is kept` });
      sink.blocked(relVault);
      continue;
    }
    if (entries.some((e) => e.name === '.git')) {
      // Another repository's work tree (a submodule, a clone): its files are that repository's.
      // Committed here, they would replace its gitlink in the vault's history and index [GIT-10].
      sink.diagnostic({ path: relVault, code: 'nested-repository', reason: 'a Git repository of its own (it holds .git): not scanned; anything Knowledge recorded under it is kept' });
      sink.blocked(relVault);
      continue;
    }
    let validOdd: Set<string> | null = null;
    const files: WalkFile[] = [];
    for (const listed of entries) {
      let e = listed;
      const name = e.name;
      if (name.includes('\uFFFD')) {
        // Node decodes names as UTF-8, replacing bad bytes with U+FFFD: look at the raw bytes once per folder.
        validOdd ??= oddNames(abs, relVault, sink);
        // Each valid name once: a name that is not UTF-8 may decode to the same string, and then this entry's
        // type may be that other file's. The path names only the valid one, so its type is asked of the path.
        if (!validOdd.delete(name)) continue;
        const st = lstatSync(`${abs}/${name}`, LSTAT);
        if (!st) continue;
        e = { name, isFile: () => st.isFile(), isDirectory: () => st.isDirectory(), isSymbolicLink: () => st.isSymbolicLink() };
      }
      if (isIgnoredName(name)) continue;
      const childVault = `${relVault}/${name}`;
      const childIn = relIn === '' ? name : `${relIn}/${name}`;
      if (e.isDirectory()) {
        if (!isSkippedDir(childIn)) stack.push(childIn);
        continue;
      }
      if (e.isSymbolicLink()) {
        sink.diagnostic({ path: childVault, code: 'symlink', reason: 'symbolic links are never followed or committed; anything Knowledge recorded at this path is kept' });
        sink.blocked(childVault);
        continue;
      }
      if (!isScannedFileName(name)) continue;
      if (!e.isFile()) {
        sink.diagnostic({ path: childVault, code: 'special-file', reason: 'not a regular file (FIFO, socket or device); not read' });
        sink.blocked(childVault);
        continue;
      }
      const problem = pathProblem(childVault);
      if (problem) {
        sink.diagnostic({ path: childVault, code: 'invalid-name', reason: `${problem}; not checkpointed` });
        continue;
      }
      const st = statFile(vault, childVault, sink, fs, e);
      if (st) files.push({ name, st });
    }
    sink.files(relVault, files);
  }
}

/** lstat one file the walk listed as a regular file (or report what it became). */
function statFile(vault: string, childVault: string, sink: WalkSink, fs: WalkFs, entry: WalkEntry): WalkStat | undefined {
  let st: WalkStat | undefined;
  try {
    st = fs.lstat(`${vault}/${childVault}`, entry);
  } catch (err) {
    sink.diagnostic({ path: childVault, code: 'unreadable', reason: `cannot look at this file (${errCode(err) ?? (err as Error).message})` });
    sink.blocked(childVault);
    return undefined;
  }
  if (!st) return undefined; // gone since readdir: the caller re-checks recorded files
  if (!st.isFile()) {
    // Replaced by a link or special file since readdir.
    sink.diagnostic({ path: childVault, code: st.isSymbolicLink() ? 'symlink' : 'special-file', reason: 'not a regular file; not read' });
    sink.blocked(childVault);
    return undefined;
  }
  return st;
}

/** Report names that are not valid UTF-8; return the decoded names that are valid (and merely contain U+FFFD). */
function oddNames(abs: string, relVault: string, sink: WalkSink): Set<string> {
  const valid = new Set<string>();
  let raws: Buffer[];
  try {
    raws = readdirSync(abs, { encoding: 'buffer' });
  } catch {
    return valid;
  }
  for (const raw of raws) {
    if (isUtf8(raw)) {
      valid.add(raw.toString('utf8'));
      continue;
    }
    sink.diagnostic({
      path: `${relVault}/${showRawName(raw)}`,
      code: 'invalid-name',
      reason: 'the name is not valid UTF-8; not read or checkpointed',
    });
  }
  return valid;
}
