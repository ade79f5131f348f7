/**
 * The order of Activity (Appendix A, SURF-2): publications, attachments and
 * scans, newest first. The order is total — `created_at` descending, then the
 * kind (publications, attachments, scans), then the order rows were made in,
 * newest first — so a page is asked for by offset (a position) or by cursor
 * (the place of the entry before it, which every entry carries). A cursor
 * walk lists each entry once whatever arrives meanwhile; an offset walk
 * shows an entry again for each newer one that arrived since its last page.
 * Each kind is read newest first by its `created_at` index, never sorted.
 */
import type { DB } from './store/db.js';
import { cursorStart, decodeCursor, encodeCursor } from './read/query.js';
import { batchGitState } from './checkpoint/outbox.js';
import type { GitState } from './git/types.js';
import { attachmentEntry } from './attach/receipt.js';
import type { AttachmentRow } from './attach/upload.js';
import { SCAN_COUNTS_COLUMNS, scanEntry, type ScanCountsRow } from './scan/receipt.js';

export interface ActivityEntry {
  kind: 'publication' | 'attachment' | 'scan';
  id: string;
  createdAt: string;
  actor: string;
  git: GitState;
  /** Extra, kind-specific facts (partition, counts, failure). */
  detail?: Record<string, unknown>;
  /** Where the entries after this one start: pass it as `cursor` (an extension of Appendix A). */
  cursor: string;
}

const TABLES = { publication: 'publications', attachment: 'attachments', scan: 'scans' } as const;
export type ActivityKind = keyof typeof TABLES;
const RANK: Record<ActivityKind, number> = { publication: 0, attachment: 1, scan: 2 };

/** An entry's place in the order. */
export interface ActivityPlace {
  createdAt: string;
  rank: number;
  rowid: number;
}


function activityCursor(p: ActivityPlace): string {
  return encodeCursor([p.createdAt, p.rank, p.rowid]);
}

export function parseActivityCursor(cursor: unknown): ActivityPlace {
  const v = decodeCursor(cursor, 'the cursor of an activity entry', (a) => a.length === 3
    && typeof a[0] === 'string' && a[0] !== '' && a[0].length <= 64
    && Number.isInteger(a[1]) && Object.values(RANK).includes(a[1] as number)
    && Number.isSafeInteger(a[2]));
  return { createdAt: v[0] as string, rank: v[1] as number, rowid: v[2] as number };
}

/** A page's start: by offset, or after a cursor's entry — not both. */
export function activityStart(offset: number, cursor: string | undefined): ActivityPlace | undefined {
  return cursorStart(offset, cursor, parseActivityCursor);
}

/**
 * The query for the places of at most `limit` rows of `kind`'s table after
 * `after` (from the newest when absent), in Activity's order: read from the
 * `created_at` index alone (it holds the rowid), never the rows themselves.
 */
export function activityQuery(kind: ActivityKind, limit: number, after?: ActivityPlace): { sql: string; params: unknown[] } {
  const rank = RANK[kind];
  let where = '';
  const params: unknown[] = [];
  if (after) {
    // Later in the order: older, or as old and of a later kind, or of this kind and made before.
    if (rank > after.rank) {
      where = 'WHERE created_at <= ?';
      params.push(after.createdAt);
    } else if (rank < after.rank) {
      where = 'WHERE created_at < ?';
      params.push(after.createdAt);
    } else {
      where = 'WHERE created_at <= ? AND NOT (created_at = ? AND rowid >= ?)';
      params.push(after.createdAt, after.createdAt, after.rowid);
    }
  }
  return { sql: `SELECT rowid AS activity_rowid, created_at FROM ${TABLES[kind]} ${where} ORDER BY created_at DESC, rowid DESC LIMIT ?`, params: [...params, limit] };
}

function activityPlaces(db: DB, kind: ActivityKind, limit: number, after?: ActivityPlace): Array<{ kind: ActivityKind; place: ActivityPlace }> {
  const q = activityQuery(kind, limit, after);
  const rows = db.prepare(q.sql).all(...q.params) as Array<{ activity_rowid: number; created_at: string }>;
  return rows.map((row) => ({ kind, place: { createdAt: row.created_at, rank: RANK[kind], rowid: row.activity_rowid } }));
}

/** Activity's order: newest first, then by kind, then the newest row first. */
function compareActivity(a: ActivityPlace, b: ActivityPlace): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? 1 : -1;
  return a.rank - b.rank || b.rowid - a.rowid;
}

interface PublicationRow {
  publication_id: string; created_at: string; actor: string; partition: string; batch_id: number | null; status: string; failure: string | null;
  record_count: number | null; first_title: unknown;
}

/**
 * `limit` entries after the first `offset` of those after `after` (from the
 * newest when absent): each kind's first offset + limit, merged, sliced.
 */
export function activityPage(db: DB, limit: number, offset: number, after: ActivityPlace | undefined): ActivityEntry[] {
  const upTo = offset + limit;
  const places = [...activityPlaces(db, 'publication', upTo, after), ...activityPlaces(db, 'attachment', upTo, after), ...activityPlaces(db, 'scan', upTo, after)];
  // Only the page's own rows are read (and their Git states looked up), not the `offset` rows before them.
  return places.sort((a, b) => compareActivity(a.place, b.place)).slice(offset, upTo)
    .map(({ kind, place }) => ({ ...entryOf(db, kind, place.rowid), cursor: activityCursor(place) }));
}

function entryOf(db: DB, kind: ActivityKind, rowid: number): Omit<ActivityEntry, 'cursor'> {
  // A publication's records: how many, and the first one's title as published (read from its plan by SQLite, which
  // never hands the whole plan of a large publication to JavaScript).
  // A scan by its counts, never its receipt (a baseline's lists every file it added).
  const columns = kind === 'publication'
    ? "publication_id, created_at, actor, partition, batch_id, status, failure, json_array_length(plan, '$.records') AS record_count, json_extract(plan, '$.records[0].meta.title') AS first_title"
    : kind === 'scan' ? SCAN_COUNTS_COLUMNS : '*';
  const row = db.prepare(`SELECT ${columns} FROM ${TABLES[kind]} WHERE rowid = ?`).get(rowid);
  if (kind === 'publication') return publicationEntry(db, row as PublicationRow);
  if (kind === 'attachment') return attachmentEntry(db, row as AttachmentRow);
  return scanEntry(db, row as ScanCountsRow);
}

function publicationEntry(db: DB, r: PublicationRow): Omit<ActivityEntry, 'cursor'> {
  return {
    kind: 'publication',
    id: r.publication_id,
    createdAt: r.created_at,
    actor: r.actor,
    git: publicationGitState(db, r),
    // records and title (the first record's, as published) say what was published, in Activity's lists.
    detail: { partition: r.partition, status: r.status, records: r.record_count ?? 0, ...(typeof r.first_title === 'string' ? { title: r.first_title } : {}) },
  };
}

/** A publication's Git state in Activity, whatever became of it. */
function publicationGitState(db: DB, r: { publication_id: string; batch_id: number | null; status: string; failure: string | null }): GitState {
  if (r.status === 'acknowledged') return batchGitState(db, r.batch_id);
  // Its install was refused (a file it would write changed on disk after it was journaled): no retry applies it.
  if (r.status === 'abandoned') {
    return { state: 'pending', code: 'abandoned', reason: `abandoned, never acknowledged, so never checkpointed: ${r.failure ?? 'its install was refused'}; files it installed before that stay on disk (a scan records them as outside edits), its bytes are kept in state.sqlite, and a retry cannot apply it: publish it again (with a new request id)` };
  }
  // Cut short before its install was acknowledged (a crash): Git has nothing to do with it yet.
  if (r.status === 'journaled' && !r.failure) {
    return { state: 'pending', code: 'waiting', reason: `journaled, not finished yet (its files installed and acknowledged): the next writer to open the store, or knowledge resume ${r.publication_id}, finishes it` };
  }
  return { state: 'pending', code: 'git-error', reason: r.failure ?? `publication is ${r.status}` };
}
