/**
 * The observing phase of a scan [SCAN-1, SCAN-4]: walk the partitions,
 * recognise unchanged files from stored metadata without reading them, read
 * and hash the rest, and stage the changed bytes in `scan_staging` in short
 * transactions (so a 100k-file baseline neither holds every file in memory
 * nor keeps SQLite's write lock for the whole walk). Then look again at
 * recorded files the walk did not see before calling them deleted. Bytes are
 * parsed here only when some file is gone (to pair renames by record id);
 * apply parses what it indexes.
 */
import { readdirSync } from 'node:fs';
import type { Store } from '../store/store.js';
import { partitionDir, partitionOfPath, type PartitionId } from '../store/layout.js';
import { crashPoint } from '../faults.js';
import { walkPartition, type WalkFile } from './walk.js';
import { endPrefetchWorkers, listingWanted, prefetchPartitions, PREFETCH_MIN_FILES, stopListingAhead } from './prefetch.js';
import { readStable, sleepSync, SCAN_MAX_BYTES, type ReadOutcome } from './read.js';
import { checkFile } from './check.js';
import { isRacy, isUnchanged } from './plan.js';
import { dirInScope } from './scope.js';
import { folderDigest, folderFiles, keepFolderDigests, recordedCounts, recordedFolders } from './known.js';
import type { MissingFile, ReadFile, ScanDiagnostic, ScanProgress } from './types.js';

export interface Observation {
  /** Files read and hashed (new, changed metadata, or racy), with the fingerprints to record. */
  read: ReadFile[];
  /** Recorded files that are gone. */
  missing: MissingFile[];
  /** Files recognised from stored metadata alone. */
  unchanged: number;
  /** Recorded files before this scan. */
  known: number;
  /** Files whose contents the prefetch workers read (a baseline's; see prefetch.ts). */
  readAhead: number;
  /** Recorded folders whose files were compared with their records one by one (the rest matched their digest). */
  foldersCompared: number;
  diagnostics: ScanDiagnostic[];
}

/** Staged bytes are flushed to SQLite in transactions of at most this many files or bytes. */
const STAGE_FILES = 2000;
const STAGE_BYTES = 8 * 1024 * 1024;
/** Pauses before each look at a recorded file the walk did not see (ms); only scans that find deletions pay them. */
const MISSING_RECHECK_MS = [0, 20, 50, 100, 200];

export function observe(
  store: Store,
  scanId: string,
  partitions: readonly PartitionId[],
  progress: ScanProgress,
  onProgress?: (p: ScanProgress) => void,
): Observation {
  const db = store.db;
  const vault = store.paths.vault;
  // The scan's clock (plan.ts isRacy), taken before any file is read, by this thread or a worker.
  const nowNs = BigInt(Date.now()) * 1_000_000n;
  // Worker threads list (and for a baseline read) while this thread walks their listings (prefetch.ts).
  const counts = recordedCounts(db, partitions);
  const knownCount = counts.reduce((n, c) => n + c, 0);
  const wanted = listingWanted(counts);
  const listing = wanted
    ? prefetchPartitions(vault, partitions.map(partitionDir), partitions.filter((_, i) => wanted.readAhead[i]).map(partitionDir))
    : stopListingAhead();
  // The folders holding recorded files (known.ts): a file's row is looked up only in a folder whose digest differs.
  const folders = partitions.map((p) => recordedFolders(db, p));
  progress.expected = knownCount;
  const getSha = db.prepare('SELECT sha256 FROM vault_files WHERE path = ?').pluck();
  const getKnown = db.prepare('SELECT sha256, exec FROM vault_files WHERE path = ?').raw();
  const insStage = db.prepare('INSERT OR REPLACE INTO scan_staging(scan_id, path, bytes, sha256, exec) VALUES (?, ?, ?, ?, ?)');
  const read: ReadFile[] = [];
  const diagnostics: ScanDiagnostic[] = [];
  const blocked: string[] = [];
  let unchanged = 0;
  let stage: Array<[string, Buffer, string, number]> = [];
  let stageBytes = 0;

  const flushStage = () => {
    if (stage.length === 0) return;
    const rows = stage;
    stage = [];
    stageBytes = 0;
    db.transaction(() => {
      for (const [path, bytes, sha256, exec] of rows) insStage.run(scanId, path, bytes, sha256, exec);
    })();
    crashPoint('scan-mid-stage');
  };

  const block = (path: string, d: ScanDiagnostic) => {
    diagnostics.push(d);
    blocked.push(path);
  };

  /**
   * Read a file whose metadata changed (or that is new). Returns false when
   * the name vanished; true when it was read, or reported and kept.
   */
  const readChanged = (path: string, wasKnown: boolean, preread?: ReadOutcome): boolean => {
    const r = preread ?? readStable(`${vault}/${path}`);
    switch (r.kind) {
      case 'ok': {
        progress.hashed++;
        const known = wasKnown ? (getKnown.get(path) as [string, number | null] | undefined) : undefined;
        const knownSha = known?.[0] ?? null;
        // The same bytes with the executable bit flipped: staged as well, a change where the
        // repository records the bit (scan.ts decides; a bit never recorded is not compared).
        const execChanged = knownSha === r.sha256 && known![1] !== null && (known![1] === 1) !== r.exec;
        // Changed bytes are staged unparsed: apply checks them once. The record id
        // that pairs a rename is read back below, only when some file is gone.
        if (knownSha !== r.sha256 || execChanged) {
          stage.push([path, r.bytes, r.sha256, r.exec ? 1 : 0]);
          stageBytes += r.bytes.length;
          if (stage.length >= STAGE_FILES || stageBytes >= STAGE_BYTES) flushStage();
        }
        read.push({
          path, sha256: r.sha256, knownSha256: knownSha, recordId: null, size: r.size, mtimeNs: r.mtimeNs, ctimeNs: r.ctimeNs, ino: r.ino, exec: r.exec,
          racy: isRacy(nowNs, r.mtimeNs, r.ctimeNs), ...(execChanged ? { execChanged } : {}),
        });
        return true;
      }
      case 'vanished':
        return false;
      case 'symlink':
        block(path, { path, code: 'symlink', reason: 'became a symbolic link; never followed or committed' });
        return true;
      case 'special':
        block(path, { path, code: 'special-file', reason: 'not a regular file; not read' });
        return true;
      case 'unreadable':
        block(path, { path, code: 'unreadable', reason: `cannot read this file: ${r.reason}${wasKnown ? '; what Knowledge recorded is kept' : '; not checkpointed'}` });
        return true;
      case 'unstable':
        block(path, { path, code: 'unstable', reason: `${r.reason}; the next scan picks it up` });
        return true;
      case 'too-large':
        block(path, { path, code: 'too-large', reason: `${r.size} bytes, more than the ${SCAN_MAX_BYTES} a scan reads; not checkpointed${wasKnown ? ', and what Knowledge recorded is kept' : ''}` });
        return true;
    }
  };

  const unseen: string[] = [];
  /** New files listed but gone when read (mid-save, say): looked for again with the recorded ones. */
  const vanishedNew: string[] = [];
  const kept: Array<[string, number, string]> = [];
  const emptied: Array<[string, number]> = [];
  let foldersCompared = 0;
  /** Compare a folder's files with its recorded rows, one by one; keep its digest when all are unchanged. */
  const compareFolder = (dir: string, pdir: string, files: readonly WalkFile[], digest: string | null) => {
    foldersCompared++;
    const known = folderFiles(db, dir, pdir);
    let clean = true;
    for (const f of files) {
      const k = known.entries.get(f.name);
      if (isUnchanged(k, f.st)) {
        k!.seen = true;
        unchanged++;
        continue;
      }
      clean = false;
      const path = `${dir}/${f.name}`;
      if (readChanged(path, k !== undefined, f.st.preread)) {
        if (k !== undefined) k.seen = true;
      } else if (k === undefined) {
        vanishedNew.push(path);
      }
    }
    for (const [name, e] of known.entries) {
      if (e.seen) continue;
      clean = false;
      unseen.push(`${dir}/${name}`);
    }
    if (known.version === null) return;
    if (known.rows === 0) emptied.push([dir, known.version]);
    else if (clean && digest !== null) kept.push([dir, known.version, digest]);
  };

  try {
    partitions.forEach((p, i) => {
      const recordedHere = folders[i]!;
      const pdir = partitionDir(p);
      const walked = new Set<string>();
      walkPartition(vault, pdir, {
        files: (dir, files) => {
          walked.add(dir);
          const before = progress.seen;
          progress.seen += files.length;
          if (onProgress && before >>> 10 !== progress.seen >>> 10) onProgress(progress);
          const folder = recordedHere.get(dir);
          if (folder === undefined) {
            // Nothing recorded here: every file is new.
            for (const f of files) if (!readChanged(`${dir}/${f.name}`, false, f.st.preread)) vanishedNew.push(`${dir}/${f.name}`);
            return;
          }
          const digest = folderDigest(files);
          if (digest === folder.digest) {
            unchanged += files.length;
            return;
          }
          compareFolder(dir, pdir, files, digest);
        },
        diagnostic: (d) => diagnostics.push(d),
        blocked: (path) => blocked.push(path),
      }, listing ?? undefined);
      // Recorded folders the walk did not list (gone or blocked): their files may be gone. (Out of the walk's
      // scope a folder admits no file: nothing there is compared or deleted.)
      for (const dir of recordedHere.keys()) if (!walked.has(dir) && dirInScope(dir, pdir)) compareFolder(dir, pdir, [], null);
    });
  } finally {
    listing?.close(); // what the workers still send is not needed
    // Workers that read a large baseline hold its garbage (tens of MiB): the next scan starts them afresh.
    if (listing && listing.prereads >= PREFETCH_MIN_FILES) endPrefetchWorkers();
  }
  keepFolderDigests(db, kept, emptied);
  const missing = recheckMissing(vault, unseen, vanishedNew, blocked, readChanged).map((path) => ({ path, sha256: '', recordId: null as string | null }));
  flushStage();
  if (missing.length > 0) {
    const recordIdOf = db.prepare('SELECT id FROM records WHERE path = @p UNION ALL SELECT id FROM scan_duplicate_rows WHERE path = @p LIMIT 1').pluck();
    for (const m of missing) {
      m.sha256 = (getSha.get(m.path) as string | undefined) ?? '';
      m.recordId = (recordIdOf.get({ p: m.path }) as string | undefined) ?? null;
    }
  }
  // Only what the table itself records can be deleted.
  const gone = missing.filter((m) => m.sha256 !== '');
  if (gone.length > 0) {
    // Renames are also paired by the record id the new bytes claim (plan.ts): parse the new files, from staging.
    const staged = db.prepare('SELECT bytes FROM scan_staging WHERE scan_id = ? AND path = ?').pluck();
    for (const f of read) {
      if (f.knownSha256 !== null) continue;
      const bytes = staged.get(scanId, f.path) as Buffer | undefined;
      if (!bytes) continue;
      const check = checkFile(f.path, partitionOfPath(f.path) ?? '', bytes, f.sha256);
      // A copy: the id is a slice of the whole decoded file, which it would keep alive.
      if (check.kind === 'record') f.recordId = Buffer.from(check.row.id, 'utf8').toString('utf8');
    }
  }
  return { read, missing: gone, unchanged, known: knownCount, diagnostics, readAhead: listing?.prereads ?? 0, foldersCompared };
}

/**
 * Recorded files the walk did not see. Before calling one deleted, look
 * again — exact name in its folder (on a case-insensitive filesystem lstat
 * of "Foo.md" also finds "foo.md"), then the file — because an editor's save
 * may have had it renamed away or deleted for a moment; and again after
 * short pauses. Files at or under a blocked path are kept. New files that
 * were listed but gone when read are looked for the same way (one that is
 * back is read, as new: the target of a move pairs with its source); those
 * still gone are no one's deletion. All of them together: the reader itself
 * does not wait for a gone file (read.ts).
 */
export function recheckMissing(
  vault: string,
  unseen: readonly string[],
  vanishedNew: readonly string[],
  blocked: readonly string[],
  readChanged: (path: string, wasKnown: boolean) => boolean,
): string[] {
  const isBlocked = (path: string) => blocked.some((b) => path === b || path.startsWith(b + '/'));
  const isNew = new Set(vanishedNew);
  let candidates = [...unseen.filter((p) => !isBlocked(p)), ...vanishedNew];
  for (const pause of MISSING_RECHECK_MS) {
    if (candidates.length === 0) break;
    if (pause > 0) sleepSync(pause);
    const listing = new Map<string, Set<string> | null>();
    const still: string[] = [];
    for (const path of candidates) {
      const slash = path.lastIndexOf('/');
      const dir = path.slice(0, slash);
      let names = listing.get(dir);
      if (names === undefined) {
        try {
          names = new Set(readdirSync(`${vault}/${dir}`));
        } catch {
          names = null;
        }
        listing.set(dir, names);
      }
      if (names?.has(path.slice(slash + 1)) && readChanged(path, !isNew.has(path))) continue;
      still.push(path);
    }
    candidates = still;
  }
  return candidates.filter((p) => !isNew.has(p)).sort();
}
