/**
 * The worker side of check-ahead.ts: reads a scan's staged rows through its
 * own read-only connection, in rowid order, checks each (check.ts) and
 * sends the verdicts in batches. Shared counters (see check-ahead.ts):
 * [0] batches posted, [1] batches taken, [2] stop, [3] worker started,
 * [4] rows checked.
 *
 * What it imports besides Node's own is loaded inside the `try`, so a
 * module that fails to load is reported like any other error.
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import type { FileCheck } from './check.js';
import type BetterSqlite3 from 'better-sqlite3';

export interface CheckJob {
  file: string;
  scanId: string;
  shared: SharedArrayBuffer;
  port: MessagePort;
  /** A message is sent at this many rows, bytes or milliseconds since its first row, whichever comes first. */
  batchRows: number;
  batchBytes: number;
  batchMs: number;
  /** Messages posted but not taken beyond which the worker waits. */
  maxAhead: number;
  /** Send each row's bytes too (pooled in one transferred buffer per message). */
  bytes: boolean;
}

/** One message: rows in rowid order; `sizes[i]` bytes of row i at its offset in `pool`. */
export type CheckMessage =
  | { rows: Array<[rowid: number, path: string, check: FileCheck]>; pool: ArrayBuffer | null; sizes: number[] }
  | { done: true; rows: number }
  | { error: string };

const job = workerData as CheckJob;
const s = new Int32Array(job.shared);
const post = (m: CheckMessage, transfer: ArrayBuffer[] = []): void => {
  job.port.postMessage(m, transfer);
  Atomics.add(s, 0, 1);
  Atomics.notify(s, 0);
};
const stopped = (): boolean => Atomics.load(s, 2) !== 0;

Atomics.store(s, 3, 1);
let db: BetterSqlite3.Database | null = null;
try {
  const { default: Database } = await import('better-sqlite3');
  const { checkStaged } = await import('./check.js');
  db = new Database(job.file, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  const rows = db.prepare('SELECT rowid, path, bytes, sha256 FROM scan_staging WHERE +scan_id = ? ORDER BY rowid')
    .raw()
    .iterate(job.scanId) as IterableIterator<[number, string, Buffer, string | null]>;
  let out: Array<[number, string, FileCheck]> = [];
  let held: Buffer[] = [];
  let total = 0;
  let count = 0;
  let started = 0;
  const send = (): void => {
    // Wait while the main thread is maxAhead messages behind: memory stays bounded.
    for (;;) {
      if (stopped()) return;
      const taken = Atomics.load(s, 1);
      if (Atomics.load(s, 0) - taken < job.maxAhead) break;
      Atomics.wait(s, 1, taken, 1000);
    }
    let pool: ArrayBuffer | null = null;
    const sizes: number[] = [];
    if (job.bytes) {
      const buf = Buffer.allocUnsafeSlow(total);
      let at = 0;
      for (const b of held) {
        b.copy(buf, at);
        at += b.length;
        sizes.push(b.length);
      }
      pool = buf.buffer as ArrayBuffer;
    }
    post({ rows: out, pool, sizes }, pool ? [pool] : []);
    out = [];
    held = [];
    total = 0;
  };
  for (const [rowid, path, bytes, sha256] of rows) {
    if (stopped()) break;
    if (out.length === 0) started = performance.now();
    out.push([rowid, path, checkStaged(path, bytes, sha256)]);
    Atomics.add(s, 4, 1);
    count++;
    if (job.bytes) held.push(bytes);
    total += bytes.length;
    if (out.length >= job.batchRows || total >= job.batchBytes || performance.now() - started >= job.batchMs) send();
  }
  if (!stopped()) {
    if (out.length > 0) send();
    post({ done: true, rows: count });
  }
} catch (err) {
  post({ error: err instanceof Error ? err.message : String(err) });
} finally {
  db?.close();
  job.port.close();
  parentPort?.close();
}
