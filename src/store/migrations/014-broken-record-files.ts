/**
 * `broken_record_files`: a record's file that no longer reads as a record
 * (its YAML broken by hand, say), with the id it claimed when it last did.
 * The file still exists, so the record is neither deleted nor free: a
 * publication of a new record under that id is refused until the file is
 * fixed or removed and scanned (publish/validate.ts), instead of starting
 * the id again at revision 1 beside it (scan/reindex.ts keeps the rows).
 */
export default `
  CREATE TABLE broken_record_files (
    path TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    partition TEXT NOT NULL
  );
  CREATE INDEX broken_record_files_id ON broken_record_files(id);
`;
