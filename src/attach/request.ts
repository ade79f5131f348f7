/**
 * Pure planning half of attachments (STYLE habit 2): parse a start request
 * at the boundary, and decide what to do with one incoming chunk. No I/O;
 * table-tested without a store.
 */
import { createHash, randomUUID } from 'node:crypto';
import { KnowledgeError } from '../errors.js';
import { parsePartition } from '../store/layout.js';
import { isUuid } from '../publish/validate.js';
import { ATTACH_LIMITS, type AttachStartRequest, type CheckedStart } from './types.js';
import { newId } from '../request-id.js';
import { normalizeMediaType } from '../evidence/media.js';
import { loneSurrogateProblem } from '../records/record.js';

const SHA256_RE = /^[0-9a-f]{64}$/i;

export function newAttachmentId(): string {
  return newId('att');
}

/** Parse and normalise a start request [ATT-1]; throws E_VALIDATION / E_TOO_LARGE with the reason. */
export function checkStartRequest(req: AttachStartRequest): CheckedStart {
  const partition = parsePartition(req.partition);
  if (req.actor !== 'agent' && req.actor !== 'operator') {
    throw new KnowledgeError('E_VALIDATION', `actor must be "agent" or "operator", got ${JSON.stringify(req.actor)}`);
  }
  if (req.requestId !== undefined && !isUuid(req.requestId)) {
    throw new KnowledgeError('E_VALIDATION', `request id must be a UUID, got ${JSON.stringify(req.requestId)}`);
  }
  const filename = req.filename;
  if (typeof filename !== 'string' || filename === '' || filename === '.' || filename === '..') {
    throw new KnowledgeError('E_VALIDATION', 'filename is required');
  }
  if (/[/\\]/.test(filename) || [...filename].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f)) {
    throw new KnowledgeError('E_VALIDATION', `filename ${JSON.stringify(filename)} must be a plain file name (no directories or control characters)`);
  }
  const loneInName = loneSurrogateProblem('filename', filename);
  if (loneInName !== null) throw new KnowledgeError('E_VALIDATION', loneInName);
  if (Buffer.byteLength(filename, 'utf8') > ATTACH_LIMITS.filenameBytes) {
    throw new KnowledgeError('E_VALIDATION', `filename is longer than ${ATTACH_LIMITS.filenameBytes} bytes`);
  }
  if (typeof req.size !== 'number' || !Number.isSafeInteger(req.size) || req.size < 0) {
    throw new KnowledgeError('E_VALIDATION', `size must be a non-negative integer, got ${JSON.stringify(req.size)}`);
  }
  if (req.size > ATTACH_LIMITS.attachmentBytes) {
    throw new KnowledgeError('E_TOO_LARGE', `attachments are limited to ${ATTACH_LIMITS.attachmentBytes} bytes; declared ${req.size}`);
  }
  if (typeof req.sha256 !== 'string' || !SHA256_RE.test(req.sha256)) {
    throw new KnowledgeError('E_VALIDATION', 'sha256 must be 64 hexadecimal characters');
  }
  const mediaType = normalizeMediaType(req.mediaType) ?? null;
  const attribution = req.attribution ?? '';
  if (typeof attribution !== 'string' || Buffer.byteLength(attribution, 'utf8') > ATTACH_LIMITS.attributionBytes) {
    throw new KnowledgeError('E_VALIDATION', `attribution must be a string of at most ${ATTACH_LIMITS.attributionBytes} bytes`);
  }
  const loneInAttribution = loneSurrogateProblem('attribution', attribution);
  if (loneInAttribution !== null) throw new KnowledgeError('E_VALIDATION', loneInAttribution);
  const sha256 = req.sha256.toLowerCase();
  const hash = createHash('sha256')
    .update(JSON.stringify({ partition, actor: req.actor, filename, size: req.size, sha256, mediaType, attribution }))
    .digest('hex');
  return { requestId: (req.requestId ?? randomUUID()).toLowerCase(), partition, actor: req.actor, filename, size: req.size, sha256, mediaType, attribution, hash };
}

/** What one incoming chunk means for an upload that has `received` of `size` bytes [ATT-1]. */
export type ChunkPlan =
  /** The next bytes: commit them. */
  | { kind: 'append' }
  /** A retry of a chunk already committed at this offset: compare, then acknowledge without writing. */
  | { kind: 'retry' }
  | { kind: 'reject'; code: 'E_VALIDATION' | 'E_TOO_LARGE'; reason: string };

/**
 * Chunks are appended strictly in order. A chunk that starts where a
 * committed one started may be a retry (the caller compares the bytes);
 * anything else before `received` overlaps, anything after it is out of
 * order, and nothing may reach past the declared size.
 */
export function planChunk(upload: { size: number; received: number }, offset: number, length: number): ChunkPlan {
  if (!Number.isSafeInteger(offset) || offset < 0) return { kind: 'reject', code: 'E_VALIDATION', reason: `chunk offset must be a non-negative integer, got ${offset}` };
  if (length === 0) return { kind: 'reject', code: 'E_VALIDATION', reason: 'empty chunk' };
  if (length > ATTACH_LIMITS.chunkBytes) {
    return { kind: 'reject', code: 'E_TOO_LARGE', reason: `chunk of ${length} bytes is larger than the limit of ${ATTACH_LIMITS.chunkBytes}` };
  }
  if (offset + length > upload.size) {
    return { kind: 'reject', code: 'E_VALIDATION', reason: `chunk [${offset}, ${offset + length}) reaches beyond the declared size ${upload.size}` };
  }
  if (offset === upload.received) return { kind: 'append' };
  if (offset > upload.received) {
    return { kind: 'reject', code: 'E_VALIDATION', reason: `chunk at offset ${offset} is out of order: the next expected offset is ${upload.received}` };
  }
  return { kind: 'retry' };
}
