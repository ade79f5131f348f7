/**
 * A large checkpoint's blobs written into the repository ahead of its
 * commit, on the second core, while the main thread is still busy with the
 * batch (a scan's applying transaction) [GIT-7, SCAN-4].
 *
 * Measured on a 100k-file baseline (~60 MiB): git took ~2-3 s of the drain
 * to receive and pack the blobs, after the scan's transaction, while the
 * main thread mostly waited for it; the transaction itself runs ~6 s on one
 * core with the other idle. Here a worker thread runs a one-shot
 * `git fast-import` that receives only `blob` commands — the exact bytes the
 * batch queues, in the order the transaction reads them — and packs them. A
 * worker, because the main thread's transaction is synchronous: its writes
 * to a child's pipe would sit in memory until it ends.
 *
 * What the commit may take from it, and why that is safe:
 * - the worker hashes each blob from the very bytes it hands to git, and
 *   reports the ids in the order the blobs were added, which the caller
 *   pairs with their paths; those bytes are the rows the transaction copies
 *   into the outbox in the same transaction, so they are the batch's bytes;
 * - only a batch whose blobs *all* went into a pack that git finished (exit
 *   0: pack and index written and fsync'd under core.fsync=committed) names
 *   them by id instead of carrying them again. Git refuses a commit naming
 *   an object it does not have; the chain is then made again with the bytes
 *   inline and every id taken from them (checkpoint.ts);
 * - a preload that fails, whose git stalls for the runner's timeout, or
 *   that is abandoned is ignored; unreferenced objects in a finished pack
 *   are ordinary garbage for `git gc`. While git is behind by more than
 *   {@link MAX_IN_FLIGHT} bytes, `add` waits for it (memory stays bounded).
 *
 * Blobs are copied into the group buffers as they come, so the caller's
 * buffers die young as they would without a preload (kept in a list until
 * a group was full, they outlived a scavenge: +36 MiB of garbage at the end
 * of a 100k baseline's transaction, measured). Figures: BENCHMARKS.md.
 *
 * The fast-import is started exactly like every other git call (same
 * executable, environment, overrides, own process group: runner.command),
 * and killed with its group if it has not finished `timeoutMs` after its
 * input ended.
 */
import { Worker } from 'node:worker_threads';
import type { GitRunner } from './runner.js';
import type { BlobIds } from './types.js';

/**
 * Bytes handed to the worker that git has not taken yet. Beyond this the
 * main thread waits for git (memory stays bounded; git is usually faster).
 */
export const MAX_IN_FLIGHT = 2 * 1024 * 1024;
/** Blobs go to the worker in groups of about this many bytes. */
const GROUP_BYTES = 256 * 1024;

// CommonJS, evaluated as the worker's source: the worker cannot import this
// package's modules under every loader (tests run TypeScript sources).
// shared[0]: bytes in flight; shared[1]: 1 once the worker has finished.
const WORKER_SOURCE = `
const { parentPort, workerData: c } = require('node:worker_threads');
const { spawn } = require('node:child_process');
const { createHash } = require('node:crypto');
const shared = new Int32Array(c.shared);
const width = c.format === 'sha1' ? 20 : 32;
let ids = Buffer.allocUnsafe(width * 4096);
let count = 0;
let child = null;
let timer = null;
let done = false;
let stderr = '';
const NL = Buffer.from('\\n');
const finish = (out) => {
  if (done) return;
  done = true;
  if (timer) clearTimeout(timer);
  Atomics.store(shared, 1, 1);
  Atomics.notify(shared, 0);
  const list = out.ok ? [out.ids.buffer] : [];
  parentPort.postMessage(out, list);
  parentPort.close();
};
const kill = () => {
  if (!child || child.pid === undefined) return;
  try { process.kill(-child.pid, 'SIGKILL'); } catch { try { child.kill('SIGKILL'); } catch {} }
};
try {
  child = spawn(c.file, c.argv, { cwd: c.cwd, env: c.env, stdio: ['pipe', 'ignore', 'pipe'], detached: true });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => { if (stderr.length < 4096) stderr += d; });
  child.stdin.on('error', () => {});
  child.on('error', (e) => finish({ ok: false, reason: 'cannot run git: ' + (e.code || e.message) }));
  child.on('close', (code, signal) => finish(code === 0
    ? { ok: true, ids: Buffer.from(ids.subarray(0, count * width)) }
    : { ok: false, reason: 'git fast-import ended with ' + (code === null ? signal : code) + ': ' + (stderr.trim().split('\\n')[0] || 'no message') }));
} catch (e) {
  finish({ ok: false, reason: 'cannot start git: ' + e.message });
}
parentPort.on('message', (m) => {
  if (done) return;
  if (m.type === 'blobs') {
    const data = Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength);
    const pieces = [];
    let at = 0;
    for (const n of m.sizes) {
      const bytes = data.subarray(at, at + n);
      pieces.push(Buffer.from('blob\\ndata ' + n + '\\n'), bytes, NL);
      if ((count + 1) * width > ids.length) {
        const more = Buffer.allocUnsafe(ids.length * 2);
        ids.copy(more, 0, 0, count * width);
        ids = more;
      }
      createHash(c.format).update('blob ' + n + '\\0').update(bytes).digest().copy(ids, count * width);
      count++;
      at += n;
    }
    child.stdin.write(Buffer.concat(pieces), () => {
      Atomics.sub(shared, 0, m.data.byteLength);
      Atomics.notify(shared, 0);
    });
  } else if (m.type === 'end') {
    child.stdin.end();
    timer = setTimeout(() => { kill(); }, c.timeoutMs);
  } else if (m.type === 'abandon') {
    kill();
  }
});
`;

/** Each preloaded path's blob id (hex), kept compactly: one raw digest per path. */
export class PreloadedIds implements BlobIds {
  private readonly at = new Map<string, number>();
  private readonly width: number;

  constructor(paths: readonly string[], private readonly raw: Buffer) {
    this.width = paths.length > 0 ? raw.length / paths.length : 20;
    paths.forEach((p, i) => this.at.set(p, i));
  }

  get size(): number {
    return this.at.size;
  }

  get(path: string): string | undefined {
    const i = this.at.get(path);
    return i === undefined ? undefined : this.raw.toString('hex', i * this.width, (i + 1) * this.width);
  }
}

export interface BlobPreload {
  /** Hand over one file's blob (the exact bytes the batch queues for `path`). */
  add(path: string, bytes: Buffer): void;
  /**
   * No more blobs: resolves with each path's blob id only when every blob
   * added went into a pack git finished; else null. Never rejects.
   */
  end(): Promise<PreloadedIds | null>;
  /** Stop now (the batch was not queued); the pack, if any, is not used. */
  abandon(): void;
}

/**
 * Start a preload into the repository whose work tree is `repo.workTree`,
 * or null when a worker cannot be started. `env` is the repository's git
 * environment (vaultEnv), `extraConfig` the fast-import settings of the
 * checkpoint (fastimport.unpackLimit=0: always a pack).
 */
export function startBlobPreload(
  runner: GitRunner,
  repo: { workTree: string; env: Record<string, string>; extraConfig: readonly string[]; objectFormat: 'sha1' | 'sha256' },
): BlobPreload | null {
  const cmd = runner.command(['fast-import', '--quiet'], { env: repo.env, extraConfig: [...repo.extraConfig] });
  const sharedBuf = new SharedArrayBuffer(8);
  const shared = new Int32Array(sharedBuf);
  let worker: Worker;
  try {
    // execArgv: [] — the source is CommonJS even in a process started with --input-type=module.
    worker = new Worker(WORKER_SOURCE, {
      eval: true,
      execArgv: [],
      // A small young generation: the blobs it receives die young and are freed soon.
      resourceLimits: { maxYoungGenerationSizeMb: 4 },
      workerData: { file: cmd.file, argv: cmd.argv, env: cmd.env, cwd: repo.workTree, timeoutMs: runner.timeoutMs, shared: sharedBuf, format: repo.objectFormat },
    });
  } catch {
    return null;
  }
  const outcome = new Promise<{ ok: boolean; ids?: Uint8Array }>((resolve) => {
    worker.once('message', (m: { ok: boolean; ids?: Uint8Array }) => resolve(m));
    worker.once('error', () => resolve({ ok: false }));
    worker.once('exit', () => resolve({ ok: false }));
  });
  let complete = true;
  let ended = false;
  const paths: string[] = [];
  // Blobs are copied into the group's own buffer as they come (see the header).
  let group = Buffer.allocUnsafeSlow(GROUP_BYTES);
  let groupBytes = 0;
  let sizes: number[] = [];
  const abandon = () => {
    complete = false;
    if (ended) return;
    ended = true;
    sizes = [];
    paths.length = 0;
    worker.postMessage({ type: 'abandon' });
  };
  const flush = () => {
    if (sizes.length === 0) return;
    // Wait while git is behind (the worker wakes us as it takes data); a
    // worker that stopped, or git stalled for the runner's timeout, ends the preload.
    const deadline = performance.now() + runner.timeoutMs;
    for (let now = Atomics.load(shared, 0); now + groupBytes > MAX_IN_FLIGHT && now > 0; now = Atomics.load(shared, 0)) {
      if (Atomics.load(shared, 1) === 1 || performance.now() > deadline) {
        abandon();
        return;
      }
      Atomics.wait(shared, 0, now, 50);
    }
    // Counted before it is posted; the worker subtracts once git has taken it.
    Atomics.add(shared, 0, groupBytes);
    // The group's buffer is handed over (transferred), not copied.
    const data = group.subarray(0, groupBytes);
    worker.postMessage({ type: 'blobs', data, sizes }, [group.buffer]);
    group = Buffer.allocUnsafeSlow(GROUP_BYTES);
    groupBytes = 0;
    sizes = [];
  };
  return {
    add(path, bytes) {
      if (!complete || ended) return;
      if (groupBytes + bytes.length > group.length) {
        flush();
        if (ended) return;
        if (bytes.length > group.length) group = Buffer.allocUnsafeSlow(bytes.length);
      }
      paths.push(path);
      bytes.copy(group, groupBytes);
      groupBytes += bytes.length;
      sizes.push(bytes.length);
    },
    async end() {
      if (!ended) {
        flush();
        if (ended) return null; // abandoned while flushing
        ended = true;
        worker.postMessage({ type: 'end' });
      }
      const out = await outcome;
      if (!complete || !out.ok || !out.ids) return null;
      const raw = Buffer.from(out.ids.buffer, out.ids.byteOffset, out.ids.byteLength);
      if (raw.length !== paths.length * (repo.objectFormat === 'sha1' ? 20 : 32)) return null;
      // In the order they were added: the worker hashed the very bytes it handed to git.
      return new PreloadedIds(paths, raw);
    },
    abandon,
  };
}
