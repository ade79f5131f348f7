/**
 * Phase 2: journal the accepted intent in one short write transaction
 * [PUB-2]. From here on the request is recoverable: the plan and its exact
 * bytes live in state.sqlite until the acknowledgement settles them.
 */
import type { Store } from '../store/store.js';
import type { PlannedPublication } from './validate.js';

export function journal(store: Store, planned: PlannedPublication): void {
  const { plan, bytes } = planned;
  const db = store.db;
  const insertPub = db.prepare(
    `INSERT INTO publications(publication_id, request_id, request_hash, partition, actor, status, created_at, plan)
     VALUES (?, ?, ?, ?, ?, 'journaled', ?, ?)`,
  );
  const insertFile = db.prepare('INSERT INTO journal_files(publication_id, path, bytes, prior_sha256) VALUES (?, ?, ?, ?)');
  db.transaction(() => {
    insertPub.run(plan.publicationId, plan.requestId, plan.requestHash, plan.partition, plan.actor, plan.createdAt, JSON.stringify(plan));
    for (const f of plan.files) insertFile.run(plan.publicationId, f.path, bytes.get(f.path)!, f.priorSha256);
  }).immediate();
}

/** Reload a journaled publication (recovery after a crash, or a retried request). */
export function loadJournal(store: Store, publicationId: string): PlannedPublication | null {
  const row = store.db.prepare("SELECT plan FROM publications WHERE publication_id = ? AND status = 'journaled'").get(publicationId) as
    | { plan: string }
    | undefined;
  if (!row) return null;
  const bytes = new Map<string, Buffer>();
  for (const f of store.db.prepare('SELECT path, bytes FROM journal_files WHERE publication_id = ?').all(publicationId) as Array<{ path: string; bytes: Buffer }>) {
    bytes.set(f.path, f.bytes);
  }
  return { plan: JSON.parse(row.plan), bytes };
}
