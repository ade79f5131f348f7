/**
 * Scans [SCAN-1..4, GIT-8]: scan runs and their receipts, which partitions
 * have their baseline, what each vault file last looked like, and the
 * diagnostics a scan found [REC-3, SCAN-2].
 *
 * - `scans`: one row per scan that queued a checkpoint, with its receipt (a
 *   scan that found nothing to commit keeps no row: scans run on every request).
 * - `scan_partitions`: a partition with a row has its baseline [GIT-8];
 *   `last_scan_*` name the last scan that recorded anything there;
 *   `checked_batch` is the outbox position up to which its references were
 *   checked (a later publication may add the record a reference names).
 * - `scan_diagnostics`: findings about files that are not re-read while
 *   unchanged (broken envelopes, invalid records, broken YAML, scope
 *   mismatches, invalid references). Walk findings (symlinks, unreadable
 *   folders, bad names) are found again by every walk and are not kept.
 * - `scan_duplicate_rows`: the index row of every file whose record id another
 *   file also claims; `duplicate_record_ids` (migration 003) is the read
 *   side's view of the same files. When only one claim is left, its row goes
 *   back into `records`.
 * - `scan_staging`: bytes a running scan has read and hashed, staged in short
 *   transactions so a 100k-file baseline neither holds every file in memory
 *   nor keeps the write lock for the whole walk. When the scan queues its
 *   checkpoint, the staged rows become that batch's bytes (its `batch_files`
 *   rows hold NULL; outbox.ts `queuedBytesSql`) until the checkpoint is
 *   recorded. Leftovers of a killed scan are dropped by the next scan.
 * - `vault_files.racy`: the file's mtime was too close to the moment it was
 *   fingerprinted to trust it (a same-size edit in the same clock tick would
 *   look unchanged), so the next scan hashes it once more, as Git does with
 *   racily clean index entries.
 */
export default `
  CREATE TABLE scans (
    scan_id TEXT PRIMARY KEY,
    partition TEXT NOT NULL,
    caller TEXT NOT NULL,
    created_at TEXT NOT NULL,
    batch_id INTEGER,
    receipt TEXT NOT NULL
  );
  CREATE INDEX scans_created ON scans(created_at);
  CREATE TABLE scan_partitions (
    partition TEXT PRIMARY KEY,
    baseline_scan_id TEXT NOT NULL,
    baselined_at TEXT NOT NULL,
    last_scan_id TEXT NOT NULL,
    last_scan_at TEXT NOT NULL,
    checked_batch INTEGER NOT NULL DEFAULT 0
  );
  CREATE TABLE scan_diagnostics (
    path TEXT NOT NULL,
    partition TEXT NOT NULL,
    code TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (path, code)
  );
  CREATE INDEX scan_diagnostics_partition ON scan_diagnostics(partition, code);
  CREATE TABLE scan_duplicate_rows (
    path TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    partition TEXT NOT NULL,
    row TEXT NOT NULL
  );
  CREATE INDEX scan_duplicate_rows_id ON scan_duplicate_rows(id);
  CREATE TABLE scan_staging (
    scan_id TEXT NOT NULL,
    path TEXT NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (scan_id, path)
  );
  ALTER TABLE vault_files ADD COLUMN racy INTEGER NOT NULL DEFAULT 0;
  `;
