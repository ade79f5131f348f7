/**
 * Completing an attachment [ATT-2, GIT-9]: verify → install → acknowledge
 * (the same phases as a publication, PUB-3/PUB-4).
 *
 * - verify: the partial file (assembled, chunk by chunk, as the chunks
 *   arrived; every committed byte fsynced) must match the declared size and
 *   SHA-256, or nothing is installed, the chunks are released and the upload
 *   starts again at offset 0 under the same request id.
 * - install: the partial file is renamed into
 *   `<partition>/evidence/<hh>/<sourceId>/<file>` and both directories fsynced;
 *   the descriptor (and, for an original kept out of history, its
 *   .gitignore) are written with the atomic-write module.
 * - acknowledge, in one short transaction: the source row (or one more
 *   attribution when the same bytes are already a source), the vault file
 *   fingerprints, one outbox batch (kind `attachment`) with the exact bytes
 *   of the descriptor and, for a non-media original under 100 MiB, of the
 *   original [GIT-9]; the receipt; and only then the chunks are released.
 *
 * Every step before the acknowledgement can be repeated: a crash anywhere is
 * finished by completing the same request again. After a crash between the
 * rename and the acknowledgement the bytes are found (and verified again)
 * at their installed path.
 */
import { existsSync, renameSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { KnowledgeError } from '../errors.js';
import type { Store } from '../store/store.js';
import { parsePartition, partitionDir } from '../store/layout.js';
import { atomicWrite, fsyncDir, mkdirDurable, requireWritable, vaultFileHolds } from '../fsutil.js';
import { detectMedia, belongsInHistory } from '../evidence/media.js';
import { sourceIdFor, retainedFileName, sourcePaths, descriptorText, sourcePutBack, refuseOccupiedSourcePaths, ignoreBeside, EXCLUDED_GITIGNORE, RETAINED_SOURCE_COLUMNS, SOURCE_FORMAT, sourceInserter, type RetainedSource } from '../evidence/source.js';
import { fingerprintOf, statFingerprint, upsertVaultFile, type Fingerprint } from '../store/vault-files.js';
import { enqueueBatch } from '../checkpoint/outbox.js';
import type { BatchChange } from '../git/types.js';
import { crashPoint } from '../faults.js';
import { sha256Hex } from '../records/record.js';
import { hashFile, installedUploads, partPath, readHead, removeQuietly, settleLength, uploadsDir } from './partial.js';
import { takeDigest } from './running-digest.js';
import { loadAttachment, noteFailure, resetUpload, type AttachmentRow } from './upload.js';
import { ioError } from './io-error.js';
import { ATTACH_LIMITS, type AttachmentReceipt } from './types.js';
import { clipCodePoints } from '../git/commit-stream.js';
import { nowIso } from '../clock.js';


/** The planned source of a verified upload: where it goes and what history keeps [GIT-9]. */
interface PlannedSource {
  sourceId: string;
  path: string;
  descriptorPath: string;
  gitignorePath: string | null;
  mediaType: string;
  inHistory: boolean;
  isNew: boolean;
}

/**
 * Complete an upload and return its row, now `completed`, with its receipt
 * and batch. A completed upload is returned as it is (idempotent).
 */
export function completeUpload(store: Store, id: string): AttachmentRow {
  const db = store.db;
  const row = loadAttachment(db, id);
  const part = partPath(store, row.attachment_id);
  if (row.state === 'completed') {
    removeQuietly(part); // a duplicate's partial file, if a crash kept it after the acknowledgement
    return row;
  }
  if (row.received < row.size) {
    throw new KnowledgeError('E_VALIDATION', `attachment ${row.attachment_id} is incomplete: ${row.received} of ${row.size} bytes received; send the chunk at offset ${row.received}`, {
      received: row.received, size: row.size,
    });
  }
  const now = nowIso();
  try {
    return settle(store, row, part, now);
  } catch (err) {
    if (err instanceof KnowledgeError && err.details?.lost === true) {
      resetUpload(store, row.attachment_id, err.message, now);
      throw err;
    }
    const e = ioError(err, `attachment ${row.attachment_id} could not be completed (its received bytes are kept; retry the same request)`);
    // Why it waits, for Activity: a disk error, or a vault path it must not write (fixed by the user, then resumed).
    if (e.code === 'E_IO' || e.code === 'E_CONFLICT') noteFailure(db, row.attachment_id, e.message, now);
    throw e;
  }
}

function settle(store: Store, row: AttachmentRow, part: string, now: string): AttachmentRow {
  const db = store.db;
  const partition = parsePartition(row.partition);
  const sourceId = sourceIdFor(row.sha256);
  const existing = db.prepare(`SELECT ${RETAINED_SOURCE_COLUMNS} FROM sources WHERE partition = ? AND source_id = ?`)
    .get(partition, sourceId) as RetainedSource | undefined;
  const pdir = partitionDir(partition);
  const { dir, path, descriptorPath } = sourcePaths(pdir, sourceId, retainedFileName(row.filename));
  const target = join(store.paths.vault, path);
  const kept = existing ? join(store.paths.vault, existing.path) : null;
  // Never through a symbolic link out of (or around) the vault, never over a folder or FIFO [PUB-3].
  const keptIgnore = existing && existing.in_history === 0 ? ignoreBeside(existing.path) : null;
  for (const rel of [path, descriptorPath, `${dir}/.gitignore`, ...(existing ? [existing.path] : []), ...(keptIgnore ? [keptIgnore] : [])]) {
    requireWritable(store.paths.vault, rel, { hash: false });
  }
  // Where the bytes are: the partial file or, after a crash between rename and acknowledgement, the original
  // this request installed — or the source's, if another request with the same bytes was acknowledged meanwhile.
  // An empty upload never wrote its partial file, so a file at its path cannot be told to be its own install
  // (its verification has no bytes to hash): it starts from an empty partial file every time.
  const candidates = existsSync(part) ? [part] : row.size > 0 ? [target, ...(kept ? [kept] : [])].filter((p) => existsSync(p)) : [];
  const from = candidates[0] ?? part;
  const installed = from !== part;
  if (!existsSync(from) && row.size === 0) mkEmpty(store, row);

  const media = detectMedia(row.filename, readHead(from, row.attachment_id), row.declared_media_type ?? undefined);
  const inHistory = existing ? existing.in_history === 1 : belongsInHistory(row.size, media);
  // What a new source writes besides its original. The descriptor depends on the request alone (retained when
  // the upload began), so a retry writes the very bytes an attempt cut short wrote.
  const descriptor = Buffer.from(descriptorText({
    format: SOURCE_FORMAT, source_id: sourceId, retained_path: path, sha256: row.sha256, size: row.size,
    media_type: media.mediaType, original_name: row.filename, attribution: row.attribution, retained_at: row.created_at, in_history: inHistory,
  }), 'utf8');
  const gitignore = inHistory ? null : Buffer.from(EXCLUDED_GITIGNORE, 'utf8');
  // A new source's paths holding files this partition has no source for (copied there by hand): refused before
  // anything is written, as a publication refuses them. After a crash, what is there is this request's own install,
  // or that of another request for the same bytes cut short after its install (which this one then completes); and
  // a file that already holds exactly what this request writes there loses nothing when replaced (what an attempt of
  // this request cut short installed, say, which for an empty upload cannot be told otherwise).
  if (!existing && !installed && !installedByAnother(store, row)) {
    const holds = (rel: string, bytes: Buffer) => vaultFileHolds(store.paths.vault, rel, sha256Hex(bytes), bytes.length);
    const occupied = [
      ...(vaultFileHolds(store.paths.vault, path, row.sha256, row.size) ? [] : [path]),
      ...(holds(descriptorPath, descriptor) ? [] : [descriptorPath]),
      ...(gitignore === null || holds(`${dir}/.gitignore`, gitignore) ? [] : [`${dir}/.gitignore`]),
    ];
    refuseOccupiedSourcePaths(store.paths.vault, `attachment ${row.attachment_id} (${row.filename})`, partition, sourceId, occupied, 'retry the same request');
  }
  const collect = !existing && inHistory; // the checkpoint commits exact bytes (< 100 MiB) [GIT-7, GIT-9]
  // Verify [ATT-2]: with the digest this process computed while it received every byte, or by reading them again.
  const seen = takeDigest(store, row.attachment_id, row.size);
  let hashed: { sha256: string; bytes: Buffer | null };
  if (seen !== null && !collect && !installed) {
    settleLength(from, row.attachment_id, row.size);
    hashed = { sha256: seen, bytes: null };
  } else {
    hashed = hashFile(from, row.attachment_id, row.size, { collect, truncate: !installed, bufBytes: ATTACH_LIMITS.fileChunkBytes });
  }
  if (hashed.sha256 !== row.sha256) {
    const reason = `the received bytes have SHA-256 ${hashed.sha256}, not the declared ${row.sha256}`;
    // A wrong file at the installed path (changed after a crash) is left alone: the next completed upload replaces it.
    resetUpload(store, row.attachment_id, `verification failed: ${reason}`, now);
    throw new KnowledgeError(
      'E_VALIDATION',
      `attachment ${row.attachment_id}: ${reason}; nothing was installed, the received chunks were released and the upload starts again at offset 0 under the same request id`,
    );
  }

  if (existing && kept) {
    // Same bytes already retained in this partition: one source, one more attribution. Its original,
    // deleted by hand (for one kept out of history, the only copy), is put back from the verified bytes, and
    // its descriptor from the row. On disk only, with no checkpoint of its own (which would be an empty commit
    // where history still holds them): a descriptor whose deletion a scan recorded is new to the next scan,
    // which commits it; a publication of the same bytes commits what it puts back (publish/validate.ts).
    const back = sourcePutBack(store.paths.vault, existing, `attachment ${row.attachment_id} (${row.filename})`, 'retry the same request');
    if (back.original) installOriginal(store, from, kept);
    if (back.gitignore !== null) atomicWrite(join(store.paths.vault, back.gitignore), Buffer.from(EXCLUDED_GITIGNORE, 'utf8'), store.paths.staging);
    if (back.descriptor !== null) atomicWrite(join(store.paths.vault, existing.descriptor_path), back.descriptor, store.paths.staging);
    const done = acknowledge(store, row, {
      sourceId, path: existing.path, descriptorPath: existing.descriptor_path, gitignorePath: null,
      mediaType: existing.media_type, inHistory: existing.in_history === 1, isNew: false,
    }, null, now);
    // A verified copy left over (the partial file, or this request's own install under another name; for an empty
    // upload, that install is an empty file at its own path).
    if (existsSync(from) && from !== kept) removeDurably(from);
    if (target !== kept && vaultFileHolds(store.paths.vault, path, row.sha256, row.size)) removeDurably(target);
    return done;
  }

  const planned: PlannedSource = {
    sourceId, path, descriptorPath, gitignorePath: inHistory ? null : `${dir}/.gitignore`,
    mediaType: media.mediaType, inHistory, isNew: true,
  };
  const files: InstalledFiles = { descriptor, gitignore, original: hashed.bytes };
  if (!installed) installOriginal(store, part, target);
  crashPoint('attach-after-install');
  atomicWrite(join(store.paths.vault, descriptorPath), descriptor, store.paths.staging);
  if (planned.gitignorePath && files.gitignore) atomicWrite(join(store.paths.vault, planned.gitignorePath), files.gitignore, store.paths.staging);
  crashPoint('attach-before-acknowledge');
  return acknowledge(store, row, planned, files, now);
}

/** Whether another request for the same bytes in this partition was cut short after its install (installedUploads). */
function installedByAnother(store: Store, row: AttachmentRow): boolean {
  return installedUploads(store, row.partition, row.sha256).some((id) => id !== row.attachment_id);
}

/** A zero-byte upload never wrote a chunk: its partial file is simply empty. */
function mkEmpty(store: Store, row: AttachmentRow): void {
  mkdirDurable(uploadsDir(store));
  atomicWrite(partPath(store, row.attachment_id), Buffer.alloc(0));
}

interface InstalledFiles { descriptor: Buffer; gitignore: Buffer | null; original: Buffer | null }

/** Rename the fsynced partial file into place and make the rename durable on both sides [PUB-3]. */
function installOriginal(store: Store, part: string, target: string): void {
  mkdirDurable(dirname(target));
  renameSync(part, target);
  fsyncDir(dirname(target));
  fsyncDir(dirname(part));
}

function removeDurably(path: string): void {
  removeQuietly(path);
  fsyncDir(dirname(path));
}

/**
 * The batch that first put this source in the outbox: where its bytes are in history. By its original's path for
 * one in history (a descriptor may have been committed alone before: by a scan that did not adopt it yet), else
 * by its descriptor's.
 */
function firstRetention(store: Store, s: PlannedSource): number | null {
  const r = store.db.prepare('SELECT MIN(batch_id) AS b FROM batch_files WHERE path = ?').get(s.inHistory ? s.path : s.descriptorPath) as { b: number | null };
  return r.b;
}

function acknowledge(store: Store, row: AttachmentRow, s: PlannedSource, files: InstalledFiles | null, now: string): AttachmentRow {
  const db = store.db;
  // Fingerprints are taken before the transaction, so it holds the write lock for SQLite work only.
  const prints: Array<{ path: string; fp: Fingerprint }> = [];
  if (s.isNew && files) {
    const st = statSync(join(store.paths.vault, s.path), { bigint: true });
    // The original may be large: its hash is the verified one, never re-read here.
    prints.push({ path: s.path, fp: fingerprintOf(st, row.sha256) });
    prints.push({ path: s.descriptorPath, fp: statFingerprint(join(store.paths.vault, s.descriptorPath), files.descriptor) });
    if (s.gitignorePath && files.gitignore) prints.push({ path: s.gitignorePath, fp: statFingerprint(join(store.paths.vault, s.gitignorePath), files.gitignore) });
  }
  const attribution = { attribution: row.attribution, attachmentId: row.attachment_id, at: now };
  try {
    db.transaction(() => {
      const cur = db.prepare('SELECT state FROM attachments WHERE attachment_id = ?').get(row.attachment_id) as { state: string };
      if (cur.state === 'completed') return; // settled once
      const src = db.prepare('SELECT attributions FROM sources WHERE partition = ? AND source_id = ?').get(row.partition, s.sourceId) as
        | { attributions: string }
        | undefined;
      let batchId: number | null;
      if (src) {
        db.prepare('UPDATE sources SET attributions = ? WHERE partition = ? AND source_id = ?')
          .run(JSON.stringify([...JSON.parse(src.attributions), attribution]), row.partition, s.sourceId);
        batchId = firstRetention(store, s);
      } else {
        if (!files) throw new KnowledgeError('E_INTERNAL', `attachment ${row.attachment_id}: source ${s.sourceId} vanished before acknowledgement`);
        sourceInserter(db)({
          partition: row.partition, sourceId: s.sourceId, sha256: row.sha256, size: row.size, mediaType: s.mediaType, path: s.path,
          descriptorPath: s.descriptorPath, inHistory: s.inHistory, attributions: [attribution], createdAt: row.created_at, descriptor: files.descriptor,
        });
        for (const p of prints) upsertVaultFile(db, p.path, p.fp);
        const changes: BatchChange[] = [];
        if (s.inHistory && files.original) changes.push({ path: s.path, bytes: files.original });
        changes.push({ path: s.descriptorPath, bytes: files.descriptor });
        if (s.gitignorePath && files.gitignore) changes.push({ path: s.gitignorePath, bytes: files.gitignore });
        batchId = enqueueBatch(db, {
          kind: 'attachment',
          refId: row.attachment_id,
          actor: row.actor,
          subject: clipCodePoints(`${row.actor === 'agent' ? 'Agent' : 'Operator'} attached ${row.filename}`, 100),
          createdAt: now,
          changes,
        });
      }
      const receipt: Omit<AttachmentReceipt, 'git'> = {
        kind: 'attachment',
        attachmentId: row.attachment_id,
        requestId: row.request_id,
        partition: row.partition,
        actor: row.actor,
        createdAt: row.created_at,
        sourceId: s.sourceId,
        path: s.path,
        descriptorPath: s.descriptorPath,
        filename: row.filename,
        sha256: row.sha256,
        size: row.size,
        mediaType: s.mediaType,
        inHistory: s.inHistory,
        newSource: src === undefined,
      };
      db.prepare(
        `UPDATE attachments SET state = 'completed', receipt = ?, batch_id = ?, completed_at = ?, updated_at = ?, failure = NULL
         WHERE attachment_id = ?`,
      ).run(JSON.stringify(receipt), batchId, now, now, row.attachment_id);
      // [ATT-2] the assembled file is durable: only now are the chunks released.
      db.prepare('DELETE FROM attachment_chunks WHERE attachment_id = ?').run(row.attachment_id);
    }).immediate();
  } catch (err) {
    if (err instanceof KnowledgeError) throw err;
    const e = ioError(err, `attachment ${row.attachment_id} is installed but could not be acknowledged (retry the same request)`);
    noteFailure(db, row.attachment_id, e.message, now);
    throw e;
  }
  crashPoint('attach-after-acknowledge');
  return loadAttachment(db, row.attachment_id);
}
