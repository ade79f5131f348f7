/**
 * Value types of a scan [SCAN-1..4]: what the walk observes, what the
 * planner decides, what the receipt reports (Appendix A).
 */
import type { GitState } from '../git/types.js';

/**
 * Stable diagnostic codes [REC-3, SCAN-2]. A diagnostic never stops a scan;
 * a file with one is still checkpointed as the bytes on disk when it can be
 * read.
 */
export type DiagnosticCode =
  /** Not valid UTF-8, a byte order mark, missing or unclosed frontmatter, or frontmatter that is not valid YAML. */
  | 'broken-envelope'
  /** Valid frontmatter that is not a valid knowledge-record-v1 (a field is missing or wrong). */
  | 'invalid-record'
  /** A `.yaml`/`.yml` file that does not parse as YAML 1.2. */
  | 'broken-yaml'
  /** The record's `scope` is not the partition it sits in (it is indexed in the partition it sits in). */
  | 'scope-mismatch'
  /** Another file claims the same record id; exact lookup returns no record for it. */
  | 'duplicate-id'
  /** A dependency, relationship endpoint or evidence citation names nothing in this partition. */
  | 'invalid-reference'
  /** A symbolic link: never followed, never committed. */
  | 'symlink'
  /** A file or folder the scan may not read (permissions); what Knowledge knew under it is kept. */
  | 'unreadable'
  /** A file larger than a scan reads (256 MiB): not checkpointed; what Knowledge recorded of it is kept. */
  | 'too-large'
  /** A name that is not valid UTF-8 or cannot be committed (control characters, backslash, `git~1` and other names Git takes for `.git`). */
  | 'invalid-name'
  /** A folder holding a `.git` of its own (a submodule, a clone): not scanned; what Knowledge recorded under it is kept. */
  | 'nested-repository'
  /** A recorded file the repository's sparse checkout leaves out of the working tree (skip-worktree): kept as recorded. */
  | 'sparse-checkout'
  /** A FIFO, socket or device named like a record. */
  | 'special-file'
  /** The file kept changing while it was read; the next scan picks it up. */
  | 'unstable'
  /** A folder under conversations/ whose name is not a session id. */
  | 'not-a-partition'
  /**
   * A source descriptor (`evidence/<hh>/<sourceId>.yaml`) the store has no source for, not adopted: not a valid
   * descriptor of that source, or its retained original is missing or holds other bytes (scan/adopt.ts).
   */
  | 'unadopted-source';

export interface ScanDiagnostic {
  /** Vault-relative, '/' separators; bytes that are not UTF-8 are shown as \xNN. */
  path: string;
  code: DiagnosticCode;
  reason: string;
}

/** A file whose bytes were read and hashed this scan (metadata changed, or new). */
export interface HashedFile {
  path: string;
  sha256: string;
  /** Whether Knowledge had recorded this path before, and the hash it recorded. */
  knownSha256: string | null;
  /** The record id the new bytes claim, when they are a valid record. */
  recordId: string | null;
  /**
   * Same bytes as recorded, but the executable bit changed (`chmod`), in a
   * repository that records it (core.fileMode): a modification, as in Git.
   */
  execChanged?: boolean;
}

/** A hashed file with the fingerprint to record for it [SCAN-4]. */
export interface ReadFile extends HashedFile {
  size: number;
  mtimeNs: string;
  ctimeNs: string;
  ino: string;
  /** The owner-execute bit of the file read. */
  exec: boolean;
  /** Too close to the scan's clock to trust next time (see plan.ts isRacy). */
  racy: boolean;
}

/** A recorded file that is no longer there. */
export interface MissingFile {
  path: string;
  sha256: string;
  /** The record id its last indexed version claimed. */
  recordId: string | null;
}

export interface Rename {
  from: string;
  to: string;
  /** Present when the bytes changed as well (a record moved and edited at once, paired by its id). */
  edited?: true;
}

/** The planner's classification (pure; see plan.ts). */
export interface ScanPlan {
  added: string[];
  modified: string[];
  deleted: string[];
  renamed: Rename[];
  /** Read and hashed, same bytes (and executable bit) as recorded (e.g. `touch`, or a racy entry): fingerprint refresh only. */
  touched: string[];
}

export interface RetriedCheckpoint {
  kind: 'publication' | 'scan' | 'attachment';
  /** Publication, scan or attachment id. */
  id: string;
  batchId: number;
  git: GitState;
}

/** Appendix A: the scan receipt. */
export interface ScanReceipt {
  kind: 'scan';
  scanId: string;
  /** The partition asked for, or "all" (every partition the caller may scan). */
  partition: string;
  /** The partitions walked. */
  partitions: string[];
  /** True when this scan made the baseline of at least one partition [GIT-8]. */
  baseline: boolean;
  baselined: string[];
  actor: 'external';
  createdAt: string;
  added: string[];
  modified: string[];
  deleted: string[];
  renamed: Rename[];
  /** Files recognised from stored metadata without reading them [SCAN-4]. */
  unchanged: number;
  /** Files read and hashed. */
  hashed: number;
  diagnostics: ScanDiagnostic[];
  /**
   * Only in a receipt read back later (`receipt SCAN_ID`): how many of the diagnostics the scan answered with were
   * not kept with it (a kept receipt holds at most KEPT_DIAGNOSTICS, src/scan/receipt.ts). Absent when none were cut.
   */
  diagnosticsOmitted?: number;
  /**
   * Sources found on disk that the store did not know, adopted by this scan (scan/adopt.ts): their ids and retained
   * paths. Present only when the scan adopted some.
   */
  adopted?: Array<{ sourceId: string; path: string }>;
  /** Waiting checkpoints this scan retried before its own [GIT-16, SCAN-3]. */
  retried: RetriedCheckpoint[];
  /** The scan's own checkpoint; null when it found nothing to commit. */
  git: GitState | null;
}

/** Progress of a long scan, for a terminal progress bar [SCAN-4]. */
export interface ScanProgress {
  phase: 'walk' | 'adopt' | 'record' | 'commit';
  /** In the adopt phase: originals of sources found on disk hashed so far, of how many (scan/adopt.ts). */
  adopting?: { done: number; of: number };
  /** Files looked at so far. */
  seen: number;
  /** Files Knowledge knew before this scan (an estimate of the total; 0 for a first scan). */
  expected: number;
  /** Files read and hashed so far. */
  hashed: number;
}
