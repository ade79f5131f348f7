/**
 * Listing and `lstat` of large partitions on worker threads [SCAN-4].
 *
 * An unchanged rescan is almost all `readdir` and `lstat` system calls; one
 * thread makes them one after the other (100k files: ~0.35 s here), while
 * `git status` spreads its `lstat`s over threads. Before the walk, workers
 * list the partition folders and `lstat` every regular file in them, in
 * parallel; the walk (walk.ts) then runs exactly as before over those
 * answers (`WalkFs`), asking the file system itself for anything the
 * workers did not see. The workers' own folder rule only saves work: the
 * walk alone decides what is looked at.
 *
 * The workers are started with the first large scan and kept, unreferenced
 * (they never keep a process alive), until 30 s after their last use.
 * Anything going wrong with them means the plain walk.
 */
import { availableParallelism } from 'node:os';
import { lstatSync, readdirSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { IGNORED_RE, isSkippedDir } from './scope.js';

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
  readonly ino: number;
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

/** Below this many recorded files, the plain walk is as fast. */
export const PREFETCH_MIN_FILES = 10_000;
const IDLE_MS = 30_000;
/** Folders handed out per worker (more than one each, so uneven folders even out). */
const TASKS_PER_WORKER = 8;

// Entry types and stat kinds in the workers' answers.
const T_FILE = 1;
const T_DIR = 2;
const T_LINK = 3;
const K_GONE = -1;
const K_ERROR = -2;

/**
 * One worker's walk of its folders (CommonJS, evaluated as the worker's
 * source: no imports of ours, so it runs the same from dist/ and src/).
 * For each folder listed: names (joined by NUL), entry types, and for each
 * regular file [kind, size, mtimeMs, ino] — kind 1 file, 2 link, 3 folder,
 * 4 other, -1 gone, -2 error (code in `errors`).
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { readdirSync, lstatSync } = require('node:fs');
parentPort.on('message', (job) => {
  const ignored = new RegExp(job.ignored, job.ignoredFlags);
  const skip = (relIn) => {
    const segs = relIn.split('/');
    if (segs.some((s) => ignored.test(s))) return true;
    if (segs[0] !== 'evidence' || segs.length < 2) return false;
    return segs.length >= 3 || !/^[0-9a-f]{2}$/.test(segs[1]);
  };
  const out = [];
  for (const task of job.tasks) {
    const stack = [task.relIn];
    while (stack.length > 0) {
      const relIn = stack.pop();
      const rel = relIn === '' ? task.pdir : task.pdir + '/' + relIn;
      const abs = job.vault + '/' + rel;
      let entries;
      try {
        entries = readdirSync(abs, { withFileTypes: true });
      } catch (e) {
        out.push({ abs, code: String(e && e.code || e), names: '', types: null, stats: null, errors: null });
        continue;
      }
      const types = new Uint8Array(entries.length);
      const stats = new Float64Array(entries.length * 4);
      let errors = null;
      const names = [];
      for (let i = 0; i < entries.length; i++) {
        const e = entries[i];
        names.push(e.name);
        if (e.isFile()) {
          types[i] = ${T_FILE};
          let st;
          try {
            st = lstatSync(abs + '/' + e.name, { throwIfNoEntry: false });
          } catch (err) {
            stats[i * 4] = ${K_ERROR};
            (errors ??= {})[i] = String(err && err.code || err);
            continue;
          }
          if (!st) { stats[i * 4] = ${K_GONE}; continue; }
          stats[i * 4] = st.isFile() ? 1 : st.isSymbolicLink() ? 2 : st.isDirectory() ? 3 : 4;
          stats[i * 4 + 1] = st.size;
          stats[i * 4 + 2] = st.mtimeMs;
          stats[i * 4 + 3] = st.ino;
        } else if (e.isDirectory()) {
          types[i] = ${T_DIR};
          const child = relIn === '' ? e.name : relIn + '/' + e.name;
          if (task.recursive && !skip(child)) stack.push(child);
        } else if (e.isSymbolicLink()) types[i] = ${T_LINK};
      }
      out.push({ abs, code: null, names: names.join('\\0'), types, stats, errors });
    }
  }
  parentPort.postMessage(out);
});
`;

interface Listing {
  abs: string;
  code: string | null;
  names: string;
  types: Uint8Array | null;
  stats: Float64Array | null;
  errors: Record<number, string> | null;
}

class PrefetchedEntry implements WalkEntry {
  constructor(readonly name: string, private readonly type: number, readonly listing: Listing, readonly index: number) {}
  isFile(): boolean {
    return this.type === T_FILE;
  }
  isDirectory(): boolean {
    return this.type === T_DIR;
  }
  isSymbolicLink(): boolean {
    return this.type === T_LINK;
  }
}

class PrefetchedStat implements WalkStat {
  constructor(private readonly kind: number, readonly size: number, readonly mtimeMs: number, readonly ino: number) {}
  isFile(): boolean {
    return this.kind === 1;
  }
  isSymbolicLink(): boolean {
    return this.kind === 2;
  }
  isDirectory(): boolean {
    return this.kind === 3;
  }
}

function errorWithCode(code: string, abs: string): Error {
  return Object.assign(new Error(`${code}: ${abs}`), { code });
}

/** A `WalkFs` answering from the workers' listings, and from the file system for the rest. */
export class PrefetchedFs implements WalkFs {
  private readonly listings = new Map<string, Listing>();

  constructor(listings: Iterable<Listing>) {
    for (const l of listings) this.listings.set(l.abs, l);
  }

  /** Folders the workers listed (tests). */
  get size(): number {
    return this.listings.size;
  }

  readdir(abs: string): WalkEntry[] {
    const l = this.listings.get(abs);
    if (!l) return directFs.readdir(abs);
    this.listings.delete(abs); // each folder is walked once; a second look asks the file system
    if (l.code !== null) throw errorWithCode(l.code, abs);
    if (l.names === '') return [];
    return l.names.split('\0').map((name, i) => new PrefetchedEntry(name, l.types![i]!, l, i));
  }

  lstat(abs: string, entry?: WalkEntry): WalkStat | undefined {
    if (!(entry instanceof PrefetchedEntry) || !entry.isFile()) return directFs.lstat(abs);
    const s = entry.listing.stats!;
    const at = entry.index * 4;
    const kind = s[at]!;
    if (kind === K_GONE) return undefined;
    if (kind === K_ERROR) throw errorWithCode(entry.listing.errors?.[entry.index] ?? 'EIO', abs);
    return new PrefetchedStat(kind, s[at + 1]!, s[at + 2]!, s[at + 3]!);
  }
}

let pool: Worker[] | null = null;
let idleTimer: NodeJS.Timeout | null = null;

function endPool(): void {
  const p = pool;
  pool = null;
  if (idleTimer) clearTimeout(idleTimer);
  idleTimer = null;
  for (const w of p ?? []) void w.terminate();
}

function workers(): Worker[] {
  if (idleTimer) clearTimeout(idleTimer);
  idleTimer = null;
  if (!pool) {
    const n = Math.min(4, availableParallelism());
    pool = Array.from({ length: n }, () => {
      const w = new Worker(WORKER_SOURCE, { eval: true });
      w.unref();
      w.on('error', () => endPool());
      return w;
    });
  }
  return pool;
}

/** Ask one worker to walk `tasks`; rejects when it fails or exits. */
function ask(w: Worker, job: unknown): Promise<Listing[]> {
  return new Promise((resolve, reject) => {
    const done = () => {
      w.off('message', onMessage);
      w.off('error', onError);
      w.off('exit', onExit);
      w.unref();
    };
    const onMessage = (m: Listing[]) => {
      done();
      resolve(m);
    };
    const onError = (e: Error) => {
      done();
      reject(e);
    };
    const onExit = (code: number) => {
      done();
      reject(new Error(`stat worker exited (${code})`));
    };
    w.on('message', onMessage);
    w.on('error', onError);
    w.on('exit', onExit);
    w.ref(); // keep the process alive while it works for us
    w.postMessage(job);
  });
}

/**
 * List the partition folders `pdirs` of `vault` on worker threads, or null
 * when that is not worth it (one core) or fails. The caller walks with the
 * result; see the header.
 */
export async function prefetchPartitions(vault: string, pdirs: readonly string[]): Promise<PrefetchedFs | null> {
  if (availableParallelism() < 2) return null;
  let ws: Worker[];
  try {
    ws = workers();
  } catch {
    return null;
  }
  // Hand out folders a level or two down (e.g. private/pages/<hh>), so each
  // worker gets several: found here breadth-first until there are enough.
  // A folder opened here is still listed by a worker, without its subfolders
  // (they are tasks of their own).
  const tasks: Array<{ pdir: string; relIn: string; recursive: boolean }> = [];
  let frontier = pdirs.map((pdir) => ({ pdir, relIn: '', recursive: true }));
  const want = ws.length * TASKS_PER_WORKER;
  for (let depth = 0; depth < 3 && frontier.length > 0 && frontier.length < want; depth++) {
    const next: typeof frontier = [];
    for (const t of frontier) {
      const abs = t.relIn === '' ? `${vault}/${t.pdir}` : `${vault}/${t.pdir}/${t.relIn}`;
      let dirs: string[];
      try {
        dirs = readdirSync(abs, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
      } catch {
        continue; // the walk reports it
      }
      tasks.push({ ...t, recursive: false });
      // This folder's own files are left to the walk; its subfolders go on.
      for (const d of dirs) {
        const relIn = t.relIn === '' ? d : `${t.relIn}/${d}`;
        if (!isSkippedDir(relIn)) next.push({ pdir: t.pdir, relIn, recursive: true });
      }
    }
    frontier = next;
  }
  tasks.push(...frontier);
  if (tasks.length === 0) return null;
  const shares: Array<typeof tasks> = ws.map(() => []);
  tasks.forEach((t, i) => shares[i % ws.length]!.push(t));
  try {
    const answers = await Promise.all(
      ws.map((w, i) => (shares[i]!.length === 0 ? Promise.resolve([]) : ask(w, { vault, tasks: shares[i], ignored: IGNORED_RE.source, ignoredFlags: IGNORED_RE.flags }))),
    );
    return new PrefetchedFs(answers.flat());
  } catch {
    endPool();
    return null;
  } finally {
    if (pool && !idleTimer) {
      idleTimer = setTimeout(endPool, IDLE_MS);
      idleTimer.unref();
    }
  }
}

/** End the workers now (tests; a process may also simply exit). */
export function endPrefetchWorkers(): void {
  endPool();
}
