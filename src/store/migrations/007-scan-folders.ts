/**
 * Folder digests for unchanged rescans [SCAN-4] (src/scan/known.ts).
 *
 * - `scan_folders`: one row per folder holding files recorded in
 *   `vault_files` (vault-relative, no trailing slash), so a scan can find the
 *   folders it recorded without reading every file row.
 * - `digest`: a scan that found every recorded file of the folder unchanged
 *   by its metadata (size, mtime, inode, none racy), and no other scanned
 *   file there, keeps a digest of what its walk saw of the folder: names,
 *   sizes, mtimes and inodes. A later walk that sees the same digest knows
 *   the folder is unchanged without looking up any file's row.
 * - `version`: bumped, and the digest cleared, by every write to
 *   `vault_files` under the folder (the triggers below, whoever writes). A
 *   scan stores a digest only if the version is still the one it read with
 *   the folder's rows, so a digest never outlives the rows it was checked
 *   against.
 *
 * A new row starts at a random version (below 2^52, so JavaScript reads it
 * exactly), so a folder row dropped when empty and created again does not
 * take up a version a scan may still hold for it.
 *
 * The folder of a path is the path with its last segment trimmed:
 * `rtrim(path, <every character of the path but '/'>)`, then the slash.
 */
const dirOf = (col: string) => `rtrim(rtrim(${col}, replace(${col}, '/', '')), '/')`;
export const NEW_FOLDER_VERSION = 'abs(random()) % 4503599627370496';

export default `
  CREATE TABLE scan_folders (
    dir TEXT PRIMARY KEY,
    partition TEXT NOT NULL,
    version INTEGER NOT NULL,
    digest TEXT
  ) WITHOUT ROWID;
  CREATE INDEX scan_folders_partition ON scan_folders(partition);
  INSERT INTO scan_folders(dir, partition, version) SELECT dir, partition, ${NEW_FOLDER_VERSION}
    FROM (SELECT DISTINCT ${dirOf('path')} AS dir, partition FROM vault_files) WHERE true
    ON CONFLICT(dir) DO NOTHING;
  CREATE TRIGGER vault_files_folder_insert AFTER INSERT ON vault_files BEGIN
    INSERT INTO scan_folders(dir, partition, version) VALUES (${dirOf('NEW.path')}, NEW.partition, ${NEW_FOLDER_VERSION})
      ON CONFLICT(dir) DO UPDATE SET version = version + 1, digest = NULL;
  END;
  CREATE TRIGGER vault_files_folder_update AFTER UPDATE ON vault_files BEGIN
    UPDATE scan_folders SET version = version + 1, digest = NULL WHERE dir = ${dirOf('OLD.path')};
    INSERT INTO scan_folders(dir, partition, version) SELECT ${dirOf('NEW.path')}, NEW.partition, ${NEW_FOLDER_VERSION} WHERE ${dirOf('NEW.path')} <> ${dirOf('OLD.path')}
      ON CONFLICT(dir) DO UPDATE SET version = version + 1, digest = NULL;
  END;
  CREATE TRIGGER vault_files_folder_delete AFTER DELETE ON vault_files BEGIN
    UPDATE scan_folders SET version = version + 1, digest = NULL WHERE dir = ${dirOf('OLD.path')};
  END;
  `;
