/**
 * A record's history asks which commits Knowledge recorded for its file
 * (src/read/history.ts offBranchCommits: those the branch no longer holds
 * are versions the list lacks). Without an index on the path, SQLite walks
 * every committed batch for it — 100k primary-key lookups at 100k
 * publications, on every history read.
 */
export default `
  CREATE INDEX IF NOT EXISTS batch_files_path ON batch_files(path);
`;
