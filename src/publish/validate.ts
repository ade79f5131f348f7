/**
 * Phase 1 of the pipeline: validate every file of the request before anything
 * is written [PUB-1], and plan exactly which bytes go where. Reads the index
 * and the disk; writes nothing.
 */
import { createHash, randomUUID } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KnowledgeError } from '../errors.js';
import type { Store } from '../store/store.js';
import { parsePartition, partitionDir, type PartitionId } from '../store/layout.js';
import { parseRecordText, completeDraft, requiresEvidence, isValidId, sha256Hex, draftExpectedRevision, withDefaultCitations, validateDraft, loneSurrogateProblem } from '../records/record.js';
import { recordPath, isSafeRelativePath } from '../records/filename.js';
import { onDiskAt, requireWritable } from '../fsutil.js';
import type { RecordKind } from '../records/types.js';
import { detectMedia, belongsInHistory, normalizeMediaType } from '../evidence/media.js';
import { sourceIdFor, retainedFileName, sourcePaths, descriptorText, sourcePutBack, EXCLUDED_GITIGNORE, RETAINED_SOURCE_COLUMNS, refuseOccupiedSourcePaths, type RetainedSource } from '../evidence/source.js';
import { CHECKED_SOURCE_MAX_BYTES, citableText, citationProblem } from '../evidence/citation.js';
import type { Plan, PlannedFile, PlannedRecord, PlannedSource, PublishRequest } from './types.js';

import { LIMITS } from './limits.js';
import { newId } from '../request-id.js';
export { LIMITS };

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}

export function newRecordId(): string {
  return newId('rec');
}

export function newPublicationId(): string {
  return newId('pub');
}

/** The identity of a request's content: the same request id with another hash is a conflict [PUB-5]. */
export function requestHash(req: PublishRequest): string {
  const h = createHash('sha256');
  h.update(JSON.stringify({
    partition: req.partition,
    actor: req.actor,
    records: req.records,
    evidence: req.evidence.map((e) => ({ name: e.name, sha256: sha256Hex(e.bytes), mediaType: e.mediaType ?? null, attribution: e.attribution ?? null })),
  }));
  return h.digest('hex');
}

export interface PlannedPublication {
  plan: Plan;
  /** path -> exact bytes to install (and queue, where inHistory). */
  bytes: Map<string, Buffer>;
}

interface IndexedRecord { id: string; partition: string; path: string; revision: number; sha256: string; recorded_at: string }

export function checkRequestShape(req: PublishRequest): { partition: PartitionId; requestId: string } {
  const partition = parsePartition(req.partition);
  if (req.actor !== 'agent' && req.actor !== 'operator') {
    throw new KnowledgeError('E_VALIDATION', `actor must be "agent" or "operator", got ${JSON.stringify(req.actor)}`);
  }
  if (req.requestId !== undefined && !isUuid(req.requestId)) {
    throw new KnowledgeError('E_VALIDATION', `request id must be a UUID, got ${JSON.stringify(req.requestId)}`);
  }
  if (req.records.length === 0) throw new KnowledgeError('E_VALIDATION', 'a publication needs at least one record');
  if (req.records.length > LIMITS.records) throw new KnowledgeError('E_TOO_LARGE', `at most ${LIMITS.records} records per publication`);
  if (req.evidence.length > LIMITS.evidenceFiles) throw new KnowledgeError('E_TOO_LARGE', `at most ${LIMITS.evidenceFiles} evidence files per publication`);
  let total = 0;
  for (const e of req.evidence) total += e.bytes.length;
  if (total > LIMITS.evidenceBytes) {
    throw new KnowledgeError('E_TOO_LARGE', `evidence totals ${total} bytes; attach files over ${LIMITS.evidenceBytes} bytes with knowledge attach`);
  }
  req.records.forEach((t, i) => {
    if (Buffer.byteLength(t, 'utf8') > LIMITS.recordBytes) throw new KnowledgeError('E_TOO_LARGE', `record #${i + 1} is larger than ${LIMITS.recordBytes} bytes`);
  });
  req.evidence.forEach((e, i) => {
    // Kept in the descriptor and the index as text: a lone surrogate is no character, refused as in a record [REC-3].
    const lone = loneSurrogateProblem(`evidence #${i + 1}: name`, e.name)
      ?? (e.attribution !== undefined ? loneSurrogateProblem(`evidence #${i + 1} (${JSON.stringify(e.name)}): attribution`, e.attribution) : null);
    if (lone !== null) throw new KnowledgeError('E_VALIDATION', lone);
    // A declared type is checked as an attachment's is (evidence/media.ts), not taken as any text [GIT-9].
    labelled(`evidence #${i + 1} (${e.name})`, () => normalizeMediaType(e.mediaType));
  });
  return { partition, requestId: (req.requestId ?? randomUUID()).toLowerCase() };
}

/** `fn`'s result; its KnowledgeError says which record it is about (`record #2: …`). */
function labelled<T>(label: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof KnowledgeError) throw new KnowledgeError(err.code, `${label}: ${err.message}`, err.details);
    throw err;
  }
}

export function planPublication(store: Store, req: PublishRequest, ids: { requestId: string; publicationId: string; hash: string; now: string }): PlannedPublication {
  const partition = parsePartition(req.partition);
  const pdir = partitionDir(partition);
  const db = store.db;
  const bytes = new Map<string, Buffer>();
  const files: PlannedFile[] = [];
  const plannedLower = new Set<string>();
  const addFile = (path: string, data: Buffer, inHistory: boolean, priorSha256: string | null) => {
    // A file the vault already has (priorSha256: a record revised in place) keeps its name as it is, in whatever
    // normal form it was written (NFD on macOS); names Knowledge makes are NFC.
    if (!isSafeRelativePath(path, { existing: priorSha256 !== null })) throw new KnowledgeError('E_VALIDATION', `unsafe path ${JSON.stringify(path)}`);
    if (plannedLower.has(path.toLowerCase())) throw new KnowledgeError('E_VALIDATION', `two files of this publication map to ${path}`);
    plannedLower.add(path.toLowerCase());
    // Never through a symbolic link out of (or around) the vault, never over a folder or FIFO [PUB-3].
    requireWritable(store.paths.vault, path, { hash: false });
    bytes.set(path, data);
    files.push({ path, priorSha256, inHistory });
  };

  // Evidence first: records cite it.
  const sources: PlannedSource[] = [];
  const bySha = new Map<string, PlannedSource>();
  /** This request's evidence bytes by source id: what its citations are checked against. */
  const requestBytes = new Map<string, Buffer>();
  const getSource = db.prepare(`SELECT ${RETAINED_SOURCE_COLUMNS} FROM sources WHERE partition = ? AND source_id = ?`);
  for (const ev of req.evidence) {
    const sha = sha256Hex(ev.bytes);
    // Same bytes twice in one request: one source, with each attribution given (as for the same bytes published again).
    const same = bySha.get(sha);
    if (same !== undefined) {
      const attribution = ev.attribution ?? '';
      if (attribution !== same.attribution && !(same.moreAttributions ?? []).includes(attribution)) (same.moreAttributions ??= []).push(attribution);
      continue;
    }
    const sourceId = sourceIdFor(sha);
    requestBytes.set(sourceId, ev.bytes);
    const existing = getSource.get(partition, sourceId) as RetainedSource | undefined;
    let s: PlannedSource;
    if (existing) {
      s = {
        sourceId, sha256: sha, size: existing.size, mediaType: existing.media_type, path: existing.path,
        descriptorPath: existing.descriptor_path, inHistory: existing.in_history === 1, attribution: ev.attribution ?? '',
      };
      // What of it was deleted by hand is installed again from these bytes and committed with this publication
      // (its deletion may be committed: a scan's, or the user's own; where it is not, the commit changes nothing
      // at that path); an original kept out of history never is [GIT-9]. Kept out of history, the original went
      // with the .gitignore beside it (which history holds), put back too, or `git status` would show the
      // original as new and the .gitignore as deleted.
      const back = sourcePutBack(store.paths.vault, existing, `evidence ${ev.name}`, 'publish again');
      if (back.original) addFile(existing.path, ev.bytes, existing.in_history === 1, null);
      if (back.gitignore !== null) addFile(back.gitignore, Buffer.from(EXCLUDED_GITIGNORE, 'utf8'), true, null);
      if (back.descriptor !== null) addFile(existing.descriptor_path, back.descriptor, true, null);
    } else {
      const media = detectMedia(ev.name, ev.bytes.subarray(0, 64), normalizeMediaType(ev.mediaType));
      const inHistory = belongsInHistory(ev.bytes.length, media);
      const { dir, path, descriptorPath } = sourcePaths(pdir, sourceId, retainedFileName(ev.name));
      // Files where a new source goes, that this partition has no source for (copied there by hand): refused now,
      // before anything is written, rather than found at install with the original already in place [PUB-1].
      refuseOccupiedSourcePaths(store.paths.vault, `evidence ${ev.name}`, partition, sourceId, [path, descriptorPath, ...(inHistory ? [] : [`${dir}/.gitignore`])], 'publish again');
      s = {
        sourceId, sha256: sha, size: ev.bytes.length, mediaType: media.mediaType, path, descriptorPath, inHistory,
        attribution: ev.attribution ?? '',
      };
      addFile(path, ev.bytes, inHistory, null);
      addFile(descriptorPath, Buffer.from(descriptorText({
        format: 'knowledge-source-v1', source_id: sourceId, retained_path: path, sha256: sha, size: ev.bytes.length,
        media_type: media.mediaType, original_name: ev.name, attribution: ev.attribution ?? '', retained_at: ids.now, in_history: inHistory,
      }), 'utf8'), true, null);
      if (!inHistory) addFile(`${dir}/.gitignore`, Buffer.from(EXCLUDED_GITIGNORE, 'utf8'), true, null);
    }
    bySha.set(sha, s);
    sources.push(s);
  }

  const getRecord = db.prepare('SELECT id, partition, path, revision, sha256, recorded_at FROM records WHERE id = ?');
  // A name is taken by one that differs only in case in this partition's folder (a clone on a case-insensitive file
  // system could not hold both), elsewhere only by the same name: whether a conversation whose id differs from this
  // one's only in case holds a file of that name is not this caller's to learn from its own file's name.
  const sameNameAnyCase = db.prepare('SELECT path FROM records WHERE lower(path) = lower(?) UNION ALL SELECT path FROM vault_files WHERE lower(path) = lower(?)').pluck();
  const pathTakenInIndex = (rel: string) => (sameNameAnyCase.all(rel, rel) as string[]).some((p) => p === rel || p.startsWith(`${pdir}/`));
  const getTombstone = db.prepare('SELECT revision, partition, path FROM record_tombstones WHERE id = ?');
  const revisionFloor = db.prepare('SELECT revision FROM record_revision_floors WHERE id = ?').pluck();
  const claimants = db.prepare('SELECT DISTINCT partition FROM scan_duplicate_rows WHERE id = ?').pluck();
  const brokenClaim = db.prepare('SELECT path, partition FROM broken_record_files WHERE id = ? LIMIT 1');
  const blockedClaim = db.prepare('SELECT path, partition FROM scan_blocked_claims WHERE id = ? ORDER BY path LIMIT 1');
  // An id is one record store-wide. Taken in a partition an agent may not read, it is refused in words
  // that name nothing of that partition: the refusal itself is all the agent learns (README, Reading).
  const unavailable = (label: string, id: string, where: string, operatorHint: string) =>
    new KnowledgeError('E_CONFLICT', req.actor === 'operator'
      ? `${label}: id ${id} ${operatorHint} (${where}); ids are unique across the store: choose another id, or publish without one`
      : `${label}: id ${id} is not available; choose another id, or publish without one (the store assigns one)`);
  const knownInPartition = db.prepare('SELECT 1 FROM records WHERE id = ? AND partition = ?');
  const sourceInPartition = db.prepare('SELECT 1 FROM sources WHERE source_id = ? AND partition = ?');
  // The text of a cited source, to check a citation's lines and quote against (evidence/citation.ts): this request's
  // bytes, or the retained original of a source of the partition while it still holds the source's bytes; null where
  // it cannot be read as text.
  const sourceTexts = new Map<string, string | null>();
  const sourceText = (sourceId: string): string | null => {
    if (!sourceTexts.has(sourceId)) {
      let bytes = requestBytes.get(sourceId) ?? null;
      if (bytes === null) {
        const row = getSource.get(partition, sourceId) as { size: number; path: string; sha256: string } | undefined;
        if (row !== undefined && row.size <= CHECKED_SOURCE_MAX_BYTES) bytes = readRetained(join(store.paths.vault, row.path));
        if (bytes !== null && sha256Hex(bytes) !== row?.sha256) bytes = null; // edited by hand: not the source any more
      }
      sourceTexts.set(sourceId, bytes === null ? null : citableText(bytes));
    }
    return sourceTexts.get(sourceId)!;
  };
  // The citations the record's current revision already has: checked when they were published (or taken as they
  // were, for a file edited by hand or published before citations were checked), so a revision that keeps them is not
  // refused for them.
  const priorCitations = db.prepare("SELECT json_extract(meta, '$.evidence') FROM records WHERE id = ?").pluck();
  const citationKey = (c: { source: string; lines?: [number, number]; quote?: string }) => JSON.stringify([c.source, c.lines ?? null, c.quote ?? null]);
  const taken = (rel: string) =>
    plannedLower.has(rel.toLowerCase()) || pathTakenInIndex(rel) || onDiskAt(join(store.paths.vault, rel));

  const records: PlannedRecord[] = [];
  const idsInRequest = new Set<string>();
  const parsed = req.records.map((text, i) => {
    const r = parseRecordText(text);
    if (!r.ok) throw new KnowledgeError('E_VALIDATION', `record #${i + 1}: ${r.reason}`);
    const id = r.file.data.id;
    if (id !== undefined && (typeof id !== 'string' || !isValidId(id))) {
      throw new KnowledgeError('E_VALIDATION', `record #${i + 1}: invalid id ${JSON.stringify(id)}`);
    }
    return r.file;
  });
  // Ids first, so relationships may point at records of the same request.
  const assigned = parsed.map((f) => (typeof f.data.id === 'string' ? f.data.id : newRecordId()));
  for (const id of assigned) {
    if (idsInRequest.has(id)) throw new KnowledgeError('E_VALIDATION', `record id ${id} appears twice in one publication`);
    idsInRequest.add(id);
  }

  parsed.forEach((draft, i) => {
    const label = `record #${i + 1}`;
    labelled(label, () => validateDraft(draft));
    const id = assigned[i]!;
    const existing = getRecord.get(id) as IndexedRecord | undefined;
    let revision = 1;
    let priorRevision: number | null = null;
    let path: string;
    let recordedAt: string | undefined;
    let priorSha: string | null = null;
    let formerPath: string | undefined;
    if (existing) {
      if (existing.partition !== partition) {
        // Never reveal another partition's content; the id is simply unavailable here.
        throw unavailable(label, id, existing.partition, 'is already used by a record in another partition');
      }
      const expected = draftExpectedRevision(draft);
      if (expected === undefined) {
        throw new KnowledgeError('E_CONFLICT', `${label}: record ${id} exists at revision ${existing.revision}; publish it with revision: ${existing.revision} to revise it [REC-4]`);
      }
      if (expected !== existing.revision) {
        throw new KnowledgeError('E_CONFLICT', `${label}: record ${id} is at revision ${existing.revision}, not ${String(expected)} [REC-4]`);
      }
      const current = labelled(label, () => requireWritable(store.paths.vault, existing.path));
      // Gone with its record still indexed: deleted since the last scan, or left out by a sparse checkout, which a
      // scan keeps as it is (scan.ts) — "run knowledge scan first" would send the second in circles.
      if (current === null) {
        throw new KnowledgeError('E_CONFLICT', `${label}: ${existing.path} is not in the working tree: deleted by hand (knowledge scan records that), or left out by the repository's sparse checkout (put it back in the checkout to revise the record)`);
      }
      if (current !== existing.sha256) {
        throw new KnowledgeError('E_CONFLICT', `${label}: ${existing.path} changed on disk since Knowledge last recorded it; run knowledge scan first`);
      }
      // Its file put back at an older revision by hand: on from the highest it has had (migration 019) [REC-4].
      revision = Math.max(existing.revision, (revisionFloor.get(id) as number | undefined) ?? 0) + 1;
      priorRevision = existing.revision;
      path = existing.path;
      recordedAt = existing.recorded_at;
      priorSha = existing.sha256;
    } else {
      // [REC-4] An expected revision of a record that does not exist is a stale expectation.
      const expected = labelled(label, () => draftExpectedRevision(draft));
      if (expected !== undefined) {
        throw new KnowledgeError('E_CONFLICT', `${label}: record ${id} does not exist, so it has no revision ${expected} to revise; publish it without revision to create it [REC-4]`);
      }
      // Files of the vault claim this id more than once (a scan parked them): one more claim would be a
      // record nobody can look up.
      const dupIn = claimants.all(id) as string[];
      if (req.actor !== 'operator' && dupIn.some((p) => p !== partition)) {
        throw unavailable(label, id, dupIn.join(', '), 'is claimed by files in another partition');
      }
      if (dupIn.length > 0) {
        throw new KnowledgeError('E_CONFLICT', `${label}: id ${id} is claimed by more than one file of the vault (the scan's duplicate-id diagnostics name them); remove or change all but one, scan, then publish`);
      }
      // A record whose file still exists but no longer reads as one (its YAML broken by hand) keeps its id:
      // a new record beside it would start the id again at revision 1, and duplicate it once the file is fixed.
      const broken = brokenClaim.get(id) as { path: string; partition: string } | undefined;
      if (broken !== undefined && broken.partition !== partition) {
        throw unavailable(label, id, broken.partition, 'is claimed by a record file of another partition that no longer reads as a record');
      }
      if (broken !== undefined) {
        throw new KnowledgeError('E_CONFLICT', `${label}: record ${id}'s file ${broken.path} no longer reads as a record (the scan's diagnostics say why); fix it, scan, and publish it with its revision — or delete it and scan first`);
      }
      // A file of another partition a scan left out while this id's record was deleted (scan/reindex.ts): the
      // record published again beside it would leave the id claimed twice, a record nobody can look up.
      const blocked = blockedClaim.get(id) as { path: string; partition: string } | undefined;
      if (blocked !== undefined && req.actor !== 'operator') throw unavailable(label, id, blocked.partition, 'is claimed by a file of another partition');
      if (blocked !== undefined) {
        throw new KnowledgeError('E_CONFLICT', `${label}: id ${id} is also claimed by ${blocked.path}, which a scan left out while the record was deleted; published again, the id would be claimed twice: give that file another id or delete it, scan, then publish`);
      }
      // A record deleted under this id goes on from its last revision [REC-4, READ-2], in its own
      // partition only: elsewhere the id stays its, so its history stays readable there.
      const last = getTombstone.get(id) as { revision: number; partition: string; path: string } | undefined;
      if (last !== undefined && last.partition !== partition) {
        throw unavailable(label, id, last.partition, 'belonged to a record deleted from another partition, whose history keeps it');
      }
      if (last !== undefined) revision = last.revision + 1;
      // validateDraft checked kind and title.
      path = recordPath({ partitionDir: pdir, kind: draft.data.kind as RecordKind, title: draft.data.title as string, id, taken });
      if (last !== undefined && last.path !== path) formerPath = last.path;
    }
    // Appendix A: a claim/relationship given evidence files and no explicit citations cites every given file.
    const file = requiresEvidence(draft.data.kind as RecordKind) ? labelled(label, () => withDefaultCitations(draft, sources.map((s) => s.sourceId))) : draft;
    const { meta, text } = completeDraft(file, { id, revision, scope: partition, now: ids.now, recordedAt });
    if (requiresEvidence(meta.kind) && meta.evidence.length === 0) {
      throw new KnowledgeError('E_VALIDATION', `${label}: a ${meta.kind} must cite evidence (pass --evidence FILE or evidence: [{ source: ID }])`);
    }
    const kept = new Set<string>();
    if (existing) {
      const prior = priorCitations.get(id);
      try {
        for (const c of typeof prior === 'string' ? (JSON.parse(prior) as Array<{ source: string; lines?: [number, number]; quote?: string }>) : []) kept.add(citationKey(c));
      } catch {
        // no citations to keep
      }
    }
    for (const [i, c] of meta.evidence.entries()) {
      const inRequest = sources.some((s) => s.sourceId === c.source);
      if (!inRequest && sourceInPartition.get(c.source, partition) === undefined) {
        throw new KnowledgeError('E_VALIDATION', `${label}: cites unknown evidence source ${c.source}`);
      }
      const text = (c.lines !== undefined || c.quote !== undefined) && !kept.has(citationKey(c)) ? sourceText(c.source) : null;
      const problem = text === null ? null : citationProblem(c, text);
      if (problem !== null) throw new KnowledgeError('E_VALIDATION', `${label}: evidence[${i}] ${problem}`);
    }
    if (meta.kind === 'relationship') {
      for (const end of [meta.from, meta.to]) {
        if (!end || (!idsInRequest.has(end) && knownInPartition.get(end, partition) === undefined)) {
          throw new KnowledgeError('E_VALIDATION', `${label}: relationship endpoint ${JSON.stringify(end)} is not a record of this partition`);
        }
      }
    }
    const data = Buffer.from(text, 'utf8');
    addFile(path, data, true, priorSha);
    const bodyStart = text.indexOf('\n---', 3);
    records.push({
      id, revision, priorRevision, path, sha256: sha256Hex(data), meta,
      body: bodyStart >= 0 ? text.slice(text.indexOf('\n', bodyStart + 1) + 1) : '',
      ...(formerPath !== undefined ? { formerPath } : {}),
    });
  });

  const plan: Plan = {
    publicationId: ids.publicationId, requestId: ids.requestId, requestHash: ids.hash, partition, actor: req.actor,
    createdAt: ids.now, records, sources, files,
  };
  return { plan, bytes };
}

/** A retained original's bytes, when it is a regular file of at most CHECKED_SOURCE_MAX_BYTES (no link followed); else null. */
function readRetained(path: string): Buffer | null {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return null; // deleted by hand, or not a file of ours: the citation cannot be checked
  }
  try {
    const st = fstatSync(fd);
    return st.isFile() && st.size <= CHECKED_SOURCE_MAX_BYTES ? readFileSync(fd) : null;
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}
