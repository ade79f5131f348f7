/**
 * No table changes: this version marks a change of meaning. From here on, a
 * queued scan batch's `batch_files` rows hold NULL bytes and the outbox reads
 * the rows the scan staged in `scan_staging` (checkpoint/outbox.ts,
 * `queuedBytesSql`). A Knowledge older than this would read those NULLs as
 * empty files and clear the staging table; the version bump makes it refuse
 * the store instead (db.ts: a newer schema is never opened).
 */
export default '';
