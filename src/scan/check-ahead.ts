/**
 * A large scan's staged files checked on a worker thread while the applying
 * transaction indexes them [SCAN-4].
 *
 * The applying transaction (apply.ts) reads back every staged file, checks
 * it (check.ts: decode, parse, validate, hash) and indexes the verdict. For
 * a 100k-file baseline the checks alone took ~3.2 s of the main thread,
 * with the second core mostly idle (measured: BENCHMARKS.md). Here a worker
 * reads the same staged rows through its own read-only connection — they
 * were committed before the transaction began and nothing changes them
 * until the scan is over, so both see the same rows in the same rowid
 * order — and sends the verdicts (and, for the blob preload, the bytes) in
 * batches; the transaction takes them as they come with
 * `receiveMessageOnPort`, waiting on a shared counter while the next batch
 * is on its way. A batch ends at {@link BATCH_ROWS} rows, {@link BATCH_BYTES}
 * bytes or {@link BATCH_MS} ms, whichever comes first, and the worker runs
 * at most {@link MAX_AHEAD} batches ahead: what waits in memory is bounded
 * by bytes, not just by rows (a file may be large), and a slow file holds
 * back no more than itself.
 *
 * The verdicts are the same function of the same bytes either way: the
 * worker runs check.ts itself (compiled), it is not a copy. It only runs
 * from the compiled package (under a TypeScript test runner the worker file
 * does not exist, and apply.ts checks in-thread), and only with a second core.
 * Anything going wrong — no worker, an error in it, no row checked and no
 * batch sent for {@link STALL_MS} — ends it, and the caller checks the rows
 * after the last one it took itself. (A check can take seconds: ~9 s for a
 * 1 MB YAML file of many small collections, measured; the stall clock
 * restarts at every row, so only a worker that is gone, or one file slower
 * than that, costs the wait.)
 */
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import type { FileCheck } from './check.js';
import type { CheckJob, CheckMessage } from './check-worker.js';

/** Rows per batch, at most. */
const BATCH_ROWS = 256;
/** A batch ends once its files hold this many bytes. */
const BATCH_BYTES = 1 << 20;
/** A batch ends this long after its first row was checked. */
const BATCH_MS = 50;
/** Batches the worker may send before the transaction takes them. */
const MAX_AHEAD = 8;
/** With no row checked and no batch sent for this long, the caller stops waiting for the worker. */
const STALL_MS = 15_000;
/** How often a waiting caller looks at the worker's progress. */
const LOOK_MS = 200;

export interface CheckedRow {
  rowid: number;
  path: string;
  check: FileCheck;
  /** The staged bytes (only when asked for). */
  bytes: Buffer | null;
}

export class CheckAhead {
  /** Rows delivered. */
  delivered = 0;
  /** Why the worker's answers stopped short of the end (null: they did not, or not yet). */
  failure: string | null = null;
  private done = false;
  private constructor(
    private readonly worker: Worker,
    private readonly port: MessagePort,
    private readonly shared: Int32Array,
  ) {}

  /**
   * Start checking the rows staged under `scanId` in the database `file`.
   * Null when there is no worker to run (e.g. under a TypeScript test runner).
   */
  static start(file: string, scanId: string, opts: { bytes: boolean }, workerUrl = new URL('./check-worker.js', import.meta.url)): CheckAhead | null {
    if (availableParallelism() < 2) return null;
    if (!workerUrl.pathname.endsWith('.js') || !existsSync(fileURLToPath(workerUrl))) return null;
    const sharedBuf = new SharedArrayBuffer(5 * Int32Array.BYTES_PER_ELEMENT);
    const { port1, port2 } = new MessageChannel();
    const job: CheckJob = {
      file, scanId, shared: sharedBuf, port: port2, batchRows: BATCH_ROWS, batchBytes: BATCH_BYTES, batchMs: BATCH_MS, maxAhead: MAX_AHEAD, bytes: opts.bytes,
    };
    let worker: Worker;
    try {
      worker = new Worker(workerUrl, { execArgv: [], workerData: job, transferList: [port2] });
    } catch {
      port1.close();
      return null;
    }
    worker.unref();
    port1.unref();
    const ahead = new CheckAhead(worker, port1, new Int32Array(sharedBuf));
    worker.on('error', (e) => ahead.fail(`the check worker failed: ${e.message}`));
    return ahead;
  }

  /**
   * The next batch of checked rows, in rowid order; null when there are no
   * more from the worker — all delivered (`failure` null) or it stopped
   * short (`failure` says why; the caller checks the rest itself).
   */
  next(): CheckedRow[] | null {
    let seen = -1;
    let since = 0;
    while (!this.done) {
      const posted = Atomics.load(this.shared, 0);
      const got = receiveMessageOnPort(this.port);
      if (got === undefined) {
        // Nothing yet: wait for a batch, looking every LOOK_MS at whether the worker still gets on.
        if (Atomics.wait(this.shared, 0, posted, LOOK_MS) === 'timed-out') {
          const progress = Atomics.load(this.shared, 4) + Atomics.load(this.shared, 3);
          const now = performance.now();
          if (progress !== seen) {
            seen = progress;
            since = now;
          } else if (now - since >= STALL_MS) {
            this.fail(Atomics.load(this.shared, 3) === 0 ? 'the check worker did not start' : `no row checked by the check worker for ${STALL_MS} ms`);
          }
        }
        continue;
      }
      Atomics.add(this.shared, 1, 1);
      Atomics.notify(this.shared, 1);
      const m = got.message as CheckMessage;
      if ('error' in m) {
        this.fail(`the check worker failed: ${m.error}`);
        continue;
      }
      if ('done' in m) {
        if (m.rows !== this.delivered) this.fail(`the check worker counted ${m.rows} rows but sent ${this.delivered}`);
        this.close();
        return null;
      }
      const pool = m.pool ? Buffer.from(m.pool) : null;
      let at = 0;
      const out = m.rows.map(([rowid, path, check], i) => {
        let bytes: Buffer | null = null;
        if (pool) {
          const n = m.sizes[i]!;
          bytes = pool.subarray(at, at + n);
          at += n;
        }
        return { rowid, path, check, bytes };
      });
      this.delivered += out.length;
      return out;
    }
    return null;
  }

  private fail(why: string): void {
    if (this.failure === null && !this.done) this.failure = why;
    this.close();
  }

  /** Stop the worker (idempotent); whatever it has not sent is not needed. */
  close(): void {
    if (this.done) return;
    this.done = true;
    Atomics.store(this.shared, 2, 1);
    Atomics.notify(this.shared, 1);
    this.port.close();
    void this.worker.terminate();
  }
}
