/**
 * Status-change times of recorded files [SCAN-4]: a scan compares a file's
 * ctime too, as Git does by default (`core.trustctime`), so an in-place edit
 * that keeps the size and puts the old mtime back (`cp -p` or `rsync -t` of a
 * same-size file, `touch -r`) is still seen: no program can set a ctime.
 *
 * Rows recorded before have none (NULL): such a file never matches its row
 * and is read once more by the next scan, which records its ctime (the same
 * bytes are "touched", not an edit; no checkpoint). Every kept folder digest
 * was taken without ctimes, so all are dropped: the next scan compares the
 * folders file by file.
 */
export default `
  ALTER TABLE vault_files ADD COLUMN ctime_ns TEXT;
  UPDATE scan_folders SET digest = NULL;
`;
