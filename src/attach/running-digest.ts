/**
 * The SHA-256 of an upload's bytes, kept in memory while one open store
 * (holding the single-writer lock throughout) receives the whole upload
 * from offset 0, in order. Completion then checks the declared digest
 * without reading the partial file again; it re-reads the file whenever
 * this digest does not cover every byte: after a crash, a reopened store,
 * or an upload spread over several processes [ATT-2].
 *
 * Keyed by the open store object, so a digest never outlives the writer
 * lock under which its bytes were committed.
 */
import { createHash, type Hash } from 'node:crypto';
import type { Store } from '../store/store.js';

interface Running { hash: Hash; next: number }

const byStore = new WeakMap<Store, Map<string, Running>>();

function runningOf(store: Store): Map<string, Running> {
  let m = byStore.get(store);
  if (!m) {
    m = new Map();
    byStore.set(store, m);
  }
  return m;
}

/** Feed bytes just written at `offset`; a gap (a resumed upload) drops the digest. */
export function feedDigest(store: Store, attachmentId: string, offset: number, bytes: Buffer): void {
  const m = runningOf(store);
  let r = m.get(attachmentId);
  if (offset === 0) {
    r = { hash: createHash('sha256'), next: 0 };
    m.set(attachmentId, r);
  }
  if (!r || r.next !== offset) {
    m.delete(attachmentId);
    return;
  }
  r.hash.update(bytes);
  r.next += bytes.length;
}

/** The digest of bytes [0, size) when this open store saw all of them, else null. Consumes it. */
export function takeDigest(store: Store, attachmentId: string, size: number): string | null {
  const m = runningOf(store);
  const r = m.get(attachmentId);
  m.delete(attachmentId);
  return r && r.next === size ? r.hash.digest('hex') : null;
}

export function dropDigest(store: Store, attachmentId: string): void {
  byStore.get(store)?.delete(attachmentId);
}
