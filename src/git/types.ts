/**
 * Shared value types of the Git layer. Outcomes are discriminated unions, not
 * exceptions (STYLE habit 5): a failed Git step never rolls back a publication
 * [GIT-15]; it becomes a visible `pending` state with a stable code [GIT-14].
 */

/** Stable reason codes for a checkpoint that could not be made yet [GIT-18]. */
export type PendingCode =
  | 'locked'
  | 'detached-head'
  | 'unborn-branch'
  | 'linked-worktree'
  | 'operation-in-progress'
  | 'unmerged'
  | 'malformed'
  | 'permission'
  | 'disk-full'
  | 'dubious-ownership'
  | 'branch-moved'
  | 'not-vault-root'
  | 'timeout'
  | 'git-error'
  | 'waiting'
  /** Activity only: a publication whose install was refused after it was journaled; it never reaches Git. */
  | 'abandoned';

export type GitState =
  | { state: 'committed'; commit: string }
  | { state: 'pending'; code: PendingCode; reason: string }
  | { state: 'unavailable'; reason: string };

export interface BatchChange {
  /** Vault-relative, '/' separators, already validated by the caller. */
  path: string;
  /**
   * Exact bytes to commit; null = deletion. May be a getter that reads them
   * from the outbox on each access (a large chain, see outbox.ts): read it
   * once per use and do not keep it.
   */
  readonly bytes: Buffer | null;
  /**
   * Whether this change deletes the path, when known without reading the
   * bytes (a lazy change sets it); see {@link isDeletion}.
   */
  readonly deleted?: boolean;
  /**
   * The file's owner-execute bit as Knowledge read it (a scan) or wrote it
   * (its own installs: never). Committed as mode 100755 or 100644 where the
   * repository records the bit (core.fileMode); elsewhere, and when unknown
   * (a batch queued by an older Knowledge), the path keeps the mode it had
   * (commit-stream.ts chainModes).
   */
  readonly exec?: boolean;
}

/** A deletion? Asks `deleted` first, so a lazy change's bytes are not read for it. */
export function isDeletion(ch: BatchChange): boolean {
  return ch.deleted ?? ch.bytes === null;
}

export interface BatchForCommit {
  /** Store's vault id, goes in the Knowledge-Batch trailer. */
  vaultId: string;
  /** Outbox sequence number. */
  batchId: number;
  kind: 'publication' | 'scan' | 'attachment';
  /** Publication id / scan id / attachment id. */
  refId: string;
  actor: 'agent' | 'operator' | 'external';
  /** ISO UTC; author AND committer date so a rebuilt commit is byte-identical [GIT-6]. */
  createdAt: string;
  /** First line of the commit message. */
  subject: string;
  changes: BatchChange[];
  /** A scan's: the branch tip it saw before reading any file (git/checkpoint.ts withoutOvertaken). */
  observedTip?: string | null;
}

/** Blob ids (hex) of a batch's files, by path, known without reading their bytes (blob-preload.ts). */
export interface BlobIds {
  get(path: string): string | undefined;
}
