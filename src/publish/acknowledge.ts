/**
 * Phase 4: acknowledge in one short transaction [PUB-4]: recheck that the
 * request is still current and the records it planned against are unchanged,
 * update the index, and queue the exact changed bytes as one outbox batch.
 */
import { join } from 'node:path';
import { KnowledgeError } from '../errors.js';
import type { Store } from '../store/store.js';
import { statFingerprint, upsertVaultFile } from '../store/vault-files.js';
import { enqueueBatch } from '../checkpoint/outbox.js';
import type { PlannedPublication } from './validate.js';
import type { PublicationReceipt } from './types.js';
import { clipCodePoints } from '../git/commit-stream.js';
import { sourceInserter } from '../evidence/source.js';

export function subjectFor(planned: PlannedPublication): string {
  const recs = planned.plan.records;
  const one = recs.length === 1 ? recs[0]! : null;
  const title = one ? clipCodePoints(one.meta.title.replace(/\s+/g, ' '), 72) : `${recs.length} records`;
  return `${planned.plan.actor === 'agent' ? 'Agent' : 'Operator'} published ${title}`;
}

export function acknowledge(store: Store, planned: PlannedPublication): number {
  const { plan, bytes } = planned;
  const db = store.db;
  const pending = { state: 'pending', code: 'waiting', reason: 'checkpoint not attempted yet' } as const;
  const receipt: PublicationReceipt = {
    kind: 'publication',
    publicationId: plan.publicationId,
    requestId: plan.requestId,
    partition: plan.partition,
    actor: plan.actor,
    createdAt: plan.createdAt,
    records: plan.records.map((r) => ({ id: r.id, revision: r.revision, path: r.path, sha256: r.sha256 })),
    evidence: plan.sources.map((s) => ({ sourceId: s.sourceId, path: s.path, sha256: s.sha256, size: s.size, inHistory: s.inHistory })),
    git: pending,
  };
  // Fingerprints of the installed files, taken before the transaction so the
  // write lock is held only for SQLite work. The bytes are the ones install
  // just wrote and fsynced: hash them instead of reading every file back.
  const prints = plan.files.map((f) => ({ f, fp: statFingerprint(join(store.paths.vault, f.path), bytes.get(f.path)) }));
  const upsertRecord = db.prepare(
    `INSERT INTO records(id, partition, path, kind, title, revision, lifecycle, sha256, recorded_at, updated_at, aliases, tags, meta, body)
     VALUES (@id, @partition, @path, @kind, @title, @revision, @lifecycle, @sha256, @recorded_at, @updated_at, @aliases, @tags, @meta, @body)
     ON CONFLICT(id) DO UPDATE SET path = excluded.path, kind = excluded.kind, title = excluded.title, revision = excluded.revision,
       lifecycle = excluded.lifecycle, sha256 = excluded.sha256, updated_at = excluded.updated_at, aliases = excluded.aliases,
       tags = excluded.tags, meta = excluded.meta, body = excluded.body`,
  );
  const getRevision = db.prepare('SELECT revision FROM records WHERE id = ?');
  const insertSource = sourceInserter(db);
  const getAttributions = db.prepare('SELECT attributions FROM sources WHERE partition = ? AND source_id = ?');
  const setAttributions = db.prepare('UPDATE sources SET attributions = ? WHERE partition = ? AND source_id = ?');

  return db.transaction(() => {
    const row = db.prepare('SELECT status, batch_id FROM publications WHERE publication_id = ?').get(plan.publicationId) as
      | { status: string; batch_id: number | null }
      | undefined;
    if (!row) throw new KnowledgeError('E_INTERNAL', `publication ${plan.publicationId} is not journaled`);
    if (row.status === 'acknowledged') return row.batch_id!; // settled once [PUB-4]
    if (row.status !== 'journaled') throw new KnowledgeError('E_CONFLICT', `publication ${plan.publicationId} was abandoned`);
    for (const r of plan.records) {
      const cur = getRevision.get(r.id) as { revision: number } | undefined;
      if ((cur?.revision ?? null) !== r.priorRevision) {
        throw new KnowledgeError('E_CONFLICT', `record ${r.id} changed (revision ${cur?.revision ?? 'none'}) since this publication was planned`);
      }
    }
    for (const r of plan.records) {
      upsertRecord.run({
        id: r.id, partition: plan.partition, path: r.path, kind: r.meta.kind, title: r.meta.title, revision: r.revision,
        lifecycle: r.meta.lifecycle, sha256: r.sha256, recorded_at: r.meta.recorded_at, updated_at: r.meta.updated_at,
        aliases: JSON.stringify(r.meta.aliases), tags: JSON.stringify(r.meta.tags), meta: JSON.stringify(r.meta), body: r.body,
      });
    }
    for (const s of plan.sources) {
      const attributions = [s.attribution, ...(s.moreAttributions ?? [])].map((a) => ({ attribution: a, publicationId: plan.publicationId, at: plan.createdAt }));
      // A new source found recorded meanwhile (another request with the same bytes, acknowledged after this one was
      // installed; or adopted by a scan): one more attribution, as for bytes that were a source when planned.
      const cur = getAttributions.get(plan.partition, s.sourceId) as { attributions: string } | undefined;
      if (cur === undefined) {
        insertSource({
          partition: plan.partition, sourceId: s.sourceId, sha256: s.sha256, size: s.size, mediaType: s.mediaType, path: s.path,
          descriptorPath: s.descriptorPath, inHistory: s.inHistory, attributions, createdAt: plan.createdAt, descriptor: bytes.get(s.descriptorPath) ?? null,
        });
      } else {
        setAttributions.run(JSON.stringify([...JSON.parse(cur.attributions), ...attributions]), plan.partition, s.sourceId);
      }
    }
    for (const { f, fp } of prints) upsertVaultFile(db, f.path, fp);
    // What a scan found wrong with the bytes these files held (broken, invalid, in the wrong scope) is
    // gone with them; references are re-checked by the next scan [REC-3].
    const clearFileDiags = db.prepare("DELETE FROM scan_diagnostics WHERE path = ? AND code <> 'invalid-reference'");
    const clearBroken = db.prepare('DELETE FROM broken_record_files WHERE path = ?');
    for (const { f } of prints) {
      clearFileDiags.run(f.path);
      clearBroken.run(f.path);
    }
    const batchId = enqueueBatch(db, {
      kind: 'publication',
      refId: plan.publicationId,
      actor: plan.actor,
      subject: subjectFor(planned),
      createdAt: plan.createdAt,
      changes: plan.files.filter((f) => f.inHistory).map((f) => ({ path: f.path, bytes: bytes.get(f.path)! })),
    });
    db.prepare("UPDATE publications SET status = 'acknowledged', receipt = ?, batch_id = ? WHERE publication_id = ?")
      .run(JSON.stringify(receipt), batchId, plan.publicationId);
    db.prepare('DELETE FROM journal_files WHERE publication_id = ?').run(plan.publicationId);
    return batchId;
  }).immediate();
}
