import type { PartitionId } from '../store/layout.js';
import type { SourceFiles } from '../evidence/source.js';
import type { RecordMeta } from '../records/types.js';
import type { GitState } from '../git/types.js';

export type Actor = 'agent' | 'operator';

export interface EvidenceInput {
  /** Original file name (used for the retained file name and media sniffing). */
  name: string;
  bytes: Buffer;
  mediaType?: string;
  attribution?: string;
}

export interface PublishRequest {
  requestId?: string;
  partition: string;
  actor: Actor;
  /** Record files as a caller writes them (Appendix A). */
  records: string[];
  evidence: EvidenceInput[];
}

export interface PlannedRecord {
  id: string;
  revision: number;
  priorRevision: number | null;
  path: string;
  /**
   * A deleted record published again under its id at another path: its last
   * path before it was deleted, where its history goes on (read/history.ts).
   */
  formerPath?: string;
  sha256: string;
  meta: RecordMeta;
  body: string;
}

export interface PlannedSource extends SourceFiles {
  attribution: string;
  /** The same bytes given again in this request with other attributions: each is kept too (absent in older journals). */
  moreAttributions?: string[];
}

export interface PlannedFile {
  path: string;
  priorSha256: string | null;
  /** Queued into the outbox for the checkpoint [GIT-7, GIT-9]. */
  inHistory: boolean;
}

/** Everything the journal keeps about an accepted request, bytes aside. */
export interface Plan {
  publicationId: string;
  requestId: string;
  requestHash: string;
  partition: PartitionId;
  actor: Actor;
  createdAt: string;
  records: PlannedRecord[];
  sources: PlannedSource[];
  files: PlannedFile[];
}

export interface PublicationReceipt {
  kind: 'publication';
  publicationId: string;
  requestId: string;
  partition: string;
  actor: Actor;
  createdAt: string;
  records: Array<{ id: string; revision: number; path: string; sha256: string }>;
  evidence: Array<{ sourceId: string; path: string; sha256: string; size: number; inHistory: boolean }>;
  git: GitState;
}
