/**
 * Attaching a file path [ATT-3] through the same chunked upload as any
 * caller [ATT-1]: open it safely, hash it (streamed), start or resume the
 * upload under the request id, and send the missing chunks from where the
 * store says it stopped. One reused buffer: memory stays bounded by the
 * chunk size, whatever the file size.
 */
import { KnowledgeError } from '../errors.js';
import type { Store } from '../store/store.js';
import { checkStartRequest } from './request.js';
import { startUpload, appendRun, findAttachment } from './upload.js';
import { openRegularFile, hashOpenFile, readAt, assertUnchanged, closeFile } from './file-source.js';
import { ATTACH_LIMITS, type AttachFileOptions } from './types.js';
import { nowIso } from '../clock.js';
import { yieldToSignals } from '../interrupt.js';

export interface FileUpload {
  attachmentId: string;
  requestId: string;
  resumedFrom: number;
  sentBytes: number;
}

/**
 * Async only to let signals in: between two commit groups (and as often
 * while the file is hashed first) the upload waits one turn of the event
 * loop, so Ctrl-C (SIGINT, SIGTERM, SIGHUP) stops it there, its committed
 * bytes kept for a resume under the same request id (src/interrupt.ts),
 * rather than once the whole file is read or sent.
 */
export async function uploadFile(store: Store, path: string, opts: AttachFileOptions): Promise<FileUpload> {
  const chunk = opts.chunkBytes ?? ATTACH_LIMITS.fileChunkBytes;
  if (!Number.isSafeInteger(chunk) || chunk < 1 || chunk > ATTACH_LIMITS.chunkBytes) {
    throw new KnowledgeError('E_VALIDATION', `chunk size must be between 1 and ${ATTACH_LIMITS.chunkBytes} bytes`);
  }
  const group = opts.commitBytes ?? ATTACH_LIMITS.fileGroupBytes;
  if (!Number.isSafeInteger(group) || group < 0) throw new KnowledgeError('E_VALIDATION', 'commit interval must be a non-negative number of bytes');
  const f = openRegularFile(path, opts.allowedRoot);
  try {
    const { sha256, size } = await hashOpenFile(f, chunk, Math.max(group, chunk));
    if (size !== f.size) throw new KnowledgeError('E_VALIDATION', `${path} changed while it was being attached`);
    const req = checkStartRequest({
      requestId: opts.requestId,
      partition: opts.partition ?? 'private',
      actor: opts.actor ?? 'operator',
      filename: f.name,
      size,
      sha256,
      mediaType: opts.mediaType,
      attribution: opts.attribution,
    });
    const row = startUpload(store.db, req, nowIso());
    const resumedFrom = row.state === 'completed' ? row.size : row.received;
    if (row.state === 'receiving' && resumedFrom < size) {
      const buf = Buffer.allocUnsafe(Math.min(chunk, size));
      // One commit group's chunks, from `from`: [from, end).
      const chunks = function* (from: number, end: number) {
        for (let offset = from; offset < end;) {
          const want = Math.min(chunk, end - offset);
          const n = readAt(f.fd, buf, offset, want);
          if (n !== want) throw new KnowledgeError('E_VALIDATION', `${path} changed while it was being attached`);
          yield { offset, bytes: buf.subarray(0, n) };
          offset += n;
        }
      };
      try {
        const span = Math.max(group, chunk);
        let at = row;
        for (let from = resumedFrom; from < size; from = at.received) {
          if (from > resumedFrom) await yieldToSignals();
          at = appendRun(store, at, chunks(from, Math.min(size, from + span)), { groupBytes: group, now: () => nowIso() });
        }
        assertUnchanged(f, path);
      } catch (err) {
        if (err instanceof KnowledgeError && err.code === 'E_IO') {
          const kept = findAttachment(store.db, row.attachment_id)?.received ?? 0;
          throw new KnowledgeError('E_IO', `${err.message}; ${kept} of ${size} bytes are kept: retry with request id ${req.requestId} to resume`, err.details);
        }
        throw err;
      }
    }
    const sentBytes = row.state === 'completed' ? 0 : size - resumedFrom;
    return { attachmentId: row.attachment_id, requestId: req.requestId, resumedFrom, sentBytes };
  } finally {
    closeFile(f);
  }
}
