/**
 * One record with everything its page shows [READ-1][SURF-2]: the indexed
 * frontmatter and body, the file as it is on disk, its evidence (each
 * citation with the source descriptor it names), its links and backlinks.
 */
import { closeSync, constants, fstatSync, openSync, readSync, realpathSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { KnowledgeError } from '../errors.js';
import type { DB } from '../store/db.js';
import type { PartitionId } from '../store/layout.js';
import { isSafeRelativePath } from '../records/filename.js';
import { sha256Hex } from '../records/record.js';
import type { Citation } from '../records/types.js';
import { bodyLinksTo, recordLinks } from './links.js';
import { columnPhrase } from './query.js';
import { SUMMARY_COLUMNS, UPDATED_KEY, UPDATED_ORDER, partitionClause, toSummary, whereSql, type SummaryRow } from './summary.js';
import { duplicateIdsAmong } from './duplicates.js';
import type { EvidenceEntry, OnDisk, RecordSummary, RecordView } from './types.js';

/** At most this many backlinks are returned (newest first); `backlinksTotal` counts all. */
export const MAX_BACKLINKS = 200;
/** Up to this many backlinks are sorted directly; more are picked from the ordered index. */
const SORT_DIRECTLY = 1000;
/** A record file larger than this is not read into a response. */
export const MAX_TEXT_BYTES = 16 * 1024 * 1024;

interface DetailRow extends SummaryRow {
  meta: string;
  body: string;
  sha256: string;
}

/** The indexed record, if the caller may see it; null otherwise (never says why). */
export function findVisible(db: DB, readable: 'all' | PartitionId[], id: string): DetailRow | null {
  const w = whereSql([{ sql: 'r.id = ?', params: [id] }, partitionClause(readable)]);
  return (db.prepare(`SELECT ${SUMMARY_COLUMNS}, r.meta, r.body, r.sha256 FROM records r ${w.sql}`).get(...w.params) as DetailRow | undefined) ?? null;
}

/** E_NOT_FOUND for ids the caller may not see, and for duplicate ids [REC-3]. */
export function requireVisible(db: DB, readable: 'all' | PartitionId[], id: string): DetailRow {
  const row = findVisible(db, readable, id);
  if (!row) throw new KnowledgeError('E_NOT_FOUND', `no record ${id}`);
  if (duplicateIdsAmong(db, [id]).size > 0) {
    throw new KnowledgeError('E_NOT_FOUND', `record id ${id} is claimed by more than one file; see the scan diagnostics [REC-3]`);
  }
  return row;
}

/**
 * A record no file holds as a record any more, in a partition the caller may
 * read: its id and last path, whose history still lists every committed
 * version [READ-2]. `deleted`: a scan found its file gone, or rewritten under
 * another id (its tombstone); `broken`: its file no longer reads as a record
 * (its YAML broken by hand). Only for an id no file claims now (not a record,
 * not a parked duplicate).
 */
export function findFormerRecord(db: DB, readable: 'all' | PartitionId[], id: string): { id: string; path: string; why: 'deleted' | 'broken' } | undefined {
  if (db.prepare('SELECT 1 FROM records WHERE id = ? UNION ALL SELECT 1 FROM scan_duplicate_rows WHERE id = ?').get(id, id) !== undefined) return undefined;
  const visible = (row: { partition: string } | undefined) => row !== undefined && (readable === 'all' || readable.includes(row.partition as PartitionId));
  type Row = { id: string; partition: string; path: string };
  // A broken file first: it is where the record is now (a tombstone may be left from an earlier deletion, the
  // record put back by hand since).
  const broken = db.prepare('SELECT id, partition, path FROM broken_record_files WHERE id = ? ORDER BY path LIMIT 1').get(id) as Row | undefined;
  if (visible(broken)) return { id: broken!.id, path: broken!.path, why: 'broken' };
  const gone = db.prepare('SELECT id, partition, path FROM record_tombstones WHERE id = ?').get(id) as Row | undefined;
  if (visible(gone)) return { id: gone!.id, path: gone!.path, why: 'deleted' };
  return undefined;
}

export function readRecordView(db: DB, vaultDir: string, readable: 'all' | PartitionId[], id: string): RecordView {
  // One read snapshot for the record, its evidence and its backlinks.
  return db.transaction(() => viewInSnapshot(db, vaultDir, readable, id)).deferred();
}

function viewInSnapshot(db: DB, vaultDir: string, readable: 'all' | PartitionId[], id: string): RecordView {
  const row = requireVisible(db, readable, id);
  const meta = parseObject(row.meta);
  const disk = readOnDisk(vaultDir, row.path, row.sha256);
  const { backlinks, total } = findBacklinks(db, readable, row.id);
  return {
    record: { ...toSummary(row), meta, body: row.body, text: disk.text, onDisk: disk.onDisk },
    evidence: evidenceOf(db, row.partition, meta),
    links: recordLinks(row.id, meta, row.body),
    backlinks,
    backlinksTotal: total,
  };
}

function parseObject(json: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(json);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/**
 * The record file as it is now. Never follows a symbolic link, never leaves
 * the vault, never reads more than MAX_TEXT_BYTES.
 */
export function readOnDisk(vaultDir: string, rel: string, indexedSha: string): { text: string | null; onDisk: OnDisk } {
  if (!isSafeRelativePath(rel, { existing: true })) return { text: null, onDisk: 'missing' };
  const abs = join(vaultDir, rel);
  let fd: number;
  try {
    const vaultReal = realpathSync(vaultDir);
    const parentReal = realpathSync(dirname(abs));
    if (parentReal !== vaultReal && !parentReal.startsWith(vaultReal + sep)) return { text: null, onDisk: 'missing' };
    fd = openSync(abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK); // a FIFO never blocks the read
  } catch {
    return { text: null, onDisk: 'missing' };
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { text: null, onDisk: 'missing' };
    if (st.size > MAX_TEXT_BYTES) return { text: null, onDisk: 'changed' };
    const buf = Buffer.alloc(st.size);
    let got = 0;
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, got);
      if (n === 0) break;
      got += n;
    }
    const bytes = buf.subarray(0, got);
    return { text: bytes.toString('utf8'), onDisk: sha256Hex(bytes) === indexedSha ? 'same' : 'changed' };
  } catch {
    return { text: null, onDisk: 'missing' };
  } finally {
    closeSync(fd);
  }
}

interface SourceRow {
  source_id: string;
  path: string;
  descriptor_path: string;
  sha256: string;
  size: number;
  media_type: string;
  in_history: number;
  attributions: string;
}

function citations(meta: Record<string, unknown>): Citation[] {
  const ev = meta.evidence;
  if (!Array.isArray(ev)) return [];
  return ev.filter((c): c is Citation => typeof c === 'object' && c !== null && typeof (c as Citation).source === 'string');
}

/** Each citation with its source descriptor; sources live in the record's own partition. */
export function evidenceOf(db: DB, partition: string, meta: Record<string, unknown>): EvidenceEntry[] {
  const get = db.prepare(
    'SELECT source_id, path, descriptor_path, sha256, size, media_type, in_history, attributions FROM sources WHERE partition = ? AND source_id = ?',
  );
  return citations(meta).map((citation): EvidenceEntry => {
    const s = get.get(partition, citation.source) as SourceRow | undefined;
    if (!s) return { known: false, sourceId: citation.source, citation };
    let attributions: Array<{ attribution: string; publicationId?: string; at?: string }> = [];
    try {
      const parsed: unknown = JSON.parse(s.attributions);
      if (Array.isArray(parsed)) attributions = parsed as typeof attributions;
    } catch {
      /* unreadable attribution list: shown as none */
    }
    return {
      known: true,
      sourceId: s.source_id,
      citation,
      path: s.path,
      descriptorPath: s.descriptor_path,
      sha256: s.sha256,
      size: s.size,
      mediaType: s.media_type,
      inHistory: s.in_history === 1,
      attributions,
    };
  });
}

/**
 * Records the caller may see that point at `id`, newest first (updated_at
 * as Date.parse reads it, then id): frontmatter links from `record_links`,
 * body wiki-links found through the FTS index (the id's words as a phrase in
 * the body) and confirmed by parsing the body.
 *
 * The total is counted inside SQLite; only the page's rows are read. A few
 * backlinks are sorted directly; many are picked by walking the
 * `records_updated` index in order, which stops as soon as the page is
 * known, so a record with 100k backlinks costs a count and a page.
 * (Finding body links still reads each body that names the id.)
 */
export function findBacklinks(db: DB, readable: 'all' | PartitionId[], id: string): { backlinks: RecordSummary[]; total: number } {
  const scope = partitionClause(readable);
  const body: string[] = [];
  const phrase = columnPhrase('body', id);
  if (phrase !== null) {
    // The id anywhere in the body (a link may be written `[[ id ]]`); bodyLinksTo decides.
    const fts = whereSql([{ sql: 'records_fts MATCH ?', params: [phrase] }, { sql: 'instr(r.body, ?) > 0', params: [id] }, scope]);
    const rows = db.prepare(
      `SELECT r.id, r.body FROM records_fts JOIN records_fts_keys k ON k.n = records_fts.rowid JOIN records r ON r.id = k.id ${fts.sql}`,
    ).all(...fts.params) as Array<{ id: string; body: string }>;
    for (const r of rows) if (bodyLinksTo(r.body, id)) body.push(r.id);
  }
  // Every backlink once: the frontmatter links' sources and the body links' records (the join from them
  // to `records` fixed: SQLite would otherwise walk a whole partition's index to scope a few ids).
  const linked = { sql: 'SELECT l.source_id AS id FROM record_links l WHERE l.target_id = ? UNION SELECT value FROM json_each(?)', params: [id, JSON.stringify(body)] };
  const others = [{ sql: 'r.id <> ?', params: [id] }, scope];
  const w = whereSql(others);
  const joined = { sql: `(${linked.sql}) b CROSS JOIN records r ON r.id = b.id ${w.sql}`, params: [...linked.params, ...w.params] };
  const total = (db.prepare(`SELECT count(*) AS n FROM ${joined.sql}`).get(...joined.params) as { n: number }).n;
  if (total === 0) return { backlinks: [], total: 0 };
  let paged = joined;
  if (total > SORT_DIRECTLY) {
    const walk = whereSql([{ sql: `r.id IN (${linked.sql})`, params: linked.params }, ...others]);
    paged = { sql: `records r INDEXED BY records_updated ${walk.sql}`, params: walk.params };
  }
  const rows = db.prepare(`SELECT ${SUMMARY_COLUMNS}, ${UPDATED_KEY} AS ukey FROM ${paged.sql} ORDER BY ${UPDATED_ORDER}`)
    .iterate(...paged.params) as IterableIterator<SummaryRow & { ukey: string }>;
  // The rows come in SQLite's order (ukey: sub-millisecond digits rounded, never earlier than Date.parse's
  // truncation); the page is in Date.parse's. Once MAX_BACKLINKS rows are read, a later row (its Date.parse
  // time at most its ukey) can only still belong on the page while its ukey reaches the worst of the first
  // MAX_BACKLINKS (ties: ids ascend).
  const page: RecordSummary[] = [];
  let worst: RecordSummary | undefined;
  for (const row of rows) {
    if (worst !== undefined) {
      const t = Date.parse(row.ukey);
      const tw = Date.parse(worst.updatedAt);
      if (t < tw || (t === tw && row.id > worst.id)) break;
    }
    page.push(toSummary(row));
    if (page.length === MAX_BACKLINKS) worst = [...page].sort(byUpdatedDesc)[MAX_BACKLINKS - 1];
  }
  return { backlinks: page.sort(byUpdatedDesc).slice(0, MAX_BACKLINKS), total };
}

function byUpdatedDesc(a: RecordSummary, b: RecordSummary): number {
  const ta = Date.parse(a.updatedAt);
  const tb = Date.parse(b.updatedAt);
  if (ta !== tb) return tb - ta;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
