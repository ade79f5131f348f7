/**
 * WAL checkpoints of a large write on another thread.
 *
 * Under WAL, SQLite copies the log back into the database file at the end of
 * the commit that makes the log pass `wal_autocheckpoint` pages, on the
 * committing thread, and fsyncs it. A 100k-file baseline scan commits
 * ~400 MiB of pages; that copy took 1.7-2.1 s of its commit (measured: the
 * same commit without it 0.6 s, and the copy then made at close 2.4 s).
 * Nothing about the commit's durability depends on it: the log itself was
 * fsync'd by the commit (synchronous=FULL).
 *
 * So a large piece of work (a scan) turns the automatic checkpoint off for
 * its connection ({@link deferCheckpoints}) and, once its big transaction
 * has committed, hands the copy to a worker thread with a connection of its
 * own (`wal_checkpoint(PASSIVE)`: it never blocks readers or writers, and
 * copies what no reader still needs), while the main thread goes on — for a
 * scan, with its Git commit. The work's end waits for the copy and turns the
 * automatic checkpoint back on; whatever the copy left (frames written
 * meanwhile) is copied by the next commit, as before. Any failure of the
 * worker only means the copy is made later, by SQLite as usual.
 */
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import type { DB } from './db.js';

/** Below this much log, the copy is left to the next commit, as SQLite would make it. */
export const BACKGROUND_MIN_WAL_BYTES = 32 * 1024 * 1024;

// CommonJS, evaluated as the worker's source: the worker cannot import this
// package's modules under every loader (tests run TypeScript sources).
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
let out;
try {
  const Database = require(workerData.driver);
  const db = new Database(workerData.file, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    db.pragma('synchronous = FULL');
    const r = db.pragma('wal_checkpoint(PASSIVE)')[0];
    out = { ok: true, busy: r.busy, log: r.log, checkpointed: r.checkpointed };
  } finally {
    db.close();
  }
} catch (e) {
  out = { ok: false, reason: String((e && e.message) || e) };
}
parentPort.postMessage(out);
`;

export type CopyOutcome = { ok: true; busy: number; log: number; checkpointed: number } | { ok: false; reason: string };

export interface DeferredCheckpoints {
  /**
   * The big transaction has committed: copy the log on a worker thread when
   * it is large (else leave it to the next commit). Call at most once.
   */
  copyInBackground(): void;
  /** Wait for the copy (if any) and turn the automatic checkpoint back on. Never rejects. */
  end(): Promise<CopyOutcome | null>;
}

let driverPath: string | null = null;
function driver(): string {
  driverPath ??= createRequire(import.meta.url).resolve('better-sqlite3');
  return driverPath;
}

/** Start one copy of `file`'s log on a worker thread; resolves with what SQLite answered. */
export function copyLogOnWorker(file: string): Promise<CopyOutcome> {
  return new Promise<CopyOutcome>((resolve) => {
    let w: Worker;
    try {
      // execArgv: [] — the source is CommonJS even in a process started with --input-type=module.
      w = new Worker(WORKER_SOURCE, { eval: true, execArgv: [], workerData: { file, driver: driver() } });
    } catch (err) {
      resolve({ ok: false, reason: `cannot start a worker: ${(err as Error).message}` });
      return;
    }
    let settled = false;
    const done = (o: CopyOutcome) => {
      if (settled) return;
      settled = true;
      resolve(o);
    };
    w.once('message', (m: CopyOutcome) => done(m));
    w.once('error', (err) => done({ ok: false, reason: err.message }));
    w.once('exit', (code) => done({ ok: false, reason: `worker exited (${code}) without an answer` }));
  });
}

/**
 * Turn the automatic checkpoint of `db` (the database at `file`) off until
 * the returned handle's `end()`. A no-op on one core, where the copy would
 * only compete with the work it is meant to get out of the way of.
 */
export function deferCheckpoints(db: DB, file: string): DeferredCheckpoints {
  if (availableParallelism() < 2) return { copyInBackground: () => undefined, end: async () => null };
  const previous = db.pragma('wal_autocheckpoint', { simple: true }) as number;
  db.pragma('wal_autocheckpoint = 0');
  let copy: Promise<CopyOutcome> | null = null;
  return {
    copyInBackground() {
      if (copy) return;
      let size: number;
      try {
        size = statSync(`${file}-wal`).size;
      } catch {
        return; // no log (or not WAL): nothing to copy
      }
      if (size >= BACKGROUND_MIN_WAL_BYTES) copy = copyLogOnWorker(file);
    },
    async end() {
      const out = copy ? await copy : null;
      if (db.open) db.pragma(`wal_autocheckpoint = ${previous}`);
      return out;
    },
  };
}
