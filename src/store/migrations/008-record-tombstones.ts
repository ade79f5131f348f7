/**
 * Deleted records' last place [READ-2]: when a scan finds a record's file
 * gone (and no other file claims its id), the id, partition and last path
 * are kept here, so the record's history can still be read from Git after
 * the file was deleted — to see or recover what it said. A row outlives
 * nothing: an id in `records` is read from there; this table is consulted
 * only for an id that is not.
 */
export default `
  CREATE TABLE record_tombstones (
    id TEXT PRIMARY KEY,
    partition TEXT NOT NULL,
    path TEXT NOT NULL,
    removed_at TEXT NOT NULL
  ) WITHOUT ROWID;
`;
