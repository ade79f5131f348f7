/**
 * Source descriptors a scan recorded as files while the store had no source
 * for them (a vault cloned or restored without its state, scanned by a
 * Knowledge that did not adopt them yet): marked racy, so the next scan reads
 * each of them once more and adopts the source where its original agrees
 * (scan/adopt.ts looks only at the files a scan reads). One pass over
 * `vault_files`, once; each source looked up by its primary key.
 */
export default `
  UPDATE vault_files SET racy = 1
   WHERE path GLOB '*/evidence/[0-9a-f][0-9a-f]/src-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f].yaml'
     AND NOT EXISTS (SELECT 1 FROM sources s WHERE s.partition = vault_files.partition AND s.source_id = substr(vault_files.path, length(vault_files.path) - 32, 28));
`;
