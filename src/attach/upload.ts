/**
 * Receiving an attachment [ATT-1]: the upload row and its chunks. Each chunk
 * is written durably to the partial file, then committed in state.sqlite in
 * its own short transaction, so an interrupted upload resumes at `received`
 * and a retried chunk is never stored twice.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { KnowledgeError } from '../errors.js';
import type { DB } from '../store/db.js';
import type { Store } from '../store/store.js';
import { crashPoint } from '../faults.js';
import { newAttachmentId, planChunk } from './request.js';
import { fsyncDir } from '../fsutil.js';
import { closePart, openPart, partPath, readPartAt, removeQuietly, syncPart, uploadsDir, writePart, type PartHandle } from './partial.js';
import { dropDigest, feedDigest } from './running-digest.js';
import { ioError } from './io-error.js';
import { ATTACH_LIMITS, type AttachActor, type AttachmentStatus, type CheckedStart, type UploadState } from './types.js';
import { REQUEST_ID_MATCH, requestIdForms } from '../request-id.js';

export interface AttachmentRow {
  attachment_id: string;
  request_id: string;
  request_hash: string;
  partition: string;
  actor: AttachActor;
  filename: string;
  declared_media_type: string | null;
  attribution: string;
  sha256: string;
  size: number;
  state: UploadState;
  received: number;
  created_at: string;
  updated_at: string;
  completed_at: string | null;
  receipt: string | null;
  batch_id: number | null;
  failure: string | null;
}

/** An upload by attachment id or request id. */
export function findAttachment(db: DB, id: string): AttachmentRow | undefined {
  return db.prepare(`SELECT * FROM attachments WHERE attachment_id = ? OR ${REQUEST_ID_MATCH}`).get(id, ...requestIdForms(id)) as AttachmentRow | undefined;
}

export function loadAttachment(db: DB, id: string): AttachmentRow {
  const row = findAttachment(db, id);
  if (!row) throw new KnowledgeError('E_NOT_FOUND', `no attachment or request ${id}`);
  return row;
}

export function statusOf(row: AttachmentRow): AttachmentStatus {
  return {
    attachmentId: row.attachment_id,
    requestId: row.request_id,
    partition: row.partition,
    state: row.state,
    size: row.size,
    received: row.received,
    chunkLimit: ATTACH_LIMITS.chunkBytes,
  };
}

/**
 * Start an upload, or find the one this request id already started. The same
 * arguments resume it (its status says where); other arguments under the
 * same request id are E_CONFLICT [ATT-1].
 */
export function startUpload(db: DB, req: CheckedStart, now: string): AttachmentRow {
  return db.transaction(() => {
    const existing = db.prepare(`SELECT * FROM attachments WHERE ${REQUEST_ID_MATCH}`).get(...requestIdForms(req.requestId)) as AttachmentRow | undefined;
    if (existing) {
      if (existing.request_hash !== req.hash) {
        throw new KnowledgeError('E_CONFLICT', `request id ${req.requestId} was already used for a different attachment`);
      }
      return existing;
    }
    // One request id names one request: `knowledge receipt ID` must find exactly one.
    if (db.prepare(`SELECT 1 FROM publications WHERE ${REQUEST_ID_MATCH}`).get(...requestIdForms(req.requestId)) !== undefined) {
      throw new KnowledgeError('E_CONFLICT', `request id ${req.requestId} was already used for a publication`);
    }
    const id = newAttachmentId();
    db.prepare(
      `INSERT INTO attachments(attachment_id, request_id, request_hash, partition, actor, filename, declared_media_type, attribution,
         sha256, size, state, received, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'receiving', 0, ?, ?)`,
    ).run(id, req.requestId, req.hash, req.partition, req.actor, req.filename, req.mediaType, req.attribution, req.sha256, req.size, now, now);
    return db.prepare('SELECT * FROM attachments WHERE attachment_id = ?').get(id) as AttachmentRow;
  }).immediate();
}

/**
 * Commit one chunk [ATT-1]. In order only; a retry of a committed chunk (same
 * offset, same bytes) is acknowledged without writing; overlapping,
 * out-of-order or oversized chunks are rejected and change nothing. The bytes
 * are durable in the partial file before the SQLite commit; a full disk is
 * E_IO with every committed chunk kept, resumable.
 */
export function appendChunk(store: Store, id: string, offset: number, bytes: Buffer, now: string): AttachmentRow {
  const db = store.db;
  const row = loadAttachment(db, id);
  if (row.state === 'completed') {
    throw new KnowledgeError('E_CONFLICT', `attachment ${row.attachment_id} is already complete`);
  }
  const plan = planChunk(row, offset, bytes.length);
  switch (plan.kind) {
    case 'reject':
      throw new KnowledgeError(plan.code, `attachment ${row.attachment_id}: ${plan.reason}`);
    case 'retry': {
      // A retry must repeat a committed chunk exactly: compare with the committed bytes.
      const prior = db.prepare('SELECT length FROM attachment_chunks WHERE attachment_id = ? AND offset = ?').get(row.attachment_id, offset) as
        | { length: number }
        | undefined;
      if (!prior || prior.length !== bytes.length || !readPartAt(store, row.attachment_id, offset, bytes.length).equals(bytes)) {
        throw new KnowledgeError('E_VALIDATION', `attachment ${row.attachment_id}: chunk at offset ${offset} overlaps bytes already received (next expected offset ${row.received})`);
      }
      return row;
    }
    case 'append':
      return appendRun(store, row, [{ offset, bytes }], { groupBytes: 0, now: () => now });
  }
}

/**
 * Receive consecutive chunks starting at `row.received`: each is written to
 * the partial file as it comes; every `groupBytes` (and at the end) the
 * written bytes are fdatasynced and their chunks committed in one short
 * transaction. groupBytes 0 commits every chunk on its own (the chunk API);
 * `attach FILE` groups, since a crash only makes it re-read the uncommitted
 * rest of a file it still has. Memory: none beyond the caller's chunk.
 */
export function appendRun(
  store: Store,
  row: AttachmentRow,
  chunks: Iterable<{ offset: number; bytes: Buffer }>,
  opts: { groupBytes: number; now: () => string },
): AttachmentRow {
  const db = store.db;
  const id = row.attachment_id;
  let committed = row.received;
  let written = committed;
  const pending: Array<{ offset: number; length: number }> = [];
  const insert = db.prepare('INSERT INTO attachment_chunks(attachment_id, offset, length, committed_at) VALUES (?, ?, ?, ?)');
  const flush = (h: PartHandle) => {
    if (pending.length === 0) return;
    syncPart(h);
    const half = committed < row.size / 2 && written >= row.size / 2;
    if (half) crashPoint('attach-before-chunk-commit');
    const at = opts.now();
    db.transaction(() => {
      // The single-writer lock makes this a formality; it keeps the row and its chunks consistent.
      const cur = db.prepare('SELECT received, state FROM attachments WHERE attachment_id = ?').get(id) as { received: number; state: string };
      if (cur.received !== committed || cur.state !== 'receiving') {
        throw new KnowledgeError('E_CONFLICT', `attachment ${id} changed while chunks were being stored`);
      }
      for (const c of pending) insert.run(id, c.offset, c.length, at);
      db.prepare('UPDATE attachments SET received = ?, updated_at = ?, failure = NULL WHERE attachment_id = ?').run(written, at, id);
    }).immediate();
    committed = written;
    pending.length = 0;
    if (half) crashPoint('attach-mid-upload');
  };
  let h: PartHandle;
  try {
    h = openPart(store, id, committed);
  } catch (err) {
    if (err instanceof KnowledgeError && err.details?.lost === true) resetUpload(store, id, err.message, opts.now());
    else if (err instanceof KnowledgeError) noteFailure(db, id, err.message, opts.now());
    throw err;
  }
  let failed = false;
  try {
    for (const c of chunks) {
      const plan = planChunk({ size: row.size, received: written }, c.offset, c.bytes.length);
      if (plan.kind !== 'append') {
        throw new KnowledgeError(plan.kind === 'reject' ? plan.code : 'E_VALIDATION', `attachment ${id}: ${plan.kind === 'reject' ? plan.reason : `chunk at offset ${c.offset} overlaps bytes already received`}`);
      }
      writePart(h, c.offset, c.bytes);
      feedDigest(store, id, c.offset, c.bytes);
      pending.push({ offset: c.offset, length: c.bytes.length });
      written += c.bytes.length;
      if (written - committed >= opts.groupBytes) flush(h);
    }
    flush(h);
  } catch (err) {
    failed = true;
    // Bytes past `committed` were never committed: cut them off; the digest no longer matches the file.
    dropDigest(store, id);
    const e = ioError(err, `attachment ${id}: chunks from offset ${committed} were not stored`);
    if (e.code === 'E_IO') noteFailure(db, id, e.message, opts.now());
    throw e;
  } finally {
    closePart(h, failed ? committed : undefined);
  }
  return { ...row, received: committed, updated_at: opts.now(), failure: null };
}

/** Forget every received byte: the upload starts again at offset 0 under the same request id. */
export function resetUpload(store: Store, attachmentId: string, reason: string, now: string): void {
  store.db.transaction(() => {
    store.db.prepare('DELETE FROM attachment_chunks WHERE attachment_id = ?').run(attachmentId);
    store.db.prepare("UPDATE attachments SET received = 0, updated_at = ?, failure = ? WHERE attachment_id = ? AND state = 'receiving'").run(now, reason, attachmentId);
  }).immediate();
  removeQuietly(partPath(store, attachmentId));
  dropDigest(store, attachmentId);
}

/** Remember why the last attempt failed (shown in activity); best effort. */
export function noteFailure(db: DB, attachmentId: string, reason: string, now: string): void {
  try {
    db.prepare('UPDATE attachments SET failure = ?, updated_at = ? WHERE attachment_id = ?').run(reason, now, attachmentId);
  } catch {
    // A full disk may refuse even this; the error itself is what the caller sees.
  }
}

/**
 * Remove the partial files of uploads already completed: a kill after the
 * acknowledgement of a duplicate (same bytes as an existing source) keeps its
 * partial file, and nothing would retry that request. Run by each writer
 * when it opens the store; best effort (an error leaves the file for the next).
 */
export function sweepCompletedParts(store: Store): void {
  const dir = uploadsDir(store);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return; // no uploads yet
  }
  const completed = store.db.prepare("SELECT 1 FROM attachments WHERE attachment_id = ? AND state = 'completed'").pluck();
  let removed = 0;
  for (const name of names) {
    const m = /^(.+)\.part$/.exec(name);
    if (m && completed.get(m[1]) !== undefined) {
      removeQuietly(join(dir, name));
      removed++;
    }
  }
  if (removed > 0) {
    try { fsyncDir(dir); } catch { /* best effort */ }
  }
}
