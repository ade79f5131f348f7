/** Value types of attachments [ATT-1..3]: requests, upload status, receipts. */
import type { GitState } from '../git/types.js';
import type { PartitionId } from '../store/layout.js';

export type AttachActor = 'agent' | 'operator';

export const ATTACH_LIMITS = {
  /** Largest chunk accepted by attachChunk [ATT-1]: bounded memory per request. */
  chunkBytes: 8 * 1024 * 1024,
  /** Chunk size used when Knowledge reads a file itself (attachFile). */
  fileChunkBytes: 4 * 1024 * 1024,
  /** attachFile makes its written chunks durable and commits them once per this many bytes. */
  fileGroupBytes: 64 * 1024 * 1024,
  /** Largest declared attachment. */
  attachmentBytes: 64 * 1024 * 1024 * 1024,
  filenameBytes: 255,
  attributionBytes: 4096,
};

/** What a caller declares when it starts an upload [ATT-1]. */
export interface AttachStartRequest {
  /** Caller-chosen UUID; the same id with the same arguments resumes. Generated when absent. */
  requestId?: string;
  partition: string;
  actor: AttachActor;
  /** The original's file name (no directories). */
  filename: string;
  size: number;
  /** Lowercase or uppercase hex SHA-256 of the whole original. */
  sha256: string;
  mediaType?: string;
  attribution?: string;
}

/** A start request after parsing at the boundary: every field checked and normalised. */
export interface CheckedStart {
  requestId: string;
  partition: PartitionId;
  actor: AttachActor;
  filename: string;
  size: number;
  sha256: string;
  mediaType: string | null;
  attribution: string;
  /** Identity of the arguments: the same request id with another hash is E_CONFLICT. */
  hash: string;
}

export type UploadState = 'receiving' | 'completed';

/** Where an upload stands; `received` is the offset of the next chunk to send. */
export interface AttachmentStatus {
  attachmentId: string;
  requestId: string;
  partition: string;
  state: UploadState;
  size: number;
  received: number;
  /** Largest chunk the store accepts. */
  chunkLimit: number;
}

/** Appendix A style receipt of a completed attachment. */
export interface AttachmentReceipt {
  kind: 'attachment';
  attachmentId: string;
  requestId: string;
  partition: string;
  actor: AttachActor;
  createdAt: string;
  sourceId: string;
  /** Retained original, vault-relative. */
  path: string;
  descriptorPath: string;
  filename: string;
  sha256: string;
  size: number;
  mediaType: string;
  /** [GIT-9] whether the original's exact bytes are in the automatic history. */
  inHistory: boolean;
  /** False when the same bytes were already a source of the partition (one source, attribution added). */
  newSource: boolean;
  git: GitState;
}

/** What attachFile reports besides the receipt: how much of the upload this call sent. */
export interface AttachFileResult {
  receipt: AttachmentReceipt;
  /** Offset the upload resumed at (0 for a fresh upload). */
  resumedFrom: number;
  /** Bytes this call sent as chunks. */
  sentBytes: number;
}

export interface AttachFileOptions {
  partition?: string;
  actor?: AttachActor;
  requestId?: string;
  attribution?: string;
  mediaType?: string;
  /** Only files under this directory (after resolving symlinks) may be attached [ATT-3]. Required. */
  allowedRoot: string;
  /** Bytes per chunk (default ATTACH_LIMITS.fileChunkBytes). */
  chunkBytes?: number;
  /** Bytes written between two durable commits (default ATTACH_LIMITS.fileGroupBytes); a crash re-reads at most this much. */
  commitBytes?: number;
}
