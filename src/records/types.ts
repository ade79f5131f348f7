/**
 * Record model [REC-1]: the validated, store-complete frontmatter of one
 * `knowledge-record-v1` Markdown file.
 */
export const RECORD_FORMAT = 'knowledge-record-v1';

export type RecordKind = 'page' | 'claim' | 'relationship';
export type Lifecycle = 'active' | 'superseded' | 'withdrawn' | 'merged';

export const RECORD_KINDS: readonly RecordKind[] = ['page', 'claim', 'relationship'];
export const LIFECYCLES: readonly Lifecycle[] = ['active', 'superseded', 'withdrawn', 'merged'];

/** One citation of evidence: a source id, an optional inclusive line range, an optional exact quote. */
export interface Citation {
  source: string;
  lines?: [number, number];
  quote?: string;
}

/** The validated, store-complete frontmatter. */
export interface RecordMeta {
  format: 'knowledge-record-v1';
  id: string;
  revision: number;
  kind: RecordKind;
  title: string;
  recorded_at: string;
  updated_at: string;
  scope: string;
  lifecycle: Lifecycle;
  aliases: string[];
  tags: string[];
  dependencies: string[];
  evidence: Citation[];
  /** Required for claims. */
  claim_kind?: string;
  /** Required for relationships (with `from` and `to`, two endpoint record ids). */
  relationship_type?: string;
  from?: string;
  to?: string;
}

/** Keys the store owns and (re)writes on every publication, in their canonical order. */
export const STORE_OWNED_KEYS = ['format', 'id', 'revision', 'scope', 'recorded_at', 'updated_at'] as const;

/** Maximum title length in Unicode code points. */
export const MAX_TITLE_LENGTH = 300;
