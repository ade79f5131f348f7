/**
 * What a scan looks at, fixed and documented (README "Scans") [SCAN-1]:
 *
 * - Only partition folders are walked: `private/` and `conversations/<sessionId>/`.
 *   So `.git/`, `.knowledge-history/`, `vault.json` and anything else at the
 *   vault root are never scanned; SQLite files live outside the vault.
 * - Only Markdown and YAML files are observed and checkpointed [GIT-8]:
 *   `.md`, `.markdown`, `.yaml`, `.yml` (any letter case). Other files
 *   (retained originals, pictures, PDFs) enter history only through
 *   publications and attachments [GIT-9].
 * - `evidence/<hh>/<sourceId>/` folders (`evidence/<sourceId>/` in stores
 *   made before evidence was sharded) hold retained originals, which are
 *   immutable and belong to publications; scans do not descend into them
 *   (the descriptors `evidence/<hh>/<sourceId>.yaml` are scanned).
 * - Ignored names, files and folders alike: hidden names (starting with `.`,
 *   e.g. `.git`, `.obsidian`, `.trash`, `.DS_Store`, Vim's `.x.swp`, Emacs'
 *   `.#x` locks, LibreOffice's `.~lock.x#`, Knowledge's own `.x.tmp`), backup
 *   and autosave names (`x~`, `#x#`), Office owner files (`~$x`), Vim's write
 *   probe `4913`, and temporary or partial downloads (`.swp .swo .swx .tmp
 *   .temp .bak .part .crdownload .crswap`), plus SQLite files.
 * - The vault's `.gitignore` files are not honoured: history records what the
 *   vault holds, and must not change with whether Git is installed.
 *
 * Pure functions of names, so the walker and the set of recorded files are
 * filtered by exactly the same rule.
 */
import { gitDirAliasIn } from '../git/commit-stream.js';

export const SCANNED_EXT_RE = /\.(?:md|markdown|ya?ml)$/i;
// One test for every ignore rule (hidden, backup/autosave, Office owner files,
// Vim's write probe, temporary and partial downloads, SQLite files).
export const IGNORED_RE = /^\.|~$|^#.*#$|^~\$|^4913$|\.(?:swp|swo|swx|tmp|temp|bak|part|crdownload|crswap|sqlite|sqlite-wal|sqlite-shm|sqlite-journal|db-wal|db-shm)$/i;
// C0 controls and DEL: git paths may hold them, but they cannot be shown or typed safely.
// eslint-disable-next-line no-control-regex -- control characters are exactly what it looks for
const CONTROL_RE = /[\u0000-\u001f\u007f]/;

/** Names a scan never looks at (files and folders). */
export function isIgnoredName(name: string): boolean {
  return IGNORED_RE.test(name);
}

/** Markdown or YAML, and not ignored. */
export function isScannedFileName(name: string): boolean {
  return SCANNED_EXT_RE.test(name) && !IGNORED_RE.test(name);
}

export function isMarkdownPath(path: string): boolean {
  return /\.(?:md|markdown)$/i.test(path);
}

/**
 * Whether the walker skips a folder, given its path inside the partition
 * ('/'-separated, no leading slash): ignored names and retained originals.
 */
export function isSkippedDir(relInPartition: string): boolean {
  const segs = relInPartition.split('/');
  if (segs.some(isIgnoredName)) return true;
  if (segs[0] !== 'evidence' || segs.length < 2) return false;
  // evidence/<hh>/ is a shard of descriptors and source folders; anything deeper is a source folder.
  return segs.length >= 3 || !/^[0-9a-f]{2}$/.test(segs[1]!);
}

/** Whether the walk of partition folder `pdir` looks into vault-relative folder `dir`. */
export function dirInScope(dir: string, pdir: string): boolean {
  if (dir === pdir) return true;
  return dir.startsWith(pdir + '/') && !isSkippedDir(dir.slice(pdir.length + 1));
}

/** Whether a vault-relative file path is one a scan of partition folder `pdir` observes. */
export function inScanScope(path: string, pdir: string): boolean {
  const slash = path.lastIndexOf('/');
  return slash > 0 && isScannedFileName(path.slice(slash + 1)) && dirInScope(path.slice(0, slash), pdir);
}

/** Why a path cannot be checkpointed, or null when it can. */
export function pathProblem(path: string): string | null {
  if (CONTROL_RE.test(path)) return 'the name contains control characters';
  if (path.includes('\\')) return 'the name contains a backslash, which Git cannot store portably';
  const alias = gitDirAliasIn(path);
  if (alias !== undefined) return `Git takes "${alias}" for its own .git folder and keeps it out of every index`;
  if (Buffer.byteLength(path, 'utf8') > 4096) return 'the path is longer than 4096 bytes';
  return null;
}

/** Show a raw file name: valid UTF-8 as text, other bytes as \xNN. */
export function showRawName(raw: Buffer): string {
  let out = '';
  let i = 0;
  while (i < raw.length) {
    const b = raw[i]!;
    const len = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    if (len > 0 && i + len <= raw.length) {
      const chunk = raw.subarray(i, i + len);
      try {
        out += new TextDecoder('utf-8', { fatal: true }).decode(chunk);
        i += len;
        continue;
      } catch {
        // fall through: not a valid sequence
      }
    }
    out += `\\x${b.toString(16).padStart(2, '0')}`;
    i++;
  }
  return out;
}

