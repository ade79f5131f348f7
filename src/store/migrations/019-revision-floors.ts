/**
 * `record_revision_floors`: the highest revision a record has had, where a
 * scan found its file at a lower one (an older version put back by hand, from
 * the vault's own history, say). The record is indexed as its file says, but
 * its next publication goes on from the highest revision, so no revision
 * number is used twice for different versions [REC-4] (scan/reindex.ts,
 * publish/validate.ts).
 */
export default `
  CREATE TABLE record_revision_floors (
    id TEXT PRIMARY KEY,
    revision INTEGER NOT NULL
  );
`;
