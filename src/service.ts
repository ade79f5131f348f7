/**
 * The one core service (STYLE habit 3). CLI, Gateway and MCP build it once
 * and call it in-process; every access check lives here.
 *
 * Pipeline: validate -> journal -> install -> acknowledge -> checkpoint.
 */
import { statSync } from 'node:fs';
import { KnowledgeError, isDiskFull, isErrnoError, isIoError, isKnowledgeError } from './errors.js';
import { openStore, type Store } from './store/store.js';
import { partitionOfPath } from './store/layout.js';
import { isDirectory, isFile } from './fsutil.js';
import { GitRunner, type GitRunnerOptions } from './git/runner.js';
import { checkRequestShape, newPublicationId, planPublication, requestHash } from './publish/validate.js';
import { journal, loadJournal } from './publish/journal.js';
import { install } from './publish/install.js';
import { acknowledge } from './publish/acknowledge.js';
import type { PublicationReceipt, PublishRequest } from './publish/types.js';
import { acceptedGitState, drainAccepted, drainSettled, takeAfterReceiptNotes } from './checkpoint/outbox.js';
import { closeLongLived } from './git/long-lived.js';
import { verifyStore, type VerifyReport } from './checkpoint/verify.js';
import type { GitState } from './git/types.js';
import { crashPoint } from './faults.js';
import { canAccessPartition, readablePartitions, requireNotSandboxed, type Caller } from './access.js';
import { parseListQuery, parseLookupKey, parseSearchQuery, isFullCommitId } from './read/query.js';
import { lookupRecord } from './read/lookup.js';
import { searchRecords } from './read/search.js';
import { listRecords } from './read/inventory.js';
import { findFormerRecord, readRecordView, requireVisible } from './read/record.js';
import { diffBetween, diffVersions, findVersions, mergeHistories, readHistory } from './read/history.js';
import { claimantsPhrase, duplicateClaimants } from './read/duplicates.js';
import { subjectForReader } from './scan/plan.js';
import type { ListQuery, ListResult, LookupResult, RecordDiff, RecordHistory, RecordView, SearchQuery, SearchResult } from './read/types.js';
import { checkStartRequest } from './attach/request.js';
import { appendChunk, loadAttachment, startUpload, statusOf, sweepCompletedParts } from './attach/upload.js';
import { completeUpload } from './attach/complete.js';
import { uploadFile } from './attach/from-file.js';
import { attachmentReceipt } from './attach/receipt.js';
import type { AttachFileOptions, AttachFileResult, AttachmentReceipt, AttachmentStatus, AttachStartRequest } from './attach/types.js';
import { runScan } from './scan/scan.js';
import { scanReceipt } from './scan/receipt.js';
import type { ScanProgress, ScanReceipt } from './scan/types.js';
import { REQUEST_ID_MATCH, requestIdForms } from './request-id.js';
import { nowIso } from './clock.js';
import { activityPage, activityStart, type ActivityEntry } from './activity.js';

export interface ServiceOptions {
  /** Take the single-writer lock (every command that may write). */
  write: boolean;
  command?: string;
  env?: NodeJS.ProcessEnv;
  git?: GitRunnerOptions;
}

export type { ActivityEntry } from './activity.js';

export class KnowledgeService {
  readonly runner: GitRunner;

  /** The device and inode of state.sqlite when this service opened it (checkAvailable). */
  private readonly databaseIdentity: string | null;
  /** The write-ahead log this process writes to (null until there is one): deleted or replaced, see checkAvailable. */
  private walIdentity: string | null;

  private constructor(readonly store: Store, git: GitRunnerOptions | undefined) {
    this.runner = new GitRunner(git);
    this.databaseIdentity = inodeOf(store.paths.database);
    this.walIdentity = inodeOf(`${store.paths.database}-wal`);
  }

  static open(storeDir: string, opts: ServiceOptions): KnowledgeService {
    const store = openStore(storeDir, { write: opts.write, command: opts.command, env: opts.env });
    const svc = new KnowledgeService(store, opts.git);
    if (store.writer) {
      try {
        svc.recoverJournaled();
        if (store.settings.writesEnabled) sweepCompletedParts(store);
      } catch (err) {
        // The writer lock is not kept by an open that failed (a long-running MCP server would hold it until it ends).
        svc.close();
        throw err;
      }
    }
    return svc;
  }

  close(): void {
    closeLongLived(this.runner, this.store.paths.vault);
    this.store.close();
  }

  /** Why the registry could not be read at the last reload (writes wait for it; reads go on), or null. */
  private registryProblem: KnowledgeError | null = null;

  /**
   * Read the registry's settings again: a long-running process (the Gateway)
   * calls it per request, so an operator's edit of `writesEnabled` applies to
   * the next request [LAY-2]. A store made writable meanwhile then gets what a
   * writer's open gives it (journaled publications finished, completed
   * uploads' partial files swept). A registry that cannot be read for a moment
   * (a half-saved edit) stops writes, not reads.
   */
  reloadSettings(): void {
    const was = this.store.settings.writesEnabled;
    try {
      this.store.reloadSettings();
      this.registryProblem = null;
    } catch (err) {
      if (!isKnowledgeError(err)) throw err;
      this.registryProblem = err;
      return;
    }
    if (!was && this.store.settings.writesEnabled && this.store.writer) {
      this.recoverJournaled();
      sweepCompletedParts(this.store);
    }
  }

  /**
   * Wait for the Git work that follows receipts: after a checkpoint is
   * recorded, the user's index is updated (Knowledge holds index.lock until
   * then) and the repository may be maintained. Publications never wait for
   * it; call this before `close()` so that work finishes with the store open.
   * Resolves with warnings about that work (an index not updated yet, say):
   * it never fails a request whose receipt is recorded [GIT-15].
   */
  async settle(): Promise<string[]> {
    return drainSettled(this.store);
  }

  /** The warnings settle() would give for the work after receipts finished so far, without waiting for the rest. */
  takeWarnings(): string[] {
    return takeAfterReceiptNotes(this.store);
  }

  /**
   * [LAY-3] E_UNAVAILABLE when the vault, its manifest or state.sqlite has
   * vanished since the store was opened. A long-running process (the
   * Gateway) calls it per request: an open database handle would otherwise
   * keep answering for files that are gone.
   */
  checkAvailable(): void {
    const p = this.store.paths;
    const missing = [!isDirectory(p.vault) && 'vault directory', !isFile(p.manifest) && 'vault/vault.json', !isFile(p.database) && 'state.sqlite'].filter(Boolean);
    if (missing.length) throw new KnowledgeError('E_UNAVAILABLE', `store ${p.root} became unavailable: missing ${missing.join(', ')}`);
    // Another file renamed into its place: this handle would go on writing a file nobody reads.
    if (inodeOf(p.database) !== this.databaseIdentity) {
      throw new KnowledgeError('E_UNAVAILABLE', `store ${p.root} became unavailable: its state.sqlite was replaced since this process opened it; restart this process to use the new one`);
    }
    // Its write-ahead log deleted (or replaced) under this open handle: what this process writes goes to a file no
    // other process sees, the writer lock included, so another would take the store as free [LAY-4].
    const wal = inodeOf(`${p.database}-wal`);
    if (this.walIdentity === null) this.walIdentity = wal;
    else if (wal !== this.walIdentity) {
      throw new KnowledgeError('E_UNAVAILABLE', `store ${p.root} became unavailable: its state.sqlite-wal was deleted or replaced while this process had it open; stop this process (never delete a store's -wal file while a Knowledge process runs)`);
    }
  }



  private requireWriter(): void {
    if (this.registryProblem) throw this.registryProblem;
    if (!this.store.settings.writesEnabled) {
      throw new KnowledgeError(
        'E_READ_ONLY',
        this.store.registered
          ? `store ${this.store.paths.root} is read-only (writesEnabled: false in ${this.store.registry.file}${this.store.registeredAs !== null && this.store.registeredAs !== this.store.paths.root ? `, under ${JSON.stringify(this.store.registeredAs)}: the same store (vault id ${this.store.manifest.vaultId}) by another path` : ''}; set it to true there to allow writes)`
          : `store ${this.store.paths.root} is read-only (created with --read-only, and ${this.store.registry.file} does not list it: \`knowledge init ${this.store.paths.root}\` registers it as it is; then set writesEnabled to true there to allow writes)`,
      );
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
        this.installAndAcknowledge(publication_id);
      } catch (err) {
        if (isKnowledgeError(err) && err.code === 'E_CONFLICT') {
          this.store.db.prepare("UPDATE publications SET status = 'abandoned', failure = ? WHERE publication_id = ?").run(err.message, publication_id);
        }
        // Other failures (I/O, disk full) leave it journaled for the next attempt.
      }
    }
  }

  private installAndAcknowledge(publicationId: string): number | null {
    const planned = loadJournal(this.store, publicationId);
    if (!planned) return null;
    install(this.store, planned);
    return acknowledge(this.store, planned);
  }

  async publish(req: PublishRequest): Promise<PublicationReceipt> {
    this.requireWriter();
    const { requestId } = checkRequestShape(req);
    const hash = requestHash(req);
    const existing = this.store.db.prepare(`SELECT publication_id, request_hash, status, failure FROM publications WHERE ${REQUEST_ID_MATCH}`).get(...requestIdForms(req.requestId ?? requestId)) as
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
      if (existing.status === 'journaled') {
        try {
          this.installAndAcknowledge(existing.publication_id);
        } catch (err) {
          throw keptButUnfinished(err, existing.publication_id, requestId);
        }
      }
      return this.resume(existing.publication_id);
    }
    // One request id names one request: `knowledge receipt ID` must find exactly one.
    if (this.store.db.prepare(`SELECT 1 FROM attachments WHERE ${REQUEST_ID_MATCH}`).get(...requestIdForms(requestId)) !== undefined) {
      throw new KnowledgeError('E_CONFLICT', `request id ${requestId} was already used for an attachment`);
    }
    const now = nowIso();
    const publicationId = newPublicationId();
    const planned = planPublication(this.store, { ...req, requestId }, { requestId, publicationId, hash, now });
    journal(this.store, planned);
    crashPoint('after-journal');
    let batchId: number;
    try {
      install(this.store, planned);
      crashPoint('after-install');
      batchId = acknowledge(this.store, planned);
    } catch (err) {
      if (isKnowledgeError(err) && err.code === 'E_CONFLICT') {
        this.store.db.prepare("UPDATE publications SET status = 'abandoned', failure = ? WHERE publication_id = ?").run(err.message, publicationId);
        throw err;
      }
      throw keptButUnfinished(err, publicationId, requestId);
    }
    crashPoint('after-acknowledge');
    return this.publicationReceipt(publicationId, await drainAccepted(this.store, this.runner, { through: batchId }));
  }

  /**
   * Check the store's outbox and receipts against the vault's repository
   * (read-only; problems carry stable codes). See src/checkpoint/verify.ts.
   */
  async verify(): Promise<VerifyReport> {
    return verifyStore(this.store, this.runner);
  }

  /** [GIT-16] retry one publication's checkpoint, committing every earlier waiting batch first. */
  async resume(publicationId: string): Promise<PublicationReceipt> {
    this.requireWriter();
    const row = this.store.db.prepare(`SELECT publication_id, request_id, status, batch_id FROM publications WHERE publication_id = ? OR ${REQUEST_ID_MATCH}`).get(publicationId, ...requestIdForms(publicationId)) as
      | { publication_id: string; request_id: string; status: string; batch_id: number | null }
      | undefined;
    if (!row) throw new KnowledgeError('E_NOT_FOUND', `no publication ${publicationId}`);
    let batchId = row.batch_id;
    if (row.status === 'journaled') {
      try {
        batchId = this.installAndAcknowledge(row.publication_id);
      } catch (err) {
        // Coded as a publication's own failure after its journal is: E_IO for the file system's errors, not E_INTERNAL.
        throw keptButUnfinished(err, row.publication_id, row.request_id);
      }
    }
    const failure = batchId !== null ? await drainAccepted(this.store, this.runner, { through: batchId }) : null;
    return this.publicationReceipt(publicationId, failure);
  }

  /**
   * A publication's receipt by publication id or request id; `failure`: a
   * drain failure the outbox could not record (drainAccepted).
   */
  publicationReceipt(id: string, failure: GitState | null = null): PublicationReceipt {
    const row = this.store.db.prepare(`SELECT status, receipt, batch_id, failure FROM publications WHERE publication_id = ? OR ${REQUEST_ID_MATCH}`).get(id, ...requestIdForms(id)) as
      | { status: string; receipt: string | null; batch_id: number | null; failure: string | null }
      | undefined;
    if (!row) throw new KnowledgeError('E_NOT_FOUND', `no publication or request ${id}`);
    if (row.status !== 'acknowledged' || !row.receipt) {
      throw new KnowledgeError('E_CONFLICT', `publication ${id} is ${row.status}${row.failure ? `: ${row.failure}` : ' (not yet acknowledged; retry it with resume)'}`);
    }
    const receipt = JSON.parse(row.receipt) as PublicationReceipt;
    receipt.git = acceptedGitState(this.store.db, row.batch_id, failure);
    return receipt;
  }

  /**
   * Start a chunked upload, or resume the one this request id started [ATT-1]:
   * the status says which offset to send next. Other arguments under the same
   * request id are E_CONFLICT.
   */
  attachStart(req: AttachStartRequest): AttachmentStatus {
    this.requireWriter();
    return statusOf(startUpload(this.store.db, checkStartRequest(req), nowIso()));
  }

  /** Commit one chunk at `offset` (in order; a retried chunk is not stored twice) [ATT-1]. */
  attachChunk(id: string, offset: number, bytes: Buffer): AttachmentStatus {
    this.requireWriter();
    return statusOf(appendChunk(this.store, id, offset, bytes, nowIso()));
  }

  /** Where an upload stands, by attachment id or request id. */
  attachStatus(id: string): AttachmentStatus {
    return statusOf(loadAttachment(this.store.db, id));
  }

  /**
   * Verify, assemble, install and acknowledge a fully received upload
   * [ATT-2], then checkpoint it [GIT-9]. Completing a completed attachment
   * retries its checkpoint and returns the same receipt.
   */
  async attachComplete(id: string): Promise<AttachmentReceipt> {
    this.requireWriter();
    const row = completeUpload(this.store, id);
    const failure = row.batch_id !== null ? await drainAccepted(this.store, this.runner, { through: row.batch_id }) : null;
    const receipt = attachmentReceipt(this.store.db, row.attachment_id);
    // No batch: bytes history already held (attach/receipt.ts says where), nothing of this request to drain.
    if (row.batch_id !== null) receipt.git = acceptedGitState(this.store.db, row.batch_id, failure);
    return receipt;
  }

  /** Attach a regular file under `opts.allowedRoot`, streamed in chunks; resumes under the same request id [ATT-3]. */
  async attachFile(path: string, opts: AttachFileOptions): Promise<AttachFileResult> {
    this.requireWriter();
    const up = await uploadFile(this.store, path, opts);
    try {
      return { receipt: await this.attachComplete(up.attachmentId), resumedFrom: up.resumedFrom, sentBytes: up.sentBytes };
    } catch (err) {
      if (isKnowledgeError(err) && err.code === 'E_IO') {
        throw new KnowledgeError('E_IO', `${err.message} (request id ${up.requestId})`, err.details);
      }
      throw err;
    }
  }

  /**
   * What this store holds under a request id so far: its publication's or
   * attachment's id and status, or null when nothing was journaled under it.
   * For the CLI's line when a signal interrupts a request; never throws.
   */
  requestProgress(requestId: string): { kind: 'publication' | 'attachment'; id: string; status: string } | null {
    try {
      if (!this.store.db.open) return null;
      const pub = this.store.db.prepare(`SELECT publication_id, status FROM publications WHERE ${REQUEST_ID_MATCH}`).get(...requestIdForms(requestId)) as
        | { publication_id: string; status: string }
        | undefined;
      if (pub) return { kind: 'publication', id: pub.publication_id, status: pub.status };
      const att = this.store.db.prepare(`SELECT attachment_id, state FROM attachments WHERE ${REQUEST_ID_MATCH}`).get(...requestIdForms(requestId)) as
        | { attachment_id: string; state: string }
        | undefined;
      return att ? { kind: 'attachment', id: att.attachment_id, status: att.state } : null;
    } catch {
      return null;
    }
  }

  /** A completed attachment's receipt by attachment id or request id. */
  attachmentReceipt(id: string): AttachmentReceipt {
    return attachmentReceipt(this.store.db, id);
  }

  // ---------------------------------------------------------------------------
  // Writes on behalf of a caller [SURF-3] (agent tools): the caller's identity
  // decides the partition it may write and the actor label; a publication or
  // attachment outside its partitions reads as E_NOT_FOUND, never leaked.

  /** Publish as `caller`: sandboxed callers, and partitions the caller may not touch, are E_DENIED. */
  async publishAs(caller: Caller, req: Omit<PublishRequest, 'actor'>): Promise<PublicationReceipt> {
    requireNotSandboxed(caller);
    if (!canAccessPartition(caller, req.partition)) {
      throw new KnowledgeError('E_DENIED', `partition ${req.partition} is not writable by this caller`);
    }
    return this.publish({ ...req, actor: caller.kind === 'agent' ? 'agent' : 'operator' });
  }

  /** [GIT-16] Retry a publication's or attachment's checkpoint (by id or request id) as `caller`. */
  async resumeAs(caller: Caller, id: string): Promise<PublicationReceipt | AttachmentReceipt> {
    requireNotSandboxed(caller);
    const pub = this.store.db.prepare(`SELECT publication_id, partition FROM publications WHERE publication_id = ? OR ${REQUEST_ID_MATCH}`).get(id, ...requestIdForms(id)) as
      | { publication_id: string; partition: string }
      | undefined;
    if (pub && canAccessPartition(caller, pub.partition)) return this.resume(pub.publication_id);
    const att = this.store.db.prepare(`SELECT attachment_id, partition FROM attachments WHERE attachment_id = ? OR ${REQUEST_ID_MATCH}`).get(id, ...requestIdForms(id)) as
      | { attachment_id: string; partition: string }
      | undefined;
    if (!pub && att && canAccessPartition(caller, att.partition)) return this.attachComplete(att.attachment_id);
    // A scan is not resumed: the next scan commits every waiting checkpoint first, then its own [GIT-16].
    const scan = /^scan-/.test(id) ? '; scan ids are not resumed: run a scan, which commits every waiting checkpoint first' : '';
    throw new KnowledgeError('E_NOT_FOUND', `no publication or attachment ${id}${scan}`);
  }

  // ---------------------------------------------------------------------------
  // Reading [READ-1][READ-2]. Every read takes the caller: records outside its
  // partitions are never selected, so they read as missing / E_NOT_FOUND and
  // never leak. Reads take no lock and write nothing.

  /** Readable partitions, after denying sandboxed callers [SURF-3]. */
  private readScope(caller: Caller) {
    requireNotSandboxed(caller);
    return readablePartitions(caller);
  }

  /** Exact lookup by id, else title, else alias (case-insensitive, NFC). */
  lookup(caller: Caller, key: string): LookupResult {
    const scope = this.readScope(caller);
    return lookupRecord(this.store.db, scope, parseLookupKey(key));
  }

  /** Keyword search (FTS5, BM25); user text is never FTS5 syntax. E_VALIDATION for bad input. */
  search(caller: Caller, q: SearchQuery): SearchResult {
    const scope = this.readScope(caller);
    return searchRecords(this.store.db, scope, parseSearchQuery(q));
  }

  /** The exhaustive inventory, updated_at desc then id. A partition the caller may not read is E_DENIED. */
  listRecords(caller: Caller, q: ListQuery = {}): ListResult {
    const scope = this.readScope(caller);
    const parsed = parseListQuery(q);
    if (parsed.partition && scope !== 'all' && !scope.includes(parsed.partition)) {
      throw new KnowledgeError('E_DENIED', `partition ${parsed.partition} is not readable by this caller`);
    }
    return listRecords(this.store.db, scope, parsed);
  }

  /** One record with evidence, links and backlinks; E_NOT_FOUND when missing or not visible. */
  readRecord(caller: Caller, id: string): RecordView {
    const scope = this.readScope(caller);
    const key = parseLookupKey(id);
    try {
      return readRecordView(this.store.db, this.store.paths.vault, scope, key);
    } catch (err) {
      if (!isKnowledgeError(err) || err.code !== 'E_NOT_FOUND') throw err;
      const claimants = duplicateClaimants(this.store.db, scope, key);
      if (claimants) {
        throw new KnowledgeError('E_NOT_FOUND', `no record ${key}: its id is claimed by more than one file (${claimantsPhrase(claimants.shown, claimants.hidden)}); see the scan diagnostics [REC-3]`);
      }
      const former = findFormerRecord(this.store.db, scope, key);
      if (!former) throw err;
      const what = former.why === 'deleted' ? 'its file was deleted' : `its file ${former.path} no longer reads as a record (see the scan's diagnostics)`;
      throw new KnowledgeError('E_NOT_FOUND', `no record ${key}: ${what}; its history still lists every committed version [READ-2]`);
    }
  }

  /** Committed versions of one record from the vault's Git history; never fails on Git. */
  async recordHistory(caller: Caller, id: string): Promise<RecordHistory> {
    const { recs, mayRead } = this.historyRecords(caller, id);
    const histories = await Promise.all(recs.map((rec) => readHistory(this.runner, this.store.paths.vault, this.store.db, rec, mayRead)));
    const history = histories.length === 1 ? histories[0]! : mergeHistories(histories);
    if (caller.kind === 'operator') return history;
    const mayReadPartition = (p: string) => canAccessPartition(caller, p);
    for (const v of history.versions) if (v.scanId) v.subject = subjectForReader(v.subject, mayReadPartition);
    return history;
  }

  /** The files whose histories make up record `id`'s, and which paths the caller may read (E_NOT_FOUND as recordHistory). */
  private historyRecords(caller: Caller, id: string): { recs: Array<{ id: string; path: string }>; mayRead: (path: string) => boolean } {
    const scope = this.readScope(caller);
    const key = parseLookupKey(id);
    let recs: Array<{ id: string; path: string }>;
    try {
      recs = [requireVisible(this.store.db, scope, key)];
    } catch (err) {
      if (!isKnowledgeError(err) || err.code !== 'E_NOT_FOUND') throw err;
      // An id two files claim is no record [REC-3], but each file's versions are there to read while the user decides.
      const claimants = duplicateClaimants(this.store.db, scope, key);
      // A record whose file was deleted, or broken by hand: its committed versions can still be read (and recovered) [READ-2].
      const former = claimants ? undefined : findFormerRecord(this.store.db, scope, key);
      if (claimants) recs = claimants.shown.map((path) => ({ id: key, path }));
      else if (former) recs = [former];
      else throw err;
    }
    const mayRead = (path: string) => {
      const p = partitionOfPath(path);
      return p !== null && canAccessPartition(caller, p);
    };
    return { recs, mayRead };
  }

  /**
   * Unified diff between two committed versions: commit ids listed by
   * recordHistory, whole or shortened (at least 7 digits, as `knowledge
   * history` prints them) to one of this record's versions.
   */
  async recordDiff(caller: Caller, id: string, from: string, to: string): Promise<RecordDiff> {
    const idLike = /^[0-9a-f]{7,64}$/;
    if (!idLike.test(from) || !idLike.test(to)) {
      throw new KnowledgeError('E_VALIDATION', 'from and to must be commit ids: hexadecimal, whole or at least their first 7 digits');
    }
    // The two versions alone, read only as far back as they are (one record's file, commits that name one object):
    // the same versions the whole history lists. Anything else — a commit that is no version, a prefix naming several
    // objects, an id several files claim — is answered from the whole history, as it always was.
    const { recs, mayRead } = this.historyRecords(caller, id);
    if (recs.length === 1) {
      const found = await findVersions(this.runner, this.store.paths.vault, this.store.db, recs[0]!, mayRead, [from, to]);
      if (found !== null) return diffBetween(this.runner, this.store.paths.vault, recs[0]!.id, found[0]!, found[1]!);
    }
    const history = await this.recordHistory(caller, id);
    const whole = (c: string): string => {
      if (isFullCommitId(c)) return c;
      const matches = [...new Set(history.versions.map((v) => v.commit).filter((v) => v.startsWith(c)))];
      if (matches.length > 1) throw new KnowledgeError('E_VALIDATION', `commit ${c} names ${matches.length} versions of ${id}; give more digits`);
      return matches[0] ?? c; // none: the diff says the commit is not one of its versions
    };
    return diffVersions(this.runner, this.store.paths.vault, history, whole(from), whole(to));
  }

  /**
   * Observe edits made outside Knowledge in one partition, or in every
   * partition the caller may scan, and record them as one `external`
   * checkpoint; waiting checkpoints are retried first [SCAN-1..4, GIT-8, GIT-16].
   */
  async scan(opts: { partition?: string; caller?: Caller; onProgress?: (p: ScanProgress) => void } = {}): Promise<ScanReceipt> {
    this.requireWriter();
    return runScan(this.store, this.runner, { partition: opts.partition, caller: opts.caller ?? { kind: 'operator' }, onProgress: opts.onProgress });
  }

  /** A scan's receipt (scans that queued a checkpoint are kept). */
  scanReceipt(scanId: string): ScanReceipt {
    return scanReceipt(this.store.db, scanId);
  }

  /**
   * Newest first (Appendix A): `limit` entries after the newest `offset`, or
   * after the entry whose `cursor` is given (src/activity.ts), so every entry
   * can be reached page by page. One read snapshot.
   */
  activity(limit = 500, offset = 0, cursor?: string): ActivityEntry[] {
    const after = activityStart(offset, cursor);
    return this.store.db.transaction(() => activityPage(this.store.db, limit, offset, after)).deferred();
  }
}


/** `dev:ino` of a file (which file it is, not what it holds), or null when it cannot be looked at. */
function inodeOf(path: string): string | null {
  try {
    const st = statSync(path);
    return `${st.dev}:${st.ino}`;
  } catch {
    return null;
  }
}

/**
 * A failure after a publication was journaled: it is kept (its bytes are in
 * state.sqlite) and finished by `resume`, or by the same request id again —
 * never by publishing it again, which would make a second publication. So
 * the error names both ids [PUB-5]. A full or failing disk, or any other
 * error of the file system, is E_IO; our own coded errors keep their code;
 * anything else is a bug (E_INTERNAL), whose stack KNOWLEDGE_DEBUG=1 shows.
 */
export function keptButUnfinished(err: unknown, publicationId: string, requestId: string): KnowledgeError {
  // The file system's own errors (EACCES, EMFILE, …) are I/O, not bugs, as they were before the ids were named.
  const code = isKnowledgeError(err) ? err.code : isDiskFull(err) || isIoError(err) || isErrnoError(err) ? 'E_IO' : 'E_INTERNAL';
  const cause = (err instanceof Error ? err.message : String(err)).split('\n')[0];
  const fix = isDiskFull(err) ? 'free space, then finish it' : 'finish it';
  return new KnowledgeError(
    code,
    `publication ${publicationId} (request ${requestId}) is journaled and kept, but could not be installed and acknowledged: ${cause}; ` +
      `${fix} with \`knowledge resume ${publicationId}\` (or the same request id again): publishing it anew would make a second publication`,
    { publicationId, requestId },
    { cause: err },
  );
}
