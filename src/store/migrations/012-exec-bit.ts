/**
 * The executable bit (docs/local-history.md, "File modes"). Git records a
 * file as 100755 or 100644 from its owner-execute bit when the repository's
 * `core.fileMode` is true (git's default on Linux and macOS); Knowledge
 * commits what it observed the same way:
 * - `scan_staging.exec`: the bit of the file a scan read (fstat of the very
 *   read that gave the staged bytes);
 * - `batch_files.exec`: the bit a queued write commits with (a scan's from its
 *   staged row; Knowledge's own installs are never executable: 0). NULL on
 *   rows queued before this version: the path keeps the mode the branch had,
 *   as those versions did;
 * - `vault_files.exec`: the bit last recorded for the file, so a scan that
 *   reads a file again (its ctime moves on `chmod`) sees a change of the bit
 *   alone. NULL on rows recorded before this version: unknown, not compared.
 */
export default `
  ALTER TABLE scan_staging ADD COLUMN exec INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE batch_files ADD COLUMN exec INTEGER;
  ALTER TABLE vault_files ADD COLUMN exec INTEGER;
`;
