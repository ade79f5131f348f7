/**
 * Attachment receipts and their activity entries (Appendix A, SURF-2). The
 * git state is read from the outbox each time, so a receipt fetched later
 * shows the checkpoint that happened since [GIT-14].
 */
import { KnowledgeError } from '../errors.js';
import type { DB } from '../store/db.js';
import { batchGitState } from '../checkpoint/outbox.js';
import type { GitState } from '../git/types.js';
import { loadAttachment, type AttachmentRow } from './upload.js';
import type { AttachmentReceipt } from './types.js';

export function receiptOf(db: DB, row: AttachmentRow): AttachmentReceipt {
  if (row.state !== 'completed' || !row.receipt) {
    throw new KnowledgeError(
      'E_CONFLICT',
      `attachment ${row.attachment_id} is not complete: ${row.received} of ${row.size} bytes received${row.failure ? ` (last attempt: ${row.failure})` : ''}; resume it with the same request id`,
    );
  }
  const receipt = JSON.parse(row.receipt) as AttachmentReceipt;
  receipt.git = attachmentGit(db, row);
  return receipt;
}

/**
 * Where a completed attachment's bytes are in history: the batch that first carried its source's files, else (a
 * source adopted by a scan while the branch already held its files: scan/adopt.ts) the branch tip that scan saw.
 * Never "committed" without a commit: a source no batch carried and no adopting scan found in the branch (one an
 * older Knowledge adopted) names none.
 */
function attachmentGit(db: DB, row: AttachmentRow): GitState {
  if (row.batch_id === null) {
    const at = db.prepare('SELECT h.commit_id FROM sources s JOIN adopted_in_history h USING (partition, source_id) WHERE s.partition = ? AND s.sha256 = ? LIMIT 1')
      .pluck().get(row.partition, row.sha256) as string | undefined;
    if (at !== undefined) return { state: 'committed', commit: at };
    return {
      state: 'pending', code: 'waiting',
      reason: 'no checkpoint of this store carried its source, and no commit holding it was recorded when a scan adopted it (a Knowledge before this one did); its files are in the vault',
    };
  }
  return batchGitState(db, row.batch_id);
}

/** A completed attachment's receipt by attachment id or request id. */
export function attachmentReceipt(db: DB, id: string): AttachmentReceipt {
  return receiptOf(db, loadAttachment(db, id));
}

export interface AttachmentActivity {
  kind: 'attachment';
  id: string;
  createdAt: string;
  actor: string;
  git: GitState;
  detail: Record<string, unknown>;
}

/** An attachment's activity entry (src/activity.ts reads the rows); an unfinished upload says how far it got. */
export function attachmentEntry(db: DB, r: AttachmentRow): AttachmentActivity {
  const receipt = r.receipt ? (JSON.parse(r.receipt) as AttachmentReceipt) : null;
  const git: GitState = r.state === 'completed'
    ? attachmentGit(db, r)
    : { state: 'pending', code: 'waiting', reason: r.failure ?? (r.received < r.size
      ? `upload incomplete: ${r.received} of ${r.size} bytes received`
      : `all ${r.size} bytes received, not yet installed: knowledge resume ${r.attachment_id} finishes it`) };
  return {
    kind: 'attachment' as const,
    id: r.attachment_id,
    createdAt: r.created_at,
    actor: r.actor,
    git,
    detail: {
      partition: r.partition,
      status: r.state,
      requestId: r.request_id,
      filename: r.filename,
      size: r.size,
      received: r.received,
      ...(receipt ? { sourceId: receipt.sourceId, path: receipt.path, inHistory: receipt.inHistory } : {}),
      ...(r.failure ? { failure: r.failure } : {}),
    },
  };
}
