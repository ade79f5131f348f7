/**
 * Deleted records' last place [READ-2]: when a scan finds a record's file
 * gone (and no other file claims its id), the id, partition and last path
 * are kept here, so the record's history can still be read from Git after
 * the file was deleted — to see or recover what it said — and its last
 * revision, so a record published again under the id goes on from it
 * [REC-4] (an old expectation of revision 1 is never met by a new revision
 * 1). A row is consulted only for an id that no file claims now (not in
 * `records`, not parked as a duplicate).
 */
export default `
  CREATE TABLE record_tombstones (
    id TEXT PRIMARY KEY,
    partition TEXT NOT NULL,
    path TEXT NOT NULL,
    revision INTEGER NOT NULL,
    removed_at TEXT NOT NULL
  ) WITHOUT ROWID;
`;
