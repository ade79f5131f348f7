/**
 * The one core service (STYLE habit 3). CLI, Gateway and MCP build it once
 * and call it in-process; every access check lives here.
 *
 * Pipeline: validate -> journal -> install -> acknowledge -> checkpoint.
 */
import { KnowledgeError, isKnowledgeError } from './errors.js';
import { openStore, type Store } from './store/store.js';
import { GitRunner, type GitRunnerOptions } from './git/runner.js';
import { checkRequestShape, newPublicationId, planPublication, requestHash } from './publish/validate.js';
import { journal, loadJournal } from './publish/journal.js';
import { install } from './publish/install.js';
import { acknowledge } from './publish/acknowledge.js';
import type { PublicationReceipt, PublishRequest } from './publish/types.js';
import { batchGitState, drainOutbox } from './checkpoint/outbox.js';
import type { GitState } from './git/types.js';
import { crashPoint } from './faults.js';

export interface ServiceOptions {
  /** Take the single-writer lock (every command that may write). */
  write: boolean;
  command?: string;
  env?: NodeJS.ProcessEnv;
  git?: GitRunnerOptions;
}

export interface ActivityEntry {
  kind: 'publication' | 'attachment' | 'scan';
  id: string;
  createdAt: string;
  actor: string;
  git: GitState;
  /** Extra, kind-specific facts (partition, counts, failure). */
  detail?: Record<string, unknown>;
}

export class KnowledgeService {
  readonly runner: GitRunner;

  private constructor(readonly store: Store, git: GitRunnerOptions | undefined) {
    this.runner = new GitRunner(git);
  }

  static open(storeDir: string, opts: ServiceOptions): KnowledgeService {
    const store = openStore(storeDir, { write: opts.write, command: opts.command, env: opts.env });
    const svc = new KnowledgeService(store, opts.git);
    if (store.writer) svc.recoverJournaled();
    return svc;
  }

  close(): void {
    this.store.close();
  }

  private requireWriter(): void {
    if (!this.store.settings.writesEnabled) {
      throw new KnowledgeError('E_READ_ONLY', `store ${this.store.paths.root} is read-only (writesEnabled: false)`);
    }
    if (!this.store.writer) throw new KnowledgeError('E_INTERNAL', 'store was opened without the writer lock');
  }

  /**
   * Finish publications a crash interrupted between journal and
   * acknowledgement [PUB-2]: re-install their journaled bytes (idempotent)
   * and acknowledge them once. One that can no longer apply is marked
   * abandoned, visibly, with its bytes kept in the journal.
   */
  recoverJournaled(): void {
    if (!this.store.settings.writesEnabled) return;
    const rows = this.store.db.prepare("SELECT publication_id FROM publications WHERE status = 'journaled' ORDER BY created_at").all() as Array<{ publication_id: string }>;
    for (const { publication_id } of rows) {
      try {
        this.settle(publication_id);
      } catch (err) {
        if (isKnowledgeError(err) && err.code === 'E_CONFLICT') {
          this.store.db.prepare("UPDATE publications SET status = 'abandoned', failure = ? WHERE publication_id = ?").run(err.message, publication_id);
        }
        // Other failures (I/O, disk full) leave it journaled for the next attempt.
      }
    }
  }

  private settle(publicationId: string): number | null {
    const planned = loadJournal(this.store, publicationId);
    if (!planned) return null;
    install(this.store, planned);
    return acknowledge(this.store, planned);
  }

  async publish(req: PublishRequest): Promise<PublicationReceipt> {
    this.requireWriter();
    const { requestId } = checkRequestShape(req);
    const hash = requestHash(req);
    const existing = this.store.db.prepare('SELECT publication_id, request_hash, status, failure FROM publications WHERE request_id = ?').get(requestId) as
      | { publication_id: string; request_hash: string; status: string; failure: string | null }
      | undefined;
    if (existing) {
      // [PUB-5] the same request id returns the same receipt, never a second publication.
      if (existing.request_hash !== hash) {
        throw new KnowledgeError('E_CONFLICT', `request id ${requestId} was already used for a different request`);
      }
      if (existing.status === 'abandoned') {
        throw new KnowledgeError('E_CONFLICT', `request ${requestId} could not be applied: ${existing.failure ?? 'abandoned'}`);
      }
      if (existing.status === 'journaled') this.settle(existing.publication_id);
      return this.resume(existing.publication_id);
    }
    const now = new Date().toISOString();
    const publicationId = newPublicationId();
    const planned = planPublication(this.store, { ...req, requestId }, { requestId, publicationId, hash, now });
    journal(this.store, planned);
    crashPoint('after-journal');
    try {
      install(this.store, planned);
    } catch (err) {
      if (isKnowledgeError(err) && err.code === 'E_CONFLICT') {
        this.store.db.prepare("UPDATE publications SET status = 'abandoned', failure = ? WHERE publication_id = ?").run(err.message, publicationId);
        throw err;
      }
      throw new KnowledgeError('E_IO', `publication ${publicationId} is journaled but could not be installed (retry with the same request id): ${(err as Error).message}`);
    }
    crashPoint('after-install');
    const batchId = acknowledge(this.store, planned);
    crashPoint('after-acknowledge');
    await drainOutbox(this.store, this.runner, { through: batchId });
    return this.publicationReceipt(publicationId);
  }

  /** [GIT-16] retry one publication's checkpoint, committing every earlier waiting batch first. */
  async resume(publicationId: string): Promise<PublicationReceipt> {
    this.requireWriter();
    const row = this.store.db.prepare('SELECT status, batch_id FROM publications WHERE publication_id = ? OR request_id = ?').get(publicationId, publicationId) as
      | { status: string; batch_id: number | null }
      | undefined;
    if (!row) throw new KnowledgeError('E_NOT_FOUND', `no publication ${publicationId}`);
    let batchId = row.batch_id;
    if (row.status === 'journaled') batchId = this.settle(publicationId);
    if (batchId !== null) await drainOutbox(this.store, this.runner, { through: batchId });
    return this.publicationReceipt(publicationId);
  }

  /** A publication's receipt by publication id or request id. */
  publicationReceipt(id: string): PublicationReceipt {
    const row = this.store.db.prepare('SELECT status, receipt, batch_id, failure FROM publications WHERE publication_id = ? OR request_id = ?').get(id, id) as
      | { status: string; receipt: string | null; batch_id: number | null; failure: string | null }
      | undefined;
    if (!row) throw new KnowledgeError('E_NOT_FOUND', `no publication or request ${id}`);
    if (row.status !== 'acknowledged' || !row.receipt) {
      throw new KnowledgeError('E_CONFLICT', `publication ${id} is ${row.status}${row.failure ? `: ${row.failure}` : ' (not yet acknowledged; retry it with resume)'}`);
    }
    const receipt = JSON.parse(row.receipt) as PublicationReceipt;
    receipt.git = batchGitState(this.store.db, row.batch_id);
    return receipt;
  }

  /** Newest first (Appendix A). */
  activity(limit = 500): ActivityEntry[] {
    const rows = this.store.db.prepare(
      `SELECT p.publication_id, p.created_at, p.actor, p.partition, p.batch_id, p.status, p.failure
       FROM publications p ORDER BY p.created_at DESC, p.rowid DESC LIMIT ?`,
    ).all(limit) as Array<{ publication_id: string; created_at: string; actor: string; partition: string; batch_id: number | null; status: string; failure: string | null }>;
    return rows.map((r) => ({
      kind: 'publication' as const,
      id: r.publication_id,
      createdAt: r.created_at,
      actor: r.actor,
      git: r.status === 'acknowledged'
        ? batchGitState(this.store.db, r.batch_id)
        : { state: 'pending' as const, code: 'git-error' as const, reason: r.failure ?? `publication is ${r.status}` },
      detail: { partition: r.partition, status: r.status },
    }));
  }
}
