/**
 * Value types of the read side [READ-1][READ-2]. These are the shapes the
 * CLI, the Gateway and the MCP tools render; they are plain JSON (no Dates,
 * no Buffers) so every surface can pass them through unchanged.
 */
import type { PartitionId } from '../store/layout.js';
import type { Lifecycle, RecordKind, Citation } from '../records/types.js';
import type { PendingCode } from '../git/types.js';

/** What every listing shows of a record; built from the `records` index. */
export interface RecordSummary {
  id: string;
  partition: PartitionId;
  /** Vault-relative, '/' separators. */
  path: string;
  kind: RecordKind;
  title: string;
  revision: number;
  lifecycle: Lifecycle;
  tags: string[];
  aliases: string[];
  /** UTC ISO-8601 as written in the frontmatter. */
  updatedAt: string;
  recordedAt: string;
}

/** Exact lookup by id, else title, else alias [READ-1]. */
export type LookupResult =
  | { status: 'found'; record: RecordSummary }
  | { status: 'ambiguous'; candidates: RecordSummary[] }
  | { status: 'missing' };

export type SearchMode = 'all' | 'any' | 'phrase';

/** Keyword search input as a caller sends it (validated by `parseSearchQuery`). */
export interface SearchQuery {
  query: string;
  /** all (default): every word must match; any: at least one; phrase: the words in order. */
  mode?: SearchMode;
  kind?: RecordKind;
  tag?: string;
  lifecycle?: Lifecycle;
  /** Inclusive lower bound on updated_at: a UTC timestamp or a YYYY-MM-DD date (midnight UTC). */
  updatedAfter?: string;
  /** Exclusive upper bound on updated_at: a UTC timestamp or a YYYY-MM-DD date (midnight UTC). */
  updatedBefore?: string;
  /** 1..50, default 20. */
  limit?: number;
  offset?: number;
}

export interface SearchHit extends RecordSummary {
  /**
   * A short excerpt of the best-matching column with the matched words
   * between SNIPPET_OPEN and SNIPPET_CLOSE (see ./query.ts). Plain text,
   * not HTML: escape it before rendering.
   */
  snippet: string;
  /**
   * Where the matched words are in `snippet`: [start, end) offsets in UTF-16
   * code units (JavaScript string indices) of each word between the markers.
   * The markers alone cannot say it when the record's own text holds `**`
   * (Markdown bold, `2 ** 10`, `src/**`).
   */
  marks: Array<[number, number]>;
  /**
   * Relevance, higher is better (negated FTS5 BM25; title > aliases > body). Only for a caller who may read every
   * partition: BM25's statistics cover the whole store, so the number would tell a caller restricted to some
   * partitions how often its words occur in the others.
   */
  score?: number;
}

export interface SearchResult {
  results: SearchHit[];
  /** All matches the caller may see, across pages. */
  total: number;
  /** Offset of the next page, or null on the last page. */
  nextOffset: number | null;
}

export interface ListQuery {
  partition?: string;
  kind?: RecordKind;
  /** The record's type: `claim_kind` of a claim or `relationship_type` of a relationship. */
  type?: string;
  tag?: string;
  lifecycle?: Lifecycle;
  /** 1..500, default 100. */
  limit?: number;
  offset?: number;
  /**
   * Where the page starts: a previous page's `nextCursor` (opaque). The page
   * holds the records after that one in the inventory order, whatever was
   * added, updated or deleted meanwhile. Not with a non-zero `offset`.
   */
  cursor?: string;
}

export interface ListResult {
  /** Stable order: updated_at descending, then id. */
  records: RecordSummary[];
  total: number;
  /** Offset of the next page, or null on the last page; always null when the page was asked for by `cursor`. */
  nextOffset: number | null;
  /** Where the next page starts (pass it as `cursor`), or null on the last page. */
  nextCursor: string | null;
}

/**
 * How the record's file on disk compares with the indexed version: `same`,
 * `changed` (edited outside Knowledge since the last publication or scan;
 * `text` is what is on disk now) or `missing` (`text` is null).
 */
export type OnDisk = 'same' | 'changed' | 'missing';

export interface RecordDetail extends RecordSummary {
  /** The validated frontmatter as indexed (unknown keys are in `text`). */
  meta: Record<string, unknown>;
  /** The Markdown body as indexed. */
  body: string;
  /** The whole file as it is on disk, or null when it is missing. */
  text: string | null;
  onDisk: OnDisk;
}

/** One citation of the record, with the source descriptor it names when the store knows it. */
export type EvidenceEntry =
  | {
      known: true;
      sourceId: string;
      citation: Citation;
      /** Retained original, vault-relative. */
      path: string;
      descriptorPath: string;
      sha256: string;
      size: number;
      mediaType: string;
      /** False for media and originals of 100 MiB or more [GIT-9]. */
      inHistory: boolean;
      attributions: Array<{ attribution: string; publicationId?: string; at?: string }>;
    }
  | { known: false; sourceId: string; citation: Citation };

export interface RecordView {
  record: RecordDetail;
  evidence: EvidenceEntry[];
  /** Record ids this record points at: dependencies, relationship endpoints, body wiki-links `[[id]]`. */
  links: string[];
  /** Records the caller may see whose dependencies, endpoints or body wiki-links point here (newest first, at most 200). */
  backlinks: RecordSummary[];
  /** How many such records there are in all. */
  backlinksTotal: number;
}

/** The actor label of a commit [GIT-11]; `unknown` for commits Knowledge did not make. */
export type HistoryActor = 'agent' | 'operator' | 'external' | 'unknown';

export interface RecordVersion {
  /** Full commit id. */
  commit: string;
  /** First parent, or null for a root commit. */
  parent: string | null;
  /** Author date, UTC ISO-8601. */
  date: string;
  actor: HistoryActor;
  subject: string;
  /** The record's path in this commit (differs from today's after a rename). */
  path: string;
  /** `revision` of the frontmatter in this version, null when unreadable. */
  revision: number | null;
  publicationId?: string;
  scanId?: string;
}

/** What reading the repository found; history is best-effort and never fails on Git. */
export type HistoryGit =
  | { state: 'ready'; branch: string; head: string | null }
  | { state: 'absent'; reason: string }
  | { state: 'pending'; code: PendingCode; reason: string }
  | { state: 'unavailable'; reason: string };

export interface RecordHistory {
  id: string;
  path: string;
  /** Newest first. */
  versions: RecordVersion[];
  /** Versions of this record queued in the outbox and not committed yet [GIT-14]. */
  queued: number;
  /**
   * Commits Knowledge recorded for this record's paths that are not on the
   * branch (reset, or .git replaced or deleted): versions missing from the
   * list. Absent when none; `knowledge verify` names them.
   */
  offBranch?: number;
  git: HistoryGit;
}

export interface RecordDiff {
  id: string;
  from: string;
  to: string;
  /** Path of the record at `to`. */
  path: string;
  /** Unified diff (`git diff`), empty when the versions are identical. */
  patch: string;
}
