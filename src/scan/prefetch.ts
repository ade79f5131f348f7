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
 * The walk does not wait for all of it: each worker sends its listings as it
 * goes, in the order the walk will want them (both walk depth-first the same
 * way), and the walk takes them as they come — `receiveMessageOnPort`, with
 * `Atomics.wait` on a shared counter while the folder it needs is on its way.
 * So listing and walking overlap. A folder no worker will send is read from
 * the file system once the workers are done; if no answer comes for
 * STALL_MS, the rest of the walk asks the file system itself.
 *
 * A baseline also has every file read: for a partition with nothing recorded
 * (its first scan), the workers read each Markdown and YAML file they list
 * with the scan's own reader (read.ts, the same source evaluated in the
 * worker) and send its bytes, hash and fingerprint with the listing, as one
 * buffer per folder, transferred. The walk then hands the file and its read to
 * observe.ts, which stages it as if it had read it itself (100k files: ~1.3 s
 * on two workers against 2.3-3.7 s on one thread). Read-ahead stops while
 * READ_AHEAD_BYTES sent are not yet taken by the walk (the file is then only
 * `lstat`ed, and observe.ts reads it), so memory stays bounded and no worker
 * ever waits for the walk. Anything but a clean read ('ok') is left to the
 * walk as well: the outcome is the walk's own.
 *
 * The workers are started with the first large scan and kept, unreferenced
 * (they never keep a process alive), until 30 s after their last use.
 * Anything going wrong with them means the plain walk.
 */
import { availableParallelism } from 'node:os';
import { lstatSync, readdirSync } from 'node:fs';
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { IGNORED_RE, isSkippedDir, SCANNED_EXT_RE } from './scope.js';
import { directFs, type WalkEntry, type WalkFs, type WalkStat } from './walk.js';
import { stableReader, type ReadOutcome } from './read.js';

/** Below this many recorded files, the plain walk is as fast. */
export const PREFETCH_MIN_FILES = 10_000;

/**
 * Whether a scan of partitions holding `recorded[i]` recorded files each
 * lists on worker threads, and which of them it reads ahead: a large rescan
 * is mostly readdir and lstat; a baseline (nothing recorded) mostly reading
 * every file. Null: the plain walk.
 */
export function listingWanted(recorded: readonly number[]): { readAhead: boolean[] } | null {
  const readAhead = recorded.map((c) => c === 0);
  const large = recorded.reduce((n, c) => n + c, 0) >= PREFETCH_MIN_FILES;
  return large || readAhead.some(Boolean) ? { readAhead } : null;
}
const IDLE_MS = 30_000;
/** Folders handed out per worker (more than one each, so uneven folders even out). */
const TASKS_PER_WORKER = 8;
/** A worker sends its listings once this many entries are ready (and at the end of each task). */
const SEND_ENTRIES = 512;
/** With no word from any worker for this long, the walk stops waiting for them. */
const STALL_MS = 5_000;
/** Read-ahead pauses while this many bytes sent are not yet taken by the walk. */
export const READ_AHEAD_BYTES = 8 * 1024 * 1024;

// Entry types and stat kinds in the workers' answers.
const T_FILE = 1;
const T_DIR = 2;
const T_LINK = 3;
const K_GONE = -1;
const K_ERROR = -2;
/** Numbers per entry in a listing's stats: kind, size, mtimeMs, ctimeMs, ino. */
const STAT_WIDTH = 5;

/**
 * One worker's walk of its folders (CommonJS, evaluated as the worker's
 * source: no imports of ours, so it runs the same from dist/ and src/).
 * For each folder listed: names (joined by NUL), entry types, and for each
 * regular file [kind, size, mtimeMs, ctimeMs, ino] — kind 1 file, 2 link, 3 folder,
 * 4 other, -1 gone, -2 error (code in `errors`). Files read ahead: their
 * bytes one after the other in `pool`, and in `reads` per file read
 * [entry index, offset, length, sha256, mtimeNs, ctimeNs, ino, exec].
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { readdirSync, lstatSync } = require('node:fs');
const reader = (${stableReader.toString()})(require('node:fs'), require('node:crypto').createHash);
// Node's Stats.mtimeMs (or ctimeMs) for a time in nanoseconds (as known.ts msFromNs).
const msOf = (ns) => ns.length > 9 ? Number(ns.slice(0, -9)) * 1000 + Number(ns.slice(-9)) / 1e6 : Number(ns) / 1e6;
parentPort.on('message', (job) => {
  const ignored = new RegExp(job.ignored, job.ignoredFlags);
  const scanned = new RegExp(job.scanned, job.scannedFlags);
  const signal = new Int32Array(job.signal);
  const inFlight = new Int32Array(job.inFlight);
  const stopped = () => Atomics.load(signal, 1) !== 0; // the walk is over, or gave up on this listing
  const skip = (relIn) => {
    const segs = relIn.split('/');
    if (segs.some((s) => ignored.test(s))) return true;
    if (segs[0] !== 'evidence' || segs.length < 2) return false;
    return segs.length >= 3 || !/^[0-9a-f]{2}$/.test(segs[1]);
  };
  let out = [];
  let entries = 0;
  const send = (done) => {
    job.port.postMessage({ listings: out, done }, out.filter((l) => l.pool).map((l) => l.pool));
    out = [];
    entries = 0;
    Atomics.add(signal, 0, 1);
    Atomics.notify(signal, 0);
  };
  try {
    for (const task of job.tasks) {
      const stack = [task.relIn];
      while (stack.length > 0 && !stopped()) {
        const relIn = stack.pop();
        const rel = relIn === '' ? task.pdir : task.pdir + '/' + relIn;
        const abs = job.vault + '/' + rel;
        Atomics.add(signal, 2, 1);
        let list;
        try {
          list = readdirSync(abs, { withFileTypes: true });
        } catch (e) {
          out.push({ abs, code: String((e && e.code) || e), names: '', types: null, stats: null, errors: null });
          continue;
        }
        // Another repository's work tree (walk.ts): listed, so the walk sees its .git, and no deeper.
        const nested = list.some((e) => e.name === '.git');
        const types = new Uint8Array(list.length);
        const stats = new Float64Array(list.length * ${STAT_WIDTH});
        let errors = null;
        const names = [];
        const reads = [];
        const bytes = [];
        let poolLength = 0;
        for (let i = 0; i < list.length; i++) {
          const e = list[i];
          names.push(e.name);
          if (e.isFile()) {
            types[i] = ${T_FILE};
            if (task.readAhead && !nested && scanned.test(e.name) && !ignored.test(e.name) && !e.name.includes('\uFFFD') && Atomics.load(inFlight, 0) < job.readAheadBytes) {
              const r = reader.read(abs + '/' + e.name);
              if (r.kind === 'ok') {
                const at = i * ${STAT_WIDTH};
                stats[at] = 1;
                stats[at + 1] = r.size;
                stats[at + 2] = msOf(r.mtimeNs);
                stats[at + 3] = msOf(r.ctimeNs);
                stats[at + 4] = Number(r.ino);
                reads.push([i, poolLength, r.size, r.sha256, r.mtimeNs, r.ctimeNs, r.ino, r.exec]);
                bytes.push(r.bytes);
                poolLength += r.size;
                Atomics.add(inFlight, 0, r.size);
                continue;
              }
            }
            const at = i * ${STAT_WIDTH};
            let st;
            try {
              st = lstatSync(abs + '/' + e.name, { throwIfNoEntry: false });
            } catch (err) {
              stats[at] = ${K_ERROR};
              (errors ??= {})[i] = String((err && err.code) || err);
              continue;
            }
            if (!st) { stats[at] = ${K_GONE}; continue; }
            stats[at] = st.isFile() ? 1 : st.isSymbolicLink() ? 2 : st.isDirectory() ? 3 : 4;
            stats[at + 1] = st.size;
            stats[at + 2] = st.mtimeMs;
            stats[at + 3] = st.ctimeMs;
            stats[at + 4] = st.ino;
          } else if (e.isDirectory()) {
            types[i] = ${T_DIR};
            const child = relIn === '' ? e.name : relIn + '/' + e.name;
            if (task.recursive && !nested && !skip(child)) stack.push(child);
          } else if (e.isSymbolicLink()) types[i] = ${T_LINK};
        }
        let pool = null;
        if (reads.length > 0) {
          // A buffer of its own (Buffer.concat may use Node's shared pool): it is transferred.
          const all = new Uint8Array(poolLength);
          for (let k = 0; k < bytes.length; k++) all.set(bytes[k], reads[k][1]);
          pool = all.buffer;
        }
        out.push({ abs, code: null, names: names.join('\\0'), types, stats, errors, reads: reads.length > 0 ? reads : null, pool });
        entries += list.length + 1;
        if (entries >= ${SEND_ENTRIES}) send(false);
      }
      send(false);
    }
  } finally {
    send(true);
    job.port.close();
  }
});
`;

/** A file read ahead: [entry index, offset in the listing's pool, length, sha256, mtimeNs, ctimeNs, ino, exec]. */
type ReadAhead = [number, number, number, string, string, string, string, boolean];

interface Listing {
  abs: string;
  code: string | null;
  names: string;
  types: Uint8Array | null;
  stats: Float64Array | null;
  errors: Record<number, string> | null;
  reads?: ReadAhead[] | null;
  pool?: ArrayBuffer | null;
}

class PrefetchedEntry implements WalkEntry {
  constructor(
    readonly name: string,
    private readonly type: number,
    readonly listing: Listing,
    readonly index: number,
    /** Its read-ahead, if any. */
    readonly read?: ReadAhead,
  ) {}
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
  constructor(
    private readonly kind: number,
    readonly size: number,
    readonly mtimeMs: number,
    readonly ctimeMs: number,
    readonly ino: number,
    readonly preread?: ReadOutcome,
  ) {}
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
  private open: number;

  /**
   * `ports`: one per worker, each sending `{ listings, done }` messages and
   * counting them in `signal[0]`. Without ports: the listings given.
   */
  constructor(
    listings: Iterable<Listing>,
    private readonly ports: MessagePort[] = [],
    private readonly signal = new Int32Array(new SharedArrayBuffer(4)),
    private readonly stallMs = STALL_MS,
    /** Bytes read ahead and not yet taken by the walk (shared with the workers). */
    private readonly inFlight = new Int32Array(new SharedArrayBuffer(4)),
  ) {
    for (const l of listings) this.listings.set(l.abs, l);
    this.open = ports.length;
  }

  /** Folders listed and not yet walked (tests). */
  get size(): number {
    return this.listings.size;
  }

  /** Wait until every worker has sent everything (tests). */
  finish(): void {
    while (this.open > 0) this.next();
  }

  /** Take every message that has arrived; false when there was none. */
  private pump(): boolean {
    let got = false;
    for (const port of this.ports) {
      for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) {
        got = true;
        const msg = m.message as { listings: Listing[]; done: boolean };
        for (const l of msg.listings) this.listings.set(l.abs, l);
        if (msg.done) this.open--;
      }
    }
    return got;
  }

  /** Block until some worker sends something (or give up on them after STALL_MS). */
  private next(): void {
    const seen = Atomics.load(this.signal, 0);
    if (this.pump()) return;
    if (Atomics.wait(this.signal, 0, seen, this.stallMs) === 'timed-out' && !this.pump()) this.close();
  }

  /** Stop listening: what the workers still send is dropped (the walk is over, or gave up on them), and they stop. */
  close(): void {
    if (this.signal.length > 1) Atomics.store(this.signal, 1, 1);
    this.open = 0;
    for (const port of this.ports) port.close();
  }

  /** The listing of `abs`, waiting for it while some worker may still send it. */
  private listing(abs: string): Listing | undefined {
    for (;;) {
      const l = this.listings.get(abs);
      if (l || this.open === 0) return l;
      this.next();
    }
  }

  /** Folders read from the file system because no worker listed them (tests). */
  directReads = 0;
  /** Files handed to the walk with their contents read ahead. */
  prereads = 0;

  readdir(abs: string): WalkEntry[] {
    const l = this.listing(abs);
    if (!l) {
      this.directReads++;
      return directFs.readdir(abs);
    }
    this.listings.delete(abs); // each folder is walked once; a second look asks the file system
    if (l.pool) Atomics.sub(this.inFlight, 0, l.pool.byteLength);
    if (l.code !== null) throw errorWithCode(l.code, abs);
    if (l.names === '') return [];
    const reads = new Map((l.reads ?? []).map((r) => [r[0], r]));
    return l.names.split('\0').map((name, i) => new PrefetchedEntry(name, l.types![i]!, l, i, reads.get(i)));
  }

  lstat(abs: string, entry?: WalkEntry): WalkStat | undefined {
    if (!(entry instanceof PrefetchedEntry) || !entry.isFile()) return directFs.lstat(abs);
    const s = entry.listing.stats!;
    const at = entry.index * STAT_WIDTH;
    const kind = s[at]!;
    if (kind === K_GONE) return undefined;
    if (kind === K_ERROR) throw errorWithCode(entry.listing.errors?.[entry.index] ?? 'EIO', abs);
    const r = entry.read;
    // A view of the folder's transferred buffer: observe.ts stages it (a copy) and lets go.
    const preread: ReadOutcome | undefined = r && entry.listing.pool
      ? { kind: 'ok', bytes: Buffer.from(entry.listing.pool, r[1], r[2]), sha256: r[3], size: r[2], mtimeNs: r[4], ctimeNs: r[5], ino: r[6], exec: r[7] }
      : undefined;
    if (preread) this.prereads++;
    return new PrefetchedStat(kind, s[at + 1]!, s[at + 2]!, s[at + 3]!, s[at + 4]!, preread);
  }
}

let pool: Worker[] | null = null;
let idleTimer: NodeJS.Timeout | null = null;

function endPool(): void {
  ahead = null;
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
      // execArgv: [] — the source is CommonJS even in a process started with --input-type=module.
      const w = new Worker(WORKER_SOURCE, { eval: true, execArgv: [] });
      w.unref();
      w.on('error', () => endPool());
      return w;
    });
  }
  return pool;
}

/**
 * Start listing the partition folders `pdirs` of `vault` on worker threads,
 * or return null when that is not worth it (one core) or fails. The caller
 * walks with the result; see the header. The files of partition folders in
 * `readAhead` are read as well. A listing of exactly these folders started
 * ahead (prefetchAhead), without read-ahead, is taken over instead.
 */
export function prefetchPartitions(
  vault: string,
  pdirs: readonly string[],
  readAhead: readonly string[] = [],
  readAheadBytes = READ_AHEAD_BYTES,
): PrefetchedFs | null {
  const early = ahead;
  ahead = null;
  if (early && early.key === aheadKey(vault, pdirs) && readAhead.length === 0 && performance.now() - early.at < AHEAD_MS) return early.fs;
  early?.fs.close();
  return startPrefetch(vault, pdirs, readAhead, readAheadBytes);
}

/** A listing started ahead of the scan that walks it (prefetchAhead). */
let ahead: { key: string; fs: PrefetchedFs; at: number } | null = null;
/** A listing started ahead is taken over only this soon after it started (ms). */
const AHEAD_MS = 5_000;
const aheadKey = (vault: string, pdirs: readonly string[]) => [vault, ...pdirs].join('\0');

/**
 * Start listing `pdirs` now, for a scan of exactly these partition folders
 * that is about to start in this process (its prefetchPartitions takes it
 * over): the CLI calls this before it loads the rest of Knowledge and opens
 * the store, so the listing runs meanwhile (src/scan/ahead.ts). A listing
 * taken earlier than the walk is what the walk already copes with: a folder
 * changed since it was listed is a change seen late, found by this scan's
 * re-checks or by the next scan.
 */
export function prefetchAhead(vault: string, pdirs: readonly string[]): void {
  stopListingAhead();
  const fs = startPrefetch(vault, pdirs, [], READ_AHEAD_BYTES);
  if (fs) ahead = { key: aheadKey(vault, pdirs), fs, at: performance.now() };
}

/** Stop a listing started ahead that no scan will take over (the scan walks without workers); returns null. */
export function stopListingAhead(): null {
  ahead?.fs.close();
  ahead = null;
  return null;
}

/** The listing started ahead and not yet taken over (tests). */
export function listingAhead(): PrefetchedFs | null {
  return ahead?.fs ?? null;
}

function startPrefetch(vault: string, pdirs: readonly string[], readAhead: readonly string[], readAheadBytes: number): PrefetchedFs | null {
  if (availableParallelism() < 2) return null;
  let ws: Worker[];
  try {
    ws = workers();
  } catch {
    return null;
  }
  // Hand out folders a level or two down (e.g. private/pages/<hh>), so each
  // worker gets several: found here breadth-first until there are enough. A
  // folder opened here is still listed by a worker, without its subfolders
  // (they are tasks of their own).
  const key = (pdir: string, relIn: string) => `${pdir}\0${relIn}`;
  // A partition folder that is not a real folder (a symlink above all) is the
  // walk's to report; the workers must not follow it out of the vault.
  const real = pdirs.filter((pdir) => {
    try {
      return lstatSync(`${vault}/${pdir}`).isDirectory();
    } catch {
      return false;
    }
  });
  const opened = new Map<string, string[]>();
  let frontier = real.map((pdir) => ({ pdir, relIn: '' }));
  const want = ws.length * TASKS_PER_WORKER;
  for (let depth = 0; depth < 3 && frontier.length > 0 && frontier.length < want; depth++) {
    const next: typeof frontier = [];
    for (const t of frontier) {
      const abs = t.relIn === '' ? `${vault}/${t.pdir}` : `${vault}/${t.pdir}/${t.relIn}`;
      let dirs: string[];
      try {
        const entries = readdirSync(abs, { withFileTypes: true });
        // Another repository's work tree is listed, never below (walk.ts).
        const nested = entries.some((e) => e.name === '.git');
        dirs = nested ? [] : entries.filter((e) => e.isDirectory()).map((e) => e.name);
      } catch {
        continue; // a task of its own: a worker meets the same error and the walk reports it
      }
      const kids: string[] = [];
      for (const d of dirs) {
        const relIn = t.relIn === '' ? d : `${t.relIn}/${d}`;
        if (!isSkippedDir(relIn)) kids.push(relIn);
      }
      opened.set(key(t.pdir, t.relIn), kids);
      for (const relIn of kids) next.push({ pdir: t.pdir, relIn });
    }
    frontier = next;
  }
  // Tasks in the order the walk (walk.ts) opens folders: depth-first, the
  // last subfolder listed first. Dealt out in turn, so the walk's next
  // folder is usually the next one some worker sends.
  const tasks: Array<{ pdir: string; relIn: string; recursive: boolean; readAhead: boolean }> = [];
  const visit = (pdir: string, relIn: string): void => {
    const kids = opened.get(key(pdir, relIn));
    tasks.push({ pdir, relIn, recursive: kids === undefined, readAhead: readAhead.includes(pdir) });
    for (let i = (kids?.length ?? 0) - 1; i >= 0; i--) visit(pdir, kids![i]!);
  };
  for (const pdir of real) visit(pdir, '');
  if (tasks.length === 0) return null;
  const shares: Array<typeof tasks> = ws.map(() => []);
  tasks.forEach((t, i) => shares[i % ws.length]!.push(t));
  // [0]: messages sent; [1]: set when the listing is no longer wanted; [2]: folders listed (tests).
  const signal = new Int32Array(new SharedArrayBuffer(12));
  const inFlight = new Int32Array(new SharedArrayBuffer(4));
  const ports: MessagePort[] = [];
  try {
    ws.forEach((w, i) => {
      if (shares[i]!.length === 0) return;
      const { port1, port2 } = new MessageChannel();
      ports.push(port1);
      w.postMessage({
        vault,
        tasks: shares[i],
        ignored: IGNORED_RE.source,
        ignoredFlags: IGNORED_RE.flags,
        scanned: SCANNED_EXT_RE.source,
        scannedFlags: SCANNED_EXT_RE.flags,
        signal: signal.buffer,
        inFlight: inFlight.buffer,
        readAheadBytes,
        port: port2,
      }, [port2]);
    });
  } catch {
    for (const p of ports) p.close();
    endPool();
    return null;
  }
  if (idleTimer) clearTimeout(idleTimer);
  idleTimer = setTimeout(endPool, IDLE_MS);
  idleTimer.unref();
  return new PrefetchedFs([], ports, signal, STALL_MS, inFlight);
}

/** End the workers now (tests; a process may also simply exit). */
export function endPrefetchWorkers(): void {
  endPool();
}
