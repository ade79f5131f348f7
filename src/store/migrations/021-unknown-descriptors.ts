/**
 * Source descriptors a scan recorded as files while the store had no source
 * for them (a vault cloned or restored without its state, scanned by a
 * Knowledge that did not adopt them yet): marked racy, so the next scan reads
 * each of them once more and adopts the source where its original agrees
 * (scan/adopt.ts looks only at the files a scan reads). One pass over
 * `vault_files`, once; each source looked up by its primary key.
 *
 * `adopted_in_history`: for a source a scan adopted while the branch already
 * held its files (no batch of this store committed them), the branch tip that
 * scan saw, which holds them: what an attachment of the same bytes reports as
 * its commit. (A table of its own, so this migration can run again.)
 */
export default `
  CREATE TABLE IF NOT EXISTS adopted_in_history (
    partition TEXT NOT NULL,
    source_id TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    PRIMARY KEY (partition, source_id)
  ) WITHOUT ROWID;
  UPDATE vault_files SET racy = 1
   WHERE path GLOB '*/evidence/[0-9a-f][0-9a-f]/src-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f].yaml'
     AND NOT EXISTS (SELECT 1 FROM sources s WHERE s.partition = vault_files.partition AND s.source_id = substr(vault_files.path, length(vault_files.path) - 32, 28));
`;
