/**
 * `scan_blocked_claims`: a record file a scan did not index because its id
 * belongs to a record deleted from another partition (the tombstone keeps
 * the id there, scan/reindex.ts), with the index row it would have had. When
 * that record is back (its file restored and scanned), the id is no longer
 * a deleted one and the file is an ordinary claim again — two claims, a
 * duplicate — exactly as if it had come second; without the row, a file that
 * did not change since would never be looked at again and stay left out. A
 * publication of the record in its own partition is refused while such a
 * file claims its id (publish/validate.ts). Files refused before this
 * migration have no row: their fingerprints are dropped, so the next scan
 * reads them again (as files new to it; their bytes are already in history)
 * and keeps their rows.
 */
export default `
  CREATE TABLE scan_blocked_claims (
    path TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    partition TEXT NOT NULL,
    row TEXT NOT NULL
  );
  CREATE INDEX scan_blocked_claims_id ON scan_blocked_claims(id);
  DELETE FROM vault_files WHERE path IN (
    SELECT path FROM scan_diagnostics
    WHERE code = 'duplicate-id' AND reason LIKE 'record id % belongs to a deleted record of another partition%'
  );
`;
