/**
 * `broken_record_files.revision`: the revision the record had when its file
 * stopped reading as one. Removing or moving that broken file is deleting the
 * record: it gets a tombstone with this revision, so its id keeps its history
 * and goes on from there (scan/reindex.ts). Null for rows written before.
 */
export default `
  ALTER TABLE broken_record_files ADD COLUMN revision INTEGER;
`;
