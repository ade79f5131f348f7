/**
 * Edits the branch already holds [SCAN-1, GIT-10]. A user who commits in the
 * vault's repository themselves (it is theirs as much as Knowledge's) may
 * commit an edit before Knowledge's next scan sees it. The scan still finds
 * the file changed against what Knowledge recorded, and must record its new
 * fingerprint and index it; but a checkpoint of bytes the branch's tip
 * already holds would be an empty commit ("1 modified", no diff). So when
 * every change a scan would commit is exactly in the tip — each written path
 * with the same blob (and, where the repository records the executable bit,
 * the same mode), each removed path absent — the scan queues no checkpoint.
 *
 * Only ever a yes when Git says so: no repository, an unborn or unreadable
 * branch, any git failure, or any queued batch (an earlier checkpoint still
 * to come may set these paths to something else, and the scan's own must
 * then follow it) means no, and the checkpoint is queued as always.
 */
import type { Store } from '../store/store.js';
import type { GitRunner } from '../git/runner.js';
import { checksOutLinks, inspectLayout, recordsExecBit } from '../git/inspect.js';
import { readTreeEntries } from '../git/index-sync.js';
import { blobId } from '../git/commit-stream.js';

export async function changesInBranchTip(
  store: Store,
  runner: GitRunner,
  scanId: string,
  change: { write: readonly string[]; remove: readonly string[] },
): Promise<boolean> {
  const db = store.db;
  if (change.write.length + change.remove.length === 0) return false;
  if (db.prepare("SELECT 1 FROM batches WHERE state = 'queued' LIMIT 1").get() !== undefined) return false;
  if (!(await runner.detect()).ok) return false;
  const repo = await inspectLayout(runner, store.paths.vault);
  if (repo.kind !== 'ready' || repo.head === null) return false;
  const tip = await readTreeEntries(runner, repo.workTree, repo.head, [...change.write, ...change.remove]);
  if (!tip.ok) return false;
  for (const path of change.remove) if (tip.entries.has(path)) return false;
  // Paths and modes first (no bytes read while any path is missing), then the blobs. A symbolic link
  // in the tip is the same file only where links are checked out as plain files (core.symlinks=false).
  let links = false;
  for (const path of change.write) {
    const mode = tip.entries.get(path)?.mode;
    if (mode === '120000') links = true;
    else if (mode !== '100644' && mode !== '100755') return false;
  }
  if (links && (await checksOutLinks(runner, repo.workTree))) return false;
  const staged = db.prepare('SELECT bytes, exec FROM scan_staging WHERE scan_id = ? AND path = ?').raw();
  // A file whose executable bit differs from the tip's mode is a change where the repository records the bit.
  let modesDiffer = false;
  for (const path of change.write) {
    const row = staged.get(scanId, path) as [Buffer, number] | undefined;
    const entry = tip.entries.get(path)!;
    if (row === undefined || blobId(row[0], repo.objectFormat) !== entry.oid) return false;
    if (entry.mode !== '120000' && (row[1] === 1) !== (entry.mode === '100755')) modesDiffer = true;
  }
  return !modesDiffer || !(await recordsExecBit(runner, repo.workTree));
}
