/**
 * Keep the records index a function of the files on disk [REC-2, REC-3],
 * inside the scan's applying transaction.
 *
 * Each record file "claims" its id. One claim: the row is in `records`. Two
 * or more: every claiming file is listed in `duplicate_record_ids` (the read
 * side's view) and its row is parked in `scan_duplicate_rows`, and `records`
 * holds none of them, so exact lookup finds no record for that id. When
 * claims drop back to one, the remaining row returns to `records`.
 *
 * Invalid files leave the index and get a diagnostic; their bytes are still
 * checkpointed by the caller [SCAN-2].
 */
import type { DB } from '../store/db.js';
import type { FileCheck, IndexRow } from './check.js';

/** Touched ids kept for changedIds; beyond this, a caller re-checks everything anyway. */
const TOUCHED_MAX = 10_000;

const RECORD_COLUMNS = 'id, partition, path, kind, title, revision, lifecycle, sha256, recorded_at, updated_at, aliases, tags, meta, body';

export class RecordIndexer {
  private readonly affected = new Set<string>();
  private readonly released = new Set<string>();
  /** Ids released because their file is gone, with where their row was: those no file claims at the end get a tombstone. */
  private readonly gone = new Map<string, { path: string; partition: string; revision: number }>();
  /**
   * Distinct ids claimed (a second claim of one id parks it: `moved`), and
   * those of them that were released first: all idsChanged needs, without a
   * set of every id a 100k baseline claims.
   */
  private claimedCount = 0;
  private readonly reclaimed = new Set<string>();
  /** A release after a claim: idsChanged answers the safe "yes". */
  private releasedLate = false;
  private moved = false;
  /** Ids whose `records` row this indexer inserted or deleted (see changedIds), up to TOUCHED_MAX. */
  private readonly touchedIds = new Set<string>();
  private touchedOverflow = false;
  private readonly s;

  /**
   * `touched` hears every record id whose `records` row this indexer inserts
   * or deletes (see read/index-maintenance.ts).
   */
  constructor(
    private readonly db: DB,
    private readonly now: string,
    private readonly touched: (id: string) => void = () => {},
    /** The scan, for the moves it records (a deleted record put back under another name). */
    private readonly scanId = '',
  ) {
    this.s = {
      recByPath: db.prepare('SELECT id, partition, revision FROM records WHERE path = ?'),
      delRecByPath: db.prepare('DELETE FROM records WHERE path = ?'),
      dupByPath: db.prepare('SELECT id, row FROM scan_duplicate_rows WHERE path = ?'),
      delDupRow: db.prepare('DELETE FROM scan_duplicate_rows WHERE path = ?'),
      delDupView: db.prepare('DELETE FROM duplicate_record_ids WHERE path = ?'),
      delDiags: db.prepare('DELETE FROM scan_diagnostics WHERE path = ?'),
      insDiag: db.prepare('INSERT OR REPLACE INTO scan_diagnostics(path, partition, code, reason) VALUES (?, ?, ?, ?)'),
      recById: db.prepare(`SELECT ${RECORD_COLUMNS} FROM records WHERE id = ?`),
      dupsById: db.prepare('SELECT path, row FROM scan_duplicate_rows WHERE id = ?'),
      delRecById: db.prepare('DELETE FROM records WHERE id = ?'),
      insRec: db.prepare(
        `INSERT INTO records(${RECORD_COLUMNS}) VALUES (@id, @partition, @path, @kind, @title, @revision, @lifecycle, @sha256,
           @recorded_at, @updated_at, @aliases, @tags, @meta, @body)`,
      ),
      insDupRow: db.prepare('INSERT OR REPLACE INTO scan_duplicate_rows(path, id, partition, row) VALUES (?, ?, ?, ?)'),
      insDupView: db.prepare('INSERT OR REPLACE INTO duplicate_record_ids(id, path, partition, found_at) VALUES (?, ?, ?, ?)'),
      allDupIds: db.prepare('SELECT DISTINCT id FROM scan_duplicate_rows').pluck(),
      hasRec: db.prepare('SELECT 1 FROM records WHERE id = ?').pluck(),
      hasDup: db.prepare('SELECT 1 FROM scan_duplicate_rows WHERE id = ? LIMIT 1').pluck(),
      tombstone: db.prepare('INSERT OR REPLACE INTO record_tombstones(id, partition, path, revision, removed_at) VALUES (?, ?, ?, ?, ?)'),
      raiseFloor: db.prepare('INSERT INTO record_revision_floors(id, revision) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET revision = max(revision, excluded.revision)'),
      floorOf: db.prepare('SELECT revision FROM record_revision_floors WHERE id = ?').pluck(),
      tombRevision: db.prepare('SELECT revision FROM record_tombstones WHERE id = ?').pluck(),
      tombstoneOf: db.prepare('SELECT partition, path FROM record_tombstones WHERE id = ?'),
      // A file that no longer reads as a record still holds its id (broken_record_files): not a deleted record.
      brokenHolds: db.prepare('SELECT 1 FROM broken_record_files WHERE id = ? LIMIT 1'),
      brokenByPath: db.prepare('SELECT id, partition, revision FROM broken_record_files WHERE path = ?'),
      delBroken: db.prepare('DELETE FROM broken_record_files WHERE path = ?'),
      insBroken: db.prepare('INSERT OR REPLACE INTO broken_record_files(path, id, partition, revision) VALUES (?, ?, ?, ?)'),
      move: db.prepare('INSERT OR REPLACE INTO record_moves(id, to_path, from_path, scan_id) VALUES (?, ?, ?, ?)'),
      // Files left out because their id belongs to a record deleted from another partition (migration 017).
      insBlocked: db.prepare('INSERT OR REPLACE INTO scan_blocked_claims(path, id, partition, row) VALUES (?, ?, ?, ?)'),
      delBlocked: db.prepare('DELETE FROM scan_blocked_claims WHERE path = ?'),
      allBlocked: db.prepare('SELECT path, id, partition, row FROM scan_blocked_claims ORDER BY path'),
      delBlockedDiag: db.prepare("DELETE FROM scan_diagnostics WHERE path = ? AND code = 'duplicate-id'"),
    };
    // Most scans (every baseline) have no deleted record or broken record file to look up: skip the
    // query per claim and per release (100k of each in a 100k-file baseline).
    this.anyTombstone = db.prepare('SELECT 1 FROM record_tombstones LIMIT 1').get() !== undefined;
    this.anyBroken = db.prepare('SELECT 1 FROM broken_record_files LIMIT 1').get() !== undefined;
    this.anyBlocked = db.prepare('SELECT 1 FROM scan_blocked_claims LIMIT 1').get() !== undefined;
  }

  private readonly anyTombstone: boolean;
  private readonly anyBroken: boolean;
  private anyBlocked: boolean;

  private note(id: string): void {
    this.touched(id);
    if (this.touchedOverflow) return;
    this.touchedIds.add(id);
    if (this.touchedIds.size > TOUCHED_MAX) {
      this.touchedOverflow = true;
      this.touchedIds.clear();
    }
  }

  /** Keep the highest revision among the deleted claims of one id. */
  private noteGone(id: string, at: { path: string; partition: string; revision: number }): void {
    const known = this.gone.get(id);
    if (!known || at.revision > known.revision) this.gone.set(id, at);
  }

  /** Paths released with new bytes, and the id (and revision) their file claimed: kept if the new bytes no longer read as a record. */
  private readonly claimedBefore = new Map<string, { id: string; revision: number | null }>();

  /** Forget what a path claimed: its file is `gone` (deleted), or its bytes changed. */
  release(path: string, gone = false): void {
    const broken = this.anyBroken ? (this.s.brokenByPath.get(path) as { id: string; partition: string; revision: number | null } | undefined) : undefined;
    if (broken !== undefined) {
      this.s.delBroken.run(path);
      if (!gone) this.claimedBefore.set(path, { id: broken.id, revision: broken.revision });
      // A broken record's file removed (or moved away) is the record deleted: its id keeps its history and revision
      // unless a file claims it again by the end of the scan (finish).
      else {
        this.affected.add(broken.id);
        this.noteGone(broken.id, { path, partition: broken.partition, revision: broken.revision ?? 0 });
      }
    }
    const rec = this.s.recByPath.get(path) as { id: string; partition: string; revision: number } | undefined;
    if (rec !== undefined && !gone) this.claimedBefore.set(path, { id: rec.id, revision: rec.revision });
    if (rec !== undefined) {
      const id = rec.id;
      this.s.delRecByPath.run(path);
      this.note(id);
      this.affected.add(id);
      this.released.add(id);
      // Deleted, or rewritten under another id (changed by hand): whichever, the id keeps its history and its last
      // revision unless a file claims it again by the end of the scan (finish).
      this.noteGone(id, { path, partition: rec.partition, revision: rec.revision });
      if (this.claimedCount > 0) this.releasedLate = true;
    }
    const dup = this.s.dupByPath.get(path) as { id: string; row: string } | undefined;
    if (dup !== undefined) {
      if (!gone) this.claimedBefore.set(path, { id: dup.id, revision: (JSON.parse(dup.row) as IndexRow).revision });
      this.s.delDupRow.run(path);
      this.s.delDupView.run(path);
      this.affected.add(dup.id);
      // A parked claim gone changes the id's standing even when no `records` row moves:
      // with every claim released, references to it no longer name a duplicate.
      this.moved = true;
      // Every claim of a duplicated id deleted at once leaves a tombstone too.
      if (gone) {
        const row = JSON.parse(dup.row) as IndexRow;
        this.noteGone(dup.id, { path, partition: row.partition, revision: row.revision });
      }
    }
    if (this.anyBlocked) this.s.delBlocked.run(path);
    this.s.delDiags.run(path);
  }

  /** Index the new bytes of a path (after {@link release}). */
  observe(path: string, partition: string, check: FileCheck): void {
    switch (check.kind) {
      case 'yaml':
        return;
      case 'invalid': {
        this.s.insDiag.run(path, partition, check.finding.code, check.finding.reason);
        // A record's file that no longer reads as one still holds its id (publish/validate.ts).
        const before = this.claimedBefore.get(path);
        if (before !== undefined) this.s.insBroken.run(path, before.id, partition, before.revision);
        return;
      }
      case 'record': {
        for (const f of check.findings) this.s.insDiag.run(path, partition, f.code, f.reason);
        // A deleted record keeps its id (and history) in its partition, as a publication elsewhere is refused it [REC-4].
        // The reason names no partition: an agent may read this one, not the other (one bit, README "Reading").
        // A record live until this scan (moved here in it) or live now (then an ordinary duplicate) is not a deleted one.
        const id = check.row.id;
        const tomb = this.anyTombstone && !this.released.has(id) ? (this.s.tombstoneOf.get(id) as { partition: string; path: string } | undefined) : undefined;
        if (tomb !== undefined && this.blockedBy(tomb, check.row)) {
          this.s.insDiag.run(path, partition, 'duplicate-id',
            `record id ${id} belongs to a deleted record of another partition (ids are unique across the store); this file is not indexed: give it another id`);
          // Kept with its row: when the record is back, this file is an ordinary claim again (finish).
          this.s.insBlocked.run(path, id, partition, JSON.stringify(check.row));
          this.anyBlocked = true;
          return;
        }
        this.claim(check.row, tomb?.path);
        return;
      }
    }
  }

  /** Whether `row`'s claim is left out: its id is a record's deleted from another partition, which no file claims now. */
  private blockedBy(tomb: { partition: string }, row: IndexRow): boolean {
    return tomb.partition !== row.partition && this.s.hasRec.get(row.id) === undefined && this.s.hasDup.get(row.id) === undefined;
  }

  /**
   * A record indexed at a lower revision than its id has had (an older version put back by hand, in this scan or
   * after its deletion, its file's breakage or its duplicate's removal): indexed as its file says, but its next
   * publication goes on from the highest revision [REC-4] (migration 019).
   */
  private keepRevisionFloor(row: IndexRow): void {
    const before = this.claimedBefore.get(row.path);
    const known = Math.max(
      this.gone.get(row.id)?.revision ?? 0,
      before?.id === row.id ? (before.revision ?? 0) : 0,
      this.anyTombstone ? ((this.s.tombRevision.get(row.id) as number | undefined) ?? 0) : 0,
    );
    if (known > row.revision) this.s.raiseFloor.run(row.id, known);
  }

  /** `deletedAt`: where the id's tombstone says the record was when it was deleted, if it has one. */
  private claim(row: IndexRow, deletedAt?: string): void {
    this.claimedCount++;
    this.keepRevisionFloor(row);
    if (this.released.has(row.id)) {
      this.reclaimed.add(row.id);
      // Claimed again in another partition (its file moved across partitions): references to it change meaning in both.
      if (this.gone.get(row.id)?.partition !== row.partition) this.moved = true;
    }
    // A deleted record put back by hand under another name: where it lived before, for its history (read/history.ts),
    // which its tombstone stops telling once the record is deleted again from the new place.
    else if (deletedAt !== undefined && deletedAt !== row.path && this.scanId) this.s.move.run(row.id, row.path, deletedAt, this.scanId);
    const holder = this.s.recById.get(row.id) as IndexRow | undefined;
    const dups = this.s.dupsById.all(row.id) as Array<{ path: string }>;
    if (!holder && dups.length === 0) {
      this.s.insRec.run(row);
      this.note(row.id);
      return;
    }
    if (holder) this.park(holder);
    this.park(row);
  }

  private park(row: IndexRow): void {
    this.moved = true;
    this.s.delRecById.run(row.id);
    this.note(row.id);
    this.s.insDupRow.run(row.path, row.id, row.partition, JSON.stringify(row));
    this.s.insDupView.run(row.id, row.path, row.partition, this.now);
    this.affected.add(row.id);
  }

  /**
   * Settle every id whose claims changed, and every parked id (a publication
   * may have indexed a record under a parked id meanwhile).
   */
  finish(): void {
    // A file left out for claiming a deleted record's id, whose record is back (its file restored, in this scan or
    // an earlier one): an ordinary claim now, as it would be had it come second — the state follows the files, not
    // the order they came in.
    if (this.anyBlocked) {
      for (const b of this.s.allBlocked.all() as Array<{ path: string; id: string; partition: string; row: string }>) {
        const tomb = this.s.tombstoneOf.get(b.id) as { partition: string } | undefined;
        const row = JSON.parse(b.row) as IndexRow;
        if (tomb !== undefined && this.blockedBy(tomb, row)) continue;
        this.s.delBlocked.run(b.path);
        this.s.delBlockedDiag.run(b.path);
        this.claim(row);
      }
    }
    for (const id of this.s.allDupIds.all() as string[]) this.affected.add(id);
    for (const id of this.affected) {
      const holder = this.s.recById.get(id) as IndexRow | undefined;
      const dups = this.s.dupsById.all(id) as Array<{ path: string; row: string }>;
      if (dups.length === 0) continue;
      if (holder) {
        this.park(holder);
        continue;
      }
      if (dups.length === 1) {
        const only = dups[0]!;
        this.moved = true;
        this.s.delDupRow.run(only.path);
        this.s.delDupView.run(only.path);
        const row = JSON.parse(only.row) as IndexRow;
        this.keepRevisionFloor(row);
        this.s.insRec.run(row);
        this.note(row.id);
      }
    }
    // [READ-2] A record whose file is gone, and whose id no other file claims: its history stays readable.
    for (const [id, at] of this.gone) {
      if (this.s.hasRec.get(id) === undefined && this.s.hasDup.get(id) === undefined && this.s.brokenHolds.get(id) === undefined) {
        this.s.tombstone.run(id, at.partition, at.path, Math.max(at.revision, (this.s.floorOf.get(id) as number | undefined) ?? 0), this.now);
      }
    }
  }

  /**
   * Every id whose standing may differ from before: its `records` row was
   * inserted or deleted, or its claims changed (parked, unparked, a duplicate
   * released). References elsewhere can only change meaning for these ids.
   * Null when there are more than `max` (the caller then takes everything).
   * Call after {@link finish}.
   */
  changedIds(max: number): ReadonlySet<string> | null {
    if (this.touchedOverflow) return null;
    const out = new Set([...this.touchedIds, ...this.affected]);
    return out.size > max ? null : out;
  }

  /**
   * Whether the set of indexed record ids may differ from before (a record
   * appeared, disappeared, or became or stopped being a duplicate): then
   * references elsewhere may have changed meaning. Call after {@link finish}.
   */
  idsChanged(): boolean {
    if (this.moved || this.releasedLate || this.released.size !== this.claimedCount) return true;
    return this.reclaimed.size !== this.released.size;
  }
}
